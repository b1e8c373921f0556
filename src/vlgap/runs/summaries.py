"""Summaries of an experiment's cells: intervals over seeds and over items, tables and DataFrames.

- `t_interval(values)`: mean and Student-t interval over seeds (the seeds are the replications: each
  trains afresh), None below two seeds, kept inside a bounded metric's range when given (vlgap.stats.bounds); `over_seeds(values, **per_seed)` the same as a record
  {mean, t_ci, per_seed, ...}.
- `over_items(values)`: mean and bootstrap interval over the items of one cell (`vlgap.stats.resampling`,
  with its small-n rule: no interval below its minimum number of items).
- A table is {"title", "header", "rows"} (rows of cell strings): `tables_markdown`, `tables_html` render
  the same tables, and `tables_frame` gives them as one pandas DataFrame in long format (one row per
  table cell). `interval_frame` turns interval records into a long DataFrame of numbers.
"""
from __future__ import annotations

import math
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from vlgap.frames import FLOAT, INT, STRING, make_frame
from vlgap.stats.bounds import ScoreRange

Table = Mapping[str, Any]


def t_interval(values: Sequence[float], confidence: float = 0.95, score_range: ScoreRange | None = None
               ) -> tuple[float, list[float] | None]:
    """Mean and Student-t interval over seeds (None with fewer than two values). A t interval is the mean
    plus or minus a width, so with few seeds it can leave a bounded metric's range: give `score_range`
    (e.g. vlgap.stats.bounds.UNIT for an accuracy) and it is intersected with it (`t_interval_note` says
    when that clipped it; the truth lies in the range, so coverage is unchanged)."""
    return _t_interval(values, confidence, score_range)[:2]


def t_interval_note(values: Sequence[float], confidence: float = 0.95, score_range: ScoreRange | None = None,
                    label: str = "the metric") -> str | None:
    """The line saying that `t_interval` clipped this interval to `score_range`, None when it did not."""
    return _t_interval(values, confidence, score_range, label)[2]


def _t_interval(values, confidence, score_range, label="the metric"):
    from scipy import stats

    from vlgap.stats.bounds import keep_in_range

    v = np.asarray(values, float)
    if len(v) < 2:
        return float(v.mean()), None, None
    half = stats.t.ppf(0.5 + confidence / 2, len(v) - 1) * v.std(ddof=1) / math.sqrt(len(v))
    lo, hi = float(v.mean() - half), float(v.mean() + half)
    if score_range is None:
        return float(v.mean()), [lo, hi], None
    kept = keep_in_range(lo, hi, score_range, method="Student-t", label=label)
    return float(v.mean()), kept.ci, kept.note


def over_seeds(values: Sequence[float], confidence: float = 0.95, score_range: ScoreRange | None = None,
               **per_seed: Sequence[Any]) -> dict[str, Any]:
    """{mean, t_ci, per_seed} of one number's per-seed values, plus per-seed extras (intervals, p-values);
    with `score_range` the interval is kept inside it and "t_ci_note" says when that clipped it."""
    mean, ci, note = _t_interval(values, confidence, score_range)
    return {"mean": mean, "t_ci": ci, "per_seed": list(values), **({"t_ci_note": note} if note else {}), **per_seed}


def over_items(values: Sequence[float], *, n_bootstrap: int = 1000, confidence: float = 0.95,
               ci_method: str = "percentile", seed: int = 0) -> dict[str, Any]:
    """{mean, ci, reason, n} of one cell's per-item values: the bootstrap interval of the mean over items
    (None, with the reason, below the small-n minimum or when every resample agrees)."""
    from vlgap.stats.resampling import bootstrap_ci

    v = np.asarray(values, float)
    iv = bootstrap_ci(v, "mean", n_bootstrap=n_bootstrap, confidence=confidence, ci_method=ci_method, seed=seed)
    return {"mean": float(v.mean()), "ci": None if iv.ci is None else [float(x) for x in iv.ci],
            "reason": iv.reason, "n": int(len(v))}


def interval_text(mean_ci: Any, nd: int = 3) -> str:
    """"0.512 [0.431, 0.593]" of (mean, [lo, hi]) or a record with mean and t_ci; the mean alone without
    an interval."""
    mean, ci = mean_ci if isinstance(mean_ci, (tuple, list)) else (mean_ci["mean"], mean_ci["t_ci"])
    return f"{mean:.{nd}f}" + (f" [{ci[0]:.{nd}f}, {ci[1]:.{nd}f}]" if ci else "")


def tables_markdown(tables: Iterable[Table]) -> str:
    """Each table as its title, a blank line and a Markdown table, then a blank line."""
    out = []
    for t in tables:
        out += [t["title"] + ":", "", "| " + " | ".join(t["header"]) + " |", "|" + "---|" * len(t["header"])]
        out += ["| " + " | ".join(r) + " |" for r in t["rows"]]
        out.append("")
    return "\n".join(out)


def tables_html(tables: Iterable[Table]) -> str:
    """The same tables as HTML (the title as a paragraph, escaped cells, every column)."""
    import html

    parts = []
    for t in tables:
        head = "".join(f"<th>{html.escape(h)}</th>" for h in t["header"])
        body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>" for r in t["rows"])
        parts.append(f"<p>{html.escape(t['title'])}.</p><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>")
    return "".join(parts)


def tables_frame(tables: Iterable[Table]):
    """The tables as one pandas DataFrame in long format: one row per cell, columns table (its index),
    title, row (index in its table), column (the header) and value (the cell's text)."""
    rows = [{"table": ti, "title": t["title"], "row": ri, "column": h, "value": v}
            for ti, t in enumerate(tables) for ri, r in enumerate(t["rows"]) for h, v in zip(t["header"], r)]
    return make_frame(rows, {"table": INT, "title": STRING, "row": INT, "column": STRING, "value": STRING},
                      "summary tables")


def interval_frame(records: Iterable[Mapping[str, Any]], names: Sequence[str] = ()):
    """Interval records as a long DataFrame: each record's `names` columns (strings), then metric, mean,
    ci_low, ci_high and n (seeds or items). A record holds "metric" and either "mean" with "t_ci" (over
    seeds) or "ci" (over items), and "n" or "per_seed"."""
    rows = []
    for r in records:
        ci = r.get("t_ci", r.get("ci"))
        n = r.get("n", len(r["per_seed"]) if "per_seed" in r else None)
        rows.append({**{k: r.get(k) for k in names}, "metric": r["metric"], "mean": r["mean"],
                     "ci_low": ci[0] if ci else None, "ci_high": ci[1] if ci else None, "n": n})
    columns = {**{k: STRING for k in names}, "metric": STRING, "mean": FLOAT, "ci_low": FLOAT, "ci_high": FLOAT,
               "n": INT}
    return make_frame(rows, columns, "summary")
