"""`vlgap report RUN_DIR`: a self-contained HTML page (figures embedded as PNG data) plus the PNG files.

Reads what `vlgap sweep` wrote: sweep.json (tidy rows), matrices/*.npy (layer-pair score matrices),
scaling.json (fitted laws) and sections/*.json written by other probes (temporal controls...).
"""
from __future__ import annotations

import base64
import html
from pathlib import Path
from typing import Any

import numpy as np

from vlgap.errors import VlgapError
from vlgap.formatting import interval, is_missing, not_available, number
from vlgap.io_utils import atomic_write_bytes, atomic_write_json, atomic_write_text
from vlgap.probe.figures import legend_outside, within_range


def _pairs(rows: list[dict]) -> list[tuple[str, str]]:
    seen: dict[tuple[str, str], None] = {}
    for r in rows:
        seen.setdefault((r["vision"], r["text"]), None)
    return list(seen)


def pair_labels(rows: list[dict], vision: str, text: str) -> tuple[str, str]:
    """The pair's encoder names as shown: "(random weights)" beside a name whose features were."""
    from vlgap.encoders.registry import labelled

    r = next((r for r in rows if r["vision"] == vision and r["text"] == text), {})
    return labelled(vision, r.get("vision_weights")), labelled(text, r.get("text_weights"))


def matrix_name(vision: str, text: str, n_f: int, n_c: int) -> str:
    safe = lambda s: "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in s)  # noqa: E731
    return f"{safe(vision)}__{safe(text)}__f{n_f}_c{n_c}.npy"


def _save(fig, path: Path) -> bytes:
    """Write the figure as PNG (atomically), close it, return the bytes for embedding."""
    import io

    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    data = buf.getvalue()
    atomic_write_bytes(path, data)
    return data


def save_figure(fig, run_dir: str | Path, rel: str) -> str:
    """Save a figure as PNG at RUN_DIR/rel for a report section; returns rel."""
    _save(fig, Path(run_dir) / rel)
    return rel


def write_section(run_dir: str | Path, name: str, title: str, body: str, figures: list[str],
                  random_weights: list[str] | None = None) -> Path:
    """RUN_DIR/sections/<name>.json ({title, html, figures}), included by `vlgap report` in name order.
    random_weights: encoders of this section that ran with random weights (said in the title and body)."""
    if random_weights:
        from vlgap.encoders.registry import labelled

        title += " (random weights)"
        body = ("<p class='warn'>" + html.escape("Random weights, not trained ones: " + ", ".join(
            labelled(n, True) for n in random_weights) + ".") + "</p>") + body
    path = Path(run_dir) / "sections" / f"{name}.json"
    atomic_write_json(path, {"title": title, "html": body, "figures": list(figures)})
    return path


def warning_paragraphs(lines) -> str:
    """A result's warnings (vlgap.caveats: why a value shown means little) as the report's warning lines."""
    return "".join(f"<p class='warn'>warning: {html.escape(line)}</p>" for line in lines)


def heatmap_figure(matrix: np.ndarray, best: tuple[int, int], title: str, chance: float, x_names=None, y_names=None):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 5))
    im = ax.imshow(matrix, aspect="auto", origin="lower", cmap="viridis")
    ax.scatter([best[1]], [best[0]], marker="*", s=220, c="red", edgecolors="white")
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("text layer")
    ax.set_ylabel("vision layer")
    ax.set_title(f"{title}\n(red star: best pair, {matrix[best]:.3f})", fontsize=10)
    cb = fig.colorbar(im, ax=ax)
    cb.set_label(f"alignment (chance {chance:.3f})")
    cb.ax.axhline(chance, color="white", lw=1)
    return fig


