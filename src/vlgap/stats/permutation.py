"""Resampling MMD^2 from one cached kernel matrix: vectorised permutation null, bootstrap, jackknife.

The pooled kernel matrix K (first m rows: sample A) is computed once. Every resampled unbiased
MMD^2 is a function of one quadratic form q = s^T K s of an indicator (permutation) or count
(bootstrap) vector s, plus linear terms, so a batch of b resamples costs one [b, N] x [N, N] matrix
product instead of b gathers of an N x N matrix.

Numerical trick: the unbiased MMD^2 of *any* split is unchanged when K is double-centred
(K_ij - mean_i - mean_j + grand mean; the coefficients of a U-statistic that compares two samples
sum to zero in every row). After centring, the row sums vanish and the statistic of a permutation
reduces to q and s.diag without subtracting large totals, which keeps float32 accurate.
(The bootstrap statistic excludes self-pairs of repeated items, which is not centring-invariant,
so it works on the raw kernel.)
"""
from __future__ import annotations

import itertools
from typing import Iterator

import numpy as np
import torch

#: bytes allowed for the per-batch work matrices ([b, N] indicators and products)
DEFAULT_BATCH_BYTES = 512 * 2**20


def double_center_(k: torch.Tensor) -> torch.Tensor:
    """Centre K in place: K - row means - column means + grand mean (means accumulated in float64)."""
    row = k.sum(dim=1, dtype=torch.float64) / k.shape[1]
    grand = row.mean()
    row_t = (row - grand / 2).to(k.dtype)
    k.sub_(row_t[:, None]).sub_(row_t[None, :])
    return k


def unbiased_from_blocks(s_xx: torch.Tensor, s_yy: torch.Tensor, s_xy: torch.Tensor, m: int, n: int) -> torch.Tensor:
    """MMD^2_u from off-diagonal block sums: S_xx/(m(m-1)) + S_yy/(n(n-1)) - 2 S_xy/(mn)."""
    return s_xx / (m * (m - 1)) + s_yy / (n * (n - 1)) - 2.0 * s_xy / (m * n)


