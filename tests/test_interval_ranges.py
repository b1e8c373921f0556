"""Intervals that respect their metric's range (issue 43, item 3): every metric declares its range once, no
printed interval leaves it, an interval that would is flagged, small N prints a warning, and the chosen
intervals cover near the bound (simulations where the truth is known)."""
from __future__ import annotations

import math
import re

import numpy as np
import pytest

from vlgap.metrics.alignment import METRIC_NAMES, make_metric, metric_range
from vlgap.metrics.layer_search import layer_search
from vlgap.runs.summaries import over_seeds, t_interval, t_interval_note
from vlgap.stats.bounds import (SMALL_N_ITEMS, UNIT, ScoreRange, difference_range, keep_in_range,
                                small_sample_warning)


# ---- the range guard --------------------------------------------------------------------------------
def test_keep_in_range_clips_flags_and_withholds():
    inside = keep_in_range(0.2, 0.9, UNIT)
    assert inside.ci == [0.2, 0.9] and inside.note is None and not inside.clipped
    # the interval: 1.000 reflected to [0.803, 1.403]
    out = keep_in_range(0.803, 1.403, UNIT, method="basic bootstrap", label="mutual_knn")
    assert out.ci == [0.803, 1.0] and out.clipped and (out.raw_low, out.raw_high) == (0.803, 1.403)
    assert out.note == "clipped to mutual_knn's range [0, 1]: the basic bootstrap interval reached [0.803, 1.403]"
    # wholly outside: withheld, never printed as the point 1
    gone = keep_in_range(1.02, 1.4, UNIT)
    assert gone.ci is None and gone.withheld and "lies outside" in gone.note
    # floating-point rounding above a bound is clipped without a note (unbiased CKA of a space with itself)
    assert keep_in_range(0.5, 1.0000000000000004, UNIT).note is None
    assert keep_in_range(0.5, 1.0000000000000004, UNIT).ci == [0.5, 1.0]
    # unbounded ranges change nothing; differences of [0, 1] scores lie in [-1, 1]
    assert keep_in_range(-5.0, 9.0, ScoreRange()).ci == [-5.0, 9.0]
    assert difference_range(UNIT).text() == "[-1, 1]" and ScoreRange(0.0).text() == "[0, inf)"


# ---- each metric declares its range once, and the declaration holds ------------------------------------
def test_every_alignment_metric_declares_a_true_range():
    expected = {"mutual_knn": (0, 1), "cycle_knn": (0, 1), "cka": (0, 1), "unbiased_cka": (-1, 1), "svcca": (0, 1),
                "edit_distance_knn": (0, 1), "lcs_knn": (0, 5), "cknna": (-math.inf, math.inf)}
    assert set(expected) == set(METRIC_NAMES)
    for name, (lo, hi) in expected.items():
        r = metric_range(name, 5)
        assert (r.low, r.high) == (lo, hi) and r.why, name
        assert make_metric(name, 5).score_range == r
    rng = np.random.default_rng(0)
    seen = {m: [] for m in METRIC_NAMES}
    for t in range(40):
        n, d = int(rng.integers(6, 20)), int(rng.integers(2, 5))
        x = rng.normal(size=(n, d)) * rng.exponential(size=(n, 1))
        y = -x if t % 5 == 0 else x + rng.normal(size=x.shape) * [0.0, 0.3, 3.0][t % 3]
        for m in METRIC_NAMES:
            seen[m].append(layer_search([x], [y], k=3, metric=m, cca_dim=2).best_score)
    for m, values in seen.items():
        r = metric_range(m, 3)
        assert r.low - 1e-9 <= min(values) and max(values) <= r.high + 1e-9, m


def test_cknna_is_declared_unbounded_because_it_exceeds_one():
    # the unbiased HSIC of masked, non-symmetric kernels is no inner product: CKNNA is not bounded by 1
    rng = np.random.default_rng(0)
    best = 0.0
    for _ in range(60):
        n = int(rng.integers(5, 30))
        x = rng.normal(size=(n, int(rng.integers(1, 6))))
        best = max(best, layer_search([x], [x + rng.normal(size=x.shape) * 0.3], k=int(rng.integers(2, n - 1)),
                                      metric="cknna").best_score)
    assert best > 1.0
    assert not math.isfinite(metric_range("cknna").high)


