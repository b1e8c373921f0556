"""Intrinsic dimension of a point cloud (pure array functions): TwoNN and the Levina-Bickel MLE.

Dynamic Reflections App. B reads the frame exponent as alpha = 2 / d_v, d_v the dimension of the video
manifold as the encoder sees it; these estimators measure d_v directly from features.

- TwoNN (Facco, d'Errico, Rodriguez & Laio 2017, Sci. Rep. 7:12140): with r1, r2 the distances of a
  point to its first and second neighbours, mu = r2 / r1 follows a Pareto law, F(mu) = 1 - mu^-d.
  method="twonn": the paper's fit, a line through the origin of -log(1 - F_emp(mu)) against log mu
  over the smallest 90 % of the mu (discard_fraction = 0.1). method="twonn-mle": the maximum
  likelihood d = (N - 1) / sum(log mu) (unbiased form; sum log mu ~ Gamma(N, d)).
- Levina & Bickel (2004, NIPS): per point, m_k(x) = [ (1/(k-1)) sum_{j<k} log(T_k(x) / T_j(x)) ]^-1 with
  T_j the distance to the j-th neighbour; averaged over points as MacKay & Ghahramani (2005) advise
  (d = 1 / mean of 1/m_k, less biased than the mean of m_k), then averaged over k = k1..k2 (10..20, the
  paper's range).

Repeated rows (duplicates) have no distance ratio, and their twins' ratio would be 1: they are left out,
counted ("n_duplicates") and said in one warning; fewer than 20 distinct points also get a warning, and
intervals follow vlgap.stats' small-n rule. x is rescaled by a power of two first (exact): d does not
depend on a global scale.
Intervals: percentile bootstrap over points of the per-point statistics (log mu, or 1/m_k), computed
once on the full cloud; resampling points themselves would create duplicates (zero distances).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from vlgap.arguments import check_array_like
from vlgap.caveats import caveat, reports_caveats
from vlgap.errors import VlgapError

METHODS = ("twonn", "twonn-mle", "levina-bickel")


def _neighbour_distances(x: np.ndarray, k: int) -> np.ndarray:
    """[N, k] Euclidean distances of each point to its k nearest other points, ascending."""
    from sklearn.neighbors import NearestNeighbors

    nn = NearestNeighbors(n_neighbors=k + 1).fit(x)
    dist, idx = nn.kneighbors(x)
    # drop the point itself (column 0 unless a duplicate came first: drop the self index wherever it is)
    own = idx == np.arange(x.shape[0])[:, None]
    has_own = own.any(axis=1)
    out = np.empty((x.shape[0], k))
    out[has_own] = dist[has_own][~own[has_own]].reshape(-1, k)
    out[~has_own] = dist[~has_own][:, :k]  # k+1 duplicates at distance 0: the first k are as good
    return out


#: fewer distinct points than this: the estimate is printed with a caveat (TwoNN's relative error is
#: about 1 / sqrt(N), 22 % at 20 points)
FEW_POINTS = 20


def _check(x) -> np.ndarray:
    """x as float64 [N, D], finite, scaled by a power of two so that its largest |value| is about 1: exact,
    and every estimator here uses ratios of distances, so d does not depend on a global scale."""
    check_array_like(x, "x", "a 2-D array [N points, D dims]")
    try:
        a = np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError) as err:
        raise VlgapError(f"x: expected a 2-D array of numbers [N points, D dims] ({err})") from None
    if a.ndim != 2:
        raise VlgapError(f"x must be a 2-D array [N points, D dims], got shape {a.shape}")
    if not np.all(np.isfinite(a)):
        bad = np.flatnonzero(~np.all(np.isfinite(a), axis=1))
        raise VlgapError(f"x has NaN or Inf in rows {bad[:5].tolist()}; intrinsic dimension needs finite features")
    peak = float(np.abs(a).max()) if a.size else 0.0
    if peak > 0:
        a = np.ldexp(a, -int(np.frexp(peak)[1]))
    return a


def _distinct(a: np.ndarray) -> np.ndarray:
    """The distinct rows of a (first occurrences, in order); duplicates are left out with a caveat: a
    point at distance 0 from another has no distance ratio, and its twin's ratio would be 1."""
    _, first = np.unique(a, axis=0, return_index=True)
    if first.size == a.shape[0]:
        return a
    caveat(f"x: {a.shape[0] - first.size} of {a.shape[0]} rows repeat another row and were left out (distance "
           f"ratios need distinct points); d is estimated from the {first.size} distinct points")
    return a[np.sort(first)]


def _twonn_fit(log_mu: np.ndarray, discard_fraction: float) -> float:
    """Facco's regression: slope through the origin of -log(1 - F) against log mu on the kept points."""
    lm = np.sort(log_mu)
    n = lm.size
    f = np.arange(1, n + 1) / n
    keep = int(np.floor(n * (1 - discard_fraction)))
    keep = min(max(keep, 2), n - 1)  # F = 1 at the largest mu: log(0) is undefined
    xs, ys = lm[:keep], -np.log(1 - f[:keep])
    den = float(np.dot(xs, xs))
    return float(np.dot(xs, ys) / den) if den > 0 else float("nan")


