"""A model's identity is part of its feature cache key (vlgap.encoders.identity): replaced weights are
recomputed, never served as "[cached]", and the run says why in one line.

Tiny random-weight twins built from their transformers / timm configs stand for real checkpoints: a folder
(hf: vision and text), an offline Hugging Face cache whose refs/main moves to a new snapshot, a timm
checkpoint file and a GGUF file (its key; the GGUF conversion itself needs a real GGUF model).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from vlgap.encoders.identity import UNRESOLVED, folder_sha256, hub_commit, weights_id
from vlgap.features.extract import encoder_key, extract

from hub_cache import lay_out_hub_cache, use_offline_hub  # tests/helpers

transformers = pytest.importorskip("transformers")

S = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64)


def _vit(folder: Path, seed: int) -> Path:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = transformers.ViTModel(transformers.ViTConfig(image_size=32, patch_size=8, **S))
    model.save_pretrained(folder)
    transformers.ViTImageProcessor(size={"height": 32, "width": 32}).save_pretrained(folder)
    return folder


def _bert(folder: Path, seed: int) -> Path:
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = transformers.BertModel(transformers.BertConfig(vocab_size=64, max_position_embeddings=32, **S))
    model.save_pretrained(folder)
    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]"] + "video caption a grey image flat nothing dark to light".split()
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(dict.fromkeys(words))}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="[PAD]", unk_token="[UNK]",
                            model_max_length=32).save_pretrained(folder)
    return folder


def _run(dataset, spec, cache, **kw):
    kw.setdefault("n_frames", [2])
    return extract(dataset, spec, cache_dir=cache, progress=False, workers=1, **kw)


def _replaced_weights_are_recomputed(dataset, spec, cache, replace, capsys, **kw):
    """Extract, replace the weights, extract again: recomputed (with the reason), other numbers."""
    first = _run(dataset, spec, cache, **kw)
    value = next(iter(first.features))
    assert first.computed == [value]
    again = _run(dataset, spec, cache, **kw)
    assert again.computed == []  # unchanged weights: reused
    old_id = first.features[value].record["weights_id"]
    capsys.readouterr()
    replace()
    third = _run(dataset, spec, cache, **kw)
    err = " ".join(capsys.readouterr().err.split())
    new_id = third.features[value].record["weights_id"]
    assert third.computed == [value] and new_id != old_id
    kind, old_hex = old_id.split(":")
    assert f"weights of {spec} changed ({kind} {old_hex[:12]}… -> {kind} {new_id.split(':')[1][:12]}…): " \
           f"recomputing" in err
    assert not np.allclose(first.features[value].layers[-1], third.features[value].layers[-1])
    assert third.features[value].record["encoder_key"]["weights_id"] == new_id
    return first, third


def test_hf_vision_folder_with_replaced_weights_is_recomputed(tmp_path, tiny_dataset, capsys):
    folder = _vit(tmp_path / "vit", seed=0)
    spec = f"hf:{folder}"
    before = weights_id(spec)
    assert before == f"sha256:{folder_sha256(folder)}"
    first, third = _replaced_weights_are_recomputed(tiny_dataset, spec, tmp_path / "c",
                                                    lambda: _vit(folder, seed=1), capsys)
    assert weights_id(spec) != before and third.features[2].record["weights_id"] == weights_id(spec)
    # the record shows the new weights' sha256, not the old one
    files = third.features[2].record["encoder"]["weights_files"]
    from vlgap.encoders.gguf_cache import file_sha256
    assert files["model.safetensors"] == file_sha256(folder / "model.safetensors")


@pytest.mark.parametrize("edit", ["config", "preprocessor"])
def test_hf_folder_with_an_edited_config_is_recomputed(tmp_path, tiny_dataset, capsys, edit):
    """The same weights under another config.json (the norm's epsilon) or another preprocessing (the
    processor's mean) give other features: both files are part of the folder's identity. Before, only the
    weight files were hashed and the old features were served as cached."""
    import json

    folder = _vit(tmp_path / "vit", seed=0)
    name = "config.json" if edit == "config" else "preprocessor_config.json"
    weights = (folder / "model.safetensors").read_bytes()

    def change():
        cfg = json.loads((folder / name).read_text())
        if edit == "config":
            cfg["layer_norm_eps"] = 0.5
        else:
            cfg["image_mean"] = [0.1, 0.2, 0.3]
        (folder / name).write_text(json.dumps(cfg))

    before = folder_sha256(folder)
    (folder / name).touch()  # the same bytes with a new mtime: the same identity
    assert folder_sha256(folder) == before
    _replaced_weights_are_recomputed(tiny_dataset, f"hf:{folder}", tmp_path / "c", change, capsys)
    assert (folder / "model.safetensors").read_bytes() == weights and folder_sha256(folder) != before


def test_hf_text_folder_with_replaced_weights_is_recomputed(tmp_path, tiny_dataset, capsys):
    folder = _bert(tmp_path / "bert", seed=0)
    _replaced_weights_are_recomputed(tiny_dataset, f"hf:{folder}", tmp_path / "c", lambda: _bert(folder, seed=1),
                                     capsys, n_frames=None, n_captions=[1])


def test_hub_snapshot_moved_by_refs_main_is_recomputed(tmp_path, tiny_dataset, capsys, monkeypatch):
    hf_home = tmp_path / "hf_home"
    use_offline_hub(monkeypatch, hf_home)
    hub_id = "tiny-org/tiny-vit"
    old = lay_out_hub_cache(hf_home / "hub", hub_id, _vit(tmp_path / "v0", seed=0))
    assert hub_commit(hub_id) == old and weights_id(f"hf:{hub_id}") == f"revision:{old}"
    repo = hf_home / "hub" / "models--tiny-org--tiny-vit"
    new = "f" * 40

    def move_ref():
        _vit(repo / "snapshots" / new, seed=1)
        (repo / "refs" / "main").write_text(new)

    first, third = _replaced_weights_are_recomputed(tiny_dataset, f"hf:{hub_id}", tmp_path / "c", move_ref, capsys)
    assert first.features[2].record["encoder"]["revision"] == old
    assert third.features[2].record["encoder"]["revision"] == new
    # a pinned revision is its own identity; a ref the cache lacks cannot be told without loading
    assert weights_id(f"hf:{hub_id}@{old}") == f"revision:{old}"
    assert weights_id(f"hf:{hub_id}@v9") == UNRESOLVED


def test_timm_checkpoint_file_replaced_is_recomputed(tmp_path, tiny_dataset, capsys):
    timm = pytest.importorskip("timm")
    from safetensors.torch import save_file

    ckpt = tmp_path / "w.safetensors"

    def write(seed):
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            save_file(timm.create_model("test_vit").state_dict(), str(ckpt))

    write(0)
    _replaced_weights_are_recomputed(tiny_dataset, f"timm:test_vit@{ckpt}", tmp_path / "c", lambda: write(1), capsys)


def test_gguf_file_replaced_is_recomputed(tmp_path, tiny_dataset, capsys, monkeypatch):
    """A tiny Llama GGUF (tests/helpers/tiny_gguf) converted and extracted; rewritten with other weights:
    its sha256 changes, so its features are recomputed (and the conversion made afresh)."""
    pytest.importorskip("gguf")
    pytest.importorskip("accelerate")
    from tiny_gguf import write_tiny_llama_gguf

    monkeypatch.setenv("VLGAP_CACHE", str(tmp_path / "vlgap_cache"))  # conversions and the hash index
    gguf = tmp_path / "m.gguf"
    write_tiny_llama_gguf(gguf, seed=0)
    first, third = _replaced_weights_are_recomputed(tiny_dataset, f"gguf:{gguf}", tmp_path / "c",
                                                    lambda: write_tiny_llama_gguf(gguf, seed=1), capsys,
                                                    n_frames=None, n_captions=[1])
    from vlgap.encoders.gguf_cache import file_sha256

    assert third.features[1].record["encoder"]["gguf_sha256"] == file_sha256(gguf)
    assert first.features[1].record["encoder"]["gguf_sha256"] != file_sha256(gguf)


def test_keys_of_bundled_and_random_models_are_unchanged():
    """Names whose weights ship in a package, config: specs and random weights keep their keys."""
    assert encoder_key("mobilenet_v2") == {"name": "mobilenet_v2", "dtype": "float32"}
    assert encoder_key("minilm") == {"name": "minilm", "dtype": "float32"}
    assert "weights_id" not in encoder_key("config:resnet18")
    assert encoder_key("tv:resnet18", random_weights=True) == {"name": "tv:resnet18", "dtype": "float32",
                                                               "weights": "random"}


def test_entries_from_before_weights_were_keyed_say_so(tmp_path, tiny_dataset, capsys, monkeypatch):
    """An entry cached under the old key (no weights_id) is not reused for an hf: folder: one note says so."""
    import vlgap.features.extract as ex

    folder = _vit(tmp_path / "vit", seed=0)
    spec = f"hf:{folder}"
    real = ex.encoder_key
    monkeypatch.setattr(ex, "encoder_key", lambda *a, **k: {x: v for x, v in real(*a, **k).items() if x != "weights_id"})
    _run(tiny_dataset, spec, tmp_path / "c")
    monkeypatch.setattr(ex, "encoder_key", real)
    capsys.readouterr()
    res = _run(tiny_dataset, spec, tmp_path / "c")
    assert res.computed == [2]
    assert "cached before its weights were part of the key are not reused" in " ".join(capsys.readouterr().err.split())


def test_console_shows_the_revision_for_every_kind(tmp_path, tiny_dataset):
    from typer.testing import CliRunner

    from vlgap.cli import app

    folder = _bert(tmp_path / "bert", seed=0)
    res = CliRunner().invoke(app, ["extract", str(tiny_dataset), "-e", f"hf:{folder}", "--n-captions", "1",
                                   "--cache-dir", str(tmp_path / "c")])
    assert res.exit_code == 0, res.output
    assert f"revision: sha256:{folder_sha256(folder)[:16]}" in " ".join(res.output.split())




def test_console_revision_line_of_a_hub_model():
    from vlgap.cli.data import encoder_facts

    lines = encoder_facts({"modality": "text", "weights": "pretrained", "revision": "ab" * 20})
    assert f"revision: {'ab' * 20}" in lines


def test_sweep_cells_of_replaced_weights_are_recomputed(tmp_path, tiny_dataset, capsys):
    """A sweep cell's key holds the identity of both models' weights: after the vision folder's weights
    change, a resumed sweep recomputes its cells (features and scores) instead of reading them back."""
    from toy_encoders import ToyText
    from vlgap.probe.sweep import SweepConfig, cell_key, run_sweep

    folder = _vit(tmp_path / "vit", seed=0)
    spec = f"hf:{folder}"
    cfg = SweepConfig(str(tiny_dataset), [spec], ["tt"], [1], [1], k=3, n_bootstrap=0, n_permutations=0,
                      cache_dir=str(tmp_path / "cache"), fit=False)
    first = run_sweep(cfg, tmp_path / "run", progress=False, encoders={"tt": ToyText()})
    _vit(folder, seed=1)
    capsys.readouterr()
    second = run_sweep(cfg, tmp_path / "run", progress=False, encoders={"tt": ToyText()})
    err = " ".join(capsys.readouterr().err.split())
    assert f"weights of {spec} changed" in err
    assert "stale (made with other settings: vision_weights_id:" in err and err.endswith("recomputing")
    assert len(first.rows) == len(second.rows) == 1
    # models without an identity (toy, bundled) keep their cells' keys
    assert "text_weights_id" not in cell_key(cfg, {}, "d", (spec, "tt", 1, 1), 0, {spec: "sha256:x", "tt": None})


def test_load_features_of_weights_not_at_hand_says_why(tmp_path, tiny_dataset, monkeypatch):
    from vlgap.errors import VlgapError
    from vlgap.features.extract import load_features

    use_offline_hub(monkeypatch, tmp_path / "hf_home")
    with pytest.raises(VlgapError, match="weights of 'hf:nobody/nothing' are not in the local caches") as err:
        load_features(tiny_dataset, "hf:nobody/nothing", "n_f", 2, cache_dir=tmp_path / "c")
    assert "\n" not in str(err.value)


def test_timm_pretrained_hub_snapshot_moved_is_recomputed(tmp_path, tiny_dataset, capsys, monkeypatch):
    """timm:<name> (pretrained, from timm's hub repository in the Hugging Face cache): refs/main moved to a
    new snapshot with other weights is recomputed."""
    timm = pytest.importorskip("timm")
    from safetensors.torch import save_file

    hf_home = tmp_path / "hf"
    use_offline_hub(monkeypatch, hf_home)
    monkeypatch.setenv("VLGAP_OFFLINE", "1")
    repo = hf_home / "hub" / "models--timm--test_resnet.r160_in1k"  # the hub repo timm names for the tag

    def snapshot(commit: str, seed: int):
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            state = timm.create_model("test_resnet").state_dict()
        (repo / "snapshots" / commit).mkdir(parents=True)
        save_file(state, str(repo / "snapshots" / commit / "model.safetensors"))
        (repo / "refs").mkdir(exist_ok=True)
        (repo / "refs" / "main").write_text(commit)

    snapshot("a" * 40, 0)
    first, third = _replaced_weights_are_recomputed(tiny_dataset, "timm:test_resnet", tmp_path / "c",
                                                    lambda: snapshot("b" * 40, 1), capsys, image_size=64)
    assert first.features[2].record["encoder"]["revision"] == "a" * 40
    assert third.features[2].record["weights_id"] == f"revision:{'b' * 40}"
