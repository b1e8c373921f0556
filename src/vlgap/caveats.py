"""The degenerate-input rule's one mechanism: why a computed value means little, said once.

Where a statistic's answer is trivial, undefined or unstable for its input (k >= N - 1, identical sets,
constant columns, fewer than 3 models, one class, N below the dimension, duplicated rows, fewer
distinct permutations than asked, truncated inputs...), vlgap either refuses (`VlgapError` with the
reason) or returns the value with ONE line saying why it means little. Such a line is a *caveat*:

- the code that sees the condition calls `caveat("...")` (one sentence: what was found, what it does
  to the value, what would make it meaningful);
- a function that builds a result is decorated with `@reports_caveats`: the caveats raised while it
  runs (in it or in anything it calls) become the result's `warnings` (a list of lines: the attribute
  of a result object, the "warnings" key of a result dict), so the JSON carries them; an enclosing
  result (gap around its MMD test) gets them too;
- every CLI command collects the caveats of its run and prints each once on stderr as
  "warning: ..." (`vlgap.cli.declarations.guard`), so --json output stays parseable; reports show a
  result's `warnings` beside its table.

Outside any result (a low-level function called on its own) a caveat is a Python warning of class
`DegenerateWarning`, so it is never lost. The same line raised twice (every resample of a bootstrap)
is kept once. Collections are per thread; a worker thread without one of its own reports to the
command's collection (`collecting(process_wide=True)`), if any.
"""
from __future__ import annotations

import dataclasses
import functools
import threading
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any


class DegenerateWarning(UserWarning):
    """A value was computed but means little for this input (the caveat's text says why)."""


class _Collection(list):
    """The lines of one collection; `prefix` ("layer 3: ") is put before every line it receives."""

    def __init__(self, prefix: str = ""):
        super().__init__()
        self.prefix = prefix

    def receive(self, lines) -> None:
        for line in lines:
            line = line if line.startswith(self.prefix) else self.prefix + line
            if line not in self:
                self.append(line)


_local = threading.local()
_process: list[_Collection] = []
_lock = threading.Lock()


def _stack() -> list[_Collection]:
    stack = getattr(_local, "stack", None)
    if stack is None:
        stack = _local.stack = []
    return stack


def _add(found: list[str], lines) -> None:
    for line in lines:
        if line not in found:
            found.append(line)


def caveat(message: str) -> None:
    """Record one caveat with the result being built (or the command's run); outside both, warn."""
    message = " ".join(str(message).split())
    stack = _stack()
    if stack:
        stack[-1].receive([message])
        return
    with _lock:
        if _process:
            _process[-1].receive([message])
            return
    warnings.warn(message, DegenerateWarning, stacklevel=2)


@contextmanager
def collecting(*, process_wide: bool = False, prefix: str = "") -> Iterator[list[str]]:
    """Collect the caveats raised inside the block (in order, each once) into the list it yields; on
    exit they are passed on to the enclosing collection of this thread, else to the command's.
    process_wide: this collection also receives the caveats of threads that have none of their own.
    prefix: put before each line (which layer, which encoder a caveat is about), here and upwards."""
    found = _Collection(prefix)
    stack = _stack()
    if process_wide:
        with _lock:
            _process.append(found)
    stack.append(found)
    try:
        yield found
    finally:
        stack.pop()
        if process_wide:
            with _lock:
                _process.remove(found)
        if stack:
            stack[-1].receive(found)
        elif not process_wide:
            with _lock:
                if _process:
                    _process[-1].receive(found)


def attach(result: Any, lines: list[str]) -> Any:
    """`lines` added to `result`'s warnings: its `warnings` attribute (a result object, frozen or not)
    or its "warnings" key (a result dict); anything else is returned unchanged (the lines still reach
    the enclosing collection)."""
    if isinstance(result, dict):
        _add(result.setdefault("warnings", []), lines)
    elif dataclasses.is_dataclass(result) and not isinstance(result, type) and hasattr(result, "warnings"):
        current = list(getattr(result, "warnings") or [])
        _add(current, lines)
        object.__setattr__(result, "warnings", current)
    return result


def reports_caveats(func: Callable) -> Callable:
    """Decorator of a function that returns a result: the caveats raised while it runs become the
    result's warnings (`attach`). A result without a place for them leaves them to the enclosing
    collection, or to a `DegenerateWarning` when there is none."""
    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        outer = bool(_stack()) or bool(_process)
        with collecting() as found:
            result = func(*args, **kwargs)
        attach(result, found)
        has_place = isinstance(result, dict) or hasattr(result, "warnings")
        if found and not has_place and not outer:
            for line in found:
                warnings.warn(line, DegenerateWarning, stacklevel=2)
        return result
    return wrapper


def warning_lines(result: Any) -> list[str]:
    """The warnings a result carries (attribute or key), [] when none."""
    if isinstance(result, dict):
        return list(result.get("warnings") or [])
    return list(getattr(result, "warnings", None) or [])
