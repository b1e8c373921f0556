"""Keep a long run's console to vlgap's own progress lines: everything the libraries print (the
Trainer's log dicts, tqdm bars, FutureWarnings and other warnings, transformers/peft log records) goes
to a log file in the run folder instead.

`library_output_to(path)` replaces sys.stdout and sys.stderr for its duration with a line splitter:
every line goes to the log file; a line that starts with one of vlgap's own prefixes ("[cape ",
"vlgap: ") also goes to the console it replaced. Logging handlers that were bound to the console
streams when their library was imported (transformers' default handler) are pointed at the log file
for the same time. Warnings are written through sys.stderr, so they land in the log. Output written
by C code straight to file descriptor 2 is not caught (no library used here does so during a run).
"""
from __future__ import annotations

import io
import logging
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, TextIO

#: lines that are vlgap's own and stay on the console
CONSOLE_PREFIXES = ("[cape ", "vlgap: ")


class _LineSplitter(io.TextIOBase):
    """A text stream that writes whole lines to `log`, and those starting with `prefixes` to `console`."""

    def __init__(self, console: TextIO, log: TextIO, prefixes: tuple[str, ...] = CONSOLE_PREFIXES,
                 path: Path | None = None):
        super().__init__()
        self.console, self.log, self.prefixes, self.path = console, log, prefixes, path
        self._pending = ""

    def _log(self, text: str | None) -> None:
        """Write `text` to the log (None: flush it); a full disk is one line naming the log file."""
        try:
            self.log.flush() if text is None else self.log.write(text)
        except OSError as err:
            from vlgap.errors import path_error

            raise path_error(err, self.path, "write the log") from None

    @property
    def encoding(self) -> str:  # some libraries read it before writing
        return "utf-8"

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:  # progress bars then draw plain lines, fit for a file
        return False

    def write(self, s: str) -> int:
        self._pending += s
        *lines, self._pending = self._pending.split("\n")
        for line in lines:
            self._emit(line + "\n")
        return len(s)

    def _emit(self, text: str) -> None:
        self._log(text)
        if text.startswith(self.prefixes):
            self.console.write(text)
            self.console.flush()

    def flush(self) -> None:
        # a partial line that is not vlgap's (a tqdm bar redrawn with '\r') goes to the log as it is
        if self._pending and not self._pending.startswith(self.prefixes):
            self._log(self._pending)
            self._pending = ""
        self._log(None)

    def close_pending(self) -> None:
        if self._pending:
            self._emit(self._pending + "\n")
            self._pending = ""
        self._log(None)


def _console_handlers(streams: tuple[object, ...]) -> list[logging.StreamHandler]:
    loggers = [logging.getLogger()] + [lg for lg in logging.root.manager.loggerDict.values()
                                       if isinstance(lg, logging.Logger)]
    return [h for lg in loggers for h in lg.handlers
            if isinstance(h, logging.StreamHandler) and not isinstance(h, logging.FileHandler)
            and h.stream in streams]


@contextmanager
def library_output_to(path: str | Path) -> Iterator[Path]:
    """Send library output to the file `path` (appended) while vlgap's own lines stay on the console."""
    from vlgap.io_utils import open_for_append

    path = Path(path)
    old_out, old_err = sys.stdout, sys.stderr
    with open_for_append(path) as log:  # a device or a FIFO in its place is refused by name
        out, err = _LineSplitter(old_out, log, path=path), _LineSplitter(old_err, log, path=path)
        handlers = _console_handlers((old_out, old_err, sys.__stdout__, sys.__stderr__))
        streams = [h.stream for h in handlers]
        for h in handlers:
            h.setStream(log)
        sys.stdout, sys.stderr = out, err
        try:
            yield path
        finally:
            sys.stdout, sys.stderr = old_out, old_err
            out.close_pending()
            err.close_pending()
            for h, s in zip(handlers, streams):
                h.setStream(s)
