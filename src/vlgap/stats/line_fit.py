"""A straight line through a handful of points (one per model) with intervals: least squares y = a x + b,
Pearson r, and a bootstrap over the points (models resampled with replacement, the line refitted in
each resample) for the slope, the intercept, r, the mean ratio y / x and a pointwise band for the
line. The classical t interval of the slope and intercept (n - 2 degrees of freedom, normal errors)
is given beside the bootstrap: with few points the percentile bootstrap is unreliable (a resample of
4 points often holds only 2 distinct ones and fits them exactly), and the t interval is the one to read.

Pure array code (numpy, scipy.stats for the t quantile): used for Dynamic Reflections' Fig 7
(1-caption vs n_c-caption alignment across models, y = 1.6 x - 0.018 in the paper).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from vlgap.errors import VlgapError

#: a resample whose x values are all equal (no slope) is left out and counted; more than this share fails
MAX_DEGENERATE_SHARE = 0.5


@dataclass
class LineFit:
    n: int
    slope: float
    intercept: float
    r: float
    slope_ci: list[float]           # bootstrap percentile over points
    intercept_ci: list[float]
    r_ci: list[float]
    slope_ci_t: list[float]         # classical t interval (n - 2 df); nan for n < 3
    intercept_ci_t: list[float]
    mean_ratio: float               # mean over points of y / x (how much larger y is, on average)
    mean_ratio_ci: list[float]
    band_x: list[float]             # pointwise band of the fitted line over these x
    band_lo: list[float]
    band_hi: list[float]
    confidence: float
    n_bootstrap: int
    n_degenerate: int               # resamples with a single distinct x (left out)
    seed: int
    notes: list[str] = field(default_factory=list)

    def predict(self, x) -> np.ndarray:
        return self.slope * np.asarray(x, dtype=float) + self.intercept

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _ols(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Slope, intercept and Pearson r along the last axis (rows are resamples); nan where x is constant."""
    xm, ym = x.mean(axis=-1, keepdims=True), y.mean(axis=-1, keepdims=True)
    dx, dy = x - xm, y - ym
    sxx, syy, sxy = (dx * dx).sum(-1), (dy * dy).sum(-1), (dx * dy).sum(-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        slope = np.where(sxx > 0, sxy / np.where(sxx > 0, sxx, 1.0), np.nan)
        r = np.where((sxx > 0) & (syy > 0), sxy / np.sqrt(np.where(sxx * syy > 0, sxx * syy, 1.0)), np.nan)
    intercept = ym[..., 0] - slope * xm[..., 0]
    return slope, intercept, r


def _pct(values: np.ndarray, confidence: float) -> list[float]:
    v = values[np.isfinite(values)]
    if v.size == 0:
        return [float("nan"), float("nan")]
    a = (1 - confidence) / 2
    return [float(np.quantile(v, a)), float(np.quantile(v, 1 - a))]


def fit_line(x, y, *, n_bootstrap: int = 2000, confidence: float = 0.95, seed: int = 0,
             band_points: int = 50, band_x=None) -> LineFit:
    """Least-squares line y = slope * x + intercept over n points with bootstrap and t intervals.

    band_x: where to evaluate the pointwise band (default: `band_points` values across the range of x).
    Needs at least 3 points with two distinct x values (two points fit any line exactly)."""
    from vlgap.arguments import as_numbers

    x, y = as_numbers(x, "x", min_items=0).ravel(), as_numbers(y, "y", min_items=0).ravel()
    if x.shape != y.shape:
        raise VlgapError(f"a line fit needs as many x as y values, got {x.size} and {y.size}")
    if not (np.all(np.isfinite(x)) and np.all(np.isfinite(y))):
        raise VlgapError("a line fit needs finite x and y values (leave n/a points out first, and say so)")
    n = x.size
    if n < 3:
        raise VlgapError(f"a line fit with an interval needs at least 3 points (models), got {n}")
    if np.ptp(x) == 0:
        raise VlgapError("every point has the same x: no slope can be fitted; give models with different scores")
    if not 0 < confidence < 1:
        raise VlgapError(f"confidence must be between 0 and 1, got {confidence}")
    if n_bootstrap < 1:
        raise VlgapError(f"n_bootstrap must be at least 1, got {n_bootstrap}")
    slope, intercept, r = (float(v) for v in _ols(x, y))
    notes: list[str] = []
    # classical t interval of slope and intercept (normal, homoscedastic errors)
    from scipy import stats

    resid = y - (slope * x + intercept)
    dof = n - 2
    sxx = float(((x - x.mean()) ** 2).sum())
    s2 = float((resid ** 2).sum()) / dof if dof > 0 else float("nan")
    tq = float(stats.t.ppf(1 - (1 - confidence) / 2, dof)) if dof > 0 else float("nan")
    se_a = np.sqrt(s2 / sxx)
    se_b = np.sqrt(s2 * (1 / n + x.mean() ** 2 / sxx))
    slope_t = [slope - tq * se_a, slope + tq * se_a]
    intercept_t = [intercept - tq * se_b, intercept + tq * se_b]
    # bootstrap over points (the models), vectorised in batches
    rng = np.random.default_rng(seed)
    grid = (np.linspace(x.min(), x.max(), band_points) if band_x is None else np.asarray(band_x, dtype=float).ravel())
    slopes, inters, rs, ratios, preds = [], [], [], [], []
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio_all = y / x
    batch = max(1, 200_000 // max(n, 1))
    for start in range(0, n_bootstrap, batch):
        idx = rng.integers(0, n, size=(min(batch, n_bootstrap - start), n))
        a, b, rr = _ols(x[idx], y[idx])
        slopes.append(a)
        inters.append(b)
        rs.append(rr)
        ratios.append(ratio_all[idx].mean(axis=1))
        preds.append(a[:, None] * grid[None, :] + b[:, None])
    slopes_a, inters_a, rs_a = np.concatenate(slopes), np.concatenate(inters), np.concatenate(rs)
    ratios_a, preds_a = np.concatenate(ratios), np.concatenate(preds)
    ok = np.isfinite(slopes_a)
    n_degenerate = int((~ok).sum())
    if n_degenerate > MAX_DEGENERATE_SHARE * n_bootstrap:
        raise VlgapError(f"{n_degenerate} of {n_bootstrap} bootstrap resamples of the {n} points have a single "
                         "distinct x: too few distinct models for a bootstrap line; add models")
    if n_degenerate:
        notes.append(f"{n_degenerate} of {n_bootstrap} bootstrap resamples drew one distinct model only "
                     "(no slope) and were left out")
    if n < 10:
        notes.append(f"only {n} points: the percentile bootstrap is unreliable at this size (resamples hold few "
                     "distinct points); read the t interval")
    a = (1 - confidence) / 2
    band = preds_a[ok]
    band_lo = np.quantile(band, a, axis=0) if band.size else np.full(grid.shape, np.nan)
    band_hi = np.quantile(band, 1 - a, axis=0) if band.size else np.full(grid.shape, np.nan)
    has_zero_x = bool(np.any(x == 0))
    mean_ratio = float(np.mean(ratio_all)) if not has_zero_x else float("nan")
    if has_zero_x:
        notes.append("a point has x = 0: the mean ratio y / x is not defined")
    return LineFit(n=n, slope=slope, intercept=intercept, r=r,
                   slope_ci=_pct(slopes_a[ok], confidence), intercept_ci=_pct(inters_a[ok], confidence),
                   r_ci=_pct(rs_a[ok], confidence), slope_ci_t=[float(v) for v in slope_t],
                   intercept_ci_t=[float(v) for v in intercept_t], mean_ratio=mean_ratio,
                   mean_ratio_ci=_pct(ratios_a, confidence) if not has_zero_x else [float("nan")] * 2,
                   band_x=[float(v) for v in grid], band_lo=[float(v) for v in band_lo],
                   band_hi=[float(v) for v in band_hi], confidence=confidence, n_bootstrap=int(n_bootstrap),
                   n_degenerate=n_degenerate, seed=int(seed), notes=notes)
