"""Language models the papers measured, through tiny random-weight twins saved to folders: decoder LMs
(Llama, Gemma 3 text, BLOOM) give every hidden state; T5 runs its encoder only; a hub id resolves from a
Hugging Face cache offline; a model dispatched over devices (accelerate device_map, here CPU + disk
offload) gives the same vectors as the plain model; chat templates are never applied."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from vlgap.encoders.registry import get_encoder
from vlgap.encoders.text import CHAT_TEMPLATE_NOTE, load_hf_text, placement
from vlgap.errors import VlgapError

TEXTS = ["a cat on the mat", "the red ball rolls left and the cat rolls"]


def _tokenizer(folder: Path, model_max_length: int = 64) -> None:
    """A word-level tokenizer built from a word list (no files needed), saved beside the model."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    words = ["<pad>", "<unk>", "<s>", "</s>"] + "a probe sentence the red ball rolls left cat on mat and".split()
    vocab = {w: i for i, w in enumerate(dict.fromkeys(words))}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", unk_token="<unk>", bos_token="<s>",
                                   eos_token="</s>", model_max_length=model_max_length)
    fast.save_pretrained(folder)


def _twin(folder: Path, model) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    _tokenizer(folder)
    return folder


def _llama(folder: Path) -> Path:
    from transformers import LlamaConfig, LlamaModel

    torch.manual_seed(0)
    return _twin(folder, LlamaModel(LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64,
                                                num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                                                max_position_embeddings=64)))


def _own_mean_pool(model, tokenizer, texts) -> list[torch.Tensor]:
    """The model's own hidden states, each text alone (no padding), mean over its tokens."""
    per_text = []
    with torch.inference_mode():
        for t in texts:
            enc = tokenizer([t], return_tensors="pt")
            hs = model(**enc, output_hidden_states=True).hidden_states
            per_text.append([h[0].float().mean(0) for h in hs])
    return [torch.stack([p[i] for p in per_text]) for i in range(len(per_text[0]))]


def _check_all_layers(enc, n_layers: int) -> None:
    got = enc.encode(TEXTS)
    assert len(got) == n_layers + 1 == enc.num_layers  # embeddings + every layer
    ref = _own_mean_pool(enc.model, enc.tokenizer, TEXTS)
    for g, r in zip(got, ref):
        torch.testing.assert_close(g, r, rtol=1e-4, atol=1e-5)
    assert enc.record()["chat_template"] == CHAT_TEMPLATE_NOTE


def test_decoder_lm_twins_give_every_hidden_state(tmp_path):
    from transformers import BloomConfig, BloomModel, Gemma3TextConfig, Gemma3TextModel

    llama = load_hf_text(str(_llama(tmp_path / "llama")))
    _check_all_layers(llama, 2)
    assert llama.record()["model_class"] == "LlamaModel"
    torch.manual_seed(0)
    gemma = Gemma3TextModel(Gemma3TextConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=3,
                                             num_attention_heads=4, num_key_value_heads=2, head_dim=8,
                                             max_position_embeddings=64, sliding_window=8))
    enc = get_encoder(f"hf:{_twin(tmp_path / 'gemma3', gemma)}")
    _check_all_layers(enc, 3)
    assert enc.record()["model_type"] == "gemma3_text"
    torch.manual_seed(0)
    bloom = BloomModel(BloomConfig(vocab_size=64, hidden_size=32, n_layer=2, n_head=4))
    enc = get_encoder(f"hf:{_twin(tmp_path / 'bloom', bloom)}", pooling="last")
    assert enc.num_layers == 3
    ids = enc.tokenizer(TEXTS[:1], return_tensors="pt")
    with torch.inference_mode():
        hs = enc.model(**ids, output_hidden_states=True).hidden_states
    for g, h in zip(enc.encode(TEXTS[:1]), hs):
        torch.testing.assert_close(g[0], h[0, -1].float())


def test_t5_runs_its_encoder_only_with_every_encoder_hidden_state(tmp_path):
    from transformers import AutoTokenizer, T5Config, T5EncoderModel, T5Model

    cfg = T5Config(vocab_size=64, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_decoder_layers=2, num_heads=4,
                   decoder_start_token_id=0, pad_token_id=0, eos_token_id=3)
    torch.manual_seed(0)
    folder = _twin(tmp_path / "t5", T5Model(cfg))  # a full encoder-decoder checkpoint
    enc = get_encoder(f"hf:{folder}")
    rec = enc.record()
    assert rec["model_class"] == "T5EncoderModel" and "encoder_only" in rec
    own = T5EncoderModel.from_pretrained(folder).eval()
    assert rec["n_parameters"] == sum(p.numel() for p in own.parameters())  # no decoder weights loaded
    tok = AutoTokenizer.from_pretrained(folder)
    assert enc.num_layers == 3
    ref = _own_mean_pool(own, tok, TEXTS)
    for g, r in zip(enc.encode(TEXTS), ref):
        torch.testing.assert_close(g, r, rtol=1e-4, atol=1e-5)