def scaling_figure(rows: list[dict], axis: str, fit: dict | None, title: str):
    """Alignment vs n_f (one line per n_c) or vs n_c (one line per n_f), CIs as bars, fitted law dashed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    other = "n_c" if axis == "n_f" else "n_f"
    fig, ax = plt.subplots(figsize=(6, 4.2))
    levels = sorted({r[other] for r in rows})
    cmap = plt.get_cmap("viridis")
    for i, lv in enumerate(levels):
        sub = sorted((r for r in rows if r[other] == lv), key=lambda r: r[axis])
        # dodged a little along the (log) axis so the lines' points and intervals do not hide each other
        x = np.array([r[axis] for r in sub], float) * (1 + 0.025 * (i - (len(levels) - 1) / 2))
        y = np.array([r["score"] for r in sub], float)
        color = cmap(i / max(1, len(levels) - 1))
        lo = np.array([r.get("ci_lo", np.nan) for r in sub], float)
        hi = np.array([r.get("ci_hi", np.nan) for r in sub], float)
        ax.plot(x, y, "o", color=color, label=f"{other}={lv}")
        ok = np.isfinite(lo) & np.isfinite(hi)
        # drawn as segments, not error bars: a bootstrap interval of a best-of-pairs maximum need not
        # contain the point estimate (the selection is part of what is resampled)
        ax.vlines(x[ok], lo[ok], hi[ok], color=color, lw=1.5, alpha=0.8)
        if fit and fit.get("params"):
            p = fit["params"]
            grid = np.geomspace(min(r[axis] for r in sub), max(r[axis] for r in sub), 50)
            nf, nc = (grid, np.full_like(grid, lv)) if axis == "n_f" else (np.full_like(grid, lv), grid)
            pred = p["S_inf"] - (p["C_f"] * nf ** -p["alpha"] + p["C_c"] * nc ** -p["beta"])
            ax.plot(grid, pred, "--", color=color, lw=1)
    chance = rows[0]["chance"]
    ax.axhline(chance, color="grey", ls=":", label=f"chance k/(N-1) = {chance:.3f}")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("frames n_f" if axis == "n_f" else "captions n_c")
    ax.set_ylabel(f"{rows[0]['metric']} (best layer pair)")
    ax.set_title(title + ("  (dashed: fitted law)" if fit and fit.get("params") else ""), fontsize=10)
    _score_axis(ax, rows)
    legend_outside(ax)
    return fig


def score_bounds(metric: str, k: int | None = None) -> tuple[float | None, float | None]:
    """The range a score of `metric` can take (None: unbounded on that side): figure axes stop there."""
    import math

    from vlgap.errors import VlgapError
    from vlgap.metrics.alignment import metric_range

    try:
        r = metric_range(metric, k)
    except VlgapError:  # a metric this vlgap does not know (a table from elsewhere): no bound to keep
        return None, None
    return (r.low if math.isfinite(r.low) else None), (r.high if math.isfinite(r.high) else None)


def _score_axis(ax, rows: list[dict]) -> None:
    """The y axis over the rows' scores, interval ends and chance level, within the metric's range."""
    values = [v for r in rows for v in (r.get("score"), r.get("ci_lo"), r.get("ci_hi"), r.get("chance"))
              if v is not None]
    within_range(ax, values, score_bounds(rows[0]["metric"], rows[0].get("k")))


def frame_sampling_figure(rows: list[dict], title: str):
    """Alignment vs n_f at the largest n_c, one line per frame-sampling strategy, CIs as segments."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n_c = max(r["n_c"] for r in rows)
    strategies = list(dict.fromkeys(r["frame_sampling"] for r in rows))
    fig, ax = plt.subplots(figsize=(6, 4.2))
    cmap = plt.get_cmap("tab10")
    for i, fs in enumerate(strategies):
        sub = sorted((r for r in rows if r["frame_sampling"] == fs and r["n_c"] == n_c), key=lambda r: r["n_f"])
        x = np.array([r["n_f"] for r in sub], float) * (1 + 0.03 * (i - (len(strategies) - 1) / 2))  # dodge
        y = np.array([r["score"] for r in sub], float)
        lo = np.array([r.get("ci_lo", np.nan) for r in sub], float)
        hi = np.array([r.get("ci_hi", np.nan) for r in sub], float)
        ax.plot(x, y, "o-", color=cmap(i % 10), label=fs)
        ok = np.isfinite(lo) & np.isfinite(hi)
        ax.vlines(x[ok], lo[ok], hi[ok], color=cmap(i % 10), lw=1.5, alpha=0.8)
    chance = rows[0]["chance"]
    ax.axhline(chance, color="grey", ls=":", label=f"chance k/(N-1) = {chance:.3f}")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("frames n_f")
    ax.set_ylabel(f"{rows[0]['metric']} (best layer pair)")
    ax.set_title(f"{title}, n_c={n_c}: n_f curve per frame-sampling strategy", fontsize=10)
    _score_axis(ax, rows)
    legend_outside(ax)
    return fig


def frame_sampling_sections(rows: list[dict], figs: Path) -> list[str]:
    """HTML parts: per (vision encoder, text encoder) run under several frame-sampling strategies, the
    n_f curve of each strategy in one figure."""
    parts = []
    groups = dict.fromkeys((r["vision_encoder"], r["text"]) for r in rows if r.get("frame_sampling"))
    for v, t in groups:
        sub = [r for r in rows if r.get("vision_encoder") == v and r["text"] == t]
        if len({r["frame_sampling"] for r in sub}) < 2:
            continue
        tag = matrix_name(v, t, 0, 0)[: -len("__f0_c0.npy")]
        data = _save(frame_sampling_figure(sub, f"{v} × {t}"), figs / f"{tag}_frame_sampling.png")
        parts.append(f"<h2>Frame sampling: {html.escape(v)} × {html.escape(t)}</h2>" + _img(data, "n_f per strategy"))
    return parts


class Raw(str):
    """A table cell that is already HTML (or already formatted)."""


class Num(Raw):
    """An already formatted number or interval: right-aligned, never wrapped."""


def fmt(v: Any, nd: int = 3) -> str:
    """A value for an HTML cell: numbers as `vlgap.formatting.number` writes them ("n/a" for None and
    non-finite values), anything else escaped."""
    return html.escape(number(v, nd))


def fmt_ci(ci, nd: int = 3, reason: str | None = None) -> str:
    return html.escape(interval(ci, nd, reason))


def na(reason: str | None = None) -> Raw:
    """An "n/a (reason)" cell, for a value that cannot exist here."""
    return Raw(html.escape(not_available(reason)))


def fmt_or_na(v: Any, reason: str, nd: int = 3) -> Raw:
    """The value, or "n/a (reason)" when it is missing or not finite."""
    return na(reason) if is_missing(v) else Num(fmt(v, nd))


def _img(data: bytes, alt: str) -> str:
    """An embedded PNG, shown at its drawn size (the page's width at most): figures that fit side by side
    sit in one row, a wide one (panels side by side) gets a row of its own instead of being shrunk."""
    return f'<img alt="{html.escape(alt)}" src="data:image/png;base64,{base64.b64encode(data).decode()}"/>'


def _td(c: Any, nd: int) -> str:
    if isinstance(c, Raw):
        return f"<td class='n'>{c}</td>" if isinstance(c, Num) else f"<td>{c}</td>"
    numeric = isinstance(c, (int, float, np.integer, np.floating)) and not isinstance(c, bool)
    return f"<td class='n'>{fmt(c, nd)}</td>" if numeric else f"<td>{fmt(c, nd)}</td>"


def html_table(headers: list[str], rows: list[list[Any]], nd: int = 3) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(_td(c, nd) for c in r) + "</tr>" for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"



def cell_warnings(rows: list[dict]) -> str:
    """The degenerate-input warnings of a pair's cells (vlgap.caveats: why a score means little), each line
    once with the cells it concerns."""
    where: dict[str, list[str]] = {}
    for r in sorted(rows, key=lambda r: (r["n_f"], r["n_c"])):
        for line in r.get("warnings") or []:
            where.setdefault(line, []).append(f"n_f={r['n_f']}, n_c={r['n_c']}")
    return "".join(f"<p class='warn'>{html.escape(f'warning ({len(cells)} of {len(rows)} cells: ' + '; '.join(cells[:4]) + ('; ...' if len(cells) > 4 else '') + f'): {line}')}</p>"
                   for line, cells in where.items())


def provenance_block(rec: dict | None) -> str:
    """The run's provenance (vlgap version, date, command or API call, machine) and this report's own
    version and date, as a small table under the title."""
    from vlgap import __version__
    from vlgap.provenance import describe, utc_now

    lines = [(f"run: {label}", text) for label, text in describe(rec)]
    if not lines:
        lines = [("run", "provenance not recorded (a run folder written before vlgap recorded it)")]
    lines.append(("report", f"written by vlgap {__version__}, {utc_now()}"))
    rows = "".join(f"<tr><td>{html.escape(a)}</td><td>{html.escape(b)}</td></tr>" for a, b in lines)
    return f"<table class='provenance'>{rows}</table>"


def _fit_section(fit: dict) -> str:
    if not fit:
        return ""
    if fit.get("error"):
        return f"<p class='warn'>Scaling law not fitted: {html.escape(fit['error'])}</p>"
    p, ci = fit["params"], fit.get("param_ci", {})
    ident = fit.get("identification") or {}
    boot = fit.get("bootstrap") or {}
    level = f"{boot.get('confidence', 0.95):.0%}"
    no_ci = "no bootstrap" if not boot.get("n_resamples") else "bootstrap failed"
    rows = []
    for name in p:
        info = ident.get(name) or {}
        lo, hi = (info.get("bounds") or [None, None])
        allowed = (("(-inf" if lo is None else f"[{lo:g}") + ", " + ("inf)" if hi is None else f"{hi:g}]"))
        status = (Raw("yes") if info.get("identified", True)
                  else Raw(f"<b class='warn'>not identified</b>: {html.escape(info.get('why') or '')}"))
        rows.append([name, _estimate(p[name], info), Num(fmt_ci(ci.get(name))) if interval(ci.get(name)) != "n/a" else na(no_ci),
                     allowed, status])
    out = ("<h3>Fitted law: score = S_inf &minus; (C_f n_f<sup>&minus;alpha</sup> + C_c n_c<sup>&minus;beta</sup>)"
           "</h3>")
    out += html_table(["parameter", "estimate", f"{level} CI", "allowed range", "identified"], rows, nd=4)
    out += "<p>" + html.escape(
        f"R² = {number(fit.get('r2'), 4)}, RMSE = {number(fit.get('rmse'), 4)} over {fit.get('n_cells')} cells"
        + (f"; intervals: {boot.get('method')} bootstrap, {boot.get('n_resamples')} refits"
           + (f" ({boot['n_failed']} failed)" if boot.get("n_failed") else "") if boot.get("n_resamples") else "")
        + ". A parameter is not identified when its estimate or its interval reaches a bound of the allowed "
          "range, or its term is absent or confounded (vlgap.scaling.identification).") + "</p>"
    out += _heldout_section(fit.get("heldout") or {})
    out += _alternatives_section(fit.get("alternatives") or {}, fit.get("best_by") or {})
    # fit.warnings repeat the "identified" column in sentences: the table says it once
    return out


def _estimate(value: float, info: dict) -> float:
    """A fitted value, shown as its bound when it sits there (7.9e-24 at the bound 0 reads as 0)."""
    at, bounds = info.get("at_bound"), info.get("bounds") or [None, None]
    bound = bounds[0] if at == "lower" else bounds[1] if at == "upper" else None
    return float(bound) if bound is not None else value


def _heldout_section(held: dict) -> str:
    if not held:
        return ""
    if "cells" not in held:
        return f"<p><b>Held-out check</b>: {html.escape(not_available(held.get('skipped')))}.</p>"
    out = ("<p><b>Held-out check</b>: " + html.escape(
        f"the law fitted on the {held['n_train']} cells with {held['train']} predicts the {held['n_test']} "
        "cells at the largest budgets:") + "</p>")
    cells = sorted(held["cells"], key=lambda c: (c["n_f"], c["n_c"]))
    rows = [[Num(number(c["n_f"], 0)), Num(number(c["n_c"], 0)), c["predicted"], c["observed"], c["abs_error"]] for c in cells]
    rows.append([Raw("<b>MAE</b>"), "", "", "", Num(f"<b>{fmt(held['mean_abs_error'], 4)}</b>")])
    rows.append(["max", "", "", "", Num(fmt(held["max_abs_error"], 4))])
    return out + html_table(["n_f", "n_c", "predicted", "observed", "abs error"], rows, nd=4)


_CRITERIA = {"aic": "AIC", "aicc": "AICc", "bic": "BIC", "heldout": "held-out MAE"}


def _alternatives_section(alts: dict, best_by: dict) -> str:
    if not alts:
        return ""
    rows = []
    for name, a in alts.items():
        a = a or {}
        why = a.get("heldout_skipped") or "not computed"
        rows.append([Raw(f"{html.escape(name)}<br><small>{html.escape(a.get('formula', ''))}</small>"),
                     a.get("n_params"), a.get("r2"), a.get("aic"), a.get("aicc"), a.get("bic"),
                     fmt_or_na(a.get("heldout_mean_abs_error"), why, 4)])
    out = "<p><b>Alternative forms</b> (lower AIC, AICc, BIC and held-out MAE are better):</p>"
    out += html_table(["form", "parameters", "R²", "AIC", "AICc", "BIC", "held-out MAE"], rows)
    crits = [f"{_CRITERIA[c]}: {best_by[c]}" for c in _CRITERIA if c in best_by]
    if "heldout" not in best_by:
        crits.append("held-out MAE: n/a (no held-out errors)")
    return out + "<p>" + html.escape("Best by " + ", ".join(crits) + ".") + "</p>"


# ------------------------------------------------------------------------------------------------
# console summaries (the CLI prints these; same numbers and words as the HTML)
# ------------------------------------------------------------------------------------------------

def fit_console(fit: dict, title: str = "") -> list:
    """Rich renderables summarising one fitted law (a `ScalingFit.to_dict()` or a scaling.json entry):
    parameter table with intervals and identification, held-out table or "n/a (why)", alternatives."""
    from rich.table import Table
    from rich.text import Text

    if fit.get("error"):
        return [Text(f"{title + ': ' if title else ''}scaling law not fitted: {fit['error']}", style="yellow")]
    boot = fit.get("bootstrap") or {}
    level = f"{boot.get('confidence', 0.95):.0%}"
    ci_note = (f"{level} {boot.get('method')} bootstrap, {boot.get('n_resamples')} refits" if boot.get("n_resamples")
               else "no bootstrap")
    ident = fit.get("identification") or {}
    t = Table(title=f"{title + ': ' if title else ''}{fit.get('model', 'fitted law')} ({ci_note})", title_justify="left")
    for col in ("parameter", "estimate", f"{level} CI", "identified"):
        t.add_column(col, justify="left" if col in ("parameter", "identified") else "right")
    for name, value in fit["params"].items():
        info = ident.get(name) or {}
        ci = interval((fit.get("param_ci") or {}).get(name), 4)
        t.add_row(name, number(_estimate(value, info), 4), ci if ci != "n/a" else not_available(
            "no bootstrap" if not boot.get("n_resamples") else "bootstrap failed"),
            "yes" if info.get("identified", True) else Text(f"not identified: {info.get('why')}", style="yellow"))
    out: list = [t, Text(f"R^2 = {number(fit.get('r2'), 4)}, RMSE = {number(fit.get('rmse'), 4)}, "
                         f"{fit.get('n_cells')} cells")]
    held = fit.get("heldout") or {}
    if "cells" in held:
        h = Table(title=f"held-out check: fit on {held['train']} ({held['n_train']} cells), "
                        f"predict the {held['n_test']} cells at the largest budgets", title_justify="left")
        for col in ("n_f", "n_c", "predicted", "observed", "abs error"):
            h.add_column(col, justify="right")
        for c in sorted(held["cells"], key=lambda c: (c["n_f"], c["n_c"])):
            h.add_row(number(c["n_f"], 0), number(c["n_c"], 0), number(c["predicted"], 4),
                      number(c["observed"], 4), number(c["abs_error"], 4))
        h.add_row("MAE", "", "", "", number(held["mean_abs_error"], 4), style="bold")
        h.add_row("max", "", "", "", number(held["max_abs_error"], 4))
        out.append(h)
    elif held:
        out.append(Text(f"held-out check: {not_available(held.get('skipped'))}"))
    alts = fit.get("alternatives") or {}
    if alts:
        a_t = Table(title="alternative forms (lower AIC/AICc/BIC/held-out MAE is better)", title_justify="left")
        for col in ("form", "params", "R^2", "AIC", "AICc", "BIC", "held-out MAE"):
            a_t.add_column(col, justify="left" if col == "form" else "right")
        for name, a in alts.items():
            mae = a.get("heldout_mean_abs_error")
            a_t.add_row(name, number(a.get("n_params")), number(a.get("r2"), 4), number(a.get("aic"), 2),
                        number(a.get("aicc"), 2), number(a.get("bic"), 2),
                        not_available(a.get("heldout_skipped") or "not computed") if is_missing(mae) else number(mae, 4))
        out.append(a_t)
        best = fit.get("best_by") or {}
        out.append(Text("best by " + ", ".join(f"{_CRITERIA.get(k, k)}: {v}" for k, v in best.items())
                        + ("" if "heldout" in best else ", held-out MAE: n/a (no held-out errors)")))
    for w in fit.get("warnings") or []:
        out.append(Text(f"warning: {w}", style="yellow"))
    return out


def fit_console_line(fit: dict, title: str) -> str:
    """One plain line per law for sweep/demo summaries: parameters, R², held-out MAE, what is not identified."""
    if fit.get("error"):
        return f"{title}: scaling law not fitted ({fit['error'].split(':')[0]})"
    p, ident = fit["params"], fit.get("identification") or {}
    parts = [f"{k} {number(_estimate(v, ident.get(k) or {}), 3)}"
             + ("*" if not (ident.get(k) or {}).get("identified", True) else "") for k, v in p.items()]
    held = fit.get("heldout") or {}
    mae = (f"held-out MAE {number(held['mean_abs_error'], 4)} ({held['n_test']} cells)" if "cells" in held
           else f"held-out MAE {not_available(held.get('reason') or held.get('skipped'))}")
    bad = [k for k, v in ident.items() if not v.get("identified", True)]
    line = f"{title}: {', '.join(parts)}; R^2 {number(fit.get('r2'), 3)}; {mae}"
    if bad:
        line += "; * not identified: " + "; ".join(f"{k} ({ident[k].get('why')})" for k in bad)
    return line


def _ci_cell(row: dict, why: str) -> Raw:
    ci = [row.get("ci_lo"), row.get("ci_hi")]
    if interval(ci) == "n/a":
        return na(row.get("ci_reason") or why)
    from vlgap.stats.bounds import CLIPPED_MARK

    return Num(fmt_ci(ci) + (CLIPPED_MARK if row.get("ci_note") else ""))


