"""Temporal pooling of per-frame embeddings: the pure function against hand computation, the extraction
path (mean unchanged, other modes keep time), the cache key, the probes and the CLI flag."""
from __future__ import annotations

import json
import sys

import numpy as np
import pytest
import torch

from toy_encoders import ToyText, ToyVision
from vlgap.data.manifest import read_manifest
from vlgap.data.sampling import frame_indices
from vlgap.data.video import count_frames, read_frames
from vlgap.errors import VlgapError
from vlgap.features.extract import encoder_key, extract, load_features
from vlgap.features.temporal_pooling import output_width, parse_mode, pool_frames, segment_bounds

# [T=8, D=2] small integers: every mean below is exact in float64, so comparisons are exact
X = np.array([[0, 8], [2, 6], [4, 4], [6, 2], [8, 0], [10, 2], [12, 4], [14, 6]], dtype=np.float64)


# ---------------------------------------------------------------------------------------------- pure function
def test_modes_against_hand_computation():
    np.testing.assert_array_equal(pool_frames(X, "mean"), [7, 4])
    np.testing.assert_array_equal(pool_frames(X), [7, 4])  # default
    # segments:4 -> frames {0,1}, {2,3}, {4,5}, {6,7}
    np.testing.assert_array_equal(pool_frames(X, "segments:4"), [1, 7, 5, 3, 9, 1, 13, 5])
    # segments:2 -> {0..3}, {4..7}
    np.testing.assert_array_equal(pool_frames(X, "segments:2"), [3, 5, 11, 3])
    # segments:3 of 8 frames: floor(8j/3) -> {0,1}, {2,3,4}, {5,6,7}
    np.testing.assert_array_equal(pool_frames(X, "segments:3"), [1, 7, 6, 2, 12, 4])
    # meandiff: mean, then last - first
    np.testing.assert_array_equal(pool_frames(X, "meandiff"), [7, 4, 14, -2])
    # fewer frames than segments: nearest repeat, width stays S*D
    np.testing.assert_array_equal(pool_frames(X[:2], "segments:4"), [0, 8, 0, 8, 2, 6, 2, 6])
    np.testing.assert_array_equal(pool_frames(X[:1], "segments:3"), [0, 8] * 3)
    np.testing.assert_array_equal(pool_frames(X[:1], "meandiff"), [0, 8, 0, 0])
    assert segment_bounds(3, 2) == [(0, 1), (1, 3)] and segment_bounds(2, 4) == [(0, 1), (0, 1), (1, 2), (1, 2)]
    for mode in ("mean", "segments:4", "meandiff", "segments:3"):
        assert pool_frames(X, mode).shape == (output_width(mode, 2),)


def test_reversed_frames_give_segment_reversed_features_when_s_divides_t():
    d = X.shape[1]
    for s in (2, 4, 8):
        fwd = pool_frames(X, f"segments:{s}").reshape(s, d)
        rev = pool_frames(X[::-1], f"segments:{s}").reshape(s, d)
        np.testing.assert_array_equal(rev, fwd[::-1])
    fwd, rev = pool_frames(X, "meandiff"), pool_frames(X[::-1], "meandiff")
    np.testing.assert_array_equal(rev, np.concatenate([fwd[:d], -fwd[d:]]))
    # and mean is order-invariant (exactly, with these small integers)
    np.testing.assert_array_equal(pool_frames(X[[3, 0, 7, 1, 5, 2, 6, 4]]), pool_frames(X))


def test_torch_input_mean_is_the_old_expression():
    t = torch.randn(7, 5, generator=torch.Generator().manual_seed(0))
    assert torch.equal(pool_frames(t, "mean"), t.mean(0))  # the same expression: bitwise
    out = pool_frames(t, "segments:2")
    assert isinstance(out, torch.Tensor) and out.shape == (10,)
    torch.testing.assert_close(out, torch.cat([t[:3].mean(0), t[3:].mean(0)]))
    np.testing.assert_allclose(pool_frames(t, "meandiff").numpy(), pool_frames(t.numpy().astype(np.float64),
                                                                                "meandiff"), rtol=1e-6, atol=1e-6)


