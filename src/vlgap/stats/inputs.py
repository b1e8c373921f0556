"""File adapters for the gap and compare commands: item sets from arrays or caption files, score tables.

Arrays: every format of `vlgap.features.arrays` (.npy, .npz, .safetensors, platonic-rep .pt); a
file holding several layers needs a layer chosen (`layer=`, `--layer`).
Captions: .txt (one caption per line) or .jsonl / .ndjson (one object per line with a "caption"
string). Nothing is dropped silently: an empty caption line is an error naming its line number.
(This is the only module of `vlgap.stats` that touches files; the statistics stay pure.)
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from vlgap.errors import VlgapError
from vlgap.features.arrays import SUFFIXES as ARRAY_SUFFIXES
from vlgap.features.arrays import read_array
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


def load_array(path: str | Path, layer: int | str | None = None) -> np.ndarray:
    """One [N, D] array from a feature file (`vlgap.features.arrays.read_array`)."""
    return read_array(path, layer)


def load_captions(path: str | Path) -> list[str]:
    """Captions from a .txt (one per line) or .jsonl file ({"caption": ...} per line)."""
    path = Path(path)
    suffix = path.suffix.lower()
    from vlgap.paths import read_text_utf8

    lines = read_text_utf8(path).splitlines()
    # one trailing blank line is an editor artefact, not an empty caption
    while lines and not lines[-1].strip():
        lines.pop()
    captions: list[str] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            raise VlgapError(f"{path}, line {number}: empty line; every line must hold one caption "
                             "(remove the line or write the caption)")
        if suffix in JSONL_SUFFIXES:
            from vlgap.json_files import parse_json

            obj = parse_json(line, f"{path}, line {number}")
            caption = obj.get("caption") if isinstance(obj, dict) else None
            if not isinstance(caption, str):
                raise VlgapError(f"{path}, line {number}: expected an object with a string field \"caption\"")
            if not caption.strip():
                raise VlgapError(f"{path}, line {number}: empty caption")
            captions.append(caption.strip())
        else:
            captions.append(line.strip())
    return captions


def load_item_set(path: str | Path, layer: int | str | None = None) -> ItemSet:
    """Read an item set, deciding by extension whether it holds embeddings or captions (`layer`
    picks one layer of an array file that holds several)."""
    path = Path(path)
    if not path.exists():
        raise VlgapError(f"{path}: no such file")
    if path.is_dir():
        raise VlgapError(f"{path}: is a folder, expected a file")
    suffix = path.suffix.lower()
    if suffix in ARRAY_SUFFIXES:
        return ItemSet(str(path), array=load_array(path, layer))
    if suffix in TEXT_SUFFIXES + JSONL_SUFFIXES:
        return ItemSet(str(path), texts=load_captions(path))
    raise VlgapError(f"{path}: unknown input type {suffix!r}; use arrays ({', '.join(ARRAY_SUFFIXES)}) or "
                     f"captions ({', '.join(TEXT_SUFFIXES + JSONL_SUFFIXES)})")


def read_table(path: str | Path, required: tuple[str, ...]) -> list[dict[str, Any]]:
    """Rows of a CSV file with a header; checks that the `required` columns exist."""
    from vlgap.csv_files import read_csv  # folder, missing, non-UTF-8, a row with extra fields

    path = Path(path)
    header, rows = read_csv(path, "SCORES")
    missing = [c for c in required if c not in header]
    if missing:
        raise VlgapError(f"{path}: missing column(s) {missing}; found {header}, need {list(required)}")
    return rows
