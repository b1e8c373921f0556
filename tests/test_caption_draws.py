"""Caption draws (issue 22, item 1): random n_c-caption draws per item, their cache keys, the sweep's
draw-averaged score and its interval (item bootstrap + between-draw variance), coverage by simulation."""
from __future__ import annotations

import json

import numpy as np
import pytest

from toy_encoders import ToyText, ToyVision
from vlgap.data.sampling import caption_draw_indices, draw_captions, join_captions
from vlgap.errors import VlgapError
from vlgap.metrics.draws import combine_draws
from vlgap.metrics.uncertainty import bootstrap_weight_batches
from vlgap.probe.sweep import SweepConfig, cell_key, run_sweep

CAPS = ("a red square", "a blue circle", "a green star", "a big triangle", "a small dot")


def test_default_is_the_first_captions_and_draws_are_seeded_nested_subsets():
    assert draw_captions(CAPS, 3, "v0") == join_captions(CAPS, 3, "v0")  # the paper's rule
    first = caption_draw_indices(5, 2, "v0", seed=0, draw=0)
    assert list(first) == sorted(first) and len(set(first)) == 2
    assert np.array_equal(first, caption_draw_indices(5, 2, "v0", 0, 0))  # seeded
    wider = caption_draw_indices(5, 4, "v0", 0, 0)
    assert set(first) <= set(wider)  # nested across n_c, as the first n_c captions are
    # different draws, items and seeds give different subsets (over many, all 10 pairs appear)
    pairs = {tuple(caption_draw_indices(5, 2, f"v{i}", 0, d)) for i in range(20) for d in range(5)}
    assert len(pairs) == 10
    text = draw_captions(CAPS, 2, "v0", (0, 0))
    assert text == " ".join(CAPS[i] + "." for i in first)
    assert draw_captions(CAPS, 5, "v0", (0, 3)) == join_captions(CAPS, 5, "v0")  # all of them: the same text
    with pytest.raises(VlgapError, match="'v0' has 5 captions but n_c=6"):
        draw_captions(CAPS, 6, "v0", (0, 0))


def test_caption_draws_enter_the_feature_key_only_when_drawn():
    from vlgap.features.extract import encoder_key

    assert encoder_key("minilm") == {"name": "minilm", "dtype": "float32"}  # older caches stay valid
    assert encoder_key("minilm", caption_draw=(0, 2))["caption_draw"] == {"seed": 0, "draw": 2}
    assert encoder_key("minilm", caption_draw=(0, 2)) != encoder_key("minilm", caption_draw=(1, 2))


def write_coloured_video(path, colours, size=16):
    """An mp4 whose frame t is the flat colour colours[t] (uint8 RGB)."""
    import av

    path.parent.mkdir(parents=True, exist_ok=True)
    with av.open(str(path), "w") as c:
        s = c.add_stream("mpeg4", rate=10)
        s.width = s.height = size
        s.pix_fmt = "yuv420p"
        s.options = {"qscale": "2"}
        for col in colours:
            img = np.broadcast_to(np.asarray(col, np.uint8), (size, size, 3)).copy()
            for p in s.encode(av.VideoFrame.from_ndarray(img, format="rgb24")):
                c.mux(p)
        for p in s.encode():
            c.mux(p)
    return path


def _manifest(tmp_path, n=24):
    rows = []
    rng = np.random.default_rng(0)
    for i in range(n):
        write_coloured_video(tmp_path / "m" / f"v{i}.mp4", rng.integers(0, 256, (6, 3)))
        rows.append({"id": f"v{i}", "video": f"m/v{i}.mp4",
                     "captions": [" ".join(f"w{x}" for x in rng.integers(0, 40, 3)) for _ in range(5)]})
    man = tmp_path / "man.jsonl"
    man.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return man


