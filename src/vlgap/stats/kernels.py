"""Kernels for two-sample statistics: Gaussian RBF (median heuristic), linear, KID cubic, CMMD preset.

Every kernel is described by a `Kernel` record (name, parameters, output scale) that is fully
resolved before use: the median-heuristic bandwidth is computed once on the pooled sample and then
stored, so the permutation null, bootstrap and witness all use the same kernel and a result can be
reproduced from its record. Arrays may be numpy or torch (CPU or GPU); computation runs in torch.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any, Literal

import numpy as np
import torch

from vlgap.caveats import caveat
from vlgap.errors import VlgapError

KernelName = Literal["rbf", "linear", "poly", "cmmd"]
KERNEL_NAMES: tuple[str, ...] = ("rbf", "linear", "poly", "cmmd")

#: CMMD (Jayasumana et al. 2024, google-research/cmmd/distance.py): k = exp(-||x-y||^2 / (2 * 10^2)),
#: MMD^2 multiplied by 1000 "to make the metric more human readable". CMMD itself reports the
#: biased (V-statistic) estimate; ours reports both, and `mmd2_biased` equals published CMMD.
CMMD_SIGMA = 10.0
CMMD_SCALE = 1000.0

#: the median heuristic looks at most at this many pooled points (seeded subsample) for speed
MEDIAN_HEURISTIC_MAX_POINTS = 2000


@dataclass(frozen=True)
class Kernel:
    """A resolved kernel.

    rbf / cmmd: k(x, y) = scale * exp(-||x - y||^2 / (2 bandwidth^2))
    linear:     k(x, y) = scale * <x, y>
    poly:       k(x, y) = scale * (gamma <x, y> + coef0)^degree  (KID: gamma = 1/D, coef0 = 1, degree 3)
    """

    name: str
    bandwidth: float | None = None
    degree: int = 3
    gamma: float | None = None
    coef0: float = 1.0
    scale: float = 1.0
    #: how the bandwidth was chosen: "median heuristic", "given", "cmmd preset" or None
    bandwidth_rule: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def to_tensor(x: Any, *, device: Any = None, dtype: torch.dtype | None = None, name: str = "x") -> torch.Tensor:
    """numpy / torch / nested list -> 2-D floating tensor on `device` (default: where it already is,
    else CPU) in `dtype` (default float64, so statistics are exact to ~1e-12)."""
    if isinstance(x, torch.Tensor):
        t = x.detach()
    else:
        from vlgap.arguments import check_array_like

        if not isinstance(x, np.ndarray):  # None or a str named as such, not by the dtype numpy gives it
            check_array_like(x, name, "a numeric array [N, D]")
        arr = np.asarray(x)
        if arr.dtype == object or arr.dtype.kind not in "biuf":
            raise VlgapError(f"{name}: expected a numeric array [N, D], got dtype {arr.dtype}")
        t = torch.from_numpy(np.ascontiguousarray(arr))
    if t.ndim != 2:
        raise VlgapError(f"{name}: expected a 2-D array [N items, D features], got shape {tuple(t.shape)}")
    target_device = torch.device(device) if device is not None else t.device
    target_dtype = dtype if dtype is not None else torch.float64
    if target_dtype != t.dtype and t.numel() and t.dtype.is_floating_point:
        # a narrower number format could turn the values into Inf or 0: refuse that by name, before the cast
        from vlgap.arguments import check_scale

        finite = t[torch.isfinite(t)]
        check_scale(float(finite.abs().max()) if finite.numel() else 0.0, name, target_dtype, "squared distances")
    return t.to(device=target_device, dtype=target_dtype)


def validate_pair(a: torch.Tensor, b: torch.Tensor, names: tuple[str, str] = ("A", "B")) -> None:
    """Same width, at least 2 items each, no NaN/Inf rows (named by index)."""
    for t, name in zip((a, b), names):
        if t.shape[0] < 2:
            raise VlgapError(f"{name} has {t.shape[0]} item(s): a two-sample statistic needs at least 2 per side")
        bad = (~torch.isfinite(t).all(dim=1)).nonzero().flatten().tolist()
        if bad:
            shown = ", ".join(str(i) for i in bad[:10]) + (" ..." if len(bad) > 10 else "")
            raise VlgapError(f"{name} has NaN or Inf in {len(bad)} row(s) at index {shown}: "
                             "fix or remove those items (rows are never dropped silently)")
    if a.shape[1] != b.shape[1]:
        raise VlgapError(f"{names[0]} has width {a.shape[1]} but {names[1]} has width {b.shape[1]}: "
                         "both sets must be embedded in the same space (same encoder and layer)")
    check_scale(a, b, names)
    for t, name in zip((a, b), names):
        if bool((t == t[:1]).all()):
            caveat(f"{name}: all {t.shape[0]} items are the same vector (a constant set): the statistic compares "
                   "a single point with the other set, not two distributions")
    if same_items(a, b):
        caveat(f"{names[0]} and {names[1]} hold the same {a.shape[0]} items (identical sets): the gap is 0 by "
               "construction, the test cannot reject, and the witness items of both sides are the same items")


def check_scale(a: torch.Tensor, b: torch.Tensor, names: tuple[str, str] = ("A", "B")) -> None:
    """Refuse sets whose values would overflow (or underflow to 0) in squared distances
    (`vlgap.arguments.check_scale`: one line with the largest |value|, the safe range and the fix; every
    kernel statistic but the linear and cubic kernels is invariant to one common factor, so dividing both
    sets by it changes nothing else)."""
    from vlgap.arguments import check_scale as check_peak

    peak = max(float(a.abs().max()), float(b.abs().max()))
    check_peak(peak, f"{names[0]} and {names[1]}", a.dtype, "squared distances")


def same_items(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether a and b hold the same rows, in any order (the same multiset of items)."""
    # cheap exact screen first: the same multiset has the same sorted first column
    if a.shape != b.shape or not torch.equal(a[:, 0].sort().values, b[:, 0].sort().values):
        return False
    sa = np.unique(a.cpu().numpy(), axis=0, return_counts=True)
    sb = np.unique(b.cpu().numpy(), axis=0, return_counts=True)
    return sa[0].shape == sb[0].shape and bool(np.array_equal(sa[0], sb[0]) and np.array_equal(sa[1], sb[1]))


