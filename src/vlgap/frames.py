"""Results as pandas DataFrames (`to_frame()` on every result object), pandas staying optional.

Every frame is long format, one row per the result's natural unit (a layer pair, a sweep cell, a
metric, a parameter, an item), with typed columns: "string" for names, "Int64" (nullable) for
counts and layer indices, "float64" for scores (NaN where a number does not exist), "boolean" for
flags. So `df.plot(...)`, `seaborn.lineplot(data=df, ...)` or `altair.Chart(df)` take it as is.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from vlgap.errors import VlgapError

STRING, INT, FLOAT, BOOL = "string", "Int64", "float64", "boolean"


def require_pandas(what: str):
    """pandas, or a VlgapError naming the result and the way out (to_dict() needs nothing)."""
    try:
        import pandas
    except ImportError:
        raise VlgapError(f"{what}.to_frame() needs pandas, which is not installed: pip install pandas "
                         f"(or use {what}.to_dict(), which needs nothing)") from None
    return pandas


def make_frame(rows: Iterable[Mapping[str, Any]], columns: Mapping[str, str], what: str):
    """A DataFrame of `rows` with exactly `columns` (name -> dtype), in that order; a key missing
    from a row is a missing value (NaN / <NA>)."""
    pandas = require_pandas(what)
    frame = pandas.DataFrame([{c: _missing(row.get(c), dtype) for c, dtype in columns.items()} for row in rows],
                             columns=list(columns))
    return frame.astype(dict(columns))


def _missing(value: Any, dtype: str) -> Any:
    if value is None and dtype == FLOAT:
        return float("nan")
    return value


def interval_bounds(ci: Any) -> dict[str, float | None]:
    """{"ci_low", "ci_high"} of an interval given as [low, high] (or None)."""
    if ci is None:
        return {"ci_low": None, "ci_high": None}
    low, high = ci
    return {"ci_low": low, "ci_high": high}
