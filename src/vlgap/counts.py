"""Count options (batch sizes, steps, beams, resamples, k...) and probabilities (alpha) checked where they enter: the API's
functions and dataclasses call `check_count`, so the CLI and Python share one one-line message that
names the option and says what is valid."""
from __future__ import annotations

from typing import Any

from vlgap.errors import VlgapError


def check_count(name: str, value: Any, minimum: int = 1, *, flag: str | None = None, example: int | None = None,
                allow_none: bool = False) -> int | None:
    """`value` as an int >= `minimum`, else VlgapError naming `name` (and its CLI `flag`)."""
    if value is None and allow_none:
        return None
    label = f"{flag} ({name})" if flag and flag.lstrip("-").replace("-", "_") != name else (flag or name)
    ok = isinstance(value, (int,)) and not isinstance(value, bool)
    if not ok and not isinstance(value, (bool, str, bytes)) and type(value).__name__ != "bool_":
        try:  # a whole float (8.0) or a numpy integer; never a bool or a string ("12" is not 12)
            ok = float(value) == int(value)
        except (TypeError, ValueError, OverflowError):
            ok = False
    if not ok or int(value) < minimum:
        hint = f", e.g. {example}" if example is not None else ""
        raise VlgapError(f"{label}={value!r}: need an integer >= {minimum}{hint}")
    return int(value)


def check_probability(name: str, value: Any, *, flag: str | None = None, example: float = 0.05) -> float:
    """`value` as a float strictly between 0 and 1 (a significance level, a rate), else VlgapError naming
    `name` (and its CLI `flag`)."""
    label = f"{flag} ({name})" if flag and flag.lstrip("-").replace("-", "_") != name else (flag or name)
    try:
        v = float(value)
    except (TypeError, ValueError):
        v = float("nan")
    if isinstance(value, bool) or not 0.0 < v < 1.0:
        raise VlgapError(f"{label}={value!r}: need a number strictly between 0 and 1, e.g. {example}")
    return v


def check_positive(name: str, value: Any, *, flag: str | None = None, example: float = 1e-3) -> float:
    """`value` as a finite float > 0 (a learning rate, a temperature), else VlgapError naming `name`."""
    label = f"{flag} ({name})" if flag and flag.lstrip("-").replace("-", "_") != name else (flag or name)
    try:
        v = float(value)
    except (TypeError, ValueError):
        v = float("nan")
    if isinstance(value, bool) or not (v > 0 and v != float("inf")):
        raise VlgapError(f"{label}={value!r}: need a finite number > 0, e.g. {example:g}")
    return v


#: the largest single allocation a size option may ask for (a batch of frames, a rendered video)
MAX_ALLOCATION_BYTES = 16 << 30


def check_allocation(label: str, nbytes: int, what: str, limit: int = MAX_ALLOCATION_BYTES) -> int:
    """Refuse a request whose `what` ("a batch of 32 frames at 100000 x 100000 px") would take `nbytes`
    of memory above `limit`: a one-line VlgapError naming `label` (the option) and the estimate."""
    if nbytes > limit:
        raise VlgapError(f"{label}: {what} would take {_gib(nbytes)} of memory (limit {_gib(limit)}); "
                         "ask for less")
    return nbytes


def _gib(n: int) -> str:
    return f"{n / 2**30:,.1f} GiB" if n >= 2**30 else f"{n / 2**20:,.1f} MiB"
