"""Cells: one result of an experiment, keyed by everything that determines it, computed at most once.

A cell is a JSON value in its own file, written through the reuse rule (`vlgap.reuse.write_artefact`:
the bytes atomically, then a seal with the key, its digest and the checksum). It is read back only
verified (`read_cell`): a cell sealed under another key (stale), changed after it was written (corrupt)
or without a seal (an interrupted write) is said in one line, removed, and computed again. Files that
belong to a cell (a score matrix beside a row) are sealed under the same key and checked with it
(`attached`): if one fails, the whole cell is recomputed.

`cell(path, key, make)` is the whole life of a cell: read it, or claim it (`vlgap.runs.claims`, with
`lock=True` when other workers share the folder), compute, seal, release.
"""
from __future__ import annotations

import json
import os
from typing import Any, Callable, Mapping

from vlgap.io_utils import to_json
from vlgap.reuse import check_artefact, discard, read_verified, write_artefact
from vlgap.runs.claims import claimed, lock_path

Report = Callable[[str], None]


def read_cell(path: str | os.PathLike, key: Any, *, what: str = "cell", report: Report | None = None,
              attached: Mapping[str | os.PathLike, str] | None = None) -> Any | None:
    """The cell's value when `path` (and every `attached` file: {path: what it is}) is sealed under `key`
    and unchanged, else None: a stale or corrupt one is reported (why, in one line) and removed with its
    seal and its attached files, so the caller computes it again; a missing one is silent."""
    attached = dict(attached or {})
    raw = read_verified(path, key, what=what, report=report)
    ok = raw is not None and all(read_verified(p, key, what=w, report=report) is not None
                                 for p, w in attached.items())
    if not ok:
        for p in (path, *attached):
            discard(p)
        return None
    return json.loads(raw)


def peek_cell(path: str | os.PathLike, key: Any, *, what: str = "cell", report: Report | None = None) -> Any | None:
    """The cell's value when it is sealed under `key` and unchanged, else None, removing nothing: read
    before claiming a cell that other workers share, an unsealed file may be one whose holder is between
    writing it and sealing it. Only the claim's holder reads with `read_cell`, which removes a bad one."""
    if not check_artefact(path, key, verify_bytes=False).ok:
        return None
    return read_cell(path, key, what=what, report=report)


def write_cell(path: str | os.PathLike, value: Any, key: Any, *, extra: dict | None = None) -> Any:
    """Seal `value` (as indented JSON) under `key` at `path`; returns the value as read back from JSON
    (NaN and tuples included), so a resumed run's tables equal this run's. `extra`: facts for people kept
    in the seal, not compared."""
    text = to_json(value) + "\n"
    write_artefact(path, text.encode(), key, extra=extra)
    return json.loads(text)


def cell(path: str | os.PathLike, key: Any, make: Callable[[], Any] | None, *, what: str = "cell",
         report: Report | None = None, lock: bool = False) -> Any | None:
    """The cell at `path` for `key`: read verified, else `make()`d and sealed. `make=None`: read only.
    With `lock`, only the worker that claims the cell's lock file computes it (None here when another
    live worker holds it); the claim is released when done, also on an error."""
    if not lock:
        found = read_cell(path, key, what=what, report=report)
        return found if found is not None or make is None else write_cell(path, make(), key)
    found = peek_cell(path, key, what=what, report=report)
    if found is not None or make is None:
        return found
    with claimed(lock_path(path)) as mine:
        if not mine:
            return None
        # another worker may have finished it between the read and the claim
        found = read_cell(path, key, what=what, report=report)
        return found if found is not None else write_cell(path, make(), key)
