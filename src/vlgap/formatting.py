"""How numbers are written for people: one rule for the HTML report and the console summaries.

Plain text only (no HTML, no Rich markup): `probe.report.fmt` escapes it for HTML, the CLI prints it
as is. A value that cannot exist is written "n/a", with the reason where the caller knows it, never
as a bare "nan".
"""
from __future__ import annotations

import math
from numbers import Integral, Real
from typing import Any, Sequence

NA = "n/a"


def not_available(reason: str | None = None) -> str:
    """"n/a (reason)", or "n/a" when no reason is known."""
    return f"{NA} ({reason})" if reason else NA


def number(v: Any, nd: int = 3) -> str:
    """A number with `nd` decimals; tiny (< 10^-nd) and huge (>= 1e6) magnitudes with `nd` significant
    digits instead, so 0.00012 does not print as 0.000. None and non-finite values: "n/a"."""
    if v is None:
        return NA
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, Integral):
        return str(int(v))
    if isinstance(v, Real):
        v = float(v)
        if not math.isfinite(v):
            return NA
        a = abs(v)
        if a != 0 and (a < 10.0 ** -nd or a >= 1e6):
            return f"{v:.{nd}g}"
        return f"{v:.{nd}f}"
    return str(v)


def interval(ci: Sequence[Any] | None, nd: int = 3, reason: str | None = None, *, signed: bool = False) -> str:
    """"[lo, hi]"; "n/a (reason)" when there is no interval (pass the `ci_reason` the statistics gave,
    e.g. "n too small: n=2 < 10"), or "n/a" when either end is missing. An interval whose ends
    coincide is never printed as a point: "n/a (degenerate: ...)" (vlgap.stats.resampling's rule).
    signed: write "+" on non-negative ends (differences)."""
    if ci is None or len(ci) != 2 or any(number(c) == NA for c in ci):
        return not_available(reason)
    if float(ci[0]) == float(ci[1]):
        return not_available(reason or "degenerate: every resample gave the same value")
    lo, hi = number(ci[0], nd), number(ci[1], nd)
    if signed:
        lo, hi = (("+" + t if not t.startswith("-") else t) for t in (lo, hi))
    return f"[{lo}, {hi}]"


def is_missing(v: Any) -> bool:
    """True for None and non-finite numbers: the cells that need "n/a (why)"."""
    if v is None:
        return True
    try:
        return not math.isfinite(float(v))
    except (TypeError, ValueError):
        return False