def test_sweep_one_draw_is_todays_sweep_and_r_draws_average(tmp_path):
    from vlgap.features.extract import load_features
    from vlgap.metrics.layer_search import layer_search

    man = _manifest(tmp_path)
    encs = {"tv": ToyVision(), "tt": ToyText()}
    base = dict(k=3, n_bootstrap=30, n_permutations=20, cache_dir=str(tmp_path / "cache"), fit=False)
    plain = SweepConfig(str(man), ["tv"], ["tt"], [2], [1, 2], **base)
    one = SweepConfig(str(man), ["tv"], ["tt"], [2], [1, 2], caption_draws=1, **base)
    assert one.to_dict() == plain.to_dict()  # R=1 is today's configuration: same run folder, same cell keys
    assert cell_key(one, {}, "x", ("tv", "tt", 2, 1), 0) == cell_key(plain, {}, "x", ("tv", "tt", 2, 1), 0)
    a = run_sweep(plain, tmp_path / "a", progress=False, encoders=encs)
    b = run_sweep(one, tmp_path / "b", progress=False, encoders=encs)
    assert [json.dumps(r, sort_keys=True) for r in a.rows] == [json.dumps(r, sort_keys=True) for r in b.rows]
    assert (tmp_path / "a" / "cells").is_dir() and "caption_draws" not in a.rows[0]

    three = SweepConfig(str(man), ["tv"], ["tt"], [2], [1, 2], caption_draws=3, **base)
    assert three.to_dict()["caption_draws"] == 3
    res = run_sweep(three, tmp_path / "c", progress=False, encoders=encs)
    row = next(r for r in res.rows if r["n_c"] == 1)
    xs = load_features(man, "tv", "n_f", 2, cache_dir=tmp_path / "cache").layers
    direct = [layer_search(xs, load_features(man, "tt", "n_c", 1, cache_dir=tmp_path / "cache",
                                             caption_draw=(0, r)).layers, k=3).best_score for r in range(3)]
    assert row["caption_draws"] == 3 and row["draw_scores"] == pytest.approx(direct, abs=1e-12)
    assert row["score"] == pytest.approx(np.mean(direct), abs=1e-12)
    assert row["draw_sd"] > 0  # n_c=1 of 5 captions: the draws differ
    assert row["ci_lo"] <= row["ci_items_lo"] and row["ci_hi"] >= row["ci_items_hi"]  # draws widen it
    assert 0 < row["p_value"] <= 1
    # the text features of each draw are cached apart from the first-n_c ones
    first = load_features(man, "tt", "n_c", 1, cache_dir=tmp_path / "cache")
    drawn = load_features(man, "tt", "n_c", 1, cache_dir=tmp_path / "cache", caption_draw=(0, 0))
    assert drawn.record["captions"]["caption_draw"] == {"seed": 0, "draw": 0}
    assert not np.array_equal(first.layers[0], drawn.layers[0])
    # n_c = all 5 captions: every draw is the same set, so no draw variance
    full = run_sweep(SweepConfig(str(man), ["tv"], ["tt"], [2], [5], caption_draws=2, **base), tmp_path / "d",
                     progress=False, encoders=encs)
    assert full.rows[0]["draw_sd"] == 0
    assert "caption draws" in json.loads((tmp_path / "c" / "sweep.json").read_text())["config"]["interval"]
    with pytest.raises(VlgapError, match="--caption-draws"):
        SweepConfig(str(man), ["tv"], ["tt"], [2], [1], caption_draws=0)


def _coverage(draw_sd: float, *, n_draws=3, n=200, n_boot=400, n_sims=300, seed=0):
    """Coverage of the combined and the item-only interval for a statistic with known mean 0: per-item
    values a_i + e_ri plus a planted per-draw shift d_r (shared by all items, so no item resampling
    sees it), bootstrapped on shared item resamples as the layer search does for every draw."""
    rng = np.random.default_rng(seed)
    weights = np.concatenate(list(bootstrap_weight_batches(n, n_boot, 0))) / n
    hit = hit_items = 0
    for _ in range(n_sims):
        vals = rng.normal(size=n)[None] + 0.5 * rng.normal(size=(n_draws, n)) + draw_sd * rng.normal(size=(n_draws, 1))
        est = vals.mean(1)
        boot = vals @ weights.T
        boot = boot - boot.mean(1, keepdims=True) + est[:, None]  # centred, as the layer search does
        iv = combine_draws(est, boot)
        hit += iv.low <= 0 <= iv.high
        hit_items += iv.item_low <= 0 <= iv.item_high
    return hit / n_sims, hit_items / n_sims


def test_combined_interval_covers_planted_draw_variance():
    # no draw variance: near nominal (Monte-Carlo error ~1.3 %), not inflated much
    cover, _ = _coverage(0.0)
    assert 0.91 <= cover <= 0.99
    # strong planted draw variance: the item bootstrap alone misses it, the combined interval covers
    cover, cover_items = _coverage(0.2)
    assert cover >= 0.91 and cover_items <= 0.8


def test_combine_draws_checks_shapes_and_one_draw_is_the_basic_interval():
    boot = np.random.default_rng(0).normal(0.5, 0.02, size=(1, 500))
    iv = combine_draws([0.5], boot)
    q = np.quantile(boot[0], [0.025, 0.975])
    assert (iv.low, iv.high) == pytest.approx((1.0 - q[1], 1.0 - q[0]))
    assert iv.draw_sd == 0 and iv.n_draws == 1
    with pytest.raises(VlgapError, match="draws=2"):
        combine_draws([0.5, 0.6], boot)
