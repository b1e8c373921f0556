"""Paths checked at the door: one helper per kind, used by every command and API entry that takes a path.

- `input_file(path, what)` / `input_folder(path, what)`: the path must exist and be of that kind; a folder
  given for a file (or the reverse) says so ("is a folder, expected a file"), not "does not exist".
- `output_file(path, what)` / `output_folder(path, what)`: the path, if it exists, must be of that kind,
  and it (or the nearest folder above it that exists) must be writable, so a run is refused before any
  work rather than failing with a traceback at its end.
- `read_text_utf8(path, what)`: the file as text (UTF-8, a byte-order mark allowed); bytes that are not
  UTF-8 are a one-line error naming the file, the line and the byte.

`what` names the option or argument ("--corpus", "MANIFEST"); every message is a one-line
`vlgap.errors.VlgapError` beginning with it, which the CLI prints and exits 2 on.
"""
from __future__ import annotations

import contextlib
import contextvars
import errno
import os
import stat
from pathlib import Path

from vlgap.errors import VlgapError


def _label(path: Path, what: str) -> str:
    return f"{what} {path}" if what else str(path)


def input_file(path: str | os.PathLike, what: str = "") -> Path:
    """`path` as a Path when it is a readable file; else a VlgapError naming `what` and the path."""
    p = Path(path).expanduser()
    if p.is_dir():
        raise VlgapError(f"{_label(p, what)}: is a folder, expected a file")
    if not p.exists():
        raise VlgapError(f"{_label(p, what)}: {_why_missing(p)} (expected a file)")
    if not os.access(p, os.R_OK):
        raise VlgapError(f"{_label(p, what)}: is not readable (permission denied)")
    return p


def input_folder(path: str | os.PathLike, what: str = "") -> Path:
    """`path` as a Path when it is a folder; else a VlgapError naming `what` and the path."""
    p = Path(path).expanduser()
    if p.exists() and not p.is_dir():
        raise VlgapError(f"{_label(p, what)}: is a file, expected a folder")
    if not p.exists():
        raise VlgapError(f"{_label(p, what)}: {_why_missing(p)} (expected a folder)")
    return p


def _why_missing(p: Path) -> str:
    """Why `p` cannot be found: "does not exist", or what the system says (a loop of symbolic links)."""
    try:
        os.stat(p)
    except (FileNotFoundError, NotADirectoryError):
        return "does not exist"
    except OSError as err:
        from vlgap.errors import os_reason

        return os_reason(err)
    return "does not exist"


def _nearest_existing(p: Path) -> Path:
    q = p.absolute()
    while not q.exists() and q != q.parent:
        q = q.parent
    return q


def _check_writable_below(p: Path, what: str, start: Path | None = None) -> None:
    """The nearest existing folder above (or at) `start` (default `p`) must be a writable folder."""
    base = _nearest_existing(p if start is None else start)
    if not base.is_dir():
        raise VlgapError(f"{_label(p, what)}: cannot be created, {base} is a file, not a folder")
    if not os.access(base, os.W_OK | os.X_OK):
        raise VlgapError(f"{_label(p, what)}: cannot write there ({base} is not writable)")


