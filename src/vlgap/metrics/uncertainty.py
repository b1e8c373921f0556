"""Uncertainty of a best-layer-pair alignment score: bootstrap over items and permutation null,
both re-selecting the best pair inside every resample so that the selection is part of the result.

Bootstrap scheme (why it is this one). A resample draws N items with replacement and the whole
procedure is rerun on it: neighbours are searched again within the resample, every layer pair is
scored and the best pair is picked again. Copies of one item are a single point of the empirical
distribution: an item never counts its own copies as neighbours (as it never counts itself), while
copies of a neighbour all count, so a k-neighbourhood still holds k/N of the resample's mass, the
scale at which the original score was measured. Resampling per-item overlaps while keeping the
neighbour graph fixed would be cheaper but wrong: each item's overlap depends on the other items
(the score is like a degree-2 U-statistic), and treating overlaps as independent understates the
standard error roughly twofold. Subsampling without replacement changes N and therefore the
neighbourhood scale k/N that the score depends on.

For mutual k-NN this is computed without new similarity searches: each item's ranking of its
M = 4k+32 nearest items is stored once, and in a resample its k nearest draws are found by walking
that ranking with the resample's multiplicities (exactly what a new search on the resample returns,
the ranking being extended on the rare rows where M items hold fewer than k draws). Other metrics
recompute their per-layer state on each resample (slower).

Interval: `percentile` (default) is Efron's percentile interval of the re-selected best score;
`basic` reflects it around the estimate (2T - q_hi, 2T - q_lo), which corrects the upward bias that
selection adds when many layer pairs are close.

Permutation null: Y's rows are shuffled (random pairing), every pair is scored and the maximum is
kept, p = (1 + #{null max >= observed max}) / (1 + P) (Phipson & Smyth 2010). `null_mean` is the
mean of that maximum (what selection alone reaches), `null_pair_mean` the mean single-pair score
(the chance level; k/(N-1) for mutual k-NN).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

import numpy as np

from vlgap.errors import VlgapError
from vlgap.metrics.alignment import AlignmentMetric
from vlgap.stats.resampling import percentile_interval, permutation_p_value

IntervalMethod = Literal["percentile", "basic"]

#: resamples generated per batch (fixed, so results depend only on the seed and the counts)
_RESAMPLE_BATCH = 128
# independent streams for the two procedures, both derived from the user's seed
_BOOTSTRAP_STREAM = 0xB0
_PERMUTATION_STREAM = 0x9E


def bootstrap_depth(k: int, n: int) -> int:
    """Ranking depth stored for fast mutual k-NN bootstraps: P(fewer than k draws among M items)
    is below 1e-12 for M = 4k + 32, and shallower rows are handled exactly anyway."""
    return min(n - 1, 4 * k + 32)


def _rng(stream: int, seed: int | None) -> np.random.Generator:
    return np.random.default_rng([stream, 0 if seed is None else int(seed)])


def bootstrap_weight_batches(n: int, n_resamples: int, seed: int | None):
    """Yield [b, N] int32 multiplicity arrays (each row sums to N), seeded, in fixed-size batches."""
    rng = _rng(_BOOTSTRAP_STREAM, seed)
    done = 0
    while done < n_resamples:
        b = min(_RESAMPLE_BATCH, n_resamples - done)
        draws = rng.integers(0, n, size=(b, n))
        flat = draws + (np.arange(b) * n)[:, None]
        yield np.bincount(flat.ravel(), minlength=b * n).reshape(b, n).astype(np.int32)
        done += b


def permutation_batches(n: int, n_permutations: int, seed: int | None):
    """Yield [b, N] int64 permutations of range(N), seeded, in fixed-size batches."""
    rng = _rng(_PERMUTATION_STREAM, seed)
    done = 0
    while done < n_permutations:
        b = min(_RESAMPLE_BATCH, n_permutations - done)
        yield np.argsort(rng.random((b, n)), axis=1)
        done += b


@dataclass
class BootstrapSummary:
    low: float
    high: float
    confidence: float
    method: str
    se: float
    n_resamples: int
    #: how often each layer pair was the best in a resample (most frequent first, at most 5)
    best_pair_frequency: list[dict[str, Any]] = field(default_factory=list)
    samples: np.ndarray | None = field(default=None, repr=False)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("samples")
        d["ci"] = [self.low, self.high]
        return d


@dataclass
class PermutationSummary:
    p_value: float
    null_mean: float
    null_pair_mean: float
    null_q95: float
    n_permutations: int
    samples: np.ndarray | None = field(default=None, repr=False)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("samples")
        return d


def _check_count(name: str, value: int) -> int:
    if int(value) != value or value < 1:
        raise VlgapError(f"{name}={value!r}: need a positive integer (e.g. 1000)")
    return int(value)


def bootstrap_best_pair(
    metric: AlignmentMetric,
    fx: list, fy: list, sx: list, sy: list,
    *,
    estimate: float,
    n_resamples: int = 1000,
    confidence: float = 0.95,
    method: IntervalMethod = "percentile",
    seed: int | None = 0,
) -> BootstrapSummary:
    """Bootstrap interval of max over layer pairs, the best pair re-selected in every resample.

    fx, fy: prepared per-layer features; sx, sy: the metric's states of them; estimate: the observed
    best score.
    """
    n_resamples = _check_count("n_bootstrap", n_resamples)
    if method not in ("percentile", "basic"):
        raise VlgapError(f"interval method {method!r}: use 'percentile' or 'basic'")
    n = fx[0].shape[0]
    best = np.empty(n_resamples)
    arg = np.empty(n_resamples, dtype=np.int64)
    done = 0
    for weights in bootstrap_weight_batches(n, n_resamples, seed):
        scores = metric.bootstrap_scores(fx, fy, sx, sy, weights).reshape(weights.shape[0], -1)
        best[done:done + len(scores)] = np.nanmax(scores, axis=1)
        arg[done:done + len(scores)] = np.nanargmax(scores, axis=1)
        done += len(scores)
    lo, hi = percentile_interval(best, confidence)
    if method == "basic":
        lo, hi = 2 * estimate - hi, 2 * estimate - lo
    pairs, counts = np.unique(arg, return_counts=True)
    order = np.argsort(-counts, kind="stable")[:5]
    n_y = len(sy)
    freq = [{"x_layer": int(pairs[i] // n_y), "y_layer": int(pairs[i] % n_y),
             "frequency": float(counts[i] / n_resamples)} for i in order]
    return BootstrapSummary(float(lo), float(hi), confidence, method, float(np.std(best, ddof=1))
                            if n_resamples > 1 else float("nan"), n_resamples, freq, best)


def permutation_best_pair(
    metric: AlignmentMetric,
    fx: list, fy: list, sx: list, sy: list,
    *,
    observed: float,
    n_permutations: int = 1000,
    seed: int | None = 0,
) -> PermutationSummary:
    """Permutation null of the best-pair score under random pairing of X and Y rows."""
    n_permutations = _check_count("n_permutations", n_permutations)
    n = fx[0].shape[0]
    best = np.empty(n_permutations)
    pair_sum = 0.0
    done = 0
    for perms in permutation_batches(n, n_permutations, seed):
        scores = metric.permutation_scores(fx, fy, sx, sy, perms).reshape(perms.shape[0], -1)
        best[done:done + len(scores)] = np.nanmax(scores, axis=1)
        pair_sum += float(np.nanmean(scores, axis=1).sum())
        done += len(scores)
    return PermutationSummary(
        p_value=permutation_p_value(observed, best, "greater"),
        null_mean=float(best.mean()),
        null_pair_mean=pair_sum / n_permutations,
        null_q95=float(np.quantile(best, 0.95)),
        n_permutations=n_permutations,
        samples=best,
    )
