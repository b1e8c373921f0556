"""Generic resampling over items: bootstrap intervals (percentile, BCa), paired bootstrap, sign-flip tests.

Stable API shared by every part of vlgap that reports an interval or a p-value:

    bootstrap_ci(data, statistic="mean", *, n_bootstrap=1000, confidence=0.95, ci_method="bca",
                 seed=0, vectorized=False) -> Interval
    paired_bootstrap(scores_a, scores_b, statistic=None, *, n_bootstrap=1000, confidence=0.95,
                     ci_method="bca", seed=0, vectorized=False) -> Interval          # of A - B
    sign_flip_test(differences, *, n_permutations=10000, alternative="two-sided", seed=0)
        -> TestResult
    sign_flip_inference(differences, *, n_permutations=10000, confidence=0.95, seed=0)
        -> (Interval, TestResult)      # the interval inverts the same test: one inference for both
    percentile_interval(boot_stats, confidence) -> (lo, hi)
    bca_interval(estimate, boot_stats, jackknife_stats, confidence) -> (lo, hi)
    permutation_p_value(observed, null_stats, alternative="greater") -> float

"Items" are always axis 0. `data` may be one array (or list) or a *tuple* of arrays sharing axis 0; a tuple is
resampled jointly (the same item indices for every array), which is what a paired design needs.
Everything is seeded through `numpy.random.default_rng(seed)`, so a result is reproducible.

Small-n rule (for every caller): an interval is reported only where it can cover.
  * A bootstrap interval over items needs at least MIN_ITEMS_FOR_INTERVAL items (per side, for a
    two-sample statistic). The number was chosen by a coverage simulation of a nominal 95% percentile
    interval of a mean (4000 data sets x 1000 resamples per n): normal data cover 0.83 at n=5, 0.88 at
    n=8, 0.91 at n=10, 0.93 at n=20; exponential data 0.78, 0.85, 0.86, 0.91. 10 is the smallest n where
    normal data reach 0.90 (tests/test_stats_small_n.py reruns the simulation). Below it a bootstrap
    resamples a handful of distinct values and its interval is too short.
  * An interval from inverting the sign-flip test (`sign_flip_inference`) is exact under a symmetric
    null at any n, but is unbounded until the smallest attainable p-value (2 / 2^n) falls below
    1 - confidence: n >= 6 at 95% (`sign_flip_min_items`).
  * An interval whose ends coincide (every resample gave the same value) is degenerate.
Below the minimum, or when degenerate, `Interval.ci` is None and `Interval.reason` says why; printers
write "n/a (reason)" (`vlgap.formatting.interval`), never a point.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Callable, Literal, Sequence

import numpy as np
from scipy import special

from vlgap.errors import VlgapError
from vlgap.keywords import renamed_keywords

Alternative = Literal["two-sided", "greater", "less"]
IntervalMethod = Literal["bca", "percentile"]

#: largest number of resampled index rows materialised at once by the vectorised paths
_MAX_BATCH_ELEMENTS = 4_000_000

#: fewest items (per side, for two-sample statistics) for which a bootstrap interval is reported; see the
#: module docstring for the coverage simulation behind the number
MIN_ITEMS_FOR_INTERVAL = 10

#: the reason written for an interval whose ends coincide
DEGENERATE_REASON = "degenerate: every resample gave the same value"


def too_few_items_reason(n: int, minimum: int = MIN_ITEMS_FOR_INTERVAL, label: str = "n") -> str:
    """"n too small: n=2 < 10": the reason an interval is not reported."""
    return f"n too small: {label}={n} < {minimum}"


def interval_reason(low: float, high: float) -> str | None:
    """Why a computed interval cannot be printed (None when it can): missing or coinciding ends."""
    if not (np.isfinite(low) and np.isfinite(high)):
        return "no finite interval from the resamples"
    if low == high:
        return DEGENERATE_REASON
    return None


def is_significant(p_value: float | None, significance: float = 0.05) -> bool:
    """The one decision rule beside every interval: reject when p < significance (an interval that inverts the
    same test excludes the null value exactly then)."""
    return p_value is not None and np.isfinite(p_value) and p_value < significance


def disagreement_note(ci: Sequence[float] | None, p_value: float | None, significance: float, why: str,
                      null_value: float = 0.0) -> str | None:
    """One line for a report where an interval and a p-value come from different inferences and disagree
    (the interval excludes `null_value` but p >= significance, or the reverse); None when they agree.
    `significance` is the test's level (1 - the interval's confidence)."""
    if ci is None or p_value is None or not np.isfinite(p_value):
        return None
    excludes = ci[0] > null_value or ci[1] < null_value
    if excludes == is_significant(p_value, significance):
        return None
    side = "excludes" if excludes else "contains"
    return f"the interval {side} {null_value:g} but p = {p_value:.3g}: {why}"


@dataclass(frozen=True)
class Interval:
    """A point estimate with a bootstrap confidence interval over `n` items."""

    estimate: float
    low: float
    high: float
    confidence: float
    method: str
    n_resamples: int
    n: int
    #: why there is no interval ("n too small: n=2 < 10", degenerate); None when `ci` is reported
    reason: str | None = None

    @property
    def ci(self) -> list[float] | None:
        """[low, high], or None where the small-n rule withholds the interval (see `reason`)."""
        if self.reason is not None:
            return None
        return [self.low, self.high]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class TestResult:
    """A test statistic with its p-value; `exact` means every sign pattern was enumerated."""

    statistic: float
    p_value: float
    n_permutations: int
    n: int
    alternative: str
    exact: bool = False

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# ----------------------------------------------------------------------------------------------
# Interval and p-value formulas (usable with any resampling scheme, e.g. a cached kernel matrix)
# ----------------------------------------------------------------------------------------------

def _check_confidence(confidence: float) -> None:
    if not 0.0 < confidence < 1.0:
        raise VlgapError(f"confidence={confidence!r}: must be strictly between 0 and 1, e.g. 0.95")


def percentile_interval(boot_stats: np.ndarray, confidence: float = 0.95) -> tuple[float, float]:
    """Efron's percentile interval: the (1-c)/2 and (1+c)/2 quantiles of the bootstrap statistics."""
    _check_confidence(confidence)
    boot = np.asarray(boot_stats, dtype=float).ravel()
    boot = boot[np.isfinite(boot)]
    if boot.size == 0:
        return (float("nan"), float("nan"))
    alpha = (1.0 - confidence) / 2.0
    lo, hi = np.quantile(boot, [alpha, 1.0 - alpha])
    return float(lo), float(hi)