#: what a path that is not a regular file is, by its st_mode test
_SPECIAL_KINDS = ((stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                  (stat.S_ISFIFO, "a named pipe (FIFO)"), (stat.S_ISSOCK, "a socket"))


def special_kind(mode: int) -> str | None:
    """What a path of st_mode `mode` is when it is neither a regular file nor a folder ("a character
    device", "a named pipe (FIFO)"...), else None."""
    return next((name for test, name in _SPECIAL_KINDS if test(mode)), None) or (
        None if stat.S_ISREG(mode) or stat.S_ISDIR(mode) else "not a regular file")


def _refuse_loops_and_special(p: Path, what: str, expected: str) -> None:
    """A loop of symbolic links, or an existing path that is a device, a FIFO or a socket, is refused by name
    (writing a file there would replace the device: vlgap writes only regular files and folders)."""
    try:
        mode = os.stat(p).st_mode
    except OSError as err:
        if err.errno != errno.ELOOP:
            return  # not there (yet), or below a file: the checks that follow say so
        from vlgap.errors import os_reason

        raise VlgapError(f"{_label(p, what)}: {os_reason(err)}") from None
    kind = None if stat.S_ISDIR(mode) else special_kind(mode)
    if kind:
        raise VlgapError(f"{_label(p, what)}: is {kind}, expected {expected}; vlgap writes only regular files "
                         "and folders")


def output_file(path: str | os.PathLike, what: str = "") -> Path:
    """`path` as a Path when a file can be written there: not a folder, nor a device, FIFO, socket or loop
    of symbolic links, and its folder (or the nearest existing one above it) writable; else a VlgapError
    naming `what` and the path."""
    p = Path(path).expanduser()
    _refuse_loops_and_special(p, what, "a file")
    if p.is_dir():
        raise VlgapError(f"{_label(p, what)}: is a folder, expected a file")
    if p.exists():
        if not os.access(p, os.W_OK) or not os.access(p.parent, os.W_OK | os.X_OK):
            raise VlgapError(f"{_label(p, what)}: cannot write there (permission denied)")
        return p
    _check_writable_below(p, what, p.parent)
    return p


def output_folder(path: str | os.PathLike, what: str = "") -> Path:
    """`path` as a Path when it is (or can become) a writable folder; else a VlgapError naming `what`."""
    p = Path(path).expanduser()
    _refuse_loops_and_special(p, what, "a folder")
    if p.exists() and not p.is_dir():
        raise VlgapError(f"{_label(p, what)}: is a file, expected a folder")
    if p.is_dir():
        if not os.access(p, os.W_OK | os.X_OK):
            raise VlgapError(f"{_label(p, what)}: cannot write there (permission denied)")
        return p
    _check_writable_below(p, what)
    return p


#: the encoding of the text files a command reads (`--encoding`; `text_encoding`); None: UTF-8
_ENCODING: "contextvars.ContextVar[str | None]" = contextvars.ContextVar("vlgap_text_encoding", default=None)


def check_encoding(name: str, what: str = "--encoding") -> str:
    """The canonical name of text encoding `name` (`utf-8`, `cp1252`, `latin-1`, ...); a one-line error
    for one Python does not know."""
    import codecs

    try:
        info = codecs.lookup(str(name).strip())
    except LookupError:
        raise VlgapError(f"{what} {name!r}: not a text encoding Python knows; give e.g. utf-8, cp1252, latin-1, "
                         "utf-16") from None
    try:
        "a".encode(info.name)
    except (LookupError, TypeError, UnicodeError):
        raise VlgapError(f"{what} {name!r}: not a text encoding (a binary codec); give e.g. utf-8, cp1252") from None
    return info.name


@contextlib.contextmanager
def text_encoding(name: str | None):
    """`with text_encoding("cp1252"):` every text file read inside (however deep) is decoded as `name`
    instead of UTF-8; the CLI's `--encoding` sets it for the command's whole run."""
    token = _ENCODING.set(None if name is None else check_encoding(name))
    try:
        yield
    finally:
        _ENCODING.reset(token)


def decode_utf8(data: bytes, path: str | os.PathLike, what: str = "") -> str:
    """`data` (the bytes of `path`) as text; a byte-order mark is dropped (a UTF-16 one says the file is
    UTF-16, as Windows tools save it: decoded so). Bytes that are not UTF-8 are a one-line VlgapError
    naming the file, the line and the byte. The one decoder of text files: every reader goes through it.
    Inside `text_encoding(name)` (the CLI's `--encoding`) the bytes are decoded as `name` instead."""
    import codecs

    encoding = _ENCODING.get()
    if encoding not in (None, "utf-8"):
        try:
            return data.decode(encoding)
        except UnicodeDecodeError as err:
            line = data[: err.start].count(b"\n") + 1
            raise VlgapError(f"{_label(Path(path), what)}: not {encoding} text at line {line} (byte "
                             f"0x{data[err.start]:02x} at offset {err.start}); give its encoding with --encoding") from None

    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        try:
            return data.decode("utf-16")
        except UnicodeDecodeError as err:
            raise VlgapError(f"{_label(Path(path), what)}: not UTF-16 text after its UTF-16 byte-order mark (at "
                             f"offset {err.start}); re-encode the file as UTF-8") from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        line = data[: err.start].count(b"\n") + 1
        raise VlgapError(f"{_label(Path(path), what)}: not UTF-8 text at line {line} (byte 0x{data[err.start]:02x} "
                         f"at offset {err.start}); re-encode the file as UTF-8, or name its encoding (--encoding cp1252)") from None


def read_text_utf8(path: str | os.PathLike, what: str = "") -> str:
    """The file at `path` as text (checked as `input_file`, decoded as `decode_utf8`)."""
    p = input_file(path, what)
    try:
        data = p.read_bytes()
    except OSError as err:
        raise VlgapError(f"{_label(p, what)}: cannot be read ({err.strerror or err})") from None
    return decode_utf8(data, p, what)
