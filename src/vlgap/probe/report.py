"""`vlgap report RUN_DIR`: a self-contained HTML page (figures embedded as PNG data) plus the PNG files.

Reads what `vlgap sweep` wrote: sweep.json (tidy rows), matrices/*.npy (layer-pair score matrices),
scaling.json (fitted laws) and sections/*.json written by other probes (temporal controls...).
"""
from __future__ import annotations

import base64
import html
import json
from pathlib import Path
from typing import Any

import numpy as np

from vlgap.errors import VlgapError
from vlgap.io_utils import atomic_write_bytes, atomic_write_json, atomic_write_text


def _pairs(rows: list[dict]) -> list[tuple[str, str]]:
    seen: dict[tuple[str, str], None] = {}
    for r in rows:
        seen.setdefault((r["vision"], r["text"]), None)
    return list(seen)


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


def write_section(run_dir: str | Path, name: str, title: str, body: str, figures: list[str]) -> Path:
    """RUN_DIR/sections/<name>.json ({title, html, figures}), included by `vlgap report` in name order."""
    path = Path(run_dir) / "sections" / f"{name}.json"
    atomic_write_json(path, {"title": title, "html": body, "figures": list(figures)})
    return path


def heatmap_figure(matrix: np.ndarray, best: tuple[int, int], title: str, chance: float, x_names=None, y_names=None):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 5))
    im = ax.imshow(matrix, aspect="auto", origin="lower", cmap="viridis")
    ax.scatter([best[1]], [best[0]], marker="*", s=220, c="red", edgecolors="white", label=f"best {matrix[best]:.3f}")
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("text layer")
    ax.set_ylabel("vision layer")
    ax.set_title(title, fontsize=10)
    cb = fig.colorbar(im, ax=ax)
    cb.set_label(f"alignment (chance {chance:.3f})")
    cb.ax.axhline(chance, color="white", lw=1)
    ax.legend(loc="upper left", fontsize=8)
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
        x = np.array([r[axis] for r in sub], float)
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
            grid = np.geomspace(x.min(), x.max(), 50)
            nf, nc = (grid, np.full_like(grid, lv)) if axis == "n_f" else (np.full_like(grid, lv), grid)
            pred = p["S_inf"] - (p["C_f"] * nf ** -p["alpha"] + p["C_c"] * nc ** -p["beta"])
            ax.plot(grid, pred, "--", color=color, lw=1)
    chance = rows[0]["chance"]
    ax.axhline(chance, color="grey", ls=":", label=f"chance k/(N-1) = {chance:.3f}")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("frames n_f" if axis == "n_f" else "captions n_c")
    ax.set_ylabel(f"{rows[0]['metric']} (best layer pair)")
    ax.set_title(title + ("  (dashed: fitted law)" if fit and fit.get("params") else ""), fontsize=10)
    ax.legend(fontsize=7, ncol=2)
    return fig


class Raw(str):
    """A table cell that is already HTML (or already formatted)."""


def fmt(v: Any, nd: int = 3) -> str:
    if isinstance(v, (float, np.floating)):
        return "nan" if not np.isfinite(v) else f"{v:.{nd}f}"
    if v is None:
        return "-"
    return html.escape(str(v))


def fmt_ci(ci, nd: int = 3) -> str:
    return "-" if ci is None else f"[{fmt(ci[0], nd)}, {fmt(ci[1], nd)}]"



def _img(data: bytes, alt: str) -> str:
    return f'<img alt="{html.escape(alt)}" src="data:image/png;base64,{base64.b64encode(data).decode()}"/>'


def html_table(headers: list[str], rows: list[list[Any]], nd: int = 3) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{c if isinstance(c, Raw) else fmt(c, nd)}</td>" for c in r) + "</tr>"
                   for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"



def _fit_section(fit: dict) -> str:
    if not fit:
        return ""
    if fit.get("error"):
        return f"<p class='warn'>Scaling law not fitted: {html.escape(fit['error'])}</p>"
    p, ci = fit["params"], fit.get("param_ci", {})
    rows = [[name, p[name], *(ci.get(name) or [float("nan"), float("nan")])] for name in ("S_inf", "C_f", "C_c", "alpha", "beta")]
    out = "<h4>Fitted law: score = S_inf - (C_f n_f^-alpha + C_c n_c^-beta)</h4>"
    out += html_table(["parameter", "estimate", "95% CI lo", "95% CI hi"], rows)
    out += f"<p>R² = {fmt(fit.get('r2'))} over {fit.get('n_cells')} cells.</p>"
    held = fit.get("heldout") or {}
    if held:
        out += "<p>Held-out check: " + html.escape(held.get("summary") or json.dumps(held, default=str)[:400]) + "</p>"
    alts = fit.get("alternatives") or {}
    if alts:
        arows = []
        for name, a in (alts.items() if isinstance(alts, dict) else enumerate(alts)):
            a = a or {}
            arows.append([a.get("name", name), a.get("r2", float("nan")), a.get("aic", float("nan")),
                          a.get("bic", float("nan")), a.get("heldout_mae", float("nan"))])
        out += html_table(["form", "R²", "AIC", "BIC", "held-out MAE"], arows)
    return out


