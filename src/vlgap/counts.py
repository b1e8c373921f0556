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


def count_list(name: str, value: Any, minimum: int = 1, *, flag: str | None = None,
               example: str = "1,2,4,8", what: str | None = None) -> list[int]:
    """Distinct integers >= `minimum`, in the order given, from one integer, a comma list as typed on a
    command line ("1,2,4") or a sequence of integers: the one parser of count lists for the CLI and the
    API. A string is never iterated character by character ("12" is twelve, not 1 and 2); a boolean, a
    number with a fraction, a string inside a list, an empty list and a value given twice are one-line
    VlgapErrors naming `name` (and its CLI `flag`). `what`: how the message calls the values."""
    import math
    import numbers

    label = f"{flag} ({name})" if flag and flag.lstrip("-").replace("-", "_") != name else (flag or name)
    want = what or f"integers >= {minimum}"
    if isinstance(value, str):
        try:
            items = [int(x) for x in value.replace(" ", "").split(",") if x]
        except ValueError:
            raise VlgapError(f"{label} must be a comma-separated list of {want}, e.g. {example}; got {value!r}") from None
    elif isinstance(value, numbers.Integral) and not isinstance(value, bool):
        items = [int(value)]
    else:
        try:
            seq = list(value)
        except TypeError:
            raise VlgapError(f"{label}={value!r}: need an integer or a list of {want}, e.g. {example}") from None
        whole = [not isinstance(v, bool) and isinstance(v, numbers.Real) and math.isfinite(v) and float(v).is_integer()
                 for v in seq]
        if not all(whole):
            bad = seq[whole.index(False)]
            raise VlgapError(f"{label}={value!r}: need a list of {want}, e.g. {example}; {bad!r} is not an integer")
        items = [int(v) for v in seq]
    if not items:
        raise VlgapError(f"{label} is empty; give a list of {want}, e.g. {example}")
    if min(items) < minimum:
        raise VlgapError(f"{label} {value!r}: every value must be " + (
            "a positive integer" if minimum == 1 else f"an integer >= {minimum}"))
    seen: set[int] = set()
    twice = next((v for v in items if v in seen or seen.add(v)), None)
    if twice is not None:
        raise VlgapError(f"{label} {value!r}: {twice} is given twice; give each value once")
    return items


def name_list(name: str, value: Any, *, flag: str | None = None, example: str = "a,b") -> list[str]:
    """Distinct non-empty names, in the order given, from a comma list as typed ("a,b") or a sequence of
    strings: a string is one list of names, never its characters. Anything else (a number, a list holding
    a non-string, an empty list, a name given twice) is a one-line VlgapError naming `name` (and `flag`)."""
    label = f"{flag} ({name})" if flag and flag.lstrip("-").replace("-", "_") != name else (flag or name)
    if isinstance(value, str):
        items = [x.strip() for x in value.split(",")]
    elif isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        items = [v.strip() for v in value]
    else:
        raise VlgapError(f"{label}={value!r}: need a list of names or their comma text, e.g. {example!r}")
    if not items or not all(items):
        raise VlgapError(f"{label}={value!r}: an empty name; give a list of names, e.g. {example!r}")
    twice = next((v for i, v in enumerate(items) if v in items[:i]), None)
    if twice is not None:
        raise VlgapError(f"{label}={value!r}: {twice!r} is given twice; name each once")
    return items


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
