"""The one reader of feature arrays from files, used by every command that takes arrays (`align`,
`layer-search`, `gap`, ...). Accepted formats (`ACCEPTED`):

- `.npy`: one array, [N, D] (one layer) or [L, N, D] (L layers).
- `.npz` and `.safetensors`: either one array ([N, D] or [L, N, D]; an unnamed `np.savez(f, x)`
  stores it as `arr_0`), or several [N, D] arrays, one per layer, under any names. Layer order is
  the *natural* sort of the names (digits compared as numbers: `layer_2` < `layer_10`, `h.9` <
  `h.10`), so vlgap's own `layer_000`, `layer_001`, ... and most exporters' names come out in order.
  An array named `ids` (npz) or the metadata entry "ids" (safetensors, as the feature store
  writes it) holds the item ids and is not a layer.
- `.pt` in platonic-rep's layout (`extract_features.py`): a dict with `feats` [N, L, D] (or a list
  of [N, D] layers), read with `torch.load(weights_only=True)`, so no code in the file runs.

A file is identified by its first bytes before its suffix is trusted (`vlgap.file_kinds`): a text, gzip
or pickle file named .npy is refused saying what it is, never with numpy's or torch's advice to load it
unsafely. Item ids must be distinct.

A file vlgap sealed when it wrote it (the feature cache's `features.safetensors` and chunks, a sweep's
score matrices) is verified against its seal first and refused when it changed since (`vlgap.reuse.
verified_input`); an unsealed file is read as it is. Half-precision and bfloat16 tensors are read as
float32. Every layer must be 2-D with the same N and finite; anything else is a one-line error naming the
file, the layer and what would be valid.
"""
from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from vlgap.errors import VlgapError

ACCEPTED = (".npy ([N, D] or [L, N, D]), .npz / .safetensors (one array, or one [N, D] array per layer "
            "under any names, in natural name order), .pt (platonic-rep: a dict with 'feats' [N, L, D])")
SUFFIXES = (".npy", ".npz", ".safetensors", ".pt")


@dataclass
class LayerArrays:
    layers: list[np.ndarray]
    ids: list[str] | None
    path: Path
    names: list[str]

    @property
    def n(self) -> int:
        return self.layers[0].shape[0]


def natural_key(name: str) -> tuple:
    """Sort key comparing runs of digits as numbers ("layer_2" < "layer_10")."""
    return tuple((0, int(part), "") if part.isdigit() else (1, 0, part)
                 for part in re.split(r"(\d+)", name) if part)


def _to_numpy(t: Any) -> np.ndarray:
    import torch

    if isinstance(t, torch.Tensor):
        t = t.detach().cpu()
        if t.dtype in (torch.bfloat16, torch.float16):
            t = t.float()  # bfloat16 has no numpy twin; float32 holds both exactly
        return t.numpy()
    return np.asarray(t)


def _read_safetensors(path: Path) -> tuple[dict[str, np.ndarray], list[str] | None]:
    from safetensors import safe_open

    arrays: dict[str, np.ndarray] = {}
    try:
        with safe_open(str(path), framework="pt") as f:  # torch reads bf16/fp16 too
            meta = f.metadata() or {}
            for key in f.keys():
                arrays[key] = _to_numpy(f.get_tensor(key))
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
    except ValueError as err:
        if "pickle" not in str(err):
            raise VlgapError(f"{path}: not a readable .npz file ({err})") from None
        raise VlgapError(f"{path}: an array of the .npz holds Python objects, which vlgap does not load; save "
                         "numeric arrays (and the ids as strings)") from None
    except Exception as err:  # noqa: BLE001 - zipfile and numpy raise several types for a damaged archive
        raise VlgapError(f"{path}: not a readable .npz file ({type(err).__name__}: {err})") from None
    ids_arr = arrays.pop("ids", None)
    return arrays, None if ids_arr is None else [str(i) for i in ids_arr.tolist()]


def _read_npy(path: Path) -> dict[str, np.ndarray]:
    from vlgap.file_kinds import load_npy

    return {"array": load_npy(path, "features")}


def _read_platonic_pt(path: Path) -> list[tuple[str, np.ndarray]]:
    from vlgap.file_kinds import torch_load_plain

    obj = torch_load_plain(str(path), str(path))
    if not isinstance(obj, dict) or "feats" not in obj:
        found = sorted(obj)[:8] if isinstance(obj, dict) else type(obj).__name__
        raise VlgapError(f"{path}: expected platonic-rep's layout, a dict with 'feats' [N, L, D]; found {found}")
    feats = obj["feats"]
    if isinstance(feats, (list, tuple)):
        return [(f"feats[{i}]", _to_numpy(f)) for i, f in enumerate(feats)]
    arr = _to_numpy(feats)
    if arr.ndim != 3:
        raise VlgapError(f"{path}: 'feats' must be [N items, L layers, D], got shape {arr.shape}")
    return [(f"feats[:, {i}]", arr[:, i, :]) for i in range(arr.shape[1])]


