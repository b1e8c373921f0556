"""Bootstrap intervals and paired comparisons for caption metrics (items resampled, corpus
statistics recomputed per replicate)."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from vlgap.captions.bleu import bleu_from_statistics, bleu_statistics
from vlgap.captions.evaluate import caption_eval, compare_captions
from vlgap.captions.intervals import (bootstrap_sums, mean_statistic, paired_difference,
                                      sum_statistic_intervals)
from vlgap.stats.resampling import bootstrap_ci

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "captions"))
from corpus import make_corpus, make_system_b  # noqa: E402

METRICS = ["bleu", "rouge", "cider", "sacrebleu"]


@pytest.fixture(scope="module")
def corpus():
    return make_corpus(300, 5, seed=2)


def test_bootstrap_is_reproducible_by_seed(corpus):
    refs, preds = corpus
    a = caption_eval(preds, refs, METRICS, n_bootstrap=300, seed=3)
    b = caption_eval(preds, refs, METRICS, n_bootstrap=300, seed=3)
    c = caption_eval(preds, refs, METRICS, n_bootstrap=300, seed=4)
    for key in ("BLEU-4", "ROUGE-L", "CIDEr", "SacreBLEU"):
        assert a[key]["ci"] == b[key]["ci"]
        assert a[key]["ci"] != c[key]["ci"]
        assert a[key]["ci"][0] < a[key]["score"] < a[key]["ci"][1]
    assert a["interval"] == {"confidence": 0.95, "method": "bca", "n_resamples": 300, "seed": 3, "unit": "items"}


@pytest.mark.parametrize("method", ["bca", "percentile"])
def test_mean_metric_interval_equals_generic_bootstrap(method):
    scores = np.random.default_rng(0).gamma(2.0, 0.5, size=150)
    ours = sum_statistic_intervals(scores[:, None], mean_statistic, n_bootstrap=500, seed=7, ci_method=method)[0]
    generic = bootstrap_ci(scores, "mean", n_bootstrap=500, seed=7, ci_method=method)
    assert ours.estimate == pytest.approx(generic.estimate, abs=1e-12)
    assert ours.low == pytest.approx(generic.low, abs=1e-12)
    assert ours.high == pytest.approx(generic.high, abs=1e-12)


def test_bleu_replicates_recompute_the_corpus_statistic(corpus):
    refs, preds = corpus
    keys = list(refs)
    stats = bleu_statistics([preds[k].lower() for k in keys], [[r.lower() for r in refs[k]] for k in keys])
    sums = bootstrap_sums(stats, 5, seed=11)
    idx = np.random.default_rng(11).integers(0, len(keys), size=(5, len(keys)))
    for b in range(5):
        direct = bleu_statistics([preds[keys[i]].lower() for i in idx[b]], [[r.lower() for r in refs[keys[i]]] for i in idx[b]])
        np.testing.assert_allclose(sums[b], direct.sum(axis=0))
        np.testing.assert_allclose(bleu_from_statistics(sums[b]), bleu_from_statistics(direct.sum(axis=0)))
    # corpus BLEU is not the mean of per-item BLEU: resampling per-item scores would be wrong
    assert not np.isclose(bleu_from_statistics(stats.sum(0))[3], bleu_from_statistics(stats)[:, 3].mean())


def test_identical_systems_differ_by_nothing(corpus):
    refs, preds = corpus
    out = compare_captions(preds, preds, refs, ["bleu", "cider"], n_bootstrap=200, n_permutations=200)
    for key in ("BLEU-4", "CIDEr"):
        assert out[key]["difference"] == 0.0
        # every resample differs by exactly 0: a degenerate interval is withheld, never printed as a point
        assert out[key]["ci"] is None
        assert out[key]["ci_reason"].startswith("degenerate")
        assert out[key]["p_value"] == 1.0


def test_a_real_difference_is_found(corpus):
    refs, preds = corpus
    better = make_system_b(refs, preds, seed=1)
    out = compare_captions(better, preds, refs, ["bleu", "rouge", "cider"], n_bootstrap=500, n_permutations=500)
    for key in ("BLEU-4", "ROUGE-L", "CIDEr"):
        assert out[key]["difference"] > 0
        assert out[key]["ci"][0] > 0
        assert out[key]["p_value"] < 0.01
    assert out["n"] == 300 and out["systems"] == ["A", "B"]


def test_permutation_test_is_calibrated_under_the_null():
    rng = np.random.default_rng(5)
    p_values = []
    for _ in range(200):
        a = rng.normal(size=(40, 1))
        b = rng.normal(size=(40, 1))  # exchangeable systems: H0 true
        (_, test), = paired_difference(a, b, mean_statistic, n_bootstrap=50, n_permutations=200,
                                       ci_method="percentile", seed=int(rng.integers(1 << 30)))
        p_values.append(test.p_value)
    rejected = np.mean(np.array(p_values) < 0.05)
    assert 0.01 <= rejected <= 0.10


def test_interval_input_checks():
    from vlgap.errors import VlgapError

    one = sum_statistic_intervals(np.ones((1, 1)), mean_statistic)[0]  # one item: its score, no interval
    assert one.estimate == 1.0 and np.isnan(one.low) and np.isnan(one.high) and "n too small" in one.reason
    with pytest.raises(VlgapError, match="at least 2 items"):
        sum_statistic_intervals(np.ones((0, 1)), mean_statistic)
    with pytest.raises(VlgapError, match="ci_method='normal'"):
        sum_statistic_intervals(np.ones((5, 1)), mean_statistic, ci_method="normal")
    with pytest.raises(VlgapError, match="same shape"):
        paired_difference(np.ones((5, 1)), np.ones((4, 1)), mean_statistic)