def write_report(run_dir: str | Path) -> Path:
    run = Path(run_dir)
    sweep_path = run / "sweep.json"
    if not sweep_path.is_file():
        raise VlgapError(f"{run} holds no sweep.json: run `vlgap sweep ... --out {run}` (or `vlgap demo`) first")
    sweep = json.loads(sweep_path.read_text())
    rows = sweep["rows"]
    fits = json.loads((run / "scaling.json").read_text()) if (run / "scaling.json").is_file() else {}
    figs = run / "figures"
    parts = [f"<h1>vlgap alignment report</h1><p>{html.escape(sweep.get('description', ''))}</p>"]
    cfg = sweep.get("config", {})
    parts.append("<p>" + html.escape(
        f"N = {rows[0]['n']} items, k = {rows[0]['k']}, metric = {rows[0]['metric']}, chance level k/(N-1) = "
        f"{rows[0]['chance']:.4f}. Intervals: {cfg.get('interval', 'bootstrap over items')}; p-values: permutation "
        f"null with shuffled pairing.") + "</p>")
    summary_rows = []
    for v, t in _pairs(rows):
        sub = [r for r in rows if r["vision"] == v and r["text"] == t]
        top = max(sub, key=lambda r: (r["n_f"], r["n_c"]))
        low = min(sub, key=lambda r: (r["n_f"], r["n_c"]))
        summary_rows.append([v, t, low["score"], top["score"], fmt_ci([top.get('ci_lo'), top.get('ci_hi')]),
                             top.get("p_value", float("nan")), (fits.get(f"{v}|{t}") or {}).get("r2", float("nan"))])
    parts.append("<h2>Summary</h2>" + html_table(
        ["vision", "text", "score at smallest budget", "score at largest budget", "95% CI (largest)", "p (largest)", "law R²"],
        summary_rows))
    for v, t in _pairs(rows):
        sub = [r for r in rows if r["vision"] == v and r["text"] == t]
        fit = fits.get(f"{v}|{t}")
        tag = matrix_name(v, t, 0, 0)[: -len("__f0_c0.npy")]
        parts.append(f"<h2>{html.escape(v)} × {html.escape(t)}</h2>")
        top = max(sub, key=lambda r: (r["n_f"], r["n_c"]))
        mpath = run / "matrices" / matrix_name(v, t, top["n_f"], top["n_c"])
        if mpath.is_file():
            m = np.load(mpath)
            data = _save(heatmap_figure(m, (top["x_layer"], top["y_layer"]),
                                        f"{v} × {t}, n_f={top['n_f']}, n_c={top['n_c']}: every layer pair",
                                        top["chance"]), figs / f"{tag}_heatmap.png")
            parts.append(_img(data, "layer-pair heatmap"))
        for axis in ("n_f", "n_c"):
            data = _save(scaling_figure(sub, axis, fit, f"{v} × {t}"), figs / f"{tag}_vs_{axis}.png")
            parts.append(_img(data, f"alignment vs {axis}"))
        parts.append(_fit_section(fit or {}))
        parts.append(html_table(["n_f", "n_c", "score", "CI lo", "CI hi", "p", "null mean", "best layers (v, t)"],
                            [[r["n_f"], r["n_c"], r["score"], r.get("ci_lo"), r.get("ci_hi"), r.get("p_value"),
                              r.get("null_mean"), f"{r['x_layer']}, {r['y_layer']}"]
                             for r in sorted(sub, key=lambda r: (r["n_f"], r["n_c"]))]))
    for extra in sorted((run / "sections").glob("*.json")) if (run / "sections").is_dir() else []:
        sec = json.loads(extra.read_text())
        parts.append(f"<h2>{html.escape(sec.get('title', extra.stem))}</h2>{sec.get('html', '')}")
        for png in sec.get("figures", []):
            p = run / png
            if p.is_file():
                parts.append(_img(p.read_bytes(), p.stem))
    style = ("body{font-family:sans-serif;max-width:1100px;margin:auto;padding:1em}table{border-collapse:collapse;"
             "margin:.5em 0}td,th{border:1px solid #ccc;padding:2px 6px;font-size:13px}img{max-width:49%;"
             "vertical-align:top}.warn{color:#a40}")
    page = f"<!doctype html><html><head><meta charset='utf-8'><title>vlgap report</title><style>{style}</style></head><body>{''.join(parts)}</body></html>"
    out = run / "report.html"
    atomic_write_text(out, page)
    return out