def test_dispatched_model_equals_the_plain_model(tmp_path):
    """accelerate's dispatch path on a CPU machine: layer 1 offloaded to disk (its weights on the meta
    device, streamed in by hooks), everything else on the CPU; same vectors as the model in one piece."""
    folder = _llama(tmp_path / "llama")
    plain = load_hf_text(str(folder))
    device_map = {"embed_tokens": "cpu", "layers.0": "cpu", "layers.1": "disk", "norm": "cpu", "rotary_emb": "cpu"}
    spread = load_hf_text(str(folder), device=device_map, offload_folder=str(tmp_path / "offload"))
    assert spread.model.layers[1].self_attn.q_proj.weight.device.type == "meta"  # really offloaded
    assert spread.record()["device_map"]["layers.1"] == "disk"
    for a, b in zip(plain.encode(TEXTS), spread.encode(TEXTS)):
        assert a.device == b.device == torch.device("cpu")
        torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_placement_rule(monkeypatch):
    """device 'spread' spreads a model over the GPUs (accelerate device_map="auto"; the CPU when there is
    none); every other device is one device, however large the model: 'auto' is the first GPU."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    assert placement("spread") == (torch.device("cuda", 0), "auto")
    assert placement("auto") == (torch.device("cuda", 0), None)
    assert placement("cuda") == (torch.device("cuda", 0), None)
    assert placement("cuda:1") == (torch.device("cuda", 1), None)
    assert placement("cpu") == (torch.device("cpu"), None)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert placement("spread") == (torch.device("cpu"), None)  # nothing to spread over


def test_hub_id_from_an_offline_hugging_face_cache(tmp_path, monkeypatch):
    import huggingface_hub.constants as hf_constants

    cache = tmp_path / "hf" / "hub"
    repo = cache / "models--tiny-org--tiny-llama"
    snapshot = repo / "snapshots" / ("ab" * 20)
    _llama(snapshot)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(snapshot.name)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(hf_constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.setattr(hf_constants, "HF_HUB_OFFLINE", True)
    enc = get_encoder("hf:tiny-org/tiny-llama")
    assert enc.num_layers == 3 and enc.record()["source"] == "tiny-org/tiny-llama"
    assert enc.record()["revision"] == snapshot.name
    # a hub folder without weight files refuses in one line (never random weights)
    (snapshot / "model.safetensors").unlink()
    with pytest.raises(VlgapError) as err:
        get_encoder("hf:tiny-org/tiny-llama")
    assert "\n" not in str(err.value) and "pretrained weights not available" in str(err.value)
    assert "--random-weights" in str(err.value)
    rnd = get_encoder("hf:tiny-org/tiny-llama", random_weights=True)
    assert rnd.record()["random_weights"] is True and rnd.num_layers == 3


def test_text_checkpoint_missing_parameters_is_refused(tmp_path):
    """A checkpoint that lacks some of the model's parameters would be completed with random weights
    by transformers (a log line only): vlgap refuses it, naming what is missing."""
    import pytest
    import torch
    from safetensors.torch import load_file, save_file
    from transformers import BertConfig, BertModel, BertTokenizerFast

    from vlgap.encoders.text import load_hf_text
    from vlgap.errors import VlgapError

    folder = tmp_path / "bert"
    cfg = BertConfig(vocab_size=40, hidden_size=16, num_hidden_layers=2, num_attention_heads=2, intermediate_size=32)
    torch.manual_seed(0)
    BertModel(cfg).save_pretrained(folder)
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" for i in range(35)]
    (tmp_path / "vocab.txt").write_text("\n".join(vocab) + "\n")
    BertTokenizerFast(vocab_file=str(tmp_path / "vocab.txt")).save_pretrained(folder)
    assert len(load_hf_text(str(folder)).layer_dims) == 3  # the whole checkpoint loads
    state = load_file(str(folder / "model.safetensors"))
    save_file({k: v for k, v in state.items() if "layer.1.output.dense" not in k}, str(folder / "model.safetensors"))
    with pytest.raises(VlgapError, match=r"no weights for 2 parameters \(e\.g\. .*layer\.1\.output\.dense"):
        load_hf_text(str(folder))
