"""Maximum mean discrepancy: unbiased and biased MMD^2 with a calibrated test and an interval.

    mmd2(a, b, kernel="rbf")                    -> float, the unbiased estimate (or biased)
    mmd_test(a, b, kernel="rbf", ...)           -> MMDResult: both estimates, permutation p-value,
                                                   bootstrap interval, N per side, kernel record

Estimators (Gretton et al. 2012, eqs. 2-3), pooled kernel K with sample A first (m items), B (n):
    unbiased  MMD^2_u = sum_{i!=j in A} K/(m(m-1)) + sum_{i!=j in B} K/(n(n-1)) - 2 sum_{A x B} K/(mn)
    biased    MMD^2_b = mean K_AA + mean K_BB - 2 mean K_AB          (diagonals included; CMMD's choice)
The unbiased estimate can be negative; its expectation is exactly 0 when A and B come from one
distribution, which is what a permutation test needs.

Test: p = (1 + #{permuted >= observed}) / (1 + B), the observed split counted as a permutation, so
the test is exact at any B. The bootstrap interval describes the size of MMD^2 and is not the test:
resampling with repeats inflates MMD^2 near 0, so it can exclude 0 where the permutation p is large;
`MMDResult.note` says so in one line when they disagree, and a verdict follows the p-value. The
interval is withheld (ci None, `ci_reason` "n too small: n_a=2 < 10") below
`vlgap.stats.resampling.MIN_ITEMS_FOR_INTERVAL` items per side, and when it is degenerate. For sizes where an N x N kernel does not fit (`method="auto"` decides
from memory), the block estimator of `vlgap.stats.linear_time` is used instead.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

import numpy as np
import torch

from vlgap.caveats import reports_caveats
from vlgap.errors import VlgapError
from vlgap.stats.kernels import Kernel, kernel_matrix, resolve_kernel, to_tensor, validate_pair
from vlgap.stats.permutation import (
    bootstrap_mmd,
    double_center_,
    jackknife_mmd,
    permutation_null,
    unbiased_from_blocks,
)
from vlgap.stats.resampling import (
    MIN_ITEMS_FOR_INTERVAL,
    bca_interval,
    disagreement_note,
    few_permutations_caveat,
    interval_reason,
    percentile_interval,
    permutation_p_value,
    too_few_items_reason,
)

#: the one line printed when the bootstrap interval and the permutation p-value disagree
MMD_DISAGREEMENT_WHY = ("the bootstrap interval measures the size of MMD^2 and is not a test (resampling with "
                        "repeats inflates MMD^2 near 0); the verdict follows the permutation p-value")

Method = Literal["auto", "quadratic", "block"]


@dataclass
class MMDResult:
    """Result of `mmd_test`. `ci` is a bootstrap interval of the unbiased MMD^2: None if n_bootstrap=0,
    or withheld by the small-n rule with `ci_reason`. `note`: one line when ci and p-value disagree."""

    mmd2_unbiased: float
    mmd2_biased: float | None
    p_value: float | None
    ci: list[float] | None
    n_a: int
    n_b: int
    kernel: str
    bandwidth: float | None
    method: str
    n_permutations: int
    n_bootstrap: int
    confidence: float
    ci_method: str | None
    seed: int | None
    kernel_params: dict[str, Any] = field(default_factory=dict)
    #: extra numbers from the block estimator (n_blocks, block sizes, standard error)
    details: dict[str, Any] = field(default_factory=dict)
    ci_reason: str | None = None
    note: str | None = None
    #: why the value means little for this input (vlgap.caveats), one line each
    warnings: list[str] = field(default_factory=list)
    #: the p-value enumerated every distinct split of the pooled items (fewer than n_permutations asked)
    exact: bool = False

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# ------------------------------------------------------------------------------------------------
# Estimators from a pooled kernel matrix
# ------------------------------------------------------------------------------------------------

def block_sums(k: torch.Tensor, m: int) -> tuple[float, float, float, float, float]:
    """(off-diagonal sum AA, off-diagonal sum BB, sum AB, trace AA, trace BB), in float64."""
    diag = torch.diagonal(k).to(torch.float64)
    tr_a, tr_b = diag[:m].sum(), diag[m:].sum()
    s_aa = k[:m, :m].sum(dtype=torch.float64) - tr_a
    s_bb = k[m:, m:].sum(dtype=torch.float64) - tr_b
    s_ab = k[:m, m:].sum(dtype=torch.float64)
    return float(s_aa), float(s_bb), float(s_ab), float(tr_a), float(tr_b)


def mmd2_from_kernel(k: torch.Tensor, m: int, *, unbiased: bool = True) -> float:
    """MMD^2 from the pooled kernel matrix whose first m rows/columns are sample A."""
    n = k.shape[0] - m
    if m < 2 or n < 2:
        raise VlgapError(f"MMD^2 needs at least 2 items per side, got {m} and {n}")
    s_aa, s_bb, s_ab, tr_a, tr_b = block_sums(k, m)
    if unbiased:
        return float(unbiased_from_blocks(s_aa, s_bb, s_ab, m, n))
    return (s_aa + tr_a) / m**2 + (s_bb + tr_b) / n**2 - 2.0 * s_ab / (m * n)


def _pooled_kernel(a: torch.Tensor, b: torch.Tensor, k: Kernel) -> torch.Tensor:
    z = torch.cat([a, b], dim=0)
    return kernel_matrix(z, z, k)


def mmd2(
    a: Any,
    b: Any,
    *,
    kernel: str | Kernel = "rbf",
    bandwidth: float | None = None,
    unbiased: bool = True,
    device: Any = None,
    dtype: torch.dtype | None = None,
    seed: int = 0,
) -> float:
    """MMD^2 between item sets a [m, D] and b [n, D] (numpy or torch, any device).

    kernel: "rbf" (median heuristic on the pooled sample unless `bandwidth` is given), "linear",
    "poly" (KID: (x.y/D + 1)^3), "cmmd" (RBF sigma=10, x1000; with unbiased=False this equals
    the published CMMD number) or a resolved `Kernel`. Returns the unbiased U-statistic by default.
    """
    ta = to_tensor(a, device=device, dtype=dtype, name="A")
    tb = to_tensor(b, device=device if device is not None else ta.device, dtype=dtype, name="B")
    validate_pair(ta, tb)
    k = resolve_kernel(kernel, torch.cat([ta, tb]), bandwidth=bandwidth, seed=seed)
    return mmd2_from_kernel(_pooled_kernel(ta, tb, k), ta.shape[0], unbiased=unbiased)


# ------------------------------------------------------------------------------------------------
# Test with interval
# ------------------------------------------------------------------------------------------------

def quadratic_bytes(n_total: int, dtype: torch.dtype = torch.float64) -> int:
    """Memory the quadratic-time path needs: the pooled N x N kernel plus per-batch work."""
    itemsize = torch.empty(0, dtype=dtype).element_size()
    return n_total * n_total * itemsize + 2 * 512 * 2**20


def available_bytes(device: torch.device) -> int:
    if device.type == "cuda":
        free, _total = torch.cuda.mem_get_info(device)
        return int(free)
    import psutil

    return int(psutil.virtual_memory().available)


def choose_method(n_total: int, device: torch.device, dtype: torch.dtype, memory_budget: int | None) -> str:
    """"quadratic" if the N x N kernel fits in the budget (default: half the free memory), else "block"."""
    budget = memory_budget if memory_budget is not None else available_bytes(device) // 2
    return "quadratic" if quadratic_bytes(n_total, dtype) <= budget else "block"


@reports_caveats
def mmd_test(
    a: Any,
    b: Any,
    *,
    kernel: str | Kernel = "rbf",
    bandwidth: float | None = None,
    n_permutations: int = 1000,
    n_bootstrap: int = 1000,
    confidence: float = 0.95,
    ci_method: Literal["bca", "percentile"] = "bca",
    method: Method = "auto",
    block_size: int | None = None,
    memory_budget: int | None = None,
    seed: int | None = 0,
    device: Any = None,
    dtype: torch.dtype | None = None,
    batch_size: int | None = None,
    return_kernel: bool = False,
) -> MMDResult | tuple[MMDResult, torch.Tensor]:
    """Two-sample MMD test of H0: A and B come from the same distribution.

    method: "quadratic" (exact U-statistic, permutation p-value, bootstrap interval), "block"
    (block estimator with a t-test over blocks, O(N * block_size) memory) or "auto" (quadratic
    when the pooled N x N kernel fits in `memory_budget` bytes, default half the free memory).
    Permutations and bootstrap resamples are seeded by `seed` (independent streams).
    `return_kernel=True` also returns the pooled kernel matrix (raw, first rows A) for the
    witness; only for the quadratic method.
    """
    ta = to_tensor(a, device=device, dtype=dtype, name="A")
    tb = to_tensor(b, device=device if device is not None else ta.device, dtype=dtype, name="B")
    validate_pair(ta, tb)
    if n_permutations < 0 or n_bootstrap < 0:
        raise VlgapError("n_permutations and n_bootstrap must be >= 0 (0 skips the p-value / interval)")
    if method not in ("auto", "quadratic", "block"):
        raise VlgapError(f"method={method!r}: use 'auto', 'quadratic' or 'block'")
    if ci_method not in ("bca", "percentile"):
        raise VlgapError(f"ci_method={ci_method!r}: use 'bca' or 'percentile'")
    m, n = ta.shape[0], tb.shape[0]
    k = resolve_kernel(kernel, torch.cat([ta, tb]), bandwidth=bandwidth, seed=seed or 0)
    if method == "auto":
        method = choose_method(m + n, ta.device, ta.dtype, memory_budget)
    common = dict(n_a=m, n_b=n, kernel=k.name, bandwidth=k.bandwidth, confidence=confidence,
                  seed=seed, kernel_params=k.to_dict())

    if method == "block":
        if return_kernel:
            raise VlgapError("return_kernel=True needs method='quadratic'")
        from vlgap.stats.linear_time import block_mmd_test

        blk = block_mmd_test(ta, tb, k, block_size=block_size, confidence=confidence, seed=seed)
        return MMDResult(
            mmd2_unbiased=blk["mmd2"], mmd2_biased=None, p_value=blk["p_value"], ci=blk["ci"],
            method="block", n_permutations=0, n_bootstrap=0, ci_method="t over blocks",
            details={key: blk[key] for key in ("n_blocks", "block_size_a", "block_size_b", "se")}, **common)

    kmat = _pooled_kernel(ta, tb, k)
    s_aa, s_bb, s_ab, tr_a, tr_b = block_sums(kmat, m)
    observed = float(unbiased_from_blocks(s_aa, s_bb, s_ab, m, n))
    biased = (s_aa + tr_a) / m**2 + (s_bb + tr_b) / n**2 - 2.0 * s_ab / (m * n)
    ci = None
    ci_reason = None
    if n_bootstrap and min(m, n) < MIN_ITEMS_FOR_INTERVAL:
        ci_reason = too_few_items_reason(min(m, n), label="n_a" if m <= n else "n_b") + " per side"
    elif n_bootstrap:
        boot_seed = None if seed is None else seed + 1  # independent of the permutation stream
        boot = bootstrap_mmd(kmat, m, n_bootstrap, seed=boot_seed, batch_size=batch_size).cpu().numpy()
        if ci_method == "bca":
            lo, hi = bca_interval(observed, boot, list(jackknife_mmd(kmat, m)), confidence)
        else:
            lo, hi = percentile_interval(boot, confidence)
        ci_reason = interval_reason(lo, hi)
        ci = None if ci_reason else [lo, hi]
    p_value = None
    exact = False
    if n_permutations:
        raw = kmat.clone() if return_kernel else None
        n_splits = math.comb(m + n, m) if m + n <= 64 else None  # C(64, 32) is 1.8e18: beyond any request
        exact = n_splits is not None and n_splits <= n_permutations
        # rounding between the raw-kernel estimate and the centred null: ties within it count as ties
        tol = 1e-9 * float(torch.diagonal(kmat).abs().max())
        kc = double_center_(kmat)  # in place: the raw matrix is not needed after this
        if exact:  # tiny N: every distinct split once, the observed one included
            few_permutations_caveat(n_splits, n_permutations, f"splits of {m} + {n} items", exact=True)
            null = permutation_null(kc, m, n_splits, batch_size=batch_size, exact=True).cpu().numpy()
            p_value = float(np.count_nonzero(null >= observed - tol) / n_splits)
            n_permutations = n_splits
        else:
            null = permutation_null(kc, m, n_permutations, seed=seed, batch_size=batch_size)
            p_value = permutation_p_value(observed, null.cpu().numpy(), "greater")
        kmat = raw
    result = MMDResult(
        mmd2_unbiased=observed, mmd2_biased=float(biased), p_value=p_value, ci=ci, method="quadratic",
        n_permutations=n_permutations, n_bootstrap=n_bootstrap, ci_method=ci_method if n_bootstrap else None,
        ci_reason=ci_reason, note=disagreement_note(ci, p_value, 1.0 - confidence, MMD_DISAGREEMENT_WHY),
        exact=exact, **common)
    if return_kernel:
        return result, kmat
    return result
