"""Uncertainty of a best-layer-pair alignment score: bootstrap over items and permutation null,
both re-selecting the best pair inside every resample so that the selection is part of the result.

Bootstrap (why it is built this way). A resample draws N items with replacement and every layer
pair is scored again on it, its neighbours searched again within the resample; the best pair is
then picked again. Three details matter for k-NN scores and were settled by simulation (latent-factor
data, N = 300 and 1000, k = 10, 3 x 3 layers; Monte-Carlo truth from 200-300 independent samples):
- Neighbours are the k nearest *distinct* drawn items, never the item's own copies; each item's
  overlap counts as often as it was drawn. Treating copies of a neighbour as separate neighbours
  (the literal rerun) makes neighbour lists lumpy and overstated the standard deviation by 30-50 %;
  with distinct neighbours the bootstrap SD was within 10 % of the true one. Resampling per-item
  overlaps on a fixed neighbour graph instead understated it by about 20 % (an item's overlap
  depends on the other items, so overlaps are positively correlated).
- A resample holds only ~63 % distinct items, so its neighbourhoods are coarser and every pair's
  score shifts (by ~+0.04 at these settings). Each pair's bootstrap scores are therefore centred
  on that pair's observed score before the maximum over pairs is taken in each resample: the shift
  goes, the joint fluctuations and hence the re-selection stay.
- Intervals (`ci_method=`), all from the same resamples, for the best pair's expected score:
  `basic` (default): the re-selected maxima reflected around the estimate, (2T - q_hi, 2T - q_lo);
  re-selection inflates the maximum by about as much as selection inflated T, so reflecting it
  moves the interval down by the estimated selection bias. `percentile`: (q_lo, q_hi) of the
  maxima, biased upward when several pairs are close. `simultaneous`: a max-t band over all pairs,
  [max_p (T_p - c se_p), max_p (T_p + c se_p)], valid whatever the ties, wider.
  Coverage at nominal 95 % (N = 300, k = 10, B = 200, 80 simulated data sets per case; Monte-Carlo
  error about 2.5 %) and mean width:
      case                               basic          percentile     simultaneous
      one clearly best pair of 9         96 % (0.047)   95 % (0.047)   99 % (0.067)
      two tied best pairs of 9           94 % (0.045)   90 % (0.045)   100 % (0.068)
      25 pairs of similar quality        90 % (0.042)   89 % (0.042)   100 % (0.078)
      25 pairs, no alignment at all      100 % (0.018)  12 % (0.018)   100 % (0.035)
  The bootstrap SE of the best score was within 5 % of its true SD when there was signal. When
  many pairs tie (`best_pair_frequency` of the top pair well below 1) prefer `simultaneous`.
- Near a bound of the metric's range (`AlignmentMetric.score_range`, [0, 1] for mutual k-NN) and at
  small N the resampled maxima are skewed against the bound, and reflecting them (`basic`) moves the
  interval the wrong way: an estimate of 1.000 became [0.803, 1.403] at N = 8, k = 5. Coverage at
  nominal 95 % with the truth near 1 (one or two pairs, N = 12-16, k = 3-4, 300 data sets each, Monte-
  Carlo truth from 1000; tests/test_interval_ranges.py): basic 0.77-0.90, percentile 0.87-0.95, the hull
  of the two 0.93-0.97. So `basic` is widened to that hull wherever N < 30 (vlgap.stats.bounds.
  SMALL_N_ITEMS) or the reflected interval leaves the range, and says so (`BootstrapSummary.note`).
- Every interval (the centred maxima are shifted, so not even `percentile` is inside by construction) is
  then intersected with the range, which cannot lower coverage (the truth lies in the range), and
  flagged when that clipped it (`BootstrapSummary.note`; vlgap.stats.bounds).
- Small N: below `vlgap.stats.resampling.MIN_ITEMS_FOR_INTERVAL` (10) items no interval is given
  (`reason`), as for every bootstrap over items in vlgap.
For mutual k-NN this runs without new similarity searches: each item's M = 4k + 32 nearest items
are ranked once, and a resample walks those rankings with its multiplicities (exactly what a new
search returns; rows whose M items hold fewer than k draws are re-ranked in full), and overlaps are
counted as popcounts of neighbour bitsets on the CPU when N is small (vlgap.metrics.knn_bits). Other metrics
recompute their per-layer state on each resample (slower; copies are separate items there, which
is the ordinary bootstrap for CKA and SVCCA and conservative for cycle_knn and cknna).

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
from vlgap.keywords import renamed_keywords
from vlgap.metrics.base import AlignmentMetric
from vlgap.stats.bounds import SMALL_N_ITEMS, keep_in_range
from vlgap.stats.resampling import (MIN_ITEMS_FOR_INTERVAL, interval_reason, percentile_interval,
                                    permutation_p_value, too_few_items_reason)

IntervalMethod = Literal["basic", "percentile", "simultaneous"]
INTERVAL_METHODS = ("basic", "percentile", "simultaneous")

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


def bootstrap_weight_batches(n: int, n_bootstrap: int, seed: int | None):
    """Yield [b, N] int32 multiplicity arrays (each row sums to N), seeded, in fixed-size batches."""
    rng = _rng(_BOOTSTRAP_STREAM, seed)
    done = 0
    while done < n_bootstrap:
        b = min(_RESAMPLE_BATCH, n_bootstrap - done)
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
    #: why there is no interval (too few resamples, degenerate: vlgap.stats.resampling's rule); None when there is
    reason: str | None = None
    #: the interval before it was kept inside the metric's range, and the one line saying it was clipped
    #: (None when the method's interval lay inside; vlgap.stats.bounds)
    raw_low: float | None = None
    raw_high: float | None = None
    note: str | None = None

    @property
    def ci(self) -> list[float] | None:
        """[low, high], or None where the interval is withheld (see `reason`): never printed as a point."""
        return None if self.reason is not None else [self.low, self.high]

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("samples")
        d["ci"] = self.ci
        d["ci_reason"] = d.pop("reason")
        d["ci_note"] = d.pop("note")
        if d["ci_note"] is None:
            d.pop("raw_low"), d.pop("raw_high")
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


def _n_items(feats) -> int:
    # PreparedLayers know N without preparing a layer
    return feats.raw[0].shape[0] if hasattr(feats, "raw") else feats[0].shape[0]


def _check_count(name: str, value: int) -> int:
    if int(value) != value or value < 1:
        raise VlgapError(f"{name}={value!r}: need a positive integer (e.g. 1000)")
    return int(value)


@renamed_keywords(n_resamples="n_bootstrap", method="ci_method")
def bootstrap_best_pair(
    metric: AlignmentMetric,
    fx: list, fy: list, sx: list, sy: list,
    *,
    observed: np.ndarray,
    n_bootstrap: int = 1000,
    confidence: float = 0.95,
    ci_method: IntervalMethod = "basic",
    seed: int | None = 0,
) -> BootstrapSummary:
    """Bootstrap interval of max over layer pairs, the best pair re-selected in every resample.

    fx, fy: prepared per-layer features; sx, sy: the metric's states of them; observed: the
    observed [L_x, L_y] score matrix.
    """
    observed = np.asarray(observed, dtype=float)
    estimate = float(np.nanmax(observed))
    n_bootstrap = _check_count("n_bootstrap", n_bootstrap)
    if ci_method not in INTERVAL_METHODS:
        raise VlgapError(f"interval ci_method {ci_method!r}: use one of {', '.join(INTERVAL_METHODS)}")
    n = _n_items(fx)
    scores = np.concatenate([metric.bootstrap_scores(fx, fy, sx, sy, weights).reshape(weights.shape[0], -1)
                             for weights in bootstrap_weight_batches(n, n_bootstrap, seed)])
    # centre each pair on its observed score (removes the resample's scale shift), then re-select
    centred = observed.reshape(1, -1) + scores - np.nanmean(scores, axis=0, keepdims=True)
    best = np.nanmax(centred, axis=1)
    arg = np.nanargmax(centred, axis=1)
    widened = None
    if ci_method == "simultaneous":
        lo, hi = _simultaneous_interval(observed.reshape(-1), scores, confidence)
    else:
        lo, hi = percentile_interval(best, confidence)
        if ci_method == "basic":
            p_lo, p_hi = lo, hi
            lo, hi = 2 * estimate - p_hi, 2 * estimate - p_lo
            bounds = metric.score_range
            if n < SMALL_N_ITEMS or lo < bounds.low or hi > bounds.high:
                # skewed against a bound: reflection moves the interval the wrong way (see module doc)
                widened = (f"widened to the hull of the basic [{lo:.4g}, {hi:.4g}] and percentile [{p_lo:.4g}, "
                           f"{p_hi:.4g}] intervals ({'N < ' + str(SMALL_N_ITEMS) if n < SMALL_N_ITEMS else 'near the range bound'})")
                lo, hi = min(lo, p_lo), max(hi, p_hi)
    pairs, counts = np.unique(arg, return_counts=True)
    order = np.argsort(-counts, kind="stable")[:5]
    n_y = len(sy)
    freq = [{"x_layer": int(pairs[i] // n_y), "y_layer": int(pairs[i] % n_y),
             "frequency": float(counts[i] / n_bootstrap)} for i in order]
    kept = keep_in_range(float(lo), float(hi), metric.score_range,
                         method="widened basic bootstrap" if widened else f"{ci_method} bootstrap",
                         label=metric.name or "the metric")
    if n_bootstrap < 2:
        reason = f"{n_bootstrap} resample: an interval needs at least 2 (1000 or more for a {confidence:.0%} interval)"
    elif n < MIN_ITEMS_FOR_INTERVAL:
        reason = too_few_items_reason(n, label="N")
    elif kept.withheld:
        reason = kept.note
    else:
        reason = interval_reason(kept.low, kept.high)
    note = "; ".join(x for x in (widened, kept.note) if x) or None if reason is None else None
    return BootstrapSummary(kept.low, kept.high, confidence, ci_method, float(np.std(best, ddof=1))
                            if n_bootstrap > 1 else float("nan"), n_bootstrap, freq, best, reason,
                            kept.raw_low if note else None, kept.raw_high if note else None, note)


def _simultaneous_interval(observed: np.ndarray, scores: np.ndarray, confidence: float) -> tuple[float, float]:
    """[max_p (T_p - c se_p), max_p (T_p + c se_p)], c the `confidence` quantile of the largest
    standardised bootstrap deviation over pairs (max-t band): if every pair's expected score lies in
    its band, so does the best pair's, whatever the ties."""
    dev = scores - np.nanmean(scores, axis=0, keepdims=True)
    se = np.nanstd(scores, axis=0, ddof=1)
    ok = se > 0
    if not ok.any():
        return float(np.nanmax(observed)), float(np.nanmax(observed))
    t_max = np.nanmax(np.abs(dev[:, ok]) / se[ok], axis=1)
    c = float(np.quantile(t_max, confidence))
    return float(np.nanmax(observed - c * se)), float(np.nanmax(observed + c * se))


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
    n = _n_items(fx)
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