def squared_distances(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """||x_i - y_j||^2 via the Gram expansion, clamped at 0 against rounding."""
    x2 = (x * x).sum(dim=1, keepdim=True)
    y2 = (y * y).sum(dim=1, keepdim=True)
    d = torch.addmm(y2.T, x, y.T, alpha=-2.0).add_(x2)
    return d.clamp_min_(0.0)


def median_heuristic(z: torch.Tensor, *, max_points: int = MEDIAN_HEURISTIC_MAX_POINTS, seed: int = 0) -> float:
    """sigma = sqrt(median_{i<j} ||z_i - z_j||^2) over the pooled sample (Gretton et al. 2012),
    on a seeded subsample of `max_points` rows when the pool is larger. Zero distances (duplicates)
    are kept, as in the usual definition; a zero median falls back to the mean distance."""
    n = z.shape[0]
    if n > max_points:
        gen = np.random.default_rng(seed)
        idx = torch.from_numpy(np.sort(gen.choice(n, size=max_points, replace=False))).to(z.device)
        z = z.index_select(0, idx)
        n = max_points
    d = squared_distances(z, z).cpu().numpy()
    # identical items are at distance 0 exactly (the Gram expansion leaves rounding residue there, which
    # would otherwise become a bandwidth of ~1e-8 when most pairs are duplicates)
    _, label = np.unique(z.cpu().numpy(), axis=0, return_inverse=True)
    label = label.reshape(-1)
    if label.max() < n - 1:
        d[label[:, None] == label[None, :]] = 0.0
    vals = d[np.triu_indices(n, k=1)]
    med = float(np.median(vals))  # numpy's median averages the middle pair (torch's takes the lower)
    if med <= 0.0:
        med = float(vals.mean())
        if med > 0.0:
            caveat(f"at least half of the pooled pairs are identical items ({int(label.max()) + 1} distinct of {n}): "
                   f"the median-heuristic bandwidth fell back to the root mean squared distance ({med ** 0.5:.3g}), "
                   "and the statistics mostly compare duplicates")
    if med <= 0.0:
        raise VlgapError("all items of both sets are identical: the median-heuristic bandwidth is 0 and there is no "
                         "gap to measure; pass bandwidth= only if that is what you mean to test")
    return med ** 0.5


def resolve_kernel(
    kernel: str | Kernel,
    pooled: torch.Tensor,
    *,
    bandwidth: float | None = None,
    seed: int = 0,
) -> Kernel:
    """Turn a kernel name into a fully specified `Kernel` for data `pooled` (both samples stacked)."""
    if isinstance(kernel, Kernel):
        if kernel.name in ("rbf", "cmmd") and kernel.bandwidth is None:
            return replace(kernel, bandwidth=median_heuristic(pooled, seed=seed), bandwidth_rule="median heuristic")
        return kernel
    name = str(kernel).lower()
    if name not in KERNEL_NAMES:
        raise VlgapError(f"kernel={kernel!r}: choose one of {', '.join(KERNEL_NAMES)}")
    if bandwidth is not None and (not np.isfinite(bandwidth) or bandwidth <= 0):
        raise VlgapError(f"bandwidth={bandwidth!r}: must be a positive number (the RBF sigma)")
    if name == "rbf":
        if bandwidth is None:
            return Kernel("rbf", bandwidth=median_heuristic(pooled, seed=seed), bandwidth_rule="median heuristic")
        return Kernel("rbf", bandwidth=float(bandwidth), bandwidth_rule="given")
    if name == "cmmd":
        if bandwidth is not None and bandwidth != CMMD_SIGMA:
            raise VlgapError(f"kernel='cmmd' fixes sigma={CMMD_SIGMA:g}; use kernel='rbf' for bandwidth={bandwidth}")
        return Kernel("cmmd", bandwidth=CMMD_SIGMA, scale=CMMD_SCALE, bandwidth_rule="cmmd preset")
    if name == "linear":
        return Kernel("linear")
    return Kernel("poly", degree=3, gamma=1.0 / pooled.shape[1], coef0=1.0)


def kernel_matrix(x: torch.Tensor, y: torch.Tensor, k: Kernel) -> torch.Tensor:
    """[len(x), len(y)] kernel matrix in the dtype/device of x."""
    if k.name in ("rbf", "cmmd"):
        if k.bandwidth is None:
            raise VlgapError("RBF kernel without a bandwidth: call resolve_kernel first")
        out = squared_distances(x, y).mul_(-1.0 / (2.0 * k.bandwidth**2)).exp_()
    elif k.name == "linear":
        out = x @ y.T
    elif k.name == "poly":
        gamma = k.gamma if k.gamma is not None else 1.0 / x.shape[1]
        out = (x @ y.T).mul_(gamma).add_(k.coef0).pow_(k.degree)
    else:
        raise VlgapError(f"unknown kernel {k.name!r}")
    if k.scale != 1.0:
        out.mul_(k.scale)
    return out


def kernel_diagonal(x: torch.Tensor, k: Kernel) -> torch.Tensor:
    """k(x_i, x_i) without building a matrix."""
    if k.name in ("rbf", "cmmd"):
        return torch.full((x.shape[0],), k.scale, dtype=x.dtype, device=x.device)
    sq = (x * x).sum(dim=1)
    if k.name == "linear":
        return sq * k.scale
    gamma = k.gamma if k.gamma is not None else 1.0 / x.shape[1]
    return (sq * gamma + k.coef0).pow(k.degree) * k.scale
