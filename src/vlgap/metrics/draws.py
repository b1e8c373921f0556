"""Alignment averaged over random caption draws, with an interval for both sources of uncertainty.

Dynamic Reflections uses the first n_c captions of each item (random ones for single-caption runs);
which captions are drawn changes the score, and no item bootstrap sees that variance. With R draws
(`caption_draws`), the score is the mean over draws of each draw's best-pair score, and its interval
combines the two sources:

- items: the layer search's bootstrap runs on every draw with the same seed, hence the same item
  resamples (`uncertainty.bootstrap_weight_batches` depends on the seed and N only); the per-draw
  re-selected maxima are averaged over draws in each resample and the basic interval of that mean is
  formed exactly as for one draw (reflected around the estimate);
- draws: the between-draw variance s^2 of the R per-draw scores gives the Monte-Carlo error of their
  mean, s^2 / R; each half-width h of the item interval becomes sqrt(h^2 + (t_{R-1} s / sqrt(R))^2), t_{R-1} Student's quantile (s rests on R values)..
  Adding the variances is conservative where the item resamples already carry some draw variance
  (each item keeps its drawn captions); its coverage is checked by simulation with planted draw
  variance in tests/test_caption_draws.py.
- range: like the basic interval it is the estimate plus or minus a width, so it is intersected with the
  metric's range and flagged when that clipped it (`DrawInterval.note`, vlgap.stats.bounds).
Permutation null: the same permutations on every draw (same seed), the null maximum averaged over
draws per permutation, compared with the averaged score.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from vlgap.errors import VlgapError
from vlgap.stats.bounds import UNBOUNDED, ScoreRange, keep_in_range
from vlgap.stats.resampling import percentile_interval, permutation_p_value


@dataclass
class DrawInterval:
    estimate: float      # mean over draws of each draw's best-pair score
    low: float
    high: float
    item_low: float      # the item-bootstrap interval of the draw mean alone (draws held fixed)
    item_high: float
    draw_sd: float       # SD of the per-draw scores (0 with one draw)
    n_draws: int
    note: str | None = None  # the interval was clipped to the metric's range (or withheld: low, high NaN)


def combine_draws(estimates: Sequence[float], boot_maxima: Sequence[np.ndarray] | np.ndarray,
                  confidence: float = 0.95, score_range: ScoreRange = UNBOUNDED,
                  label: str = "the metric") -> DrawInterval:
    """Mean over draws and the combined interval (see module doc). estimates: [R] per-draw best-pair
    scores; boot_maxima: [R, B] per-draw re-selected bootstrap maxima on the same item resamples;
    score_range: the metric's (both intervals are kept inside it, `note` says when that clipped one)."""
    from scipy.stats import t as student_t

    est = np.asarray(estimates, dtype=np.float64)
    boot = np.asarray(boot_maxima, dtype=np.float64)
    if est.ndim != 1 or len(est) < 1:
        raise VlgapError(f"combine_draws needs one score per draw, got shape {est.shape}")
    if boot.ndim != 2 or boot.shape[0] != len(est):
        raise VlgapError(f"boot_maxima must be [draws={len(est)}, resamples], got shape {boot.shape}")
    r = len(est)
    mean = float(est.mean())
    q_lo, q_hi = percentile_interval(boot.mean(axis=0), confidence)
    item_lo, item_hi = 2 * mean - q_hi, 2 * mean - q_lo
    sd = float(est.std(ddof=1)) if r > 1 else 0.0
    # Student's t with R-1 degrees of freedom: s is estimated from a handful of draws
    extra = (student_t.ppf(0.5 + confidence / 2, r - 1) * sd / np.sqrt(r)) ** 2 if r > 1 else 0.0
    lo = mean - np.sqrt((mean - item_lo) ** 2 + extra)
    hi = mean + np.sqrt((item_hi - mean) ** 2 + extra)
    items = keep_in_range(item_lo, item_hi, score_range, method="basic bootstrap", label=label)
    kept = keep_in_range(float(lo), float(hi), score_range, method="draw-widened basic bootstrap", label=label)
    return DrawInterval(mean, kept.low, kept.high, items.low, items.high, sd, r, kept.note)


def draws_p_value(estimates: Sequence[float], null_maxima: Sequence[np.ndarray] | np.ndarray) -> tuple[float, float]:
    """(p, null mean) of the draw-averaged score against the draw-averaged permutation maxima ([R, P],
    the same permutations on every draw)."""
    null = np.asarray(null_maxima, dtype=np.float64).mean(axis=0)
    return permutation_p_value(float(np.mean(estimates)), null, "greater"), float(null.mean())
