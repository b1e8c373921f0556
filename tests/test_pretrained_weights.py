"""Pretrained unless told otherwise: tv: and timm: load their libraries' pretrained weights from the local
caches (or a file), refuse in one line when they cannot be had, and random weights happen only on
request, labelled "random weights" in the console, record.json, JSON results and the HTML report."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from vlgap.encoders.registry import get_encoder, labelled, mark_random_weights, weights_note
from vlgap.errors import VlgapError

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def empty_caches(tmp_path, monkeypatch):
    """Offline, with an empty torch hub cache and an empty Hugging Face cache."""
    import huggingface_hub.constants as hf_constants

    torch_home, hf_home = tmp_path / "torch", tmp_path / "hf"
    monkeypatch.setenv("VLGAP_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TORCH_HOME", str(torch_home))
    monkeypatch.setattr(torch.hub, "_hub_dir", None)  # get_dir() follows TORCH_HOME
    monkeypatch.setattr(hf_constants, "HF_HUB_CACHE", str(hf_home / "hub"))
    monkeypatch.setattr(hf_constants, "HF_HUB_OFFLINE", True)
    return torch_home, hf_home


def _same_parameters(saved: dict[str, torch.Tensor], model: torch.nn.Module) -> None:
    loaded = model.state_dict()
    assert set(saved) <= set(loaded)
    for k, v in saved.items():
        torch.testing.assert_close(loaded[k].float(), v.float(), rtol=0, atol=0, msg=k)


# ---------------------------------------------------------------------------------------------- torchvision
def test_torchvision_loads_default_weights_from_the_torch_hub_cache(empty_caches):
    torch_home, _ = empty_caches
    import torchvision.models as tvm

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(123)  # not the seed-0 random init vlgap would build
        state = tvm.resnet18().state_dict()
    ckpt = torch_home / "hub" / "checkpoints" / "resnet18-f37072fd.pth"  # the name in IMAGENET1K_V1's URL
    ckpt.parent.mkdir(parents=True)
    torch.save(state, ckpt)
    enc = get_encoder("tv:resnet18", image_size=64)
    _same_parameters(state, enc.model)
    rec = enc.record()
    assert rec["weights"] == "pretrained" and rec["weights_file"] == str(ckpt.resolve())
    from vlgap.encoders.identity import UNRESOLVED, weights_id

    assert weights_id("tv:resnet18") == f"sha256:{rec['weights_sha256']}"  # the file in the torch hub cache
    assert weights_id("tv:resnet34") == UNRESOLVED  # not cached: only loading (downloading) can tell
    assert "ResNet18_Weights.IMAGENET1K_V1" in rec["weights_origin"] and weights_note(rec) is None
    assert len(rec["weights_sha256"]) == 64
    # the weights' own preprocessing: resize 256 -> crop 224, scaled to the requested 64
    assert rec["preprocess"]["resize_size"] == int(64 / (224 / 256))


def test_torchvision_refuses_silent_random_weights(empty_caches):
    torch_home, _ = empty_caches
    with pytest.raises(VlgapError) as err:
        get_encoder("tv:resnet18")
    msg = str(err.value)
    assert "\n" not in msg
    assert "'tv:resnet18'" in msg and str(torch_home / "hub" / "checkpoints" / "resnet18-f37072fd.pth") in msg
    # config:resnet18 would build timm's ResNet-18 (other layers, other preprocessing): not suggested
    assert "tv:resnet18@" in msg and "config:resnet18" not in msg and "--random-weights" in msg
    rnd = get_encoder("tv:resnet18", image_size=32, random_weights=True)
    assert weights_note(rnd.record()) == "random weights" and rnd.record()["random_weights"] is True


# --------------------------------------------------------------------------------------------------- timm
def test_timm_checkpoint_overlay_loads_the_saved_parameters(tmp_path, empty_caches):
    import timm
    from safetensors.torch import save_file

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(7)
        state = timm.create_model("test_vit").state_dict()
    ckpt = tmp_path / "test_vit.safetensors"
    save_file(state, str(ckpt))
    enc = get_encoder(f"timm:test_vit@{ckpt}")  # timm's pretrained_cfg_overlay=dict(file=...)
    _same_parameters(state, enc.model)
    assert enc.record()["weights_file"] == str(ckpt.resolve()) and weights_note(enc.record()) is None


def test_timm_loads_pretrained_weights_from_the_hugging_face_cache(empty_caches):
    _, hf_home = empty_caches
    import timm
    from safetensors.torch import save_file

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(11)
        state = timm.create_model("test_resnet").state_dict()
    repo = hf_home / "hub" / "models--timm--test_resnet.r160_in1k"  # the hub repo timm names for the tag
    snapshot = repo / "snapshots" / ("0123456789abcdef" * 3)[:40]
    snapshot.mkdir(parents=True)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(snapshot.name)
    save_file(state, str(snapshot / "model.safetensors"))
    enc = get_encoder("timm:test_resnet", image_size=64)
    _same_parameters(state, enc.model)
    rec = enc.record()
    assert rec["weights"] == "pretrained" and rec["hf_hub_id"] == "timm/test_resnet.r160_in1k"
    assert rec["weights_file"] == str((snapshot / "model.safetensors").resolve())
    # its identity in the feature cache key: the hub snapshot, told without loading; shown in the record
    from vlgap.encoders.identity import weights_id

    assert rec["revision"] == snapshot.name and weights_id("timm:test_resnet") == f"revision:{snapshot.name}"


@pytest.mark.slow  # > 5 s on 2 cores: make test-slow (the fast suite keeps a cheaper test of the same module)
def test_perception_encoder_spec_of_the_family_table_loads_from_the_hugging_face_cache(empty_caches):
    """The family table's Perception Encoder spec (a timm model) loads its pretrained weights by hub id
    from an offline cache: a twin with random weights stands for the real file."""
    _, hf_home = empty_caches
    import timm
    from safetensors.torch import save_file

    from vlgap.encoders.hf_families import family_table

    spec = next(r["spec"] for r in family_table() if r["family"].startswith("Perception Encoder"))
    name = spec.split(":", 1)[1]
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(5)
        model = timm.create_model(name)
    state = model.state_dict()
    tag = model.pretrained_cfg["hf_hub_id"]  # e.g. timm/vit_pe_core_base_patch16_224.fb
    repo = hf_home / "hub" / ("models--" + tag.replace("/", "--"))
    snapshot = repo / "snapshots" / ("fedcba9876543210" * 3)[:40]
    snapshot.mkdir(parents=True)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(snapshot.name)
    save_file({k: v.contiguous() for k, v in state.items()}, str(snapshot / "model.safetensors"))
    enc = get_encoder(spec)
    _same_parameters(state, enc.model)
    assert enc.record()["weights"] == "pretrained" and weights_note(enc.record()) is None
    frames = np.random.default_rng(0).integers(0, 255, size=(2, 40, 48, 3), dtype=np.uint8)
    layers = enc.forward_layers(enc.preprocess(frames))
    assert [t.shape[1] for t in layers] == enc.layer_dims and all(t.shape[0] == 2 for t in layers)
    assert all(torch.isfinite(t).all() for t in layers)


def test_timm_refuses_silent_random_weights(empty_caches):
    _, hf_home = empty_caches
    with pytest.raises(VlgapError) as err:
        get_encoder("timm:test_vit")
    msg = str(err.value)
    assert "\n" not in msg and "'timm:test_vit'" in msg
    assert str(hf_home / "hub") in msg and "timm/test_vit.r160_in1k" in msg
    assert "timm:test_vit@" in msg and "config:test_vit" in msg and "--random-weights" in msg
    enc = get_encoder("timm:test_vit", random_weights=True)
    assert weights_note(enc.record()) == "random weights"
    # config: specs are random by definition and say so
    assert weights_note(get_encoder("config:test_vit").record()) == "random weights"


def test_cli_refusal_is_one_line_with_exit_code_2(tmp_path):
    from vlgap.data.shapes.write import generate_shapes

    man = generate_shapes(tmp_path / "shapes", 4, n_frames=4, size=32)
    env = dict(os.environ, VLGAP_OFFLINE="1", HF_HUB_OFFLINE="1", TORCH_HOME=str(tmp_path / "torch"),
               HF_HOME=str(tmp_path / "hf"), PYTHONPATH=str(REPO / "src"))
    proc = subprocess.run([sys.executable, "-c", "from vlgap.cli import main; main()", "extract", str(man), "--encoder", "tv:resnet18",
                           "--n-frames", "1", "--cache-dir", str(tmp_path / "cache")],
                          capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 2, proc.stderr
    errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1 and "pretrained weights not available" in errors[0] and "'tv:resnet18'" in errors[0]
    assert "Traceback" not in proc.stderr


# --------------------------------------------------------------------------------- labels, cache key
def test_labels_and_cache_key():
    from vlgap.features.extract import encoder_key

    assert labelled("timm:x", {"weights": "random initialisation (seed 0)"}) == "timm:x (random weights)"
    assert labelled("timm:x", {"weights": "pretrained"}) == "timm:x" and labelled("x", True) == "x (random weights)"
    assert encoder_key("tv:resnet18", random_weights=True)["weights"] == "random"
    # tv:/timm: specs used to mean random weights: their pretrained features get a key of their own
    assert encoder_key("tv:resnet18")["weights"] == "pretrained"
    assert "weights" not in encoder_key("mobilenet_v2") and "weights" not in encoder_key("tv:resnet18@/w.pth")


@pytest.mark.slow  # > 5 s on 2 cores: make test-slow (the fast suite keeps a cheaper test of the same module)
def test_random_weights_are_labelled_in_console_record_json_and_report(tmp_path):
    """--random-weights through the CLI: extract's console and record.json, sweep's console, JSON rows and
    HTML report all say "random weights" beside the encoder's name."""
    from vlgap.data.shapes.write import generate_shapes

    man = generate_shapes(tmp_path / "shapes", 14, n_frames=4, size=32)
    env = dict(os.environ, VLGAP_OFFLINE="1", HF_HUB_OFFLINE="1", TORCH_HOME=str(tmp_path / "torch"),
               PYTHONPATH=str(REPO / "src"), COLUMNS="250")
    cache = tmp_path / "cache"
    base = [sys.executable, "-c", "from vlgap.cli import main; main()"]
    proc = subprocess.run(base + ["extract", str(man), "--encoder", "tv:resnet18", "--n-frames", "1",
                                  "--image-size", "32", "--cache-dir", str(cache), "--random-weights"],
                          capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "tv:resnet18 (random weights)" in proc.stdout
    records = list(cache.rglob("record.json"))
    assert len(records) == 1
    rec = json.loads(records[0].read_text())
    assert rec["encoder_label"] == "tv:resnet18 (random weights)" and rec["weights_note"] == "random weights"
    assert rec["encoder"]["random_weights"] is True and rec["encoder_key"]["weights"] == "random"

    out = tmp_path / "run"
    proc = subprocess.run(base + ["sweep", str(man), "--vision", "tv:resnet18", "--text", "minilm",
                                  "--n-frames", "1", "--n-captions", "1", "--k", "3", "--bootstrap", "0",
                                  "--permutations", "0", "--image-size", "32", "--cache-dir", str(cache),
                                  "--out", str(out), "--random-weights"],
                          capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "tv:resnet18 (random weights)" in proc.stdout and "minilm (random weights)" in proc.stdout
    rows = json.loads((out / "sweep.json").read_text())["rows"]
    assert rows[0]["vision_weights"] == rows[0]["text_weights"] == "random weights"
    assert json.loads((out / "sweep.json").read_text())["config"]["random_weights"] is True
    proc = subprocess.run(base + ["report", str(out)], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    page = (out / "report.html").read_text()
    assert "tv:resnet18 (random weights)" in page and "minilm (random weights)" in page


def test_probe_results_and_sections_label_random_weights(tmp_path):
    """Probes fed through FeatureOptions(random_weights=True) mark every encoder in their JSON results
    and their report sections."""
    from vlgap.data.shapes.write import generate_shapes
    from vlgap.features.source import FeatureOptions, FeatureSource
    from vlgap.probe.cross_model import run_cross_alignment

    man = generate_shapes(tmp_path / "shapes", 14, n_frames=4, size=32)
    src = FeatureSource(FeatureOptions(cache_dir=tmp_path / "cache", image_size=32, random_weights=True,
                                       progress=False))
    d = run_cross_alignment(man, ["tv:resnet18", "timm:test_vit"], n_f=1, k=3, n_bootstrap=0, features=src,
                            out=tmp_path / "run")
    assert d["random_weights"] == ["timm:test_vit", "tv:resnet18"]
    section = json.loads((tmp_path / "run" / "sections" / "43_cross_vision.json").read_text())
    assert section["title"].endswith("(random weights)") and "tv:resnet18 (random weights)" in section["html"]
    # a pretrained run is not marked; a config: spec always is
    assert mark_random_weights({"vision": "a"}, []) == {"vision": "a"}
    assert FeatureSource(FeatureOptions()).random_weight_names(["mobilenet_v2", "config:resnet18"]) == [
        "config:resnet18"]
