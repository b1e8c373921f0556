"""The command line's standard output, guarded, and the one place an OS error becomes one line.

`vlgap ... > /dev/full` (a full disk) or `vlgap ... | head` (a closed pipe) fails where the output is
written or flushed, often only at the interpreter's exit, with a traceback or an "Exception ignored" note.
`guarded_stdout()` wraps sys.stdout for the run of a command: a failed write or flush is a
`StdoutError`; `main` flushes before it returns, says it in one line on stderr (exit 2; a closed pipe:
quietly, exit 1, as Python's documentation advises) and points the descriptor at /dev/devnull so that the
interpreter's own last flush finds nothing to fail on.

`os_error_line(err)` is the line of an OSError that reached the entry point without passing one of the
writers (vlgap.io_utils, which already say theirs): only an error that names its file is said so; one
without a file name is a bug and keeps its traceback.
"""
from __future__ import annotations

import contextlib
import errno
import os
import sys
from typing import Any, Iterator

from vlgap.errors import VlgapError, os_reason


class StdoutError(VlgapError):
    """Standard output cannot be written (a full device, a closed pipe)."""

    def __init__(self, err: OSError):
        self.errno = err.errno
        super().__init__(f"cannot write to standard output: {os_reason(err)}")


class _Guarded:
    """A text stream whose write and flush failures are StdoutError; everything else is the stream's."""

    def __init__(self, stream: Any):
        self._stream = stream

    def write(self, text):
        try:
            return self._stream.write(text)
        except OSError as err:
            raise StdoutError(err) from None

    def flush(self):
        try:
            return self._stream.flush()
        except OSError as err:
            raise StdoutError(err) from None

    def __getattr__(self, name):
        return getattr(self._stream, name)


@contextlib.contextmanager
def guarded_stdout() -> Iterator[None]:
    """sys.stdout guarded (see the module docstring) inside; flushed on leaving, so a failure shows here."""
    real = sys.stdout
    sys.stdout = _Guarded(real)
    try:
        try:
            yield
        finally:
            sys.stdout.flush()
    except StdoutError:
        silence_stdout(real)
        raise
    finally:
        sys.stdout = real


def silence_stdout(stream: Any) -> None:
    """Point `stream`'s descriptor at the null device: what is still buffered goes nowhere instead of
    failing again at the interpreter's exit."""
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, stream.fileno())
        os.close(null)
    except (OSError, AttributeError, ValueError):  # not a real descriptor (a test's capture)
        pass


def closed_pipe(err: StdoutError) -> bool:
    """The reader of standard output went away (`vlgap ... | head`): nothing to tell anyone."""
    return err.errno == errno.EPIPE


def os_error_line(err: OSError) -> str | None:
    """One line for an OSError that names its file ("PATH: permission denied (EACCES)"); None for one
    that does not (a bug: it keeps its traceback)."""
    if not err.filename:
        return None
    second = f" -> {err.filename2}" if getattr(err, "filename2", None) else ""
    return f"{err.filename}{second}: {os_reason(err)}"