def test_caption_metrics_declare_their_ranges():
    from vlgap.captions.registry import caption_metrics, score_range

    ranges = {m.name: m.score_range for m in caption_metrics()}
    assert (ranges["bleu"].low, ranges["bleu"].high) == (0, 1)
    assert (ranges["meteor"].low, ranges["meteor"].high) == (0, 1)
    assert (ranges["rouge"].low, ranges["rouge"].high) == (0, 1)
    assert (ranges["cider"].low, ranges["cider"].high) == (0, math.inf)  # CIDEr >= 0, no upper bound used
    assert (ranges["sacrebleu"].low, ranges["sacrebleu"].high) == (0, 100)
    assert score_range("BLEU-4") == ranges["bleu"] and not score_range("no such key").bounded


# ---- the best-pair bootstrap at small N ----------------------------------------------------------------
def _near_one(rng, n, noise=0.05, layers=(1, 1)):
    z = rng.normal(size=(n, 3))
    return ([z + rng.normal(size=z.shape) * noise * (1 + i) for i in range(layers[0])],
            [z + rng.normal(size=z.shape) * noise * (1 + i) for i in range(layers[1])])


@pytest.mark.parametrize("method", ["basic", "percentile", "simultaneous"])
def test_hostile_small_n_never_leaves_the_range(method):
    rng = np.random.default_rng(3)
    flagged = 0
    for n, k in [(8, 5), (10, 7), (12, 5), (14, 6)]:
        for rep in range(2):
            xs, ys = _near_one(rng, n, layers=(3, 2))
            res = layer_search(xs, ys, k=k, n_bootstrap=100, ci_method=method, seed=rep)
            assert res.small_sample is not None and "small sample" in res.small_sample
            if n < 10:  # the small-n rule: no interval, the reason instead
                assert res.ci is None and res.ci_reason == f"n too small: N={n} < 10"
                continue
            lo, hi = res.ci
            assert 0.0 <= lo <= hi <= 1.0
            flagged += res.ci_note is not None
            d = res.to_dict()
            assert d["ci"] == res.ci and d.get("ci_note") == res.ci_note and d["small_sample"] == res.small_sample
            if res.ci_note and "clipped" in res.ci_note:
                raw = d["bootstrap"]
                assert raw["raw_high"] > 1.0 or raw["raw_low"] < 0.0
    assert flagged  # these data push the method's interval past 1: it was clipped and said so


def test_small_sample_warning_rule():
    assert small_sample_warning(SMALL_N_ITEMS) is None and small_sample_warning(1000, 10) is None
    assert "N = 29 < 30" in small_sample_warning(29)
    assert "k = 5 >= N/4" in small_sample_warning(8, 5) and "k = 10 >= N/4" in small_sample_warning(40, 10)
    assert small_sample_warning(41, 10) is None  # k < N/4 and N >= 30


def _coverage_near_one(n: int, k: int, noise: float, layers=(1, 1), reps: int = 200, seed: int = 1):
    """Coverage of the best-pair intervals of mutual k-NN, truth = max over pairs of each pair's expected score
    at this N (Monte-Carlo over 800 independent data sets)."""
    rng = np.random.default_rng(seed)
    truth = np.mean([layer_search(*_near_one(rng, n, noise, layers), k=k).scores for _ in range(800)], axis=0).max()
    hits = {"chosen": 0, "reflected only": 0, "percentile": 0}
    from vlgap.stats.resampling import percentile_interval

    for rep in range(reps):
        xs, ys = _near_one(rng, n, noise, layers)
        res = layer_search(xs, ys, k=k, n_bootstrap=200, ci_method="basic", seed=rep)
        lo, hi = res.ci
        assert 0.0 <= lo <= hi <= 1.0
        hits["chosen"] += lo <= truth <= hi
        p_lo, p_hi = percentile_interval(res.bootstrap.samples, 0.95)
        hits["percentile"] += p_lo <= truth <= p_hi
        reflected = (2 * res.best_score - p_hi, 2 * res.best_score - p_lo)
        hits["reflected only"] += reflected[0] <= truth <= reflected[1]
    return truth, {key: v / reps for key, v in hits.items()}


