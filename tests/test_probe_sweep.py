"""Sweep orchestration and report on toy encoders: tidy rows, resumable cells, law fit, HTML page."""
from __future__ import annotations

import json

import pytest

from toy_encoders import ToyText, ToyVision
from vlgap.probe.report import write_report
from vlgap.probe.sweep import SweepConfig, run_sweep


@pytest.fixture
def toy_manifest(tmp_path):
    from conftest import write_toy_manifest

    return write_toy_manifest(tmp_path, 30, vocab=50, n_captions=4)


def test_sweep_rows_match_direct_layer_search_and_resume(toy_manifest, tmp_path):
    from vlgap.features.extract import load_features
    from vlgap.metrics.layer_search import layer_search

    cfg = SweepConfig(str(toy_manifest), ["tv"], ["tt"], [1, 2, 4], [1, 2, 3, 4], k=3, n_bootstrap=20, n_permutations=20,
                      cache_dir=str(tmp_path / "cache"))
    encs = {"tv": ToyVision(), "tt": ToyText()}
    res = run_sweep(cfg, tmp_path / "run", progress=False, encoders=encs)
    assert len(res.rows) == 12
    row = next(r for r in res.rows if r["n_f"] == 2 and r["n_c"] == 3)
    xs = load_features(toy_manifest, "tv", "n_f", 2, cache_dir=tmp_path / "cache").layers
    ys = load_features(toy_manifest, "tt", "n_c", 3, cache_dir=tmp_path / "cache").layers
    direct = layer_search(xs, ys, k=3)
    assert row["score"] == pytest.approx(direct.best_score, abs=1e-12)
    assert (row["x_layer"], row["y_layer"]) == (direct.x_layer, direct.y_layer)
    assert row["n"] == 30 and row["chance"] == pytest.approx(3 / 29)
    assert row["ci_lo"] <= row["score"] <= row["ci_hi"] or row["ci_lo"] <= row["ci_hi"]
    assert 0 < row["p_value"] <= 1
    header = (tmp_path / "run" / "sweep.csv").read_text().splitlines()[0]
    assert header.startswith("vision,text,n_f,n_c,score,ci_lo,ci_hi,p_value")
    # resume: cells already done are read back, not recomputed (identical rows, even with no encoders)
    again = run_sweep(cfg, tmp_path / "run", progress=False)
    assert sorted(json.dumps(r, sort_keys=True) for r in again.rows) == sorted(json.dumps(r, sort_keys=True) for r in res.rows)
    assert "|" in next(iter(res.fits))
    page = write_report(tmp_path / "run")
    text = page.read_text()
    assert "data:image/png;base64," in text and "chance" in text
    assert (tmp_path / "run" / "figures").is_dir() and len(list((tmp_path / "run" / "figures").glob("*.png"))) == 3


def test_sweep_preset_is_applied_recorded_and_not_mixed_on_resume(toy_manifest, tmp_path):
    from vlgap.features.extract import load_features
    from vlgap.metrics.layer_search import layer_search

    cache = str(tmp_path / "cache")
    encs = {"tv": ToyVision(), "tt": ToyText()}
    cfg = SweepConfig(str(toy_manifest), ["tv"], ["tt"], [1, 2], [1, 2], k=3, n_bootstrap=0, n_permutations=0,
                      cache_dir=cache, fit=False, preset="platonic-rep")
    res = run_sweep(cfg, tmp_path / "run", progress=False, encoders=encs)
    row = next(r for r in res.rows if r["n_f"] == 2 and r["n_c"] == 1)
    xs = load_features(toy_manifest, "tv", "n_f", 2, cache_dir=cache).layers
    ys = load_features(toy_manifest, "tt", "n_c", 1, cache_dir=cache).layers
    direct = layer_search(xs, ys, k=3, preset="platonic-rep")
    assert row["preset"] == "platonic-rep" and row["score"] == pytest.approx(direct.best_score, abs=1e-12)
    saved = json.loads((tmp_path / "run" / "sweep.json").read_text())
    assert saved["config"]["preset"] == "platonic-rep"
    # the same run folder without the preset: refused with the difference named; with force every cell
    # is recomputed, none reused from the preset run
    from vlgap.errors import VlgapError

    with pytest.raises(VlgapError, match='another configuration .*preset: "platonic-rep" -> null.*--force'):
        run_sweep(SweepConfig(**{**cfg.to_dict(), "preset": None}), tmp_path / "run", progress=False, encoders=encs)
    plain = run_sweep(SweepConfig(**{**cfg.to_dict(), "preset": None}), tmp_path / "run", progress=False,
                      encoders=encs, force=True)
    assert all(r["preset"] is None for r in plain.rows)
    ref = layer_search(xs, ys, k=3)
    again = next(r for r in plain.rows if r["n_f"] == 2 and r["n_c"] == 1)
    assert again["score"] == pytest.approx(ref.best_score, abs=1e-12)
import pytest
from vlgap.errors import VlgapError
from vlgap.cli.config_file import load_config
from vlgap.probe.demo import DemoConfig

def test_config_resample_fields_use_the_one_vocabulary(tmp_path):
    cfg = SweepConfig("m.jsonl", ["a"], ["b"], [1], [1], n_bootstrap=5, n_permutations=6)
    assert (cfg.n_bootstrap, cfg.n_permutations) == (5, 6)
    with pytest.raises(VlgapError, match="SweepConfig\\(\\): the keyword 'bootstrap' is now n_bootstrap"):
        SweepConfig("m.jsonl", ["a"], ["b"], [1], [1], bootstrap=5)
    with pytest.raises(VlgapError, match="DemoConfig\\(\\): the keyword 'permutations' is now n_permutations"):
        DemoConfig(permutations=5)
    toml = tmp_path / "demo.toml"
    toml.write_text("[demo]\nbootstrap = 50\n")
    with pytest.raises(VlgapError, match="'bootstrap' is now 'n_bootstrap'"):
        load_config(toml)
    toml.write_text("[demo]\nn_bootstrap = 50\n")
    assert load_config(toml).n_bootstrap == 50
