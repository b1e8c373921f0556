"""Exceptions that the CLI turns into a one-line message instead of a stack trace."""
from __future__ import annotations

import errno as _errno
import os


class VlgapError(ValueError):
    """Bad input or an impossible request: the message names the item and what would be valid."""


class BadItemError(VlgapError):
    """One dataset item cannot be used (missing file, no frames, too few captions...)."""

    def __init__(self, item_id: str, reason: str):
        self.item_id = item_id
        self.reason = reason
        super().__init__(f"item {item_id!r}: {reason}")


class PathError(VlgapError, OSError):
    """An operating-system error on a path (no space left, permission denied, a device where a file goes),
    said in one line naming the path. A VlgapError, so the CLI prints the line; an OSError too (with the
    errno and the file name), so code that tolerates a failed write (a cache index) still does."""

    def __init__(self, message: str, errno: int | None = None, filename: str | os.PathLike | None = None):
        OSError.__init__(self, errno, message, None if filename is None else os.fspath(filename))
        self.message = message

    def __str__(self) -> str:
        return self.message

    def __reduce__(self):  # pickled as it was made (a worker process hands it back whole)
        return type(self), (self.message, self.errno, self.filename)


#: what an errno means, in the words of a message (the others: the system's own text)
_REASONS = {
    _errno.ENOSPC: "no space left on the device",
    _errno.EDQUOT: "disk quota exceeded",
    _errno.EACCES: "permission denied",
    _errno.EPERM: "operation not permitted (an immutable or protected file or folder?)",
    _errno.EROFS: "read-only file system",
    _errno.ELOOP: "a loop of symbolic links",
    _errno.ENOTDIR: "a part of the path is a file, not a folder",
    _errno.EISDIR: "is a folder, expected a file",
    _errno.EEXIST: "already exists",
    _errno.ENAMETOOLONG: "name too long",
    _errno.ENOENT: "does not exist",
    _errno.EIO: "input/output error on the device",
    _errno.EPIPE: "the reader closed the pipe",
    _errno.EFBIG: "file too large for the file system",
}


def os_reason(err: OSError) -> str:
    """A few words saying why an OSError happened ("no space left on the device (ENOSPC)")."""
    code = err.errno
    text = _REASONS.get(code) or (err.strerror or str(err) or type(err).__name__).strip().rstrip(".")
    name = _errno.errorcode.get(code) if isinstance(code, int) else None
    return f"{text} ({name})" if name else text


def path_error(err: OSError, path: str | os.PathLike | None, doing: str) -> PathError:
    """`err` as a one-line PathError: "cannot <doing> <path>: <why>" (path: the one the user named; else
    the file the error names)."""
    if isinstance(err, PathError):
        return err
    where = path if path is not None else err.filename
    return PathError(f"cannot {doing} {where}: {os_reason(err)}", err.errno, where)
