"""A byte-level BPE tokenizer trained on the shapes world's CAPE texts, for tiny causal-LM twins.

The CAPE tests build random-weight Llama / Qwen2 models from configs; their tokenizer must cover the
six-part targets and the inputs, and must be made here (no hub): this is the one place that trains it.
"""
from __future__ import annotations


def cape_corpus(n_videos: int, *, seed: int = 11, inputs: str = "all") -> list[str]:
    """Each sampled video's inputs (`all` kinds, or just the `user` prompt) and its six-part target."""
    from vlgap.cape import world as W

    corpus: list[str] = []
    for v in W.sample_videos(n_videos, seed=seed):
        corpus += list(W.inputs_of(v).values()) if inputs == "all" else [W.user_prompt(v)]
        corpus.append(W.target_of(v).to_text())
    return corpus


def byte_bpe_tokenizer(corpus: list[str], vocab_size: int, eos: str = "<eos>"):
    """A PreTrainedTokenizerFast (byte-level BPE, `eos` also the pad token) trained on `corpus`."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    bpe.train_from_iterator(corpus, trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=[eos],
                                                        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    return PreTrainedTokenizerFast(tokenizer_object=bpe, eos_token=eos, pad_token=eos)