@pytest.mark.slow
def test_chosen_interval_covers_near_the_bound():
    # truth near 1 at N = 12: the reflected (basic) interval alone undercovers; the chosen interval (basic
    # widened to the basic / percentile hull below N = 30, then kept in [0, 1]) covers about nominally
    truth, cov = _coverage_near_one(12, 3, 0.05)
    assert truth > 0.9
    assert cov["reflected only"] < 0.9 and cov["chosen"] >= 0.93
    truth, cov = _coverage_near_one(16, 4, 0.08)
    assert truth > 0.85 and cov["chosen"] >= 0.93 and cov["chosen"] >= cov["reflected only"]
    # two layer pairs (the best one re-selected in every resample)
    truth, cov = _coverage_near_one(12, 3, 0.1, layers=(2, 2))
    assert cov["chosen"] >= 0.9 and cov["chosen"] >= cov["reflected only"]


# ---- t intervals over seeds ---------------------------------------------------------------------------
def test_t_interval_over_few_seeds_is_kept_in_range_without_losing_coverage():
    # accuracies near 1 over 3 seeds: the t interval often passes 1; clipped to [0, 1] it covers exactly as
    # often (the truth lies in the range) and never leaves it
    rng = np.random.default_rng(0)
    truth = 0.97
    raw_hits = kept_hits = left = 0
    reps = 4000
    for _ in range(reps):
        seeds = rng.binomial(40, truth, size=3) / 40
        mean, raw = t_interval(seeds)
        _, kept = t_interval(seeds, score_range=UNIT)
        raw_hits += raw[0] <= truth <= raw[1]
        if kept is None:
            continue
        kept_hits += kept[0] <= truth <= kept[1]
        assert 0.0 <= kept[0] <= kept[1] <= 1.0
        left += raw[1] > 1.0
    assert left > reps / 4  # the hostile case: the raw interval often leaves [0, 1]
    # clipping changes no hit; the t interval itself covers 0.92 here (3 seeds of a skewed, discrete score)
    assert kept_hits == raw_hits and raw_hits / reps >= 0.9
    note = t_interval_note([0.95, 1.0, 1.0], score_range=UNIT, label="accuracy")
    assert note.startswith("clipped to accuracy's range [0, 1]: the Student-t interval reached")
    rec = over_seeds([0.95, 1.0, 1.0], score_range=UNIT)
    assert rec["t_ci"][1] == 1.0 and "t_ci_note" in rec
    assert "t_ci_note" not in over_seeds([0.5, 0.6, 0.55], score_range=UNIT)


# ---- the sweep: console, JSON and report ----------------------------------------------------------------
@pytest.mark.slow
def test_hostile_small_n_sweep_prints_no_interval_outside_the_range(tmp_path, monkeypatch):
    from conftest import write_toy_manifest
    from rich.console import Console
    from toy_encoders import ToyText, ToyVision

    from vlgap.cli import run as run_cli
    from vlgap.probe.report import write_report
    from vlgap.probe.sweep import SweepConfig, run_sweep

    manifest = write_toy_manifest(tmp_path, 12, vocab=50, n_captions=2)
    cfg = SweepConfig(str(manifest), ["tv"], ["tt"], [2, 4], [1, 2], k=5, n_bootstrap=40, n_permutations=10,
                      cache_dir=str(tmp_path / "cache"))
    res = run_sweep(cfg, tmp_path / "run", progress=False, encoders={"tv": ToyVision(), "tt": ToyText()})
    for row in res.rows:
        assert row["small_sample"].startswith("small sample: N = 12 < 30")
        if np.isfinite(row["ci_lo"]):
            assert 0.0 <= row["ci_lo"] <= row["ci_hi"] <= 1.0
    console = Console(width=250, record=True)
    monkeypatch.setattr(run_cli, "console", console)
    run_cli._print_rows(res.rows)
    text = console.export_text()
    assert "warning: small sample: N = 12 < 30" in text and "k = 5 >= N/4" in text
    for lo, hi in re.findall(r"\[(-?\d+\.\d+), (-?\d+\.\d+)\]", text):
        assert 0.0 <= float(lo) <= float(hi) <= 1.0
    page = write_report(tmp_path / "run").read_text()
    assert "warning: small sample: N = 12 &lt; 30" in page or "warning: small sample: N = 12 < 30" in page
    for lo, hi in re.findall(r"\[(-?\d+\.\d+), (-?\d+\.\d+)\]", page):
        assert 0.0 <= float(lo) <= float(hi) <= 1.0