def bca_interval(
    estimate: float,
    boot_stats: np.ndarray,
    jackknife_stats: np.ndarray | Sequence[np.ndarray],
    confidence: float = 0.95,
) -> tuple[float, float]:
    """Bias-corrected and accelerated interval (Efron 1987; Efron & Tibshirani 1993, ch. 14).

    `jackknife_stats` holds the leave-one-out statistics; for a statistic of several independent
    samples pass one array per sample and the acceleration is the multi-sample formula (as in
    scipy.stats.bootstrap): a = sum_j sum_i U_ji^3 / n_j^3 / (6 (sum_j sum_i U_ji^2 / n_j^2)^1.5),
    with U_ji = (n_j - 1)(mean_j - theta_(ji)). For one sample this is the textbook formula.
    The bias correction uses the mid-rank of the estimate among the bootstrap statistics, so ties
    (e.g. discrete scores) are handled symmetrically.
    """
    _check_confidence(confidence)
    boot = np.asarray(boot_stats, dtype=float).ravel()
    boot = boot[np.isfinite(boot)]
    if boot.size == 0:
        return (float("nan"), float("nan"))
    if isinstance(jackknife_stats, np.ndarray) and jackknife_stats.ndim == 1:
        groups = [jackknife_stats]
    else:
        groups = [np.asarray(g, dtype=float).ravel() for g in jackknife_stats]

    below = np.count_nonzero(boot < estimate)
    equal = np.count_nonzero(boot == estimate)
    prop = (below + 0.5 * equal) / boot.size
    if prop <= 0.0 or prop >= 1.0:
        # The estimate lies outside the bootstrap distribution: BCa is undefined, fall back.
        return percentile_interval(boot, confidence)
    z0 = special.ndtri(prop)

    num = 0.0
    den = 0.0
    for g in groups:
        g = np.asarray(g, dtype=float)
        n_j = g.size
        if n_j < 2:
            continue
        u = (n_j - 1) * (g.mean() - g)
        num += np.sum(u**3) / n_j**3
        den += np.sum(u**2) / n_j**2
    accel = num / (6.0 * den**1.5) if den > 0 else 0.0

    alpha = (1.0 - confidence) / 2.0
    z = special.ndtri(np.array([alpha, 1.0 - alpha]))
    adj = special.ndtr(z0 + (z0 + z) / (1.0 - accel * (z0 + z)))
    if not np.all(np.isfinite(adj)):
        return percentile_interval(boot, confidence)
    lo, hi = np.quantile(boot, adj)
    return float(lo), float(hi)


