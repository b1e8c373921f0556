"""`text_dtype`: the text encoders in another number format than the vision encoders (the demo runs
SmolLM2 and MiniLM in auto, bfloat16 where the device computes it natively, beside float32 vision); cached
apart, recorded, canonicalised once."""
from __future__ import annotations

import json

import numpy as np
import pytest

from toy_encoders import ToyVision
from vlgap.errors import VlgapError
from vlgap.probe.sweep import SweepConfig, run_sweep


@pytest.fixture
def small_manifest(tmp_path):
    from conftest import write_video

    rows = []
    rng = np.random.default_rng(2)
    for i in range(14):
        write_video(tmp_path / "m" / f"v{i}.mp4", 4, size=16)
        words = ["red", "blue", "green", "circle", "square", "moves", "left", "right", "fast", "slowly"]
        rows.append({"id": f"v{i}", "video": f"m/v{i}.mp4",
                     "captions": [" ".join(rng.choice(words, 5)) for _ in range(2)]})
    man = tmp_path / "man.jsonl"
    man.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return man


def test_text_side_runs_in_its_own_dtype(small_manifest, tmp_path, monkeypatch):
    from vlgap.features.extract import load_features

    monkeypatch.setenv("VLGAP_WORKERS", "1")
    cache = tmp_path / "cache"
    cfg = SweepConfig(str(small_manifest), ["tv"], ["minilm"], [2], [1, 2], k=3, n_bootstrap=0, n_permutations=0,
                      text_dtype="bf16", cache_dir=str(cache), fit=False)
    assert cfg.text_dtype == "bfloat16" and cfg.to_dict()["text_dtype"] == "bfloat16"
    res = run_sweep(cfg, tmp_path / "run", progress=False, encoders={"tv": ToyVision()})
    assert len(res.rows) == 2
    bf = load_features(small_manifest, "minilm", "n_c", 2, cache_dir=cache, dtype="bfloat16")
    assert bf.record["encoder"]["dtype"] == "bfloat16"
    with pytest.raises(VlgapError):  # nothing was extracted in float32
        load_features(small_manifest, "minilm", "n_c", 2, cache_dir=cache, dtype="float32")
    # the same sweep in float32 text: other features (cached apart), other keys
    cfg32 = SweepConfig(str(small_manifest), ["tv"], ["minilm"], [2], [1, 2], k=3, n_bootstrap=0, n_permutations=0,
                        cache_dir=str(cache), fit=False)
    assert "text_dtype" not in cfg32.to_dict()  # the default keeps older run folders' configurations
    run_sweep(cfg32, tmp_path / "run32", progress=False, encoders={"tv": ToyVision()})
    f32 = load_features(small_manifest, "minilm", "n_c", 2, cache_dir=cache, dtype="float32")
    a, b = np.asarray(f32.layers[-1]), np.asarray(bf.layers[-1])
    assert a.shape == b.shape and not np.array_equal(a, b)
    assert np.allclose(a, b, atol=0.05 * np.abs(a).max())  # bfloat16 rounding, not other features


def test_text_dtype_equal_to_dtype_is_no_setting_and_a_bad_one_is_refused():
    assert SweepConfig("m.jsonl", ["a"], ["b"], [1], [1], dtype="fp32", text_dtype="float32").text_dtype is None
    with pytest.raises(VlgapError, match="int7"):
        SweepConfig("m.jsonl", ["a"], ["b"], [1], [1], text_dtype="int7")
    from vlgap.probe.demo import DemoConfig

    assert DemoConfig().check().text_dtype == "auto"  # resolved against the device when the demo starts
    assert DemoConfig(text_dtype="f32").check().text_dtype == "float32"
    # unset alike in both configurations ("" is how a TOML file leaves it), and a bad value names its flag
    assert SweepConfig("m.jsonl", ["a"], ["b"], [1], [1], text_dtype="").text_dtype is None
    assert DemoConfig(text_dtype="").check().text_dtype is None
    for make in (lambda: SweepConfig("m.jsonl", ["a"], ["b"], [1], [1], text_dtype="int7"),
                 lambda: DemoConfig(text_dtype="int7").check()):
        with pytest.raises(VlgapError, match=r"dtype 'int7' \(--text-dtype\) is not valid here; valid: float32"):
            make()
    with pytest.raises(VlgapError, match=r"\(--dtype\)"):
        SweepConfig("m.jsonl", ["a"], ["b"], [1], [1], dtype="int7")


def test_bad_text_dtype_on_the_command_line_names_its_flag(tmp_path, capsys):
    from in_process_cli import refused

    manifest = tmp_path / "m.jsonl"
    manifest.write_text('{"id": "a", "video": "x.mp4", "captions": ["c"]}\n')
    line = refused(capsys, "sweep", manifest, "--vision", "mobilenet_v2", "--text", "minilm", "--text-dtype", "int7")
    assert "(--text-dtype) is not valid here" in line and "(--dtype)" not in line
