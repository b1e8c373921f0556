"""Small file helpers shared by every layer: atomic writes and JSON with numpy values."""
from __future__ import annotations

import hashlib
import json
import os
import secrets
import stat
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from vlgap.errors import VlgapError


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


def process_alive(pid: int) -> bool:
    """Whether process `pid` exists (signal 0 only asks): the one liveness check behind the locks of
    vlgap.runs and the leftovers of killed writers. Another user's process counts as alive."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@contextmanager
def folder_lock(folder: str | os.PathLike, *, shared: bool = False) -> Iterator[None]:
    """An advisory lock on `folder` (flock on the folder itself, made if missing: no lock file is left)
    while files in it that several processes read and write are read or written: exclusive, or shared
    among readers; where the platform has no flock, none."""
    try:
        import fcntl
    except ImportError:  # not POSIX
        yield
        return
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    fd = os.open(folder, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH if shared else fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def _open_temp_beside(path: Path) -> tuple[int, Path]:
    """Create a fresh temporary file next to `path`, opened for writing.

    Created with mode 0o666 so the kernel applies the umask (and any default ACL) exactly as it does
    for `open(path, "w")`; `tempfile.mkstemp` would force 0600 on every output."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0) | getattr(os, "O_CLOEXEC", 0)
    for _ in range(100):
        tmp = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
        try:
            return os.open(tmp, flags, 0o666), tmp
        except FileExistsError:
            continue
    raise FileExistsError(f"could not create a temporary file beside {path}")


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Write to a temporary file in the same folder, fsync, then rename: readers never see half a file.

    Permissions are those a plain write would give: a new file gets 0o666 minus the umask (0644 under
    umask 0022); a file being replaced keeps its mode. A symlink is written through (its target is
    replaced, the link stays), as `open(path, "w")` would."""
    path = Path(path)
    if path.is_symlink():
        path = Path(os.path.realpath(path))
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        keep_mode: int | None = stat.S_IMODE(os.stat(path).st_mode)
    except FileNotFoundError:
        keep_mode = None
    fd, tmp = _open_temp_beside(path)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            if keep_mode is not None:
                os.chmod(tmp, keep_mode)
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


def jsonl_lines(path: str | os.PathLike) -> Iterator[tuple[int, Any]]:
    """(line number, parsed value) for every non-blank line of a JSONL file; a line that is not JSON
    is a one-line VlgapError naming the file and the line. Callers check the value's shape."""
    path = Path(path)
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            yield n, json.loads(line)
        except ValueError as err:
            raise VlgapError(f"{path.name} line {n}: not valid JSON ({err})") from None