def permutation_p_value(
    observed: float, null_stats: np.ndarray, alternative: Alternative = "greater"
) -> float:
    """Monte-Carlo permutation p-value that counts the observed statistic as one of the permutations:
    p = (1 + #{null >= observed}) / (1 + B) (Phipson & Smyth 2010), so it is never 0 and the test
    is exactly valid. "two-sided" compares absolute values (for statistics centred at 0 under H0)."""
    null = np.asarray(null_stats, dtype=float).ravel()
    if alternative == "greater":
        hits = np.count_nonzero(null >= observed)
    elif alternative == "less":
        hits = np.count_nonzero(null <= observed)
    elif alternative == "two-sided":
        hits = np.count_nonzero(np.abs(null) >= abs(observed))
    else:
        raise VlgapError(f"alternative={alternative!r}: use 'two-sided', 'greater' or 'less'")
    return float((1 + hits) / (1 + null.size))


def few_permutations_caveat(n_distinct: int, n_asked: int, what: str, *, exact: bool,
                            smallest_p: float | None = None) -> None:
    """The one line for a permutation test asked for more permutations than there are distinct ones
    (tiny N). With `exact` every distinct one was enumerated (an exact test; the result reports their
    number): a caveat only when even the most extreme data cannot reach p < 0.05 (`smallest_p`, default
    1 / n_distinct). Otherwise the random permutations repeat, which keeps the p-value valid but coarse:
    said always."""
    if n_distinct >= n_asked:
        return
    from vlgap.caveats import caveat

    if exact:
        smallest = 1.0 / n_distinct if smallest_p is None else smallest_p
        if smallest >= 0.05:
            caveat(f"only {n_distinct} distinct {what} exist: all were enumerated (an exact test), and the smallest "
                   f"attainable p-value is {smallest:.3g}, so the test cannot reject at 0.05 whatever the data")
    else:
        caveat(f"only {n_distinct} distinct {what} exist, fewer than the {n_asked} permutations asked: the random "
               f"permutations repeat them, so the p-value is valid but cannot resolve below about 1/{n_distinct}")


# ----------------------------------------------------------------------------------------------
# Bootstrap over items
# ----------------------------------------------------------------------------------------------

