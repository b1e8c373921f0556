"""Count options (batch sizes, steps, beams, resamples, k...) checked where they enter: the API's
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
    if not ok:
        try:
            ok = float(value) == int(value)
        except (TypeError, ValueError, OverflowError):
            ok = False
    if not ok or int(value) < minimum:
        hint = f", e.g. {example}" if example is not None else ""
        raise VlgapError(f"{label}={value!r}: need an integer >= {minimum}{hint}")
    return int(value)
