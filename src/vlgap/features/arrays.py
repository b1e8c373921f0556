"""Read per-layer feature arrays from a file for `vlgap align`: .safetensors or .npz holding
`layer_000`, `layer_001`, ... each [N, D_l], or one `features` array [L, N, D].

Item ids, when the file carries them (safetensors metadata "ids" as written by the feature store,
or an npz array `ids`), are returned so that two files can be checked to hold the same items in the
same order.
"""
from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from vlgap.errors import VlgapError

_LAYER_RE = re.compile(r"^layer_(\d+)$")


@dataclass
class LayerArrays:
    layers: list[np.ndarray]
    ids: list[str] | None
    path: Path

    @property
    def n(self) -> int:
        return self.layers[0].shape[0]


def _read_safetensors(path: Path) -> tuple[dict[str, np.ndarray], list[str] | None]:
    from safetensors import safe_open

    arrays: dict[str, np.ndarray] = {}
    try:
        with safe_open(str(path), framework="pt") as f:  # torch reads bf16/fp16 too
            meta = f.metadata() or {}
            for key in f.keys():
                t = f.get_tensor(key)
                arrays[key] = (t.float() if t.is_floating_point() else t).numpy()
    except Exception as err:
        raise VlgapError(f"{path}: not a readable .safetensors file ({err})") from err
    ids = None
    if "ids" in meta:
        try:
            ids = [str(i) for i in json.loads(meta["ids"])]
        except (ValueError, TypeError):
            ids = None
    return arrays, ids


def _read_npz(path: Path) -> tuple[dict[str, np.ndarray], list[str] | None]:
    try:
        with np.load(path, allow_pickle=False) as z:
            arrays = {key: z[key] for key in z.files}
    except Exception as err:
        raise VlgapError(f"{path}: not a readable .npz file ({err})") from err
    ids_arr = arrays.pop("ids", None)
    return arrays, None if ids_arr is None else [str(i) for i in ids_arr.tolist()]


def read_layers(path: str | os.PathLike) -> LayerArrays:
    """The layers stored in `path`, validated: same N in every layer, finite numbers."""
    path = Path(path)
    if not path.exists():
        raise VlgapError(f"{path}: no such file")
    suffix = path.suffix.lower()
    if suffix == ".safetensors":
        arrays, ids = _read_safetensors(path)
    elif suffix == ".npz":
        arrays, ids = _read_npz(path)
    else:
        raise VlgapError(f"{path}: unknown feature file type {suffix!r}; use .safetensors or .npz")

    numbered = {int(m.group(1)): key for key in arrays if (m := _LAYER_RE.match(key))}
    if numbered and "features" in arrays:
        raise VlgapError(f"{path}: holds both layer_NNN arrays and 'features'; keep one of the two layouts")
    if numbered:
        missing = sorted(set(range(max(numbered) + 1)) - set(numbered))
        if missing:
            raise VlgapError(f"{path}: layers must be numbered layer_000 .. layer_{max(numbered):03d} without "
                             f"gaps; missing {', '.join(f'layer_{i:03d}' for i in missing[:5])}")
        layers = [arrays[numbered[i]] for i in range(len(numbered))]
        names = [numbered[i] for i in range(len(numbered))]
    elif "features" in arrays:
        feats = arrays["features"]
        if feats.ndim != 3:
            raise VlgapError(f"{path}: 'features' must be [L layers, N items, D], got shape {feats.shape}")
        layers = list(feats)
        names = [f"features[{i}]" for i in range(len(layers))]
    else:
        raise VlgapError(f"{path}: no feature arrays found; expected layer_000, layer_001, ... ([N, D] each) "
                         f"or one 'features' [L, N, D]; found {sorted(arrays)[:8]}")

    n = layers[0].shape[0] if layers[0].ndim else 0
    for name, arr in zip(names, layers):
        if arr.ndim != 2:
            raise VlgapError(f"{path}: {name} must be [N items, D features], got shape {arr.shape}")
        if arr.shape[0] != n:
            raise VlgapError(f"{path}: {name} has {arr.shape[0]} items but {names[0]} has {n}")
        if arr.dtype.kind not in "biuf":
            raise VlgapError(f"{path}: {name} has non-numeric dtype {arr.dtype}")
        bad = ~np.isfinite(arr).all(axis=1)
        if bad.any():
            raise VlgapError(f"{path}: {name} has NaN/Inf in item rows {np.flatnonzero(bad)[:5].tolist()}")
    if ids is not None and len(ids) != n:
        raise VlgapError(f"{path}: {len(ids)} item ids for {n} rows")
    return LayerArrays(layers, ids, path)


def check_same_items(a: LayerArrays, b: LayerArrays) -> None:
    """Refuse two feature files whose rows are not the same items in the same order."""
    if a.n != b.n:
        raise VlgapError(f"{a.path} has {a.n} items but {b.path} has {b.n}: align needs the same items in both")
    if a.ids is not None and b.ids is not None and a.ids != b.ids:
        first = next(i for i, (x, y) in enumerate(zip(a.ids, b.ids)) if x != y)
        raise VlgapError(f"{a.path} and {b.path} list different items (first difference at row {first}: "
                         f"{a.ids[first]!r} vs {b.ids[first]!r}); extract both from the same manifest order")
