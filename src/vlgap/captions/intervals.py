"""Bootstrap intervals and paired tests for caption metrics, by resampling items.

Every caption metric here is a function of *sums* of per-item sufficient statistics: a mean score
(ROUGE-L, CIDEr with fixed document frequencies) is sum/n, corpus BLEU and METEOR are nonlinear
functions of summed counts. So a bootstrap replicate is a weighted sum of the cached per-item rows,
counts @ stats, and 1000 replicates of corpus BLEU on thousands of items cost one matrix product;
the corpus statistic is recomputed on every replicate, never averaged from per-item scores.

Resampled index rows come from `numpy.random.default_rng(seed).integers(0, n, (B, n))`, the same
stream as `vlgap.stats.resampling.bootstrap_ci`, and the interval formulas (percentile, BCa with a
jackknife of leave-one-out sums) and permutation p-values are that module's.

Paired comparison of systems A and B on the same items: the paired bootstrap resamples items
jointly; the permutation test swaps A's and B's output on each item with probability 1/2
(approximate randomisation, Riezler & Maxwell 2005) and recomputes the corpus difference, which for
a mean metric is the sign-flip test on per-item differences.

Small n: intervals follow vlgap.stats.resampling's rule (withheld below MIN_ITEMS_FOR_INTERVAL items,
and when degenerate, with `Interval.reason`). The paired interval (bootstrap) and p-value
(randomisation) are two inferences; where they disagree, PAIRED_DISAGREEMENT_WHY is the one line a
report prints (`vlgap.stats.resampling.disagreement_note`), and the verdict follows the p-value.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from vlgap.errors import VlgapError
from vlgap.keywords import renamed_keywords
from vlgap.stats.resampling import (
    MIN_ITEMS_FOR_INTERVAL,
    Interval,
    TestResult,
    bca_interval,
    interval_reason,
    percentile_interval,
    permutation_p_value,
    too_few_items_reason,
)

#: why a caption metric's paired bootstrap interval and randomisation p-value can disagree
PAIRED_DISAGREEMENT_WHY = ("the interval is a paired bootstrap of the corpus difference and the p-value an "
                           "approximate-randomisation test, which is exact; the verdict follows the p-value")

#: statistic(sums, n_items) -> values: sums has shape (..., k), values (..., m)
SumStatistic = Callable[[np.ndarray, int], np.ndarray]

_MAX_ELEMENTS = 8_000_000  # resample counts materialised at once


def mean_statistic(sums: np.ndarray, n_items: int) -> np.ndarray:
    """The mean of a per-item score kept in column 0."""
    return np.asarray(sums, dtype=float)[..., :1] / n_items


def _counts(rng: np.random.Generator, n: int, b: int) -> np.ndarray:
    idx = rng.integers(0, n, size=(b, n))
    flat = (idx + (np.arange(b, dtype=np.int64) * n)[:, None]).ravel()
    return np.bincount(flat, minlength=b * n).reshape(b, n).astype(float)


def bootstrap_sums(stats: np.ndarray, n_bootstrap: int, seed: int | None) -> np.ndarray:
    """Summed statistics of `n_bootstrap` bootstrap resamples of the items (rows of `stats`)."""
    stats = np.asarray(stats, dtype=float)
    n = stats.shape[0]
    rng = np.random.default_rng(seed)
    batch = max(1, _MAX_ELEMENTS // max(1, n))
    out = []
    done = 0
    while done < n_bootstrap:
        b = min(batch, n_bootstrap - done)
        out.append(_counts(rng, n, b) @ stats)
        done += b
    return np.concatenate(out, axis=0)


def _check(n: int, n_bootstrap: int, ci_method: str) -> None:
    if n < 2:
        raise VlgapError(f"a bootstrap interval needs at least 2 items (one gives its score and n/a), got {n}")
    if n_bootstrap < 1:
        raise VlgapError(f"n_bootstrap={n_bootstrap}: need at least 1 (1000 or more for a 95% interval)")
    if ci_method not in ("bca", "percentile"):
        raise VlgapError(f"ci_method={ci_method!r}: use 'bca' or 'percentile'")


def _interval(estimate: float, boot: np.ndarray, jack: np.ndarray, confidence: float, ci_method: str) -> tuple[float, float]:
    if ci_method == "percentile":
        return percentile_interval(boot, confidence)
    return bca_interval(estimate, boot, jack, confidence)


def _withheld(estimate: float, lo: float, hi: float, confidence: float, method: str, n_resamples: int,
              n: int) -> Interval:
    """An Interval under the small-n rule: ends kept only when n is large enough and they differ."""
    reason = too_few_items_reason(n) if n < MIN_ITEMS_FOR_INTERVAL else interval_reason(lo, hi)
    if reason is not None:
        lo = hi = float("nan")
    return Interval(estimate, lo, hi, confidence, method, n_resamples, n, reason)


@renamed_keywords(n_resamples="n_bootstrap", method="ci_method")
def sum_statistic_intervals(stats: np.ndarray, statistic: SumStatistic, *, n_bootstrap: int = 1000,
                            confidence: float = 0.95, ci_method: str = "bca", seed: int | None = 0
                            ) -> list[Interval]:
    """One interval per output of `statistic` (e.g. BLEU-1..4), resampling the rows of `stats`."""
    stats = np.asarray(stats, dtype=float)
    n = stats.shape[0]
    if n == 1:  # one item: the score, and "n/a (too few items)" for its interval, as below the small-n rule
        _check(2, n_bootstrap, ci_method)
        estimate = np.atleast_1d(statistic(stats.sum(axis=0), n))
        return [_withheld(float(e), float("nan"), float("nan"), confidence, ci_method, n_bootstrap, n) for e in estimate]
    _check(n, n_bootstrap, ci_method)
    total = stats.sum(axis=0)
    estimate = np.atleast_1d(statistic(total, n))
    boot = np.atleast_2d(statistic(bootstrap_sums(stats, n_bootstrap, seed), n))
    jack = np.atleast_2d(statistic(total[None, :] - stats, n - 1)) if ci_method == "bca" else None
    out = []
    for j in range(estimate.shape[-1]):
        lo, hi = _interval(float(estimate[j]), boot[:, j], None if jack is None else jack[:, j], confidence, ci_method)
        out.append(_withheld(float(estimate[j]), lo, hi, confidence, ci_method, n_bootstrap, n))
    return out


@renamed_keywords(n_resamples="n_bootstrap", method="ci_method")
def paired_difference(stats_a: np.ndarray, stats_b: np.ndarray, statistic: SumStatistic, *,
                      n_bootstrap: int = 1000, n_permutations: int = 10000, confidence: float = 0.95,
                      ci_method: str = "bca", seed: int | None = 0) -> list[tuple[Interval, TestResult]]:
    """For each output of `statistic`: interval of statistic(A) - statistic(B) (paired bootstrap)
    and a two-sided approximate-randomisation p-value. Rows of A and B are the same items."""
    a = np.asarray(stats_a, dtype=float)
    b = np.asarray(stats_b, dtype=float)
    if a.shape != b.shape:
        raise VlgapError(f"paired statistics must have the same shape (same items), got {a.shape} and {b.shape}")
    n = a.shape[0]
    _check(n, n_bootstrap, ci_method)
    if n_permutations < 1:
        raise VlgapError(f"n_permutations={n_permutations}: need at least 1")
    ta, tb = a.sum(axis=0), b.sum(axis=0)
    observed = np.atleast_1d(statistic(ta, n) - statistic(tb, n))
    # paired bootstrap: the same resampled items for both systems
    both = np.concatenate([a, b], axis=1)
    sums = bootstrap_sums(both, n_bootstrap, seed)
    k = a.shape[1]
    boot = np.atleast_2d(statistic(sums[:, :k], n) - statistic(sums[:, k:], n))
    jack = None
    if ci_method == "bca":
        jack = np.atleast_2d(statistic(ta[None, :] - a, n - 1) - statistic(tb[None, :] - b, n - 1))
    # approximate randomisation: swap the two systems' rows on a random half of the items
    rng = np.random.default_rng(seed)
    diff = b - a
    null = []
    batch = max(1, _MAX_ELEMENTS // max(1, n))
    done = 0
    while done < n_permutations:
        m = min(batch, n_permutations - done)
        swap = rng.integers(0, 2, size=(m, n)).astype(float)
        moved = swap @ diff
        null.append(np.atleast_2d(statistic(ta + moved, n) - statistic(tb - moved, n)))
        done += m
    null = np.concatenate(null, axis=0)
    out = []
    for j in range(observed.shape[-1]):
        lo, hi = _interval(float(observed[j]), boot[:, j], None if jack is None else jack[:, j], confidence, ci_method)
        # a relative tolerance so that swaps reproducing the observed difference count as ties
        p = permutation_p_value(abs(float(observed[j])) * (1 - 1e-12), null[:, j], "two-sided")
        out.append((_withheld(float(observed[j]), lo, hi, confidence, ci_method, n_bootstrap, n),
                    TestResult(float(observed[j]), p, n_permutations, n, "two-sided")))
    return out