def interval_warnings(rows: list[dict]) -> str:
    """The report's warning lines about its intervals: the small-sample warning and, once per distinct note,
    the intervals clipped to the metric's range (vlgap.stats.bounds); "" when there is nothing to say."""
    from vlgap.stats.bounds import CLIPPED_MARK, range_notes

    lines = [f"warning: {w}" for w in range_notes(rows, "small_sample")]
    clipped = [r for r in rows if r.get("ci_note")]
    if clipped:
        lines.append(f"{CLIPPED_MARK} {len(clipped)} of {len(rows)} intervals were widened (basic reflected against a "
                     "bound undercovers) or clipped to the metric's range (the truth lies inside it, so coverage is "
                     "unchanged): "
                     + "; ".join(f"n_f={r['n_f']}, n_c={r['n_c']} ({r['vision']} × {r['text']}): {r['ci_note']}"
                                 for r in clipped[:6]) + ("; ..." if len(clipped) > 6 else ""))
    return "".join(f"<p class='warn'>{html.escape(line)}</p>" for line in lines)


def write_report(run_dir: str | Path, progress: bool = True) -> Path:
    """RUN_DIR/report.html (self-contained) and RUN_DIR/figures/*.png from what the sweep and the other
    probes wrote. Drawing the figures takes seconds: `progress` says so on stderr."""
    from vlgap.progress import step

    run = Path(run_dir)
    sweep_path = run / "sweep.json"
    if not sweep_path.is_file():
        raise VlgapError(f"{run} holds no sweep.json: run `vlgap sweep ... --out {run}` (or `vlgap demo`) first")
    from vlgap.runs.schemas import SCALING, SWEEP, read_run_json

    # sealed by the sweep: a table changed since is not drawn; sealed or not, each is checked field by field
    fix = f"rerun `vlgap sweep ... --out {run}` to rewrite it"
    sweep = read_run_json(sweep_path, SWEEP, fix=fix)
    fits = read_run_json(run / "scaling.json", SCALING, fix=fix) if (run / "scaling.json").is_file() else {}
    with step(f"drawing figures and writing {run / 'report.html'}", enabled=progress):
        return _write_report(run, sweep, fits)