def _batch_size(n_total: int, itemsize: int, requested: int | None, batch_bytes: int) -> int:
    if requested is not None:
        return max(1, int(requested))
    return max(1, batch_bytes // (2 * n_total * itemsize))


def permutation_indices(n_total: int, n_permutations: int, seed: int | None) -> Iterator[np.ndarray]:
    """The seeded permutations, one at a time: `numpy.random.default_rng(seed).permutation(N)` drawn
    in order. The first m entries of a permutation are the items assigned to sample A."""
    rng = np.random.default_rng(seed)
    for _ in range(n_permutations):
        yield rng.permutation(n_total)


def all_splits(n_total: int, m: int) -> Iterator[np.ndarray]:
    """Every split of N pooled items into A (m items) and B, once each: A's members in ascending order,
    the observed split (A = the first m items) first. There are C(N, m) of them."""
    for chosen in itertools.combinations(range(n_total), m):
        yield np.array(chosen)


def permutation_null(
    k_centred: torch.Tensor,
    m: int,
    n_permutations: int,
    *,
    seed: int | None = 0,
    batch_size: int | None = None,
    batch_bytes: int = DEFAULT_BATCH_BYTES,
    exact: bool = False,
) -> torch.Tensor:
    """Unbiased MMD^2 for `n_permutations` seeded random splits of the pooled sample, or with
    `exact=True` for every distinct split (`all_splits`; n_permutations must then be C(N, m)).

    `k_centred` must be double-centred (see `double_center_`); rows 0..m-1 were sample A.
    Returns a float64 tensor [n_permutations] on the kernel's device.
    """
    n_total = k_centred.shape[0]
    n = n_total - m
    device, dtype = k_centred.device, k_centred.dtype
    diag = torch.diagonal(k_centred).to(torch.float64)
    diag_total = diag.sum()
    b = _batch_size(n_total, k_centred.element_size(), batch_size, batch_bytes)
    splits = all_splits(n_total, m) if exact else (p[:m] for p in permutation_indices(n_total, n_permutations, seed))
    out = torch.empty(n_permutations, dtype=torch.float64, device=device)
    done = 0
    while done < n_permutations:
        rows = min(b, n_permutations - done)
        idx = np.stack([next(splits) for _ in range(rows)])
        s = torch.zeros(rows, n_total, dtype=dtype, device=device)
        s.scatter_(1, torch.from_numpy(idx).to(device), 1.0)
        q = ((s @ k_centred) * s).sum(dim=1, dtype=torch.float64)
        s_diag = s.to(torch.float64) @ diag
        out[done:done + rows] = unbiased_from_blocks(q - s_diag, q - diag_total + s_diag, -q, m, n)
        done += rows
    return out


def bootstrap_mmd(
    k: torch.Tensor,
    m: int,
    n_bootstrap: int,
    *,
    seed: int | None = 0,
    batch_size: int | None = None,
    batch_bytes: int = DEFAULT_BATCH_BYTES,
) -> torch.Tensor:
    """MMD^2 of `n_bootstrap` bootstrap resamples (A and B resampled independently, with
    replacement, each keeping its size), from the *raw* (not centred) pooled kernel.

    A resample repeats items; pairing a copy with itself would add k(x, x) (the kernel's maximum)
    to the within-sample sums and push every resample far above the estimate. So within each sample
    the U-statistic runs over pairs of *distinct original items*, weighted by their counts w:
    (w^T K w - sum_i w_i^2 K_ii) / (m^2 - sum_i w_i^2). Its bootstrap mean is then the estimate
    itself (up to O(1/N)), which the percentile and BCa intervals need.
    """
    n_total = k.shape[0]
    n = n_total - m
    device, dtype = k.device, k.dtype
    diag = torch.diagonal(k).to(torch.float64)
    k_a = k[:m]            # [m, N]: A-A and A-B blocks
    k_bb = k[m:, m:]
    rng = np.random.default_rng(seed)
    b = _batch_size(n_total, k.element_size(), batch_size, batch_bytes)
    out = torch.empty(n_bootstrap, dtype=torch.float64, device=device)
    done = 0
    while done < n_bootstrap:
        rows = min(b, n_bootstrap - done)
        ia = torch.from_numpy(rng.integers(0, m, size=(rows, m))).to(device)
        ib = torch.from_numpy(rng.integers(0, n, size=(rows, n))).to(device)
        w = torch.zeros(rows, m, dtype=dtype, device=device).scatter_add_(1, ia, torch.ones_like(ia, dtype=dtype))
        v = torch.zeros(rows, n, dtype=dtype, device=device).scatter_add_(1, ib, torch.ones_like(ib, dtype=dtype))
        p = w @ k_a
        w64, v64 = w.to(torch.float64), v.to(torch.float64)
        w_sq, v_sq = w64 * w64, v64 * v64
        u_xx = (((p[:, :m] * w).sum(dim=1, dtype=torch.float64) - w_sq @ diag[:m])
                / (m * m - w_sq.sum(dim=1)))
        u_yy = ((((v @ k_bb) * v).sum(dim=1, dtype=torch.float64) - v_sq @ diag[m:])
                / (n * n - v_sq.sum(dim=1)))
        mean_xy = (p[:, m:] * v).sum(dim=1, dtype=torch.float64) / (m * n)
        out[done:done + rows] = u_xx + u_yy - 2.0 * mean_xy
        done += rows
    return out


def jackknife_mmd(k: torch.Tensor, m: int) -> tuple[np.ndarray, np.ndarray]:
    """Leave-one-out unbiased MMD^2 for every item of A and of B, in O(N^2) total from row sums
    (for the BCa acceleration). Works on the raw or the centred kernel."""
    n = k.shape[0] - m
    k64_rows_a = k[:m].to(torch.float64)
    diag = torch.diagonal(k).to(torch.float64)
    r_aa = k64_rows_a[:, :m].sum(dim=1) - diag[:m]       # sum_{j != i in A} K_ij
    r_ab = k64_rows_a[:, m:].sum(dim=1)                   # sum_{j in B} K_ij, i in A
    k_b = k[m:].to(torch.float64)
    r_bb = k_b[:, m:].sum(dim=1) - diag[m:]
    r_ba = k_b[:, :m].sum(dim=1)
    s_xx, s_yy, s_xy = r_aa.sum(), r_bb.sum(), r_ab.sum()
    loo_a = unbiased_from_blocks(s_xx - 2 * r_aa, s_yy, s_xy - r_ab, m - 1, n) if m > 2 else torch.full((m,), float("nan"), dtype=torch.float64)
    loo_b = unbiased_from_blocks(s_xx, s_yy - 2 * r_bb, s_xy - r_ba, m, n - 1) if n > 2 else torch.full((n,), float("nan"), dtype=torch.float64)
    return loo_a.cpu().numpy(), loo_b.cpu().numpy()
