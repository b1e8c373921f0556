"""Hub checkpoints in the layouts people save them (vlgap.encoders.hf_families / text), on tiny twins.

Task-head checkpoints (*ForVideoClassification, *ForImageClassification, *ForCausalLM) load their backbone:
a pooler no hidden state uses may be missing, anything else missing is still refused. Plus the messages:
--trust-remote-code reaches the text loader, the '#' typo, a folder without tokenizer files, a folder
with '@revision', and the tv: refusal's way out.
"""
from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from vlgap.encoders.registry import get_encoder
from vlgap.errors import VlgapError

from hub_cache import lay_out_hub_cache, use_offline_hub  # tests/helpers

transformers = pytest.importorskip("transformers")

S = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64)
VIVIT_HUB = "google/vivit-b-16x2-kinetics400"


def _vivit_classifier(folder: Path):
    t = transformers
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(3)
        model = t.VivitForVideoClassification(t.VivitConfig(num_frames=4, tubelet_size=[2, 8, 8], image_size=32,
                                                            patch_size=8, num_labels=5, **S)).eval()
    model.save_pretrained(folder)
    t.VivitImageProcessor(size={"shortest_edge": 36}, crop_size={"height": 32, "width": 32}).save_pretrained(folder)
    return model


def _same_as_backbone(enc, backbone):
    frames = np.random.default_rng(0).integers(0, 255, (4, 40, 48, 3), dtype=np.uint8)
    x = enc.preprocess(frames)[None]
    with torch.inference_mode():
        hs = backbone(pixel_values=x, output_hidden_states=True).hidden_states
    got = enc.forward_layers(x)
    assert len(got) == len(hs) == 3
    for g, h in zip(got, hs):
        torch.testing.assert_close(g, h[:, 0], atol=1e-5, rtol=1e-4)  # ViViT: the CLS token


def test_vivit_classification_checkpoint_from_a_folder_and_a_hub_cache(tmp_path, monkeypatch, tiny_dataset):
    folder = tmp_path / "vivit_k400"
    model = _vivit_classifier(folder)
    from safetensors.torch import load_file

    assert not any(k.startswith("vivit.pooler") for k in load_file(folder / "model.safetensors"))  # the layout
    _same_as_backbone(get_encoder(f"hf:{folder}"), model.vivit)
    use_offline_hub(monkeypatch, tmp_path / "hf_home")
    lay_out_hub_cache(tmp_path / "hf_home" / "hub", VIVIT_HUB, folder)
    enc = get_encoder(f"hf:{VIVIT_HUB}")
    _same_as_backbone(enc, model.vivit)
    assert enc.record()["revision"]
    from vlgap.features.extract import extract

    res = extract(tiny_dataset, f"hf:{VIVIT_HUB}", n_frames=[4], cache_dir=tmp_path / "c", progress=False, workers=1,
                  skip_bad=True, allow_repeated_frames=True)
    assert res.computed == [4] and res.features[4].layers[0].shape[1] == 32


def test_a_classification_checkpoint_missing_a_layer_is_still_refused(tmp_path):
    from safetensors.torch import load_file, save_file

    folder = tmp_path / "vivit_partial"
    _vivit_classifier(folder)
    state = load_file(folder / "model.safetensors")
    save_file({k: v for k, v in state.items() if ".layer.1." not in k}, folder / "model.safetensors")
    with pytest.raises(VlgapError, match="no weights for 16 parameters .*layers.1.*random weights"):
        get_encoder(f"hf:{folder}")


def test_image_classification_and_causal_lm_checkpoints_load_their_backbone(tmp_path):
    t = transformers
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(4)
        vit = t.ViTForImageClassification(t.ViTConfig(image_size=32, patch_size=8, num_labels=3, **S)).eval()
    vit.save_pretrained(tmp_path / "vit")
    t.ViTImageProcessor(size={"height": 32, "width": 32}).save_pretrained(tmp_path / "vit")
    enc = get_encoder(f"hf:{tmp_path / 'vit'}")
    x = enc.preprocess(np.random.default_rng(1).integers(0, 255, (2, 40, 48, 3), dtype=np.uint8))
    with torch.inference_mode():
        hs = vit.vit(pixel_values=x, output_hidden_states=True).hidden_states
    for g, h in zip(enc.forward_layers(x), hs):
        torch.testing.assert_close(g, h[:, 0], atol=1e-5, rtol=1e-4)

    from tiny_tokenizer import byte_bpe_tokenizer

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(5)
        lm = t.LlamaForCausalLM(t.LlamaConfig(vocab_size=300, num_key_value_heads=2, max_position_embeddings=64,
                                              **S)).eval()
    lm.save_pretrained(tmp_path / "lm")
    tok = byte_bpe_tokenizer(["a cat on a mat", "two dogs run in the park"] * 4, 300)
    tok.save_pretrained(tmp_path / "lm")
    text = get_encoder(f"hf:{tmp_path / 'lm'}")
    ids = tok(["a cat on a mat"], return_tensors="pt")
    with torch.inference_mode():
        hs = lm.model(**ids, output_hidden_states=True).hidden_states
    for g, h in zip(text.encode(["a cat on a mat"]), hs):
        torch.testing.assert_close(g, h.mean(1), atol=1e-5, rtol=1e-4)