def _write_report(run: Path, sweep: dict, fits: dict) -> Path:
    from vlgap.probe.items import items_html
    from vlgap.runs.schemas import SECTION, read_run_json

    rows = sweep["rows"]
    figs = run / "figures"
    parts = [f"<h1>vlgap alignment report</h1><p>{html.escape(sweep.get('description', ''))}</p>",
             provenance_block(sweep.get("provenance"))]
    cfg = sweep.get("config", {})
    parts.append("<p>" + html.escape(
        f"N = {rows[0]['n']} items, k = {rows[0]['k']}, metric = {rows[0]['metric']}, chance level k/(N-1) = "
        f"{rows[0]['chance']:.4f}. Intervals: {cfg.get('interval', 'bootstrap over items')}; p-values: permutation "
        f"null with shuffled pairing.") + "</p>")
    parts.append(interval_warnings(rows))
    parts.append(items_html(sweep.get("items")))  # N kept and left out, each item with its reasons
    # sweep.json files written before the rename say "bootstrap" / "permutations"
    no_ci = "no bootstrap" if not cfg.get("n_bootstrap", cfg.get("bootstrap")) else "bootstrap failed"
    no_p = "no permutations" if not cfg.get("n_permutations", cfg.get("permutations")) else "no null"
    summary_rows = []
    for v, t in _pairs(rows):
        sub = [r for r in rows if r["vision"] == v and r["text"] == t]
        top = max(sub, key=lambda r: (r["n_f"], r["n_c"]))
        low = min(sub, key=lambda r: (r["n_f"], r["n_c"]))
        fit = fits.get(f"{v}|{t}") or {}
        if not fit or fit.get("error"):
            law: Any = na("law not fitted" + (": grid too small" if "too small" in fit.get("error", "") else ""))
            ident: Any = na("law not fitted")
        else:
            law = fit.get("r2")
            bad = fit.get("not_identified") or []
            ident = Raw("all" if not bad else f"<span class='warn'>not identified: {html.escape(', '.join(bad))}</span>")
        v_label, t_label = pair_labels(rows, v, t)
        summary_rows.append([v_label, t_label, low["score"], top["score"], _ci_cell(top, no_ci),
                             fmt_or_na(top.get("p_value"), no_p, 4), law if isinstance(law, Raw) else Num(fmt(law, 4)),
                             ident])
    level = cfg.get("confidence", 0.95)
    parts.append("<h2>Summary</h2>" + html_table(
        ["vision", "text", "score at smallest budget", "score at largest budget", f"{level:.0%} CI (largest)",
         "p (largest)", "law R²", "law parameters identified"], summary_rows))
    for v, t in _pairs(rows):
        sub = [r for r in rows if r["vision"] == v and r["text"] == t]
        fit = fits.get(f"{v}|{t}")
        tag = matrix_name(v, t, 0, 0)[: -len("__f0_c0.npy")]
        v_label, t_label = pair_labels(rows, v, t)
        parts.append(f"<h2>{html.escape(v_label)} × {html.escape(t_label)}</h2>")
        top = max(sub, key=lambda r: (r["n_f"], r["n_c"]))
        mpath = run / "matrices" / matrix_name(v, t, top["n_f"], top["n_c"])
        if mpath.is_file():
            from vlgap.reuse import verified_input

            verified_input(mpath, "score matrix", fix=f"rerun `vlgap sweep ... --out {run}` to recompute its cell")
            from vlgap.file_kinds import load_npy

            m = load_npy(mpath, "score matrix")
            data = _save(heatmap_figure(m, (top["x_layer"], top["y_layer"]),
                                        f"{v_label} × {t_label}, n_f={top['n_f']}, n_c={top['n_c']}: every layer pair",
                                        top["chance"]), figs / f"{tag}_heatmap.png")
            parts.append(_img(data, "layer-pair heatmap"))
        for axis in ("n_f", "n_c"):
            data = _save(scaling_figure(sub, axis, fit, f"{v_label} × {t_label}"), figs / f"{tag}_vs_{axis}.png")
            parts.append(_img(data, f"alignment vs {axis}"))
        parts.append(_fit_section(fit or {}))
        parts.append(cell_warnings(sub))
        parts.append("<h3>Cells</h3>" + html_table(
            ["n_f", "n_c", "score", f"{level:.0%} CI", "p", "null mean", "best layers (v, t)"],
            [[r["n_f"], r["n_c"], r["score"], _ci_cell(r, no_ci), fmt_or_na(r.get("p_value"), no_p, 4),
              fmt_or_na(r.get("null_mean"), no_p), f"{r['x_layer']}, {r['y_layer']}"]
             for r in sorted(sub, key=lambda r: (r["n_f"], r["n_c"]))]))
    parts += frame_sampling_sections(rows, figs)
    for extra in sorted((run / "sections").glob("*.json")) if (run / "sections").is_dir() else []:
        sec = read_run_json(extra, SECTION)
        parts.append(f"<h2>{html.escape(sec.get('title', extra.stem))}</h2>{sec.get('html', '')}")
        for png in sec.get("figures", []):
            p = run / png
            if p.is_file():
                parts.append(_img(p.read_bytes(), p.stem))
    style = ("body{font-family:sans-serif;max-width:1200px;margin:auto;padding:1em}table{border-collapse:collapse;"
             "margin:.5em 0}td,th{border:1px solid #ccc;padding:2px 6px;font-size:13px}img{max-width:100%;"
             "vertical-align:top}.warn{color:#a40}td.n{text-align:right;white-space:nowrap}"
             "table.provenance td{border:none;padding:0 8px 0 0;font-size:12px;color:#444}")
    page = f"<!doctype html><html><head><meta charset='utf-8'><title>vlgap report</title><style>{style}</style></head><body>{''.join(parts)}</body></html>"
    out = run / "report.html"
    atomic_write_text(out, page)
    return out
