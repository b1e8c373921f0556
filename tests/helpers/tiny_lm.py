"""A tiny random-weight Qwen2 causal LM with its byte-BPE tokenizer, saved as a downloaded model is
(save_pretrained), for the CAPE tests that load an LM from a folder or a hub id."""
from __future__ import annotations

from pathlib import Path


def save_tiny_qwen2(folder: Path, *, max_positions: int = 1024, seed: int = 0) -> Path:
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from tiny_tokenizer import byte_bpe_tokenizer, cape_corpus

    tok = byte_bpe_tokenizer(cape_corpus(30), vocab_size=1000, eos="<|endoftext|>")
    torch.manual_seed(seed)
    cfg = Qwen2Config(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=max_positions,
                      initializer_range=0.3, tie_word_embeddings=True, eos_token_id=tok.eos_token_id,
                      pad_token_id=tok.pad_token_id, bos_token_id=tok.eos_token_id)
    Qwen2ForCausalLM(cfg).save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder
