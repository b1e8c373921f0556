"""Turn user arrays into the features every alignment metric sees: validated float tensors on one
device, optionally outlier-clamped (platonic-rep's `remove_outliers`), rows L2-normalised.

platonic-rep (`measure_alignment.prepare_features` + `compute_score(normalize=True)`) clamps the raw
features at the q-quantile of |x| and then L2-normalises every row before any metric; `align` and
`layer_search` do the same, with the clamp off unless `q` is given (a coordinate-wise clamp is not
rotation invariant, so it is opt-in). With `q` alone each layer gets its own threshold; the
`platonic-rep` preset takes ONE threshold over all of a model's layers together, as platonic-rep
does with its [N, L, D] feature files (`prepare_features`).
"""
from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np
import torch

from vlgap.arguments import check_array_like
from vlgap.caveats import caveat
from vlgap.errors import VlgapError

#: working memory per block of rows for quantiles and similarity chunks (bytes)
DEFAULT_CHUNK_BYTES = 256 * 2**20


def resolve_device(device: str | torch.device | None, like: Any = None) -> torch.device:
    """`None` keeps a torch input where it is and puts everything else on the CPU; any other value is
    parsed by vlgap.runtime.parse_device ("auto": the first CUDA GPU, else MPS, else the CPU)."""
    if device is None:
        if isinstance(like, torch.Tensor):
            return like.device
        return torch.device("cpu")
    from vlgap.runtime import parse_device

    return torch.device(parse_device(device))


def as_matrix(x: Any, name: str, device: torch.device, *, check_finite: bool = True) -> torch.Tensor:
    """A 2-D float tensor [N, D] (float64 stays float64, everything else becomes float32), checked
    finite unless `check_finite=False` (then `prepare(..., name=...)` checks it on the way)."""
    if isinstance(x, torch.Tensor):
        t = x.detach()
        if t.is_complex():
            raise VlgapError(f"{name}: expected real numbers, got dtype {t.dtype}")
    else:
        check_array_like(x, name, "a 2-D array [N items, D features]")
        try:
            arr = np.asarray(x)
        except Exception as err:  # ragged lists and other shapes numpy cannot stack
            raise VlgapError(f"{name}: cannot be read as an array [N items, D features] ({err})") from None
        if arr.dtype.kind not in "biuf":
            raise VlgapError(f"{name}: expected real numbers [N items, D features], got dtype {arr.dtype}")
        t = torch.from_numpy(np.ascontiguousarray(arr))
    if t.ndim != 2:
        raise VlgapError(f"{name}: expected a 2-D array [N items, D features], got shape {tuple(t.shape)}")
    if t.shape[0] < 2 or t.shape[1] < 1:
        raise VlgapError(f"{name}: shape {tuple(t.shape)} has too few items or features (need N >= 2, D >= 1)")
    dtype = torch.float64 if t.dtype == torch.float64 else torch.float32
    t = t.to(device=device, dtype=dtype)
    if check_finite:
        _check_finite(t, t.sum(dim=1), name)
    return t


def _check_finite(t: torch.Tensor, row_summary: torch.Tensor, name: str) -> None:
    # a row sum or norm is NaN/Inf if the row holds one (or overflows): cheap screen, exact check after
    suspect = torch.nonzero(~torch.isfinite(row_summary.reshape(-1))).flatten()
    if suspect.numel():
        bad = suspect[~torch.isfinite(t[suspect]).all(dim=1)]
        if bad.numel():
            raise VlgapError(f"{name}: NaN or Inf in item rows {bad[:5].tolist()}; remove or fix those items")


def as_layers(xs: Any, name: str, device: torch.device, *, check_finite: bool = True) -> list[torch.Tensor]:
    """A list of [N, D_l] layers from a list/tuple of 2-D arrays or one 3-D array [L, N, D]."""
    check_array_like(xs, name)
    kw = {"check_finite": check_finite}
    if isinstance(xs, (list, tuple)):
        if not xs:
            raise VlgapError(f"{name}: no layers given; pass a list of [N, D] arrays or one [L, N, D] array")
        layers = [as_matrix(x, f"{name}[{i}]", device, **kw) for i, x in enumerate(xs)]
    else:
        ndim = xs.ndim if hasattr(xs, "ndim") else np.asarray(xs).ndim
        if ndim == 2:
            layers = [as_matrix(xs, f"{name}[0]", device, **kw)]
        elif ndim == 3:
            layers = [as_matrix(xs[i], f"{name}[{i}]", device, **kw) for i in range(len(xs))]
        else:
            raise VlgapError(f"{name}: expected a list of [N, D] arrays or one [L, N, D] array, got {ndim}-D")
    n = layers[0].shape[0]
    for i, layer in enumerate(layers):
        if layer.shape[0] != n:
            raise VlgapError(f"{name}[{i}] has {layer.shape[0]} items but {name}[0] has {n}: "
                             "every layer must hold the same items in the same order")
    return layers


def _check_q(q: float) -> None:
    if not 0.0 < q < 1.0:
        raise VlgapError(f"q={q!r}: the outlier quantile must be in (0, 1], e.g. 0.95 (platonic-rep), or None")


def clamp_threshold(layers: Sequence[torch.Tensor], q: float | None, *, exact: bool = False,
                    chunk_bytes: int = DEFAULT_CHUNK_BYTES) -> torch.Tensor | None:
    """platonic-rep's `remove_outliers` threshold t over `layers` taken together (one [N, D_l] or
    several with the same N; platonic-rep passes one model's [N, L, D] at once).

    exact=False (platonic-rep's default): t = mean over items of the q-quantile of |x| over all of
    that item's values in every layer (linear interpolation, as torch.quantile). exact=True
    (platonic-rep `--precise`): the value at index int(q * numel) of all |x| sorted ascending.
    q=None or q=1: no clamp (None). Quantiles are taken by sorting row blocks of at most
    `chunk_bytes`, since torch.quantile refuses tensors above 2^24 values.
    """
    if q is None or q == 1:
        return None
    _check_q(q)
    dtype = layers[0].dtype
    if exact:
        flat = torch.cat([layer.reshape(-1).abs() for layer in layers])
        return torch.kthvalue(flat, int(q * flat.numel()) + 1).values.to(dtype)
    n = layers[0].shape[0]
    d = sum(layer.shape[1] for layer in layers)
    pos = q * (d - 1)
    lo_i, frac = int(np.floor(pos)), pos - np.floor(pos)
    hi_i = min(lo_i + 1, d - 1)
    rows = max(1, chunk_bytes // (8 * d))
    total = torch.zeros((), dtype=torch.float64, device=layers[0].device)
    for start in range(0, n, rows):
        block = torch.cat([layer[start:start + rows] for layer in layers], dim=1) if len(layers) > 1 \
            else layers[0][start:start + rows]
        srt = block.abs().sort(dim=1).values
        qv = srt[:, lo_i] + (srt[:, hi_i] - srt[:, lo_i]) * frac
        total += qv.double().sum()
    return (total / n).to(dtype)


def remove_outliers(feats: torch.Tensor, q: float | None, *, exact: bool = False,
                    chunk_bytes: int = DEFAULT_CHUNK_BYTES) -> torch.Tensor:
    """Clamp to [-t, t], t = `clamp_threshold([feats], q, exact=exact)` (platonic-rep).

    q=None or q=1 returns the features unchanged."""
    thr = clamp_threshold([feats], q, exact=exact, chunk_bytes=chunk_bytes)
    return feats if thr is None else feats.clamp(-thr, thr)


def prepare_features(layers: Sequence[torch.Tensor], q: float | None = 0.95, *, exact: bool = False
                     ) -> list[torch.Tensor]:
    """platonic-rep's `prepare_features` for one model: ONE clamp threshold from all its layers
    together (`clamp_threshold`), every layer clamped to [-t, t]. Rows are L2-normalised later, per
    layer, as in its `compute_score(normalize=True)` (`prepare`)."""
    thr = clamp_threshold(list(layers), q, exact=exact)
    return list(layers) if thr is None else [layer.clamp(-thr, thr) for layer in layers]


def l2_normalize(feats: torch.Tensor) -> torch.Tensor:
    """Rows scaled to unit length; an all-zero row stays zero (torch.nn.functional.normalize)."""
    return torch.nn.functional.normalize(feats, p=2.0, dim=1)


def prepare(feats: torch.Tensor, q: float | None = None, normalize: bool = True,
            name: str | None = None, *, threshold: torch.Tensor | None = None) -> torch.Tensor:
    """Clamp (at this layer's q-quantile threshold, or at a given `threshold`, e.g. one shared by
    all of a model's layers) and L2-normalise rows. With `name`, also check that the rows are finite
    (reusing the row norms, one pass less than a separate check) and name the layer in the error."""
    clamps = q is not None or threshold is not None
    if name is not None and (clamps or not normalize):
        _check_finite(feats, feats.sum(dim=1), name)  # the clamp would hide an Inf
        name = None
    feats = feats.clamp(-threshold, threshold) if threshold is not None else remove_outliers(feats, q)
    if not normalize:
        return feats
    # the arithmetic of torch.nn.functional.normalize, with the norms kept for the check
    norms = feats.norm(2.0, 1, keepdim=True)
    if name is not None:
        _check_finite(feats, norms, name)
    unsafe = ~((norms >= safe_norm_floor(feats.dtype)) & torch.isfinite(norms))
    if bool(unsafe.any()):
        return _normalize_rescaled(feats, norms, unsafe.flatten(), name or "features")
    return feats / norms.expand_as(feats)


def safe_norm_floor(dtype: torch.dtype) -> float:
    """The smallest row norm whose square (a sum of squares) keeps full precision in `dtype`:
    sqrt(smallest normal) / epsilon (6.7e-139 in float64, 9.1e-13 in float32). Rows below it, and
    rows whose squares overflow, are normalised after dividing by their largest |value| instead."""
    info = torch.finfo(dtype)
    return math.sqrt(info.tiny) / info.eps


def _normalize_rescaled(feats: torch.Tensor, norms: torch.Tensor, unsafe: torch.Tensor, name: str) -> torch.Tensor:
    """Rows scaled to unit length where the plain norm under- or overflows: each such row is first
    divided by its largest |value| (the LAPACK nrm2 idea), so a global scale of the features (x 1e-300,
    x 1e300) leaves the normalised rows, and every score on them, unchanged. An all-zero row has no
    direction: it stays zero (similarity 0 to every item) and is named in one warning line, unless every row
    is zero (a constant layer: see metrics.base)."""
    rows = torch.nonzero(unsafe).flatten()
    sub = feats[rows]
    peak = sub.abs().amax(dim=1, keepdim=True)
    zero = peak.flatten() == 0
    if bool(zero.any()) and int(zero.sum()) < feats.shape[0]:
        # a few zero rows happen in real layers (a black frame through ReLU blocks): the run goes on, said once
        bad = rows[zero][:5].tolist()
        caveat(f"{name}: item rows {bad}{' ...' if int(zero.sum()) > 5 else ''} ({int(zero.sum())} of "
               f"{feats.shape[0]}) are all zero: a zero vector has no direction, so those items' cosine "
               "neighbours are decided by index ties and their share of the score means little")
    info = torch.finfo(feats.dtype)
    if bool(((peak > 0) & (peak < info.tiny)).any()):
        caveat(f"{name}: features as small as {float(peak[peak > 0].min()):.3g} are subnormal numbers (below "
               f"{info.tiny:.3g} in {str(feats.dtype).removeprefix('torch.')}) and carry fewer significant bits: "
               "near-ties between neighbours may order differently than at a normal scale; multiply the "
               "features by a common factor first")
    scaled = sub / torch.where(peak > 0, peak, torch.ones_like(peak))
    scaled = scaled / scaled.norm(2.0, 1, keepdim=True).clamp_min(info.tiny)  # zero rows (all rows) stay zero
    out = feats / norms.where(~unsafe[:, None], torch.ones_like(norms)).expand_as(feats)
    out[rows] = scaled
    return out


def prepare_layers(xs: Any, name: str, device: torch.device, q: float | None = None,
                   normalize: bool = True) -> list[torch.Tensor]:
    return [prepare(x, q, normalize) for x in as_layers(xs, name, device)]


def check_same_items(xs: Sequence[torch.Tensor], ys: Sequence[torch.Tensor]) -> int:
    n_x, n_y = xs[0].shape[0], ys[0].shape[0]
    if n_x != n_y:
        raise VlgapError(f"X has {n_x} items but Y has {n_y}: row i of X and row i of Y must be the same item")
    return n_x