def test_mode_parsing_and_errors():
    assert parse_mode(None) == "mean" and parse_mode(" Segments:4 ") == "segments:4" and parse_mode("MEANDIFF") == "meandiff"
    for bad in ("max", "segments", "segments:", "segments:x", "segments:-2", "concat:4", ""):
        with pytest.raises(VlgapError, match=r"segments:S .*meandiff"):
            parse_mode(bad)
    with pytest.raises(VlgapError, match="S >= 2"):
        parse_mode("segments:1")
    with pytest.raises(VlgapError, match=r"per_frame: pool_frames needs a \[T frames, D\]"):
        pool_frames(X[0], "mean")
    with pytest.raises(VlgapError, match=r"per_frame: pool_frames needs a \[T frames, D\]"):
        pool_frames(X[:0], "segments:2")


# ---------------------------------------------------------------------------------------------- extraction
def test_cache_key_default_unchanged_and_differs_per_mode(tmp_path):
    from vlgap.features.store import FeatureKey

    assert encoder_key("m", "float32") == {"name": "m", "dtype": "float32"}  # as before this option existed
    assert encoder_key("m", temporal_pooling="mean") == encoder_key("m") == encoder_key("m", temporal_pooling=None)
    keys = {mode: encoder_key("m", temporal_pooling=mode) for mode in ("mean", "segments:4", "segments:2", "meandiff")}
    assert keys["segments:4"]["temporal_pooling"] == "segments:4"
    dirs = {FeatureKey(k, "fp", "n_f", 8).entry_dir(tmp_path) for k in keys.values()}
    assert len(dirs) == 4
    assert encoder_key("m", temporal_pooling="Segments:4") == keys["segments:4"]  # canonical spelling


def _naive(enc, item, n_f, mode, order=slice(None)):
    frames, _ = read_frames(item, frame_indices(count_frames(item), n_f)[order])
    layers = enc.forward_layers(enc.preprocess(frames))
    return [pool_frames(layer.double().numpy(), mode) for layer in layers]


