"""Small file helpers shared by every layer: atomic writes and JSON with numpy values."""
from __future__ import annotations

import errno
import hashlib
import json
import os
import secrets
import stat
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from vlgap.errors import PathError, path_error
from vlgap.paths import special_kind


def cache_root(cache_dir: str | os.PathLike | None = None) -> Path:
    """Where vlgap keeps features, converted models and generated data: `cache_dir` if given, else
    $VLGAP_CACHE, else ~/.cache/vlgap. One that exists and is not a folder is a one-line PathError."""
    env = os.environ.get("VLGAP_CACHE")
    if cache_dir is not None:
        root, named = Path(cache_dir).expanduser(), f"cache folder {cache_dir}"
    elif env:
        root, named = Path(env).expanduser(), f"VLGAP_CACHE={env}"
    else:
        return Path.home() / ".cache" / "vlgap"
    if root.exists() and not root.is_dir():
        raise PathError(f"{named}: is a file, expected a folder (where vlgap keeps its cache); name a folder"
                        + ("" if cache_dir is not None else ", or unset it for ~/.cache/vlgap"), errno.ENOTDIR, root)
    return root


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
    folder = make_folder(folder)
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError as err:
        raise path_error(err, folder, "lock") from None
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


def output_target(path: str | os.PathLike) -> Path:
    """The regular file that writing `path` replaces: `path` itself, or where its symbolic links lead (a
    link is written through, as `open(path, "w")` does). Refused by name (PathError, one line): a loop of
    symbolic links, a path through a file, and a target that exists and is not a regular file (a device
    such as /dev/full, a FIFO, a socket, a folder): renaming a file over it would destroy it."""
    path = Path(path)
    if str(path) in ("", "."):
        raise PathError(f"cannot write {str(path)!r}: an empty path; name a file", errno.EINVAL, str(path))
    try:
        target = Path(os.path.realpath(path, strict=True))
    except FileNotFoundError:  # not there yet (or a link to a file to be made): what it will be
        target = Path(os.path.realpath(path))
    except NotADirectoryError as err:
        raise PathError(f"cannot write {path}: {_file_in_the_way(path)} is a file, not a folder", err.errno,
                        path) from None
    except OSError as err:
        raise path_error(err, path, "write") from None
    try:
        mode = os.stat(target).st_mode
    except FileNotFoundError:
        return target
    except OSError as err:
        raise path_error(err, path, "write") from None
    if stat.S_ISDIR(mode):
        raise PathError(f"cannot write {path}: is a folder, expected a file", errno.EISDIR, path)
    kind = special_kind(mode)
    if kind:
        shown = f"{path}" + (f" (-> {target})" if target != path.absolute() else "")
        raise PathError(f"cannot write {shown}: it is {kind}, not a regular file; vlgap writes only regular "
                        "files (name a new file)", errno.EINVAL, path)
    return target


def _file_in_the_way(path: Path) -> Path:
    """The first part of `path` that exists and is not a folder (what a "not a directory" error means)."""
    for part in reversed(path.absolute().parents):
        if part.exists() and not part.is_dir():
            return part
    return path


def make_folder(path: str | os.PathLike) -> Path:
    """`path` made a folder (with its parents; an existing folder is fine); a file in the way, a loop of
    symbolic links, no permission or no space is a one-line PathError naming the folder."""
    path = Path(path)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError) as err:
        blocking = path if path.exists() and not path.is_dir() else _file_in_the_way(path)
        raise PathError(f"cannot create folder {path}: {blocking} is a file, not a folder", err.errno, path) from None
    except OSError as err:
        raise path_error(err, path, "create folder") from None
    return path


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data).cast("B")
    while view:
        view = view[os.write(fd, view):]


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Write to a temporary file in the same folder, fsync, then rename: readers never see half a file.

    The one writer of every output: a target that exists and is not a regular file (a device, a FIFO, a
    socket, a folder) or a loop of symbolic links is refused by name (`output_target`) before anything is
    written, and an OS error (no space, permission, read-only, a file where a folder goes) is a one-line
    PathError naming the path (a VlgapError and an OSError), leaving no temporary file behind.

    Permissions are those a plain write would give: a new file gets 0o666 minus the umask (0644 under
    umask 0022); a file being replaced keeps its mode. A symlink is written through (its target is
    replaced, the link stays), as `open(path, "w")` would."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TypeError(f"atomic_write_bytes: data must be bytes, not {type(data).__name__}")
    shown = Path(path)
    path = output_target(shown)
    make_folder(path.parent)
    try:
        keep_mode: int | None = stat.S_IMODE(os.stat(path).st_mode)
    except FileNotFoundError:
        keep_mode = None
    except OSError as err:
        raise path_error(err, shown, "write") from None
    try:
        fd, tmp = _open_temp_beside(path)
    except OSError as err:
        raise path_error(err, shown, "write") from None
    try:
        try:
            _write_all(fd, data)
            if keep_mode is not None:
                os.chmod(tmp, keep_mode)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException as err:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(err, OSError):
            raise path_error(err, shown, "write") from None
        raise


def open_for_append(path: str | os.PathLike):
    """A log file opened for appending text (line-buffered UTF-8), through the writer's checks: a device,
    a FIFO, a socket, a folder or a loop of symbolic links in its place is refused by name, its folder is
    made, and an OS error opening it is one line naming it (PathError). A log grows line by line, so it is
    not written atomically; a failed write to it is the caller's to name (`append_text` does)."""
    shown = Path(path)
    target = output_target(shown)
    make_folder(target.parent)
    try:
        return open(target, "a", encoding="utf-8", buffering=1)
    except OSError as err:
        raise path_error(err, shown, "write") from None


def append_text(path: str | os.PathLike, text: str) -> None:
    """`text` appended to the log file at `path` (see `open_for_append`); a failed write is one line."""
    with open_for_append(path) as f:
        try:
            f.write(text)
            f.flush()
        except OSError as err:
            raise path_error(err, Path(path), "write") from None


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: str | os.PathLike, obj: Any) -> None:
    atomic_write_text(path, to_json(obj) + "\n")


def jsonl_lines(path: str | os.PathLike) -> Iterator[tuple[int, Any]]:
    """(line number, parsed value) for every non-blank line of a JSONL file; a line that is not JSON
    is a one-line VlgapError naming the file and the line. Callers check the value's shape."""
    from vlgap.json_files import parse_json
    from vlgap.paths import read_text_utf8

    path = Path(path)
    for n, line in enumerate(read_text_utf8(path).splitlines(), start=1):
        if not line.strip():
            continue
        yield n, parse_json(line, f"{path.name} line {n}")
