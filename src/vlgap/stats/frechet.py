"""Frechet distance between Gaussian fits of two item sets (the FID formula), stable when rank-deficient.

    FD = ||mu_a - mu_b||^2 + tr(S_a) + tr(S_b) - 2 tr((S_a^1/2 S_b S_a^1/2)^1/2)

The cross term is computed from eigenvalues of the symmetric PSD matrix S_a^1/2 S_b S_a^1/2
(negative round-off eigenvalues clipped to 0) instead of scipy.linalg.sqrtm(S_a S_b), whose
non-symmetric square root turns complex or NaN when covariances are singular (N < D, duplicated
items) - the case pytorch-fid patches with an eps*I offset. With eigenvalues there is nothing to
patch: FD(x, x) is 0 up to rounding and FD >= 0 always.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from vlgap.caveats import caveat, reports_caveats
from vlgap.errors import VlgapError
from vlgap.stats.resampling import MIN_ITEMS_FOR_INTERVAL, interval_reason, percentile_interval, too_few_items_reason


@dataclass(frozen=True)
class FrechetResult:
    fd: float
    ci: list[float] | None
    n_a: int
    n_b: int
    n_bootstrap: int
    confidence: float
    #: why `ci` is None although a bootstrap was asked for (vlgap.stats' small-n rule)
    ci_reason: str | None = None
    #: why the value means little for this input (vlgap.caveats), one line each
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _psd_sqrt(s: np.ndarray) -> np.ndarray:
    w, v = np.linalg.eigh(s)
    return (v * np.sqrt(np.clip(w, 0.0, None))) @ v.T


def frechet_distance_gaussian(mu_a: np.ndarray, cov_a: np.ndarray, mu_b: np.ndarray, cov_b: np.ndarray) -> float:
    """FD between N(mu_a, cov_a) and N(mu_b, cov_b); covariances may be singular."""
    mu_a, mu_b = np.asarray(mu_a, float), np.asarray(mu_b, float)
    cov_a, cov_b = np.atleast_2d(np.asarray(cov_a, float)), np.atleast_2d(np.asarray(cov_b, float))
    if mu_a.shape != mu_b.shape or cov_a.shape != cov_b.shape or cov_a.shape != (mu_a.size, mu_a.size):
        raise VlgapError(f"Gaussian shapes disagree: mu {mu_a.shape} / {mu_b.shape}, cov {cov_a.shape} / {cov_b.shape}")
    cov_a = (cov_a + cov_a.T) / 2
    cov_b = (cov_b + cov_b.T) / 2
    root_a = _psd_sqrt(cov_a)
    middle = root_a @ cov_b @ root_a
    eig = np.linalg.eigvalsh((middle + middle.T) / 2)
    cross = float(np.sqrt(np.clip(eig, 0.0, None)).sum())
    diff = mu_a - mu_b
    fd = float(diff @ diff + np.trace(cov_a) + np.trace(cov_b) - 2.0 * cross)
    # tiny negative values are rounding, not information
    return max(fd, 0.0)


def _fit(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return x.mean(axis=0), np.cov(x, rowvar=False, ddof=1).reshape(x.shape[1], x.shape[1])


@reports_caveats
def frechet_distance(
    a: Any,
    b: Any,
    *,
    n_bootstrap: int = 0,
    confidence: float = 0.95,
    seed: int | None = 0,
) -> FrechetResult:
    """FD between Gaussian fits (mean, unbiased covariance) of item sets a [m, D] and b [n, D].

    FD is biased upwards at small N (it is a plug-in estimate); compare values only at equal N and
    read the percentile bootstrap interval (`n_bootstrap` > 0, items resampled within each set) as
    the sampling spread, not as an interval around the population FD.
    """
    from vlgap.stats.kernels import to_tensor, validate_pair

    ta, tb = to_tensor(a, name="A"), to_tensor(b, name="B")
    validate_pair(ta, tb)
    xa, xb = ta.cpu().numpy(), tb.cpu().numpy()
    few = min(len(xa), len(xb))
    if few <= xa.shape[1]:
        side = "n_a" if len(xa) <= len(xb) else "n_b"
        caveat(f"Frechet distance from {side}={few} items in D={xa.shape[1]} dimensions: a covariance from N items "
               f"has rank at most N-1 = {few - 1} < D, so the FD is mostly estimation noise (biased upwards); "
               "compare FDs only with N well above D, at equal N")
    fd = frechet_distance_gaussian(*_fit(xa), *_fit(xb))
    ci = None
    ci_reason = None
    if n_bootstrap and min(len(xa), len(xb)) < MIN_ITEMS_FOR_INTERVAL:
        ci_reason = too_few_items_reason(min(len(xa), len(xb)), label="n_a" if len(xa) <= len(xb) else "n_b") + " per side"
    elif n_bootstrap:
        rng = np.random.default_rng(seed)
        boot = np.empty(n_bootstrap)
        for r in range(n_bootstrap):
            ia = rng.integers(0, len(xa), len(xa))
            ib = rng.integers(0, len(xb), len(xb))
            boot[r] = frechet_distance_gaussian(*_fit(xa[ia]), *_fit(xb[ib]))
        ci = list(percentile_interval(boot, confidence))
        ci_reason = interval_reason(*ci)
        ci = None if ci_reason else ci
    return FrechetResult(fd, ci, len(xa), len(xb), n_bootstrap, confidence, ci_reason)