def _as_item_arrays(data: Any, numeric: bool = False) -> tuple[np.ndarray, ...]:
    # a tuple means several arrays resampled jointly; anything else (list, ndarray) is one array
    from vlgap.arguments import as_numbers, check_array_like

    parts = data if isinstance(data, tuple) else (data,)
    if not parts:
        raise VlgapError("data is an empty tuple: pass one array, or a tuple of arrays sharing axis 0")
    names = [f"data[{k}]" if isinstance(data, tuple) else "data" for k in range(len(parts))]
    what = "one value (or row) per item along axis 0"
    for part, name in zip(parts, names):
        check_array_like(part, name, what)
    arrays = tuple(as_numbers(d, name, what=what, min_items=0) if numeric else np.asarray(d)
                   for d, name in zip(parts, names))
    n = arrays[0].shape[0] if arrays[0].ndim else 0
    for k, arr in enumerate(arrays):
        if arr.ndim == 0:
            raise VlgapError(f"{names[k]} is a scalar: pass one value (or row) per item along axis 0")
        if arr.shape[0] != n:
            raise VlgapError(
                f"data[{k}] has {arr.shape[0]} items but data[0] has {n}: arrays resampled jointly "
                "must share axis 0 (one row per item)")
    if n < 2:
        raise VlgapError(f"data: the bootstrap needs at least 2 items, got {n}")
    for k, arr in enumerate(arrays):
        if arr.dtype.kind in "fc":
            bad = ~np.isfinite(arr.reshape(n, -1)).all(axis=1)
            if bad.any():
                idx = np.flatnonzero(bad)[:5].tolist()
                raise VlgapError(f"data[{k}] has NaN or Inf at item index {idx}: remove or fix those items")
    return arrays


