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

Points at distance zero from a neighbour (duplicates) have no ratio: they are left out and counted.
Intervals: percentile bootstrap over points of the per-point statistics (log mu, or 1/m_k), computed
once on the full cloud; resampling points themselves would create duplicates (zero distances).
"""
from __future__ import annotations

from typing import Any

import numpy as np

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


def _check(x) -> np.ndarray:
    a = np.asarray(x, dtype=np.float64)
    if a.ndim != 2:
        raise VlgapError(f"X must be a 2-D array [N points, D dims], got shape {a.shape}")
    if not np.all(np.isfinite(a)):
        raise VlgapError("X has non-finite values; intrinsic dimension needs finite features")
    return a


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


def intrinsic_dimension(x, method: str = "twonn", *, k1: int = 10, k2: int = 20, discard_fraction: float = 0.1,
                        n_bootstrap: int = 500, confidence: float = 0.95, seed: int = 0) -> dict[str, Any]:
    """Intrinsic dimension of the rows of x [N, D] (see the module docstring for the methods).

    Returns {"d", "ci" (percentile bootstrap over points, None without bootstrap), "method", "n" (points
    used), "n_duplicates" (left out), ...}."""
    from vlgap.stats.resampling import percentile_interval

    if method not in METHODS:
        raise VlgapError(f"unknown intrinsic-dimension method {method!r}; choose one of {', '.join(METHODS)}")
    a = _check(x)
    n_points = a.shape[0]
    rng = np.random.default_rng([0x1D, int(seed)])
    out: dict[str, Any] = {"method": method, "n_points": int(n_points), "confidence": confidence,
                           "n_bootstrap": int(n_bootstrap)}
    if method.startswith("twonn"):
        if n_points < 3:
            raise VlgapError(f"TwoNN needs at least 3 points, got {n_points}")
        if not 0 <= discard_fraction < 1:
            raise VlgapError(f"discard_fraction must be in [0, 1), got {discard_fraction}")
        dist = _neighbour_distances(a, 2)
        ok = dist[:, 0] > 0
        log_mu = np.log(dist[ok, 1] / dist[ok, 0])
        n = log_mu.size
        if n < 3:
            raise VlgapError(f"TwoNN: only {n} of {n_points} points have a nonzero nearest-neighbour distance "
                             "(the rest are duplicates)")
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
        if n_points <= k2:
            raise VlgapError(f"Levina-Bickel with k2={k2} needs more than {k2} points, got {n_points}")
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
    out.update(d=float(d), n=int(n), n_duplicates=int(n_points - n),
               ci=list(percentile_interval(boot, confidence)) if n_bootstrap else None)
    return out


def exponent_from_dimension(d: float, ci: list[float] | None = None) -> dict[str, Any]:
    """App. B's alpha = 2 / d_v with the interval mapped through the (decreasing) map."""
    val = 2.0 / d if d > 0 else float("nan")
    out_ci = None
    if ci is not None and all(np.isfinite(ci)) and min(ci) > 0:
        out_ci = [2.0 / max(ci), 2.0 / min(ci)]
    return {"value": val, "ci": out_ci}