def test_extraction_pools_sampled_frames_and_reversal_reverses_segments(tiny_dataset, tmp_path):
    enc = ToyVision()
    # v0 (5 frames) and the frame folder (4) are shorter than n_f=8: kept with repeated frames
    kw = dict(cache_dir=tmp_path, loaded_encoder=enc, progress=False, allow_repeated_frames=True)
    man = read_manifest(tiny_dataset)
    mean = extract(tiny_dataset, "toy", n_frames=[8], **kw).features[8]
    again = extract(tiny_dataset, "toy", n_frames=[8], temporal_pooling="mean", **kw)
    assert again.computed == [] and again.features[8].path == mean.path  # same cache entry as before
    seg = extract(tiny_dataset, "toy", n_frames=[2, 8], temporal_pooling="segments:4", **kw).features
    assert seg[8].path != mean.path
    assert [layer.shape for layer in seg[8].layers] == [(8, 12), (8, 32), (8, 32)]
    assert [layer.shape for layer in seg[2].layers] == [(8, 12), (8, 32), (8, 32)]  # nearest repeat keeps S*D
    assert seg[8].record["sampling"]["temporal_pooling"] == "segments:4"
    assert seg[8].record["encoder_key"]["temporal_pooling"] == "segments:4"
    assert "4 contiguous temporal segments" in seg[8].record["sampling"]["aggregation"]
    for i, item in enumerate(man.items):
        ref = _naive(enc, item, 8, "segments:4")
        for li in range(3):
            np.testing.assert_allclose(seg[8].layers[li][i], ref[li], rtol=1e-5, atol=1e-6)
        # segments of a mean over [T, D]: the plain mean is the mean of the (equal-sized) segment means
        np.testing.assert_allclose(seg[8].layers[1][i].reshape(4, 8).mean(0), mean.layers[1][i], rtol=1e-5, atol=1e-6)
    rev = extract(tiny_dataset, "toy", n_frames=[8], temporal_pooling="segments:4", frame_order="reversed",
                  **kw).features[8]
    for li, d in enumerate((3, 8, 8)):
        fwd = seg[8].layers[li].reshape(-1, 4, d)
        np.testing.assert_allclose(rev.layers[li].reshape(-1, 4, d), fwd[:, ::-1], rtol=1e-5, atol=1e-6)
    assert not np.allclose(rev.layers[1], seg[8].layers[1])  # v0..v5 have changing frames: order is visible now
    md = extract(tiny_dataset, "toy", n_frames=[8], temporal_pooling="meandiff", **kw).features[8]
    md_rev = extract(tiny_dataset, "toy", n_frames=[8], temporal_pooling="meandiff", frame_order="reversed",
                     **kw).features[8]
    np.testing.assert_allclose(md.layers[1][:, :8], mean.layers[1], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(md_rev.layers[1][:, 8:], -md.layers[1][:, 8:], rtol=1e-5, atol=1e-6)
    loaded = load_features(tiny_dataset, "toy", "n_f", 8, cache_dir=tmp_path, temporal_pooling="meandiff",
                           allow_repeated_frames=True)
    np.testing.assert_array_equal(loaded.layers[1], md.layers[1])


def test_video_and_text_encoders_refuse_other_modes(tiny_dataset, tmp_path):
    with pytest.raises(VlgapError, match="video encoder.*use 'mean'"):
        extract(tiny_dataset, "toyv", n_frames=[4], temporal_pooling="segments:2", cache_dir=tmp_path,
                loaded_encoder=ToyVision(kind="video", n0=4), progress=False)
    with pytest.raises(VlgapError, match="vision encoders"):
        extract(tiny_dataset, "toyt", n_captions=[1], temporal_pooling="meandiff", cache_dir=tmp_path,
                loaded_encoder=ToyText(), progress=False)
    with pytest.raises(VlgapError, match="not valid"):
        extract(tiny_dataset, "toy", n_frames=[4], temporal_pooling="max", cache_dir=tmp_path,
                loaded_encoder=ToyVision(), progress=False)
    # text features are unaffected by the vision option (FeatureSource passes it to vision only)
    from vlgap.features.source import FeatureOptions, FeatureSource

    src = FeatureSource(FeatureOptions(cache_dir=tmp_path, progress=False, temporal_pooling="segments:2"),
                        encoders={"toyt": ToyText()})
    assert src.text(read_manifest(tiny_dataset), "toyt").n == 8
    with pytest.raises(VlgapError, match="not valid"):
        FeatureOptions(temporal_pooling="segment:2")


# ---------------------------------------------------------------------------------------------- probes
def test_frame_order_probe_measures_order_with_segments(tiny_dataset, tmp_path):
    from vlgap.features.source import FeatureOptions, FeatureSource
    from vlgap.probe.frame_order import run_frame_order

    def run(mode):
        src = FeatureSource(FeatureOptions(cache_dir=tmp_path, progress=False, temporal_pooling=mode,
                                           allow_repeated_frames=True),  # v0 and the folder: < 8 frames
                            encoders={"toy": ToyVision(), "toyt": ToyText()})
        return run_frame_order(tiny_dataset, ["toy"], ["toyt"], n_f=8, k=2, orders=["reversed"], n_bootstrap=20,
                               image_check_items=2, features=src, out=tmp_path / mode.replace(":", "_"))

    mean, seg = run("mean"), run("segments:4")
    assert mean["temporal_pooling"] == "mean" and seg["temporal_pooling"] == "segments:4"
    assert mean["rows"][0]["by_construction"] and mean["rows"][0]["difference"] == 0
    check = seg["checks"][0]
    assert not check["invariant"] and check["checked_items"] == 8 and not seg["rows"][0]["by_construction"]
    page = (tmp_path / "segments_4" / "sections").glob("*frame_order*")
    assert "temporal pooling segments:4" in next(page).read_text()


def test_sweep_records_mode_and_redoes_cells_of_another_mode(tiny_dataset, tmp_path):
    from vlgap.probe.sweep import SweepConfig, run_sweep

    encs = {"tv": ToyVision(), "tt": ToyText()}

    def cfg(mode):
        return SweepConfig(str(tiny_dataset), ["tv"], ["tt"], [4], [1], k=2, n_bootstrap=0, n_permutations=0, fit=False,
                           cache_dir=str(tmp_path / "cache"), temporal_pooling=mode)

    a = run_sweep(cfg("meandiff"), tmp_path / "run", progress=False, encoders=encs)
    assert a.rows[0]["temporal_pooling"] == "meandiff"
    with pytest.raises(VlgapError, match='temporal_pooling: "meandiff" -> "mean"'):
        run_sweep(cfg("mean"), tmp_path / "run", progress=False, encoders=encs)  # never silently mixed
    b = run_sweep(cfg("mean"), tmp_path / "run", progress=False, encoders=encs, force=True)
    assert b.rows[0]["temporal_pooling"] == "mean"  # not the meandiff cell reused
    assert json.loads((tmp_path / "run" / "config.json").read_text())["temporal_pooling"] == "mean"
    with pytest.raises(VlgapError, match="not valid"):
        cfg("first")


def test_demo_config_key(tmp_path):
    from vlgap.cli.config_file import load_config

    (tmp_path / "c.toml").write_text('[demo]\ntemporal_pooling = "Segments:4"\n')
    assert load_config(tmp_path / "c.toml").temporal_pooling == "segments:4"
    assert load_config(None, {"temporal_pooling": "meandiff"}).temporal_pooling == "meandiff"
    with pytest.raises(VlgapError, match="not valid"):
        load_config(None, {"temporal_pooling": "avg"})


# ---------------------------------------------------------------------------------------------- CLI
def test_cli_flag_reaches_the_api(tiny_dataset, monkeypatch):
    from typer.testing import CliRunner

    import vlgap.features.extract as fx
    import vlgap.probe.frame_order as fo
    import vlgap.probe.reorder as ro
    from vlgap.cli import app

    seen = {}

    def fake_extract(*a, **kw):
        seen["extract"] = kw
        raise VlgapError("stop")

    monkeypatch.setattr(fx, "extract", fake_extract)
    out = CliRunner().invoke(app, ["extract", str(tiny_dataset), "-e", "x", "--n-frames", "8",
                                   "--temporal-pooling", "segments:4"])
    assert isinstance(out.exception, VlgapError) and seen["extract"]["temporal_pooling"] == "segments:4"

    def fake(*a, features=None, **kw):
        seen["probe"] = features.options.temporal_pooling
        raise VlgapError("stop")

    monkeypatch.setattr(fo, "run_frame_order", fake)
    monkeypatch.setattr(ro, "run_reorder", fake)
    out = CliRunner().invoke(app, ["temporal", str(tiny_dataset), "--vision", "a", "--text", "b",
                                   "--temporal-pooling", "MeanDiff"])
    assert isinstance(out.exception, VlgapError) and seen["probe"] == "meandiff"


def test_cli_bad_mode_exits_2_with_one_line(tiny_dataset, monkeypatch, capsys):
    from vlgap.cli import main

    for argv in (["extract", str(tiny_dataset), "-e", "mobilenet_v2", "--n-frames", "8"],
                 ["temporal", str(tiny_dataset), "--vision", "a", "--text", "b"],
                 ["sweep", str(tiny_dataset), "--vision", "a", "--text", "b"]):
        monkeypatch.setattr(sys, "argv", ["vlgap", *argv, "--temporal-pooling", "segments:0"])
        with pytest.raises(SystemExit) as exc:
            main()
        assert exc.value.code == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and "segments:0" in err and "meandiff" in err, err


# ---------------------------------------------------------------------------------------------- p-value
def test_paired_p_value_inverts_the_interval():
    """The p-value reported with every paired difference agrees with its interval: p < 0.05 exactly when
    the 95% interval excludes 0 (away from the boundary, where quantile interpolation may differ)."""
    from vlgap.metrics.conditions import _centred_interval, _centred_p_value

    samples = np.random.default_rng(0).normal(size=999) + 3.0  # the bootstrap's own location is irrelevant
    checked = 0
    for d in np.linspace(-4, 4, 161):
        ci, p = _centred_interval(d, samples, 0.95), _centred_p_value(d, samples)
        assert 0 < p <= 1
        if abs(p - 0.05) > 0.01:
            assert (ci[0] > 0 or ci[1] < 0) == (p < 0.05), (d, ci, p)
            checked += 1
    assert checked > 140
    assert _centred_p_value(0.0, np.zeros(200)) == 1.0  # difference 0 by construction
    # hand count: deviations -2,-1,0,1,2; estimate 1.5 -> one deviation <= -1.5, four >= -1.5: min 1
    assert _centred_p_value(1.5, np.array([-2.0, -1, 0, 1, 2])) == pytest.approx(2 * 2 / 6)


def test_paired_p_value_is_calibrated_under_the_null():
    from vlgap.metrics.conditions import reorder_drop

    ps = []
    for rep in range(12):
        rng = np.random.default_rng(200 + rep)
        c = rng.normal(size=(80, 6))
        v, p, q = (c + 0.6 * rng.normal(size=c.shape) for _ in range(3))
        ps.append(reorder_drop(v, p, q, k=5, n_bootstrap=100, seed=rep).p_value)
    assert sum(x < 0.05 for x in ps) <= 2 and np.mean(ps) > 0.3  # no excess of small p under the null