def _resampled_stats(
    arrays: tuple[np.ndarray, ...],
    statistic: Callable[..., Any],
    index_rows: np.ndarray,
    vectorized: bool,
) -> np.ndarray:
    if not vectorized:
        return np.array([float(statistic(*(a[idx] for a in arrays))) for idx in index_rows])
    n = index_rows.shape[1]
    row_size = max(1, n * max(int(np.prod(a.shape[1:])) for a in arrays))
    batch = max(1, _MAX_BATCH_ELEMENTS // row_size)
    out = []
    for start in range(0, index_rows.shape[0], batch):
        idx = index_rows[start:start + batch]
        out.append(np.asarray(statistic(*(a[idx] for a in arrays)), dtype=float).reshape(-1))
    return np.concatenate(out)


def _jackknife_stats(
    arrays: tuple[np.ndarray, ...], statistic: Callable[..., Any], vectorized: bool
) -> np.ndarray:
    n = arrays[0].shape[0]
    # leave-one-out index rows: row i is 0..n-1 without i
    loo = np.arange(1, n)[None, :] - (np.arange(1, n)[None, :] <= np.arange(n)[:, None])
    return _resampled_stats(arrays, statistic, loo, vectorized)


@renamed_keywords(n_resamples="n_bootstrap", method="ci_method")
def bootstrap_ci(
    data: Any,
    statistic: Callable[..., Any] | Literal["mean"] = "mean",
    *,
    n_bootstrap: int = 1000,
    confidence: float = 0.95,
    ci_method: IntervalMethod = "bca",
    seed: int | None = 0,
    vectorized: bool = False,
) -> Interval:
    """Bootstrap confidence interval of any statistic of items.

    data: an array with one row per item (axis 0), or a tuple of such arrays resampled jointly.
    statistic: "mean" (mean over items; vectorised) or a callable `statistic(*arrays) -> float`.
        With `vectorized=True` the callable instead receives arrays with a leading batch axis,
        shape [b, n, ...], and must return b values (much faster for simple statistics).
    ci_method: "bca" (bias-corrected and accelerated; needs n extra jackknife evaluations) or
        "percentile".
    Returns Interval(estimate, low, high, confidence, ci_method, n_bootstrap, n).
    """
    arrays = _as_item_arrays(data, numeric=isinstance(statistic, str))
    if n_bootstrap < 1:
        raise VlgapError(f"n_bootstrap={n_bootstrap}: need at least 1 (1000 or more for a 95% interval)")
    if ci_method not in ("bca", "percentile"):
        raise VlgapError(f"ci_method={ci_method!r}: use 'bca' or 'percentile'")
    _check_confidence(confidence)
    if statistic == "mean":
        if arrays[0].ndim != 1:
            raise VlgapError("statistic='mean' needs a 1-D array of per-item scores")
        statistic, vectorized = (lambda a: np.mean(a, axis=-1)), True
    n = arrays[0].shape[0]
    rng = np.random.default_rng(seed)
    estimate_arrays = tuple(a[None] for a in arrays) if vectorized else arrays
    estimate = float(np.asarray(statistic(*estimate_arrays)).reshape(-1)[0])
    if n < MIN_ITEMS_FOR_INTERVAL:
        nan = float("nan")
        return Interval(estimate, nan, nan, confidence, ci_method, n_bootstrap, n, too_few_items_reason(n))
    index_rows = rng.integers(0, n, size=(n_bootstrap, n))
    boot = _resampled_stats(arrays, statistic, index_rows, vectorized)
    if ci_method == "percentile":
        lo, hi = percentile_interval(boot, confidence)
    else:
        jack = _jackknife_stats(arrays, statistic, vectorized)
        lo, hi = bca_interval(estimate, boot, jack, confidence)
    return Interval(estimate, lo, hi, confidence, ci_method, n_bootstrap, n, interval_reason(lo, hi))


@renamed_keywords(n_resamples="n_bootstrap", method="ci_method")
def paired_bootstrap(
    scores_a: Any,
    scores_b: Any,
    statistic: Callable[[np.ndarray, np.ndarray], float] | None = None,
    *,
    n_bootstrap: int = 1000,
    confidence: float = 0.95,
    ci_method: IntervalMethod = "bca",
    seed: int | None = 0,
    vectorized: bool = False,
) -> Interval:
    """Interval for a difference between two systems scored on the same items (row i of A and of B
    is the same item; items are resampled jointly).

    statistic=None: mean(A) - mean(B). Otherwise `statistic(a_rows, b_rows) -> float` returns the
    difference itself, e.g. corpus BLEU of A minus corpus BLEU of B computed from per-item
    sufficient statistics (rows may be vectors). `vectorized` as in `bootstrap_ci`.
    """
    a = np.asarray(scores_a)
    b = np.asarray(scores_b)
    if a.shape[:1] != b.shape[:1]:
        raise VlgapError(
            f"paired scores need the same items: A has {a.shape[0] if a.ndim else 0} rows, "
            f"B has {b.shape[0] if b.ndim else 0}")
    if statistic is None:
        if a.ndim != 1 or b.ndim != 1:
            raise VlgapError("default paired statistic (difference of means) needs 1-D per-item scores")
        return bootstrap_ci(a.astype(float) - b.astype(float), "mean", n_bootstrap=n_bootstrap,
                            confidence=confidence, ci_method=ci_method, seed=seed)
    return bootstrap_ci((a, b), statistic, n_bootstrap=n_bootstrap, confidence=confidence,
                        ci_method=ci_method, seed=seed, vectorized=vectorized)


# ----------------------------------------------------------------------------------------------
# Sign-flip (paired permutation) test
# ----------------------------------------------------------------------------------------------

def _check_differences(differences: Any, n_permutations: int) -> np.ndarray:
    from vlgap.arguments import as_numbers

    d = as_numbers(differences, "differences", ndim=1, what="a 1-D array of differences (one per item)", min_items=0)
    if d.size < 2:
        raise VlgapError(f"differences: the sign-flip test needs at least 2 items, got {d.size}")
    bad = np.flatnonzero(~np.isfinite(d))
    if bad.size:
        raise VlgapError(f"differences have NaN or Inf at item index {bad[:5].tolist()}")
    if n_permutations < 1:
        raise VlgapError(f"n_permutations={n_permutations}: need at least 1")
    return d


def _sign_batches(n: int, n_permutations: int, seed: int | None):
    """(is_exact, generator of [b, n] sign matrices): every pattern when 2^n <= n_permutations, else
    `n_permutations` seeded random patterns. The test and its inverted interval share this stream."""
    batch = max(1, _MAX_BATCH_ELEMENTS // n)
    if n <= 30 and 2**n <= n_permutations:
        bits = np.arange(n, dtype=np.int64)

        def exact():
            for start in range(0, 2**n, batch):
                codes = np.arange(start, min(2**n, start + batch), dtype=np.int64)
                yield 1.0 - 2.0 * ((codes[:, None] >> bits[None, :]) & 1)
        return True, exact()

    def sampled():
        rng = np.random.default_rng(seed)
        done = 0
        while done < n_permutations:
            b = min(batch, n_permutations - done)
            yield rng.integers(0, 2, size=(b, n)) * 2.0 - 1.0
            done += b
    return False, sampled()


def sign_flip_test(
    differences: Any,
    *,
    n_permutations: int = 10000,
    alternative: Alternative = "two-sided",
    seed: int | None = 0,
) -> TestResult:
    """Paired permutation test of H0: per-item differences are symmetric about 0 (e.g. A - B).

    The statistic is the mean difference; under H0 each sign is a fair coin. When 2^n is at most
    `n_permutations` every sign pattern is enumerated and the p-value is exact (the identity
    pattern included); otherwise random patterns give p = (1 + #{|null| >= |obs|}) / (1 + B).
    Zero differences carry no information and stay in the mean as zeros (standard practice).
    """
    d = _check_differences(differences, n_permutations)
    if alternative not in ("two-sided", "greater", "less"):
        raise VlgapError(f"alternative={alternative!r}: use 'two-sided', 'greater' or 'less'")
    n = d.size
    observed = float(d.mean())

    def _compare(null: np.ndarray) -> int:
        if alternative == "greater":
            return int(np.count_nonzero(null >= observed - 1e-12 * abs(observed)))
        if alternative == "less":
            return int(np.count_nonzero(null <= observed + 1e-12 * abs(observed)))
        return int(np.count_nonzero(np.abs(null) >= abs(observed) * (1 - 1e-12)))

    exact, batches = _sign_batches(n, n_permutations, seed)
    hits = sum(_compare(signs @ d / n) for signs in batches)
    if exact:
        few_permutations_caveat(2**n, n_permutations, f"sign patterns of {n} items", exact=True,
                                smallest_p=(2.0 if alternative == "two-sided" else 1.0) / 2**n)
        return TestResult(observed, hits / 2**n, 2**n, n, alternative, exact=True)
    return TestResult(observed, (1 + hits) / (1 + n_permutations), n_permutations, n, alternative)


def sign_flip_min_items(confidence: float = 0.95) -> int:
    """Fewest items for which the inverted sign-flip interval is bounded: the smallest attainable
    two-sided p-value, 2 / 2^n (the all-plus and all-minus patterns always count), must fall below
    1 - confidence. 6 at 95%, 8 at 99%."""
    _check_confidence(confidence)
    n = 2
    while 2.0 / 2**n >= 1.0 - confidence:
        n += 1
    return n


#: why a difference has neither p-value nor interval when no permutation was asked for
NO_PERMUTATIONS_REASON = "no test: n_permutations=0 (the interval inverts the sign-flip test)"


def sign_flip_or_none(differences: Any, *, n_permutations: int, confidence: float = 0.95,
                      seed: int | None = 0) -> tuple[Interval, TestResult | None]:
    """`sign_flip_inference`, or with n_permutations=0 ("0: none", as every command documents it) the
    mean difference alone: no test (None) and no interval, with the reason."""
    from vlgap.counts import check_count

    n_permutations = check_count("n_permutations", n_permutations, 0, flag="--permutations", example=10000)
    if n_permutations == 0:
        _check_confidence(confidence)
        d = _check_differences(differences, 1)
        nan = float("nan")
        return Interval(float(d.mean()), nan, nan, confidence, "sign-flip inversion", 0, d.size,
                        NO_PERMUTATIONS_REASON), None
    return sign_flip_inference(differences, n_permutations=n_permutations, confidence=confidence, seed=seed)


def sign_flip_inference(
    differences: Any,
    *,
    n_permutations: int = 10000,
    confidence: float = 0.95,
    seed: int | None = 0,
) -> tuple[Interval, TestResult]:
    """The two-sided sign-flip test of mean 0 and the interval that inverts it: one inference for both.

    The interval is {mu : p(mu) >= 1 - confidence}, where p(mu) is the sign-flip p-value of the
    shifted differences d - mu computed with the *same* sign patterns as the reported p = p(0) (a
    Hodges-Lehmann style test-inversion interval). So the interval excludes 0 exactly when
    p < 1 - confidence, the decision `is_significant` makes; its coverage is exact when the
    differences are symmetric about their mean.

    Computed exactly, not by search: for a pattern s with a = mean(s d) and b = mean(s), the
    pattern counts at mu when |a - mu b| >= |mean(d) - mu|, a concave quadratic in mu (|b| < 1), so
    it counts on a closed interval [l_s, u_s] around mean(d) (the all-plus and all-minus patterns
    count everywhere). The count of patterns is therefore non-increasing away from mean(d), and the
    interval's ends are order statistics of the l_s and u_s.
    Below `sign_flip_min_items(confidence)` items the interval is unbounded and is withheld
    (`Interval.ci` None with the reason).
    """
    _check_confidence(confidence)
    d = _check_differences(differences, n_permutations)
    n = d.size
    alpha = 1.0 - confidence
    test = sign_flip_test(d, n_permutations=n_permutations, seed=seed)
    dbar = test.statistic
    tol = 1.0 - 1e-12  # the test's relative tolerance for ties, kept so both count the same patterns
    lows, highs = [], []
    exact, batches = _sign_batches(n, n_permutations, seed)
    for signs in batches:
        a = signs @ d / n
        b = signs.mean(axis=1)
        full = np.abs(b) == 1.0
        with np.errstate(divide="ignore", invalid="ignore"):
            r1 = (tol * dbar - a) / (tol - b)
            r2 = (a + tol * dbar) / (tol + b)
        lows.append(np.where(full, -np.inf, np.minimum(r1, r2)))
        highs.append(np.where(full, np.inf, np.maximum(r1, r2)))
    low_ends = np.sort(np.concatenate(lows))
    high_ends = np.sort(np.concatenate(highs))[::-1]
    total = low_ends.size
    # accept mu when p(mu) >= alpha, i.e. when at least k patterns count there
    need = alpha * total if exact else alpha * (1 + total) - 1
    k = int(np.ceil(need - 1e-9))
    method = "sign-flip inversion"
    nan = float("nan")
    if k < 1 or n < sign_flip_min_items(confidence):
        reason = too_few_items_reason(n, sign_flip_min_items(confidence)) + \
            f" for a {confidence:.0%} sign-flip interval (smallest attainable p = {2.0 / 2**n:.3g})"
        return Interval(dbar, nan, nan, confidence, method, test.n_permutations, n, reason), test
    lo, hi = float(low_ends[k - 1]), float(high_ends[k - 1])
    if not (np.isfinite(lo) and np.isfinite(hi)):
        reason = f"no bounded interval: fewer than {k} of {total} sign patterns bound it; raise n_permutations"
        return Interval(dbar, nan, nan, confidence, method, test.n_permutations, n, reason), test
    # rounding guard at the null value: the printed verdict and the interval must agree
    if is_significant(test.p_value, alpha):
        if lo <= 0.0 <= hi:
            lo, hi = (np.nextafter(0.0, 1.0), hi) if dbar > 0 else (lo, np.nextafter(0.0, -1.0))
    else:
        lo, hi = min(lo, 0.0), max(hi, 0.0)
    return Interval(dbar, lo, hi, confidence, method, test.n_permutations, n, interval_reason(lo, hi)), test
