"""The small-n rule of vlgap.stats (issue 21, item 6): intervals are withheld below a stated minimum n
and when degenerate, every printer writes "n/a (why)", and an interval printed beside a p-value comes
from the same inference (or a one-line note says why they differ)."""
from __future__ import annotations

import numpy as np
import pytest

from vlgap.formatting import interval
from vlgap.stats.resampling import (
    MIN_ITEMS_FOR_INTERVAL,
    bootstrap_ci,
    disagreement_note,
    is_significant,
    sign_flip_inference,
    sign_flip_min_items,
    sign_flip_test,
)

# A paired contrast over 12 prompts where the old code path (BCa bootstrap interval of the mean beside a
# sign-flip p-value) printed an interval excluding 0 next to p = 0.067 and "no significant difference".
CONTRADICTION = np.array([0.049, 0.005, -0.019, 0.295, 0.044, -0.111, -0.002, 0.104, 0.01, 0.159, 0.13, 0.038])


def _percentile_coverage(n: int, dist: str, reps: int = 1500, resamples: int = 400, seed: int = 1) -> float:
    """Coverage of a nominal 95% percentile bootstrap interval of the mean, all data sets at once."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((reps, n)) if dist == "normal" else rng.exponential(size=(reps, n))
    truth = 0.0 if dist == "normal" else 1.0
    idx = rng.integers(0, n, size=(reps, resamples, n))
    means = np.take_along_axis(np.broadcast_to(x[:, None, :], idx.shape), idx, axis=2).mean(axis=2)
    lo, hi = np.quantile(means, [0.025, 0.975], axis=1)
    return float(np.mean((lo <= truth) & (truth <= hi)))


def test_minimum_n_is_where_bootstrap_coverage_reaches_090():
    # the simulation behind MIN_ITEMS_FOR_INTERVAL (resampling's docstring): at the minimum a normal mean's
    # 95% interval covers about 0.90; a few items fewer it clearly undercovers, and 2 items is hopeless
    at_min = _percentile_coverage(MIN_ITEMS_FOR_INTERVAL, "normal")
    assert 0.89 <= at_min <= 0.93
    assert _percentile_coverage(5, "normal") < 0.86
    assert _percentile_coverage(2, "normal") < 0.6
    assert _percentile_coverage(5, "exponential") < _percentile_coverage(MIN_ITEMS_FOR_INTERVAL, "exponential")


def test_below_the_minimum_the_interval_is_na_with_the_reason():
    iv = bootstrap_ci([0.2, 0.3], "mean")
    assert iv.ci is None and iv.estimate == pytest.approx(0.25)
    assert iv.reason == "n too small: n=2 < 10"
    assert interval(iv.ci, 3, iv.reason) == "n/a (n too small: n=2 < 10)"
    assert iv.to_dict()["reason"] == iv.reason
    # at the minimum an interval is reported
    assert bootstrap_ci(np.arange(MIN_ITEMS_FOR_INTERVAL, dtype=float)).ci is not None


def test_a_degenerate_interval_is_never_printed_as_a_point():
    iv = bootstrap_ci(np.full(20, 0.5))
    assert iv.ci is None and iv.reason.startswith("degenerate")
    # the printers' own safety net, for intervals computed elsewhere
    assert interval([0.049, 0.049]) == "n/a (degenerate: every resample gave the same value)"
    assert interval([0.01, 0.02]) == "[0.010, 0.020]"
    assert interval([0.012, 0.155], 3, signed=True) == "[+0.012, +0.155]"


def test_mmd_with_two_items_per_side_has_no_interval():
    from vlgap.cape.report import _ci
    from vlgap.stats.mmd import mmd_test

    rng = np.random.default_rng(0)
    res = mmd_test(rng.normal(size=(2, 4)), rng.normal(size=(2, 4)) + 1, n_permutations=50, n_bootstrap=200)
    assert res.ci is None
    assert res.ci_reason == "n too small: n_a=2 < 10 per side"
    assert _ci(res.ci, res.ci_reason) == "n/a (n too small: n_a=2 < 10 per side)"
    assert res.p_value is not None  # the permutation test still runs: it is exact at any n


def test_mmd_interval_and_p_value_disagreement_is_said_in_one_line():
    from vlgap.stats.mmd import mmd_test

    rng = np.random.default_rng(3)
    seen_disagreement = False
    for trial in range(6):  # one distribution: the bootstrap interval of MMD^2 often sits above 0
        res = mmd_test(rng.normal(size=(12, 3)), rng.normal(size=(12, 3)), n_permutations=200, n_bootstrap=200,
                       seed=trial)
        excludes = res.ci[0] > 0 or res.ci[1] < 0
        agree = excludes == is_significant(res.p_value, 0.05)
        assert (res.note is None) == agree
        if not agree:
            seen_disagreement = True
            assert "verdict follows the permutation p-value" in res.note and "\n" not in res.note
    assert seen_disagreement


def test_sign_flip_minimum_items_follows_the_smallest_attainable_p():
    assert sign_flip_min_items(0.95) == 6
    assert sign_flip_min_items(0.99) == 8
    iv, test = sign_flip_inference([0.1, 0.2, 0.3, 0.4, 0.5])  # all positive, yet p = 2/32 > 0.05
    assert test.p_value == pytest.approx(0.0625)
    assert iv.ci is None and iv.reason.startswith("n too small: n=5 < 6")
    iv6, test6 = sign_flip_inference([0.1, 0.2, 0.3, 0.4, 0.5, 0.6])
    assert test6.p_value == pytest.approx(2 / 64) and iv6.ci[0] > 0


def test_old_code_path_contradicts_itself_and_the_new_one_cannot():
    from vlgap.cape.analysis import verdict
    from vlgap.stats.factorial import factorial_effects

    d = CONTRADICTION
    old_ci = bootstrap_ci(d, "mean", n_bootstrap=2000, seed=0).ci
    old_p = sign_flip_test(d).p_value
    assert old_ci[0] > 0 and old_p > 0.05  # the reported contradiction

    zeros = np.zeros_like(d)
    fx = factorial_effects(zeros, zeros, zeros, d, n_bootstrap=2000)  # the interaction contrast is d itself
    effect = fx["interaction"]
    assert effect["p_value"] == pytest.approx(old_p)
    assert effect["ci_method"] == "sign-flip inversion"
    assert effect["ci"][0] < 0 < effect["ci"][1]
    line = verdict(effect)
    assert "no significant difference" in line and "[-0.0047, +0.1245]" in line


def test_inverted_interval_excludes_zero_exactly_when_p_is_significant():
    from vlgap.stats.paired import paired_comparison

    rng = np.random.default_rng(7)
    for trial in range(60):
        n = int(rng.integers(6, 16))
        a = rng.normal(size=n)
        b = a + rng.normal(0.4 * rng.standard_normal(), 0.5, n)
        if trial % 3 == 0:  # discrete scores: many ties among sign patterns
            a, b = np.round(a), np.round(b)
        r = paired_comparison(a, b, n_permutations=2000 if trial % 2 else 10000, seed=trial)
        if r["ci"] is None:
            assert np.all(a == b) or r["ci_reason"]
            continue
        excludes = r["ci"][0] > 0 or r["ci"][1] < 0
        assert excludes == is_significant(r["p_value"]), (trial, r["ci"], r["p_value"])
        assert disagreement_note(r["ci"], r["p_value"], 0.05, "x") is None


def test_interval_ends_are_where_the_shifted_test_crosses_alpha():
    d = np.random.default_rng(2).normal(0.3, 1.0, 11)
    iv, _ = sign_flip_inference(d)
    eps = 1e-7
    for end, outward in ((iv.low, -eps), (iv.high, eps)):
        assert sign_flip_test(d - (end + outward)).p_value < 0.05
        assert sign_flip_test(d - (end - outward)).p_value >= 0.05


def test_sign_flip_p_values_are_uniform_under_the_null_and_the_interval_covers():
    rng = np.random.default_rng(11)
    reps, n, mu = 400, 10, 0.5
    data = rng.standard_normal((reps, n))
    p = np.array([sign_flip_test(x).p_value for x in data])
    for level in (0.05, 0.2, 0.5):
        assert abs(np.mean(p <= level) - level) < 3.5 * np.sqrt(level * (1 - level) / reps) + 1 / 2**n
    covered = 0
    for x in data + mu:
        iv, _ = sign_flip_inference(x)
        covered += iv.low <= mu <= iv.high
    assert 0.92 <= covered / reps <= 0.98


def test_cape_verdict_prints_na_beside_p():
    from vlgap.cape.analysis import verdict

    line = verdict({"estimate": 0.05, "ci": None, "ci_reason": "n too small: n=5 < 6", "p_value": 0.0625})
    assert line == "+0.0500 n/a (n too small: n=5 < 6), p = 0.0625 (no significant difference at alpha=0.05)"


def test_cape_report_rows_at_demo_scale():
    """The demo report of issue 21: an MMD^2 row with 2 items per side and a 2x2 over 12 prompts whose
    interaction contrast is the old path's contradiction case."""
    from vlgap.cape.analysis import two_by_two
    from vlgap.cape.report import report_markdown

    d = CONTRADICTION
    zeros = np.zeros_like(d)
    scores = {("rewriter", "rewriter", 0): zeros, ("rewriter", "pe", 0): zeros, ("pe", "rewriter", 0): zeros,
              ("pe", "pe", 0): d}
    r = two_by_two(scores, n_bootstrap=500, n_permutations=10000)
    r.update(config={"generator_seeds": [0], "max_retries": 2}, config_key="demo", template_reference=0.4,
             mmd={"user(pe) vs dense(pe)": {"mmd2_unbiased": 0.049, "ci": None,
                                            "ci_reason": "n too small: n_a=2 < 10 per side", "p_value": 0.33,
                                            "n_a": 2, "n_b": 2},
                  "user(pe) vs dense(rewriter)": {"mmd2_unbiased": 0.03, "ci": [0.01, 0.08], "p_value": 0.2,
                                                  "n_a": 12, "n_b": 12}},
             validity={"pe/test": {"n": 12, "first_try_valid": 0.5, "valid_after_retries": 0.8}},
             per_attribute={"pe/pe": {"shape": 0.5}},
             sft={"pe": {"lora_r": 8, "steps": 4, "batch_size": 2, "first_loss": 3.0, "last_loss": 2.0, "seconds": 1,
                         "samples_per_second": 2.0}},
             timings_s={}, seconds_this_run=1)
    text = report_markdown(r)
    assert "| user(pe) vs dense(pe) | 0.0490 | n/a (n too small: n_a=2 < 10 per side) | 0.33 | 2/2 |" in text
    assert "[0.049, 0.049]" not in text
    interaction = next(line for line in text.splitlines() if line.startswith("| interaction"))
    assert "[-0.0047, +0.1245], p = 0.0669 (no significant difference" in interaction
    # a bootstrap interval excluding 0 beside p = 0.2 gets its one-line reason
    assert "Note, user(pe) vs dense(rewriter): the interval excludes 0 but p = 0.2:" in text
    assert "interval excludes 0 exactly when p < 0.05" in text