def _bert_folder(folder: Path, tokenizer: bool = True) -> Path:
    t = transformers
    t.BertModel(t.BertConfig(vocab_size=40, max_position_embeddings=32, **S)).save_pretrained(folder)
    if tokenizer:
        vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" for i in range(35)]
        (folder.parent / "vocab.txt").write_text("\n".join(vocab) + "\n")
        t.BertTokenizerFast(vocab_file=str(folder.parent / "vocab.txt")).save_pretrained(folder)
    return folder


def _spy_from_pretrained(monkeypatch, *classes) -> list:
    """(class name, trust_remote_code) of every from_pretrained call of `classes`."""
    seen = []
    for cls in classes:
        real = cls.from_pretrained.__func__

        def spy(c, *a, _real=real, _name=cls.__name__, **k):
            seen.append((_name, k.get("trust_remote_code", False)))
            return _real(c, *a, **k)
        monkeypatch.setattr(cls, "from_pretrained", classmethod(spy))
    return seen


def test_trust_remote_code_reaches_the_text_loader(tmp_path, monkeypatch):
    """Every from_pretrained of a text model (config, tokenizer, weights) gets trust_remote_code when asked
    for, so transformers never stops to ask on the console."""
    t = transformers
    folder = _bert_folder(tmp_path / "bert")
    seen = _spy_from_pretrained(monkeypatch, t.AutoConfig, t.AutoTokenizer, t.AutoModel)
    enc = get_encoder(f"hf:{folder}", trust_remote_code=True)
    assert enc.record()["trust_remote_code"] is True
    assert {n for n, _ in seen} >= {"AutoConfig", "AutoTokenizer", "AutoModel"}
    assert all(flag for _, flag in seen), seen
    seen.clear()
    get_encoder(f"hf:{folder}")
    assert seen and not any(flag for _, flag in seen)  # never implied


def test_messages_say_what_happened_and_what_to_do(tmp_path, monkeypatch):
    with pytest.raises(VlgapError) as err:  # the '#' typo names what was written
        get_encoder("hf:org/name#txt")
    assert "not 'txt'" in str(err.value) and "{tail" not in str(err.value)

    folder = _bert_folder(tmp_path / "bert", tokenizer=False)
    with pytest.raises(VlgapError) as err:  # no tokenizer files: named, not "hub ids need network access"
        get_encoder(f"hf:{folder}")
    msg = str(err.value)
    assert "tokenizer.json" in msg and "has none of them" in msg and "network" not in msg and "\n" not in msg

    vit = tmp_path / "vit"
    shutil.copytree(folder, vit)
    with pytest.raises(VlgapError, match="a local folder has no revisions.*drop '@v1'"):
        get_encoder(f"hf:{folder}@v1")
    from vlgap.encoders.identity import UNRESOLVED, weights_id

    assert weights_id(f"hf:{folder}@v1") == UNRESOLVED  # the key never pretends the revision was honoured


def test_trust_remote_code_reaches_the_causal_lm_loader(tmp_path, monkeypatch):
    t = transformers
    from tiny_tokenizer import byte_bpe_tokenizer

    from vlgap.encoders.causal_lm import load_lm

    t.LlamaForCausalLM(t.LlamaConfig(vocab_size=300, num_key_value_heads=2, max_position_embeddings=64,
                                     **S)).save_pretrained(tmp_path / "lm")
    byte_bpe_tokenizer(["a cat on a mat"] * 4, 300).save_pretrained(tmp_path / "lm")
    seen = _spy_from_pretrained(monkeypatch, t.AutoConfig, t.AutoTokenizer, t.AutoModelForCausalLM)
    load_lm(str(tmp_path / "lm"), trust_remote_code=True)
    assert {n for n, _ in seen} >= {"AutoConfig", "AutoTokenizer", "AutoModelForCausalLM"}
    assert all(flag for _, flag in seen), seen
