"""File adapters for the gap and compare commands: item sets from arrays or caption files, score tables.

Arrays: .npy, .npz holding exactly one array, .safetensors holding exactly one tensor, each [N, D].
Captions: .txt (one caption per line) or .jsonl / .ndjson (one object per line with a "caption"
string). Nothing is dropped silently: an empty caption line is an error naming its line number.
(This is the only module of `vlgap.stats` that touches files; the statistics stay pure.)
"""
from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from vlgap.errors import VlgapError

ARRAY_SUFFIXES = (".npy", ".npz", ".safetensors")
TEXT_SUFFIXES = (".txt", ".text")
JSONL_SUFFIXES = (".jsonl", ".ndjson")


@dataclass
class ItemSet:
    """Either an embedding array [N, D] or a list of captions, plus where it came from."""

    source: str
    array: np.ndarray | None = None
    texts: list[str] | None = None

    @property
    def is_text(self) -> bool:
        return self.texts is not None

    def __len__(self) -> int:
        return len(self.texts) if self.texts is not None else int(self.array.shape[0])


def _check_2d(arr: np.ndarray, path: Path, what: str) -> np.ndarray:
    if arr.ndim != 2:
        raise VlgapError(f"{path}: {what} has shape {arr.shape}; expected [N items, D features]")
    if arr.dtype.kind not in "biuf":
        raise VlgapError(f"{path}: {what} has dtype {arr.dtype}; expected numbers")
    return arr


def load_array(path: str | Path) -> np.ndarray:
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix == ".npy":
        return _check_2d(np.load(path, allow_pickle=False), path, "the array")
    if suffix == ".npz":
        with np.load(path, allow_pickle=False) as data:
            names = list(data.files)
            if len(names) != 1:
                raise VlgapError(f"{path}: holds {len(names)} arrays {names[:10]}; expected exactly one [N, D] array")
            return _check_2d(data[names[0]], path, f"array {names[0]!r}")
    if suffix == ".safetensors":
        from safetensors.torch import load_file

        tensors = load_file(str(path))
        if len(tensors) != 1:
            raise VlgapError(f"{path}: holds {len(tensors)} tensors {sorted(tensors)[:10]}; expected exactly one [N, D] tensor")
        name, tensor = next(iter(tensors.items()))
        import torch

        if tensor.dtype in (torch.bfloat16, torch.float16):
            tensor = tensor.float()  # bfloat16 has no numpy twin; float32 holds both exactly
        return _check_2d(tensor.numpy(), path, f"tensor {name!r}")
    raise VlgapError(f"{path}: unsupported array format {suffix!r}; use one of {', '.join(ARRAY_SUFFIXES)}")


def load_captions(path: str | Path) -> list[str]:
    """Captions from a .txt (one per line) or .jsonl file ({"caption": ...} per line)."""
    path = Path(path)
    suffix = path.suffix.lower()
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError as err:
        raise VlgapError(f"{path}: not UTF-8 text ({err.reason} at byte {err.start})") from None
    # one trailing blank line is an editor artefact, not an empty caption
    while lines and not lines[-1].strip():
        lines.pop()
    captions: list[str] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            raise VlgapError(f"{path}, line {number}: empty line; every line must hold one caption "
                             "(remove the line or write the caption)")
        if suffix in JSONL_SUFFIXES:
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as err:
                raise VlgapError(f"{path}, line {number}: not valid JSON ({err.msg})") from None
            caption = obj.get("caption") if isinstance(obj, dict) else None
            if not isinstance(caption, str):
                raise VlgapError(f"{path}, line {number}: expected an object with a string field \"caption\"")
            if not caption.strip():
                raise VlgapError(f"{path}, line {number}: empty caption")
            captions.append(caption.strip())
        else:
            captions.append(line.strip())
    return captions


def load_item_set(path: str | Path) -> ItemSet:
    """Read an item set, deciding by extension whether it holds embeddings or captions."""
    path = Path(path)
    if not path.exists():
        raise VlgapError(f"{path}: no such file")
    suffix = path.suffix.lower()
    if suffix in ARRAY_SUFFIXES:
        return ItemSet(str(path), array=load_array(path))
    if suffix in TEXT_SUFFIXES + JSONL_SUFFIXES:
        return ItemSet(str(path), texts=load_captions(path))
    raise VlgapError(f"{path}: unknown input type {suffix!r}; use arrays ({', '.join(ARRAY_SUFFIXES)}) or "
                     f"captions ({', '.join(TEXT_SUFFIXES + JSONL_SUFFIXES)})")


def read_table(path: str | Path, required: tuple[str, ...]) -> list[dict[str, Any]]:
    """Rows of a CSV file with a header; checks that the `required` columns exist."""
    path = Path(path)
    if not path.exists():
        raise VlgapError(f"{path}: no such file")
    with path.open(newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        header = reader.fieldnames or []
        missing = [c for c in required if c not in header]
        if missing:
            raise VlgapError(f"{path}: missing column(s) {missing}; found {header}, need {list(required)}")
        return list(reader)