@reports_caveats
def intrinsic_dimension(x, method: str = "twonn", *, k1: int = 10, k2: int = 20, discard_fraction: float = 0.1,
                        n_bootstrap: int = 500, confidence: float = 0.95, seed: int = 0) -> dict[str, Any]:
    """Intrinsic dimension of the rows of x [N, D] (see the module docstring for the methods).

    Returns {"d", "ci" (percentile bootstrap over points, None without bootstrap or below 10 points, with
    "ci_reason"), "method", "n" (points used), "n_duplicates" (repeated rows, left out), "warnings", ...}.
    d does not depend on a global scale of x."""
    from vlgap.stats.resampling import MIN_ITEMS_FOR_INTERVAL, interval_reason, percentile_interval, too_few_items_reason

    if method not in METHODS:
        raise VlgapError(f"unknown intrinsic-dimension method {method!r}; choose one of {', '.join(METHODS)}")
    a = _check(x)
    n_points = a.shape[0]
    a = _distinct(a)
    rng = np.random.default_rng([0x1D, int(seed)])
    out: dict[str, Any] = {"method": method, "n_points": int(n_points), "confidence": confidence,
                           "n_bootstrap": int(n_bootstrap)}
    if method.startswith("twonn"):
        if a.shape[0] < 3:
            raise VlgapError(f"x: TwoNN needs at least 3 distinct points, got {a.shape[0]} (of {n_points} rows)")
        if not 0 <= discard_fraction < 1:
            raise VlgapError(f"discard_fraction must be in [0, 1), got {discard_fraction}")
        dist = _neighbour_distances(a, 2)
        ok = dist[:, 0] > 0
        log_mu = np.log(dist[ok, 1] / dist[ok, 0])
        n = log_mu.size
        if n < 3:
            raise VlgapError(f"TwoNN: only {n} of {n_points} points have a nonzero nearest-neighbour distance "
                             "(the rest are duplicates or closer than rounding)")
        if method == "twonn-mle":
            def stat(lm):
                s = float(lm.sum())
                return (lm.size - 1) / s if s > 0 else float("nan")
        else:
            def stat(lm):
                return _twonn_fit(lm, discard_fraction)
            out["discard_fraction"] = discard_fraction
        d = stat(log_mu)
        boot = np.array([stat(log_mu[rng.integers(0, n, n)]) for _ in range(n_bootstrap)])
    else:
        if not 2 <= k1 <= k2:
            raise VlgapError(f"Levina-Bickel needs 2 <= k1 <= k2, got k1={k1}, k2={k2}")
        if a.shape[0] <= k2:
            raise VlgapError(f"x: Levina-Bickel with k2={k2} needs more than {k2} distinct points, got {a.shape[0]} "
                             f"(of {n_points} rows)")
        dist = _neighbour_distances(a, k2)
        ok = dist[:, 0] > 0
        dist = dist[ok]
        n = dist.shape[0]
        if n < 3:
            raise VlgapError(f"Levina-Bickel: only {n} of {n_points} points have a nonzero nearest-neighbour "
                             "distance (the rest are duplicates)")
        logs = np.log(dist)
        # inv[i, j] = 1 / m_k(x_i) for k = k1 + j: mean over the first k-1 neighbours of log(T_k / T_j)
        inv = np.stack([(logs[:, k - 1:k] - logs[:, :k - 1]).mean(axis=1) for k in range(k1, k2 + 1)], axis=1)
        out.update(k1=k1, k2=k2, aggregation="MacKay-Ghahramani: 1 / mean(1 / m_k) per k, averaged over k")

        def stat_idx(rows):
            mean_inv = inv[rows].mean(axis=0)
            return float(np.mean(1.0 / mean_inv)) if np.all(mean_inv > 0) else float("nan")
        d = stat_idx(np.arange(n))
        boot = np.array([stat_idx(rng.integers(0, n, n)) for _ in range(n_bootstrap)])
    ci, ci_reason = None, None
    if n_bootstrap and n < MIN_ITEMS_FOR_INTERVAL:
        ci_reason = too_few_items_reason(n)
    elif n_bootstrap:
        ci = list(percentile_interval(boot, confidence))
        ci_reason = interval_reason(*ci)
        ci = None if ci_reason else ci
    if n < FEW_POINTS:
        caveat(f"intrinsic dimension from {n} distinct points: its relative error is about 1/sqrt(N) = "
               f"{1 / np.sqrt(n):.0%}, and a manifold is barely sampled; use hundreds of points")
    out.update(d=float(d), n=int(n), n_duplicates=int(n_points - a.shape[0]), ci=ci, ci_reason=ci_reason)
    return out


def exponent_from_dimension(d: float, ci: list[float] | None = None) -> dict[str, Any]:
    """App. B's alpha = 2 / d_v with the interval mapped through the (decreasing) map."""
    val = 2.0 / d if d > 0 else float("nan")
    out_ci = None
    if ci is not None and all(np.isfinite(ci)) and min(ci) > 0:
        out_ci = [2.0 / max(ci), 2.0 / min(ci)]
    return {"value": val, "ci": out_ci}