def _split_layers(arrays: dict[str, np.ndarray], path: Path) -> list[tuple[str, np.ndarray]]:
    if not arrays:
        raise VlgapError(f"{path}: holds no arrays; accepted: {ACCEPTED}")
    if len(arrays) == 1:
        (name, arr), = arrays.items()
        if arr.ndim == 2:
            return [(name, arr)]
        if arr.ndim == 3:
            return [(f"{name}[{i}]", arr[i]) for i in range(arr.shape[0])]
        raise VlgapError(f"{path}: {name!r} has shape {arr.shape}; expected [N items, D features] "
                         "or [L layers, N items, D features]")
    names = sorted(arrays, key=natural_key)
    for name in names:
        if arrays[name].ndim != 2:
            raise VlgapError(f"{path}: holds {len(names)} arrays, so each must be one layer [N items, D "
                             f"features]; {name!r} has shape {arrays[name].shape} (store one [L, N, D] "
                             "array alone, or one [N, D] array per layer)")
    return [(name, arrays[name]) for name in names]


def read_layers(path: str | os.PathLike) -> LayerArrays:
    """The layers stored in `path` (any accepted format), validated: 2-D numbers, the same N in
    every layer, finite."""
    from vlgap.reuse import verified_input

    path = Path(path)
    if not path.exists():
        raise VlgapError(f"{path}: no such file")
    # a file vlgap sealed (a cache entry's features, a chunk, a sweep's score matrix) is read only intact
    verified_input(path, "features", fix="run `vlgap extract` (or `vlgap cache --prune`) to recompute it")
    suffix = path.suffix.lower()
    if suffix in SUFFIXES:
        from vlgap.file_kinds import check_kind

        check_kind(path, ACCEPTED)  # the bytes are what the name says: a text or gzip file is named as such
    ids = None
    if suffix == ".safetensors":
        arrays, ids = _read_safetensors(path)
        named = _split_layers(arrays, path)
    elif suffix == ".npz":
        arrays, ids = _read_npz(path)
        named = _split_layers(arrays, path)
    elif suffix == ".npy":
        named = _split_layers(_read_npy(path), path)
    elif suffix == ".pt":
        named = _read_platonic_pt(path)
    else:
        raise VlgapError(f"{path}: unknown feature file type {suffix!r}; accepted: {ACCEPTED}")

    names = [n for n, _ in named]
    layers = [a for _, a in named]
    n = layers[0].shape[0] if layers and layers[0].ndim else 0
    for name, arr in named:
        if arr.ndim != 2:
            raise VlgapError(f"{path}: {name} must be [N items, D features], got shape {arr.shape}")
        if arr.dtype.kind not in "biuf":
            raise VlgapError(f"{path}: {name} has non-numeric dtype {arr.dtype}")
        if arr.shape[0] != n:
            raise VlgapError(f"{path}: {name} has {arr.shape[0]} items but {names[0]} has {n}: every layer "
                             "must hold the same items")
        bad = ~np.isfinite(arr).all(axis=1)
        if bad.any():
            raise VlgapError(f"{path}: {name} has NaN/Inf in item rows {np.flatnonzero(bad)[:5].tolist()}")
    if ids is not None and len(ids) != n:
        raise VlgapError(f"{path}: {len(ids)} item ids for {n} rows")
    if ids is not None and len(set(ids)) != len(ids):
        seen: dict[str, int] = {}
        for row, item in enumerate(ids):
            if item in seen:
                break
            seen[item] = row
        first = seen[ids[row]]
        raise VlgapError(f"{path}: item id {ids[row]!r} appears twice (rows {first} and {row}); each row must be "
                         "one item")
    return LayerArrays(layers, ids, path, names)


def read_array(path: str | os.PathLike, layer: int | str | None = None) -> np.ndarray:
    """One [N, D] array from `path`: its only layer, or `layer` (index, negative from the end, or
    name) when it holds several."""
    la = read_layers(path)
    if layer is None:
        if len(la.layers) != 1:
            raise VlgapError(f"{la.path}: holds {len(la.layers)} layers ({', '.join(la.names[:6])}"
                             f"{', ...' if len(la.names) > 6 else ''}); choose one with --layer (index or name)")
        return la.layers[0]
    if isinstance(layer, str) and layer in la.names:
        return la.layers[la.names.index(layer)]
    try:
        i = int(layer)
    except ValueError:
        raise VlgapError(f"{la.path}: no layer {layer!r}; layers are {la.names[:8]} or indices "
                         f"0..{len(la.layers) - 1}") from None
    if not -len(la.layers) <= i < len(la.layers):
        raise VlgapError(f"{la.path}: layer {i} out of range; the file holds {len(la.layers)} layers")
    return la.layers[i]


def check_same_items(a: LayerArrays, b: LayerArrays) -> None:
    """Refuse two feature files whose rows are not the same items in the same order."""
    if a.n != b.n:
        raise VlgapError(f"{a.path} has {a.n} items but {b.path} has {b.n}: align needs the same items in both")
    if a.ids is not None and b.ids is not None and a.ids != b.ids:
        first = next(i for i, (x, y) in enumerate(zip(a.ids, b.ids)) if x != y)
        raise VlgapError(f"{a.path} and {b.path} list different items (first difference at row {first}: "
                         f"{a.ids[first]!r} vs {b.ids[first]!r}); extract both from the same manifest order")
