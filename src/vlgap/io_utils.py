"""Small file helpers shared by every layer: atomic writes and JSON with numpy values."""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

import numpy as np


def cache_root(cache_dir: str | os.PathLike | None = None) -> Path:
    """Where vlgap keeps features, converted models and generated data: `cache_dir` if given, else
    $VLGAP_CACHE, else ~/.cache/vlgap."""
    if cache_dir is not None:
        return Path(cache_dir).expanduser()
    env = os.environ.get("VLGAP_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "vlgap"


def sha256_of_file(path: str | os.PathLike) -> str:
    """Hex sha256 of a file's bytes, read in 4 MiB blocks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 22), b""):
            h.update(block)
    return h.hexdigest()


def _default(obj: Any):
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


def to_json(obj: Any, indent: int | None = 2) -> str:
    return json.dumps(obj, indent=indent, default=_default, allow_nan=True)


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Write to a temporary file in the same folder, fsync, then rename: readers never see half a file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: str | os.PathLike, obj: Any) -> None:
    atomic_write_text(path, to_json(obj) + "\n")
