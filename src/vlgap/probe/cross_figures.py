"""The paper's cross-model figures from a sweep over many encoders (Dynamic Reflections Figs 7, 10, 11, 12).

Read from the sweep's rows (one per vision, text, n_f, n_c with the best layer pair, its score and
interval), each vision encoder at its own n_f: the n_f at which it aligns best in the sweep
(`best_n_f`), one n_f for all, or one given per encoder.

- Fig 7, `caption_gain_fit`: each (vision, text) pair a point, x = its score with n_c_low captions
  (1), y = with n_c_high (the sweep's largest; the paper's 10), and the least-squares line through
  the points with a bootstrap over the points (models) and a t interval (`vlgap.stats.line_fit`). The
  paper reports y = 1.6 x - 0.018, r = 0.998 across its vision models.
- Figs 11 and 12, `best_score_matrix`: the vision x text matrix of best scores at n_c = 1 (Fig 11)
  and at n_c_high (Fig 12), each cell annotated "score (vision layer, text layer)", intervals in a
  table beside it.
- Fig 10, `vlgap.probe.cross_model.run_cross_alignment` with per-encoder n_f from the sweep and the
  text encoders as extra rows (needs the features, read from the cache).

`run_cross_model_figures(RUN_DIR)` (CLI `vlgap cross-model-figures RUN_DIR`) writes
RUN_DIR/cross_model/figures.json and the report sections 80_cross_model (Figs 7, 11, 12) and, with
`encoder_matrix=True`, 81_cross_encoder_matrix (Fig 10); `vlgap report RUN_DIR` includes them. The
same two sections run in `vlgap demo --preset dr-full`.
"""
from __future__ import annotations

import html
import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from vlgap.errors import VlgapError
from vlgap.formatting import interval, number
from vlgap.io_utils import atomic_write_json
from vlgap.probe.dr_full import section
from vlgap.probe.report import Num, Raw, fmt_ci, html_table, save_figure, write_section

NFChoice = "int | dict[str, int] | str | None"


# ------------------------------------------------------------------------------------------------
# per-model n_f
# ------------------------------------------------------------------------------------------------

def _finite(v: Any) -> bool:
    try:
        return v is not None and bool(np.isfinite(float(v)))
    except (TypeError, ValueError):
        return False


def _check_rows(rows: Sequence[dict]) -> list[dict]:
    rows = list(rows)
    if not rows:
        raise VlgapError("the sweep has no rows: run `vlgap sweep` (or `vlgap demo`) first")
    need = ("vision", "text", "n_f", "n_c", "score")
    for i, r in enumerate(rows):
        missing = [k for k in need if k not in r]
        if missing:
            raise VlgapError(f"sweep row {i} lacks {', '.join(missing)}; rows need {', '.join(need)} "
                             "(a sweep.json written by `vlgap sweep`)")
    return rows


def n_f_table(rows: Sequence[dict]) -> dict[str, dict[str, Any]]:
    """Per vision encoder: its mean score at each swept n_f (over the (text, n_c) cells present at
    every n_f of that encoder, finite scores only) and the n_f where that mean is largest (ties: the
    smaller n_f, the cheaper one)."""
    rows = _check_rows(rows)
    out: dict[str, dict[str, Any]] = {}
    for v in dict.fromkeys(r["vision"] for r in rows):
        sub = [r for r in rows if r["vision"] == v and _finite(r["score"])]
        n_fs = sorted({int(r["n_f"]) for r in rows if r["vision"] == v})
        cells_at = {nf: {(r["text"], int(r["n_c"])) for r in sub if int(r["n_f"]) == nf} for nf in n_fs}
        # an n_f whose every cell is n/a has no mean; the others are compared on the cells they share
        present = [c for c in cells_at.values() if c]
        shared = set.intersection(*present) if present else set()
        means: dict[int, float] = {}
        for nf in n_fs:
            vals = [float(r["score"]) for r in sub if int(r["n_f"]) == nf and (r["text"], int(r["n_c"])) in shared]
            means[nf] = float(np.mean(vals)) if vals else float("nan")
        ok = {nf: m for nf, m in means.items() if np.isfinite(m)}
        if not ok:
            raise VlgapError(f"vision encoder {v}: no finite score at any n_f in the sweep (every cell n/a); "
                             "give its n_f explicitly or leave it out")
        best = max(ok.items(), key=lambda kv: (kv[1], -kv[0]))[0]
        out[v] = {"n_f": int(best), "mean_score": means, "n_cells": len(shared), "swept": n_fs}
    return out


def best_n_f(rows: Sequence[dict]) -> dict[str, int]:
    """The n_f at which each vision encoder aligns best in the sweep (see `n_f_table`)."""
    return {v: t["n_f"] for v, t in n_f_table(rows).items()}


def choose_n_f(rows: Sequence[dict], n_f: NFChoice = None) -> tuple[dict[str, int], str]:
    """Per vision encoder n_f and how it was chosen. n_f: None or "best" (the sweep's best n_f per
    encoder), an int (the same for all), or {vision: n_f} (encoders not named get their best). Every
    value must be one the sweep ran for that encoder."""
    rows = _check_rows(rows)
    swept = {v: sorted({int(r["n_f"]) for r in rows if r["vision"] == v}) for v in dict.fromkeys(r["vision"] for r in rows)}
    if n_f is None or n_f == "best":
        return best_n_f(rows), "best per encoder (largest mean score over the sweep's texts and n_c)"
    if isinstance(n_f, dict):
        unknown = sorted(set(n_f) - set(swept))
        if unknown:
            raise VlgapError(f"n_f given for {', '.join(unknown)}, not a vision encoder of the sweep; "
                             f"its vision encoders: {', '.join(swept)}")
        best = best_n_f(rows) if set(swept) - set(n_f) else {}
        chosen = {v: int(n_f[v]) if v in n_f else best[v] for v in swept}
        how = "given per encoder" + (f" (best for {', '.join(v for v in swept if v not in n_f)})"
                                     if set(swept) - set(n_f) else "")
    else:
        try:
            value = int(n_f)
        except (TypeError, ValueError):
            raise VlgapError(f"n_f {n_f!r}: give 'best', one integer, or name=n_f per vision encoder") from None
        chosen, how = {v: value for v in swept}, f"n_f = {value} for every encoder"
    bad = [f"{v}={nf} (swept: {', '.join(map(str, swept[v]))})" for v, nf in chosen.items() if nf not in swept[v]]
    if bad:
        raise VlgapError(f"n_f not in the sweep: {'; '.join(bad)}")
    return chosen, how


def parse_n_f(text: str | None) -> NFChoice:
    """CLI value of --n-f: "best" (or empty), "8", or "mobilenet_v2=4,efficientnet_lite0=8"."""
    if text is None or text.strip() in ("", "best"):
        return None
    text = text.strip()
    if "=" not in text:
        try:
            return int(text)
        except ValueError:
            raise VlgapError(f"--n-f {text!r}: give best, one integer (e.g. 8) or name=n_f pairs "
                             "(e.g. mobilenet_v2=4,efficientnet_lite0=8)") from None
    out: dict[str, int] = {}
    for part in (p.strip() for p in text.split(",") if p.strip()):
        name, _, value = part.partition("=")
        try:
            out[name.strip()] = int(value)
        except ValueError:
            raise VlgapError(f"--n-f {part!r}: n_f must be an integer, e.g. {name.strip()}=8") from None
        if not name.strip() or out[name.strip()] < 1:
            raise VlgapError(f"--n-f {part!r}: give name=n_f with a positive n_f, e.g. mobilenet_v2=8")
    return out


def _row(rows: Sequence[dict], v: str, t: str, nf: int, nc: int) -> dict | None:
    return next((r for r in rows if r["vision"] == v and r["text"] == t and int(r["n_f"]) == nf
                 and int(r["n_c"]) == nc), None)


def _ci(r: dict) -> list[float] | None:
    lo, hi = r.get("ci_lo"), r.get("ci_hi")
    return [float(lo), float(hi)] if _finite(lo) and _finite(hi) else None


# ------------------------------------------------------------------------------------------------
# Fig 7: 1 vs n_c captions across models
# ------------------------------------------------------------------------------------------------

def caption_gain_fit(rows: Sequence[dict], *, n_c_low: int = 1, n_c_high: int | None = None, n_f: NFChoice = None,
                     text: str | Sequence[str] | None = None, n_bootstrap: int = 2000, confidence: float = 0.95,
                     seed: int = 0) -> dict[str, Any]:
    """Fig 7: one point per (vision, text) pair (only the text encoders named in `text`, if given),
    x = score at n_c_low, y = score at n_c_high (default: the largest n_c swept), both at the vision
    encoder's n_f; the line y = slope x + intercept with bootstrap (over the points) and t intervals,
    r, and the mean ratio y / x. Pairs without both cells, or with an n/a cell, are left out and named
    in `notes`."""
    from vlgap.stats.line_fit import fit_line

    rows = _check_rows(rows)
    texts = [text] if isinstance(text, str) else (list(text) if text is not None else None)
    if texts is not None:
        unknown = [t for t in texts if t not in {r["text"] for r in rows}]
        if unknown:
            raise VlgapError(f"text encoder {', '.join(unknown)} is not in the sweep; its text encoders: "
                             f"{', '.join(dict.fromkeys(r['text'] for r in rows))}")
    n_fs, how = choose_n_f(rows, n_f)
    high = int(n_c_high) if n_c_high is not None else max(int(r["n_c"]) for r in rows)
    swept_nc = sorted({int(r["n_c"]) for r in rows})
    for name, value in (("n_c_low", n_c_low), ("n_c_high", high)):
        if value not in swept_nc:
            raise VlgapError(f"{name}={value} is not an n_c of the sweep; swept: {', '.join(map(str, swept_nc))}")
    if high == n_c_low:
        raise VlgapError(f"n_c_low and n_c_high are both {high}: give two different caption counts")
    points, notes = [], []
    pairs = dict.fromkeys((r["vision"], r["text"]) for r in rows if texts is None or r["text"] in texts)
    for v, t in pairs:
        nf = n_fs[v]
        lo_row, hi_row = _row(rows, v, t, nf, n_c_low), _row(rows, v, t, nf, high)
        if lo_row is None or hi_row is None:
            notes.append(f"{v} × {t}: no cell at n_f={nf} with n_c={n_c_low if lo_row is None else high}; left out")
            continue
        if not (_finite(lo_row["score"]) and _finite(hi_row["score"])):
            notes.append(f"{v} × {t}: n/a cell at n_f={nf} ({lo_row.get('na_reason') or hi_row.get('na_reason')}); "
                         "left out")
            continue
        points.append({"vision": v, "text": t, "n_f": nf, "x": float(lo_row["score"]), "x_ci": _ci(lo_row),
                       "y": float(hi_row["score"]), "y_ci": _ci(hi_row),
                       "x_layers": [lo_row.get("x_layer"), lo_row.get("y_layer")],
                       "y_layers": [hi_row.get("x_layer"), hi_row.get("y_layer")],
                       "chance": lo_row.get("chance")})
    if len(points) < 3:
        raise VlgapError(f"Fig 7 needs at least 3 (vision, text) pairs with both cells, got {len(points)}"
                         + (f" ({'; '.join(notes)})" if notes else "") + ": sweep more encoders")
    fit = fit_line([p["x"] for p in points], [p["y"] for p in points], n_bootstrap=n_bootstrap,
                   confidence=confidence, seed=seed)
    n_vision = len({p["vision"] for p in points})
    n_text = len({p["text"] for p in points})
    if n_text > 1:
        notes.append(f"the {len(points)} points are {n_vision} vision × {n_text} text pairs: they share encoders, so "
                     "they are not independent, and the bootstrap over points treats them as if they were")
    return {"n_c_low": int(n_c_low), "n_c_high": high, "n_f": n_fs, "n_f_choice": how, "n_points": len(points),
            "n_vision": n_vision, "n_text": n_text, "points": points, "fit": fit.to_dict(),
            "notes": notes + fit.notes, "paper": {"slope": 1.6, "intercept": -0.018, "r": 0.998,
                                                  "n_c_high": 10, "what": "vision models x Gemma 2-9b-it, VATEX"}}


def caption_gain_figure(res: dict[str, Any]):
    """Fig 7: points with their intervals (both axes), the fitted line with its bootstrap band, y = x."""
    from vlgap.probe.figures import pyplot

    plt = pyplot()
    fit, pts = res["fit"], res["points"]
    fig, ax = plt.subplots(figsize=(6, 5))
    texts = list(dict.fromkeys(p["text"] for p in pts))
    for p in pts:
        color = f"C{texts.index(p['text'])}"
        xerr = [[p["x"] - p["x_ci"][0]], [p["x_ci"][1] - p["x"]]] if p["x_ci"] else None
        yerr = [[p["y"] - p["y_ci"][0]], [p["y_ci"][1] - p["y"]]] if p["y_ci"] else None
        # a bootstrap interval of a best-of-pairs maximum need not contain the estimate: clip for drawing
        if xerr:
            xerr = [[max(0.0, e) for e in side] for side in xerr]
        if yerr:
            yerr = [[max(0.0, e) for e in side] for side in yerr]
        ax.errorbar([p["x"]], [p["y"]], xerr=xerr, yerr=yerr, fmt="o", color=color, capsize=2, ms=5)
        ax.annotate(p["vision"], (p["x"], p["y"]), fontsize=7, xytext=(4, -8), textcoords="offset points")
    for i, t in enumerate(texts):
        ax.plot([], [], "o", color=f"C{i}", label=f"text: {t}")
    bx = np.asarray(fit["band_x"])
    ax.fill_between(bx, fit["band_lo"], fit["band_hi"], color="grey", alpha=0.25,
                    label=f"{fit['confidence']:.0%} bootstrap band (over the {fit['n']} points)")
    ax.plot(bx, fit["slope"] * bx + fit["intercept"], "k-",
            label=f"y = {fit['slope']:.2f} x {'-' if fit['intercept'] < 0 else '+'} {abs(fit['intercept']):.3f}, "
                  f"r = {fit['r']:.3f}")
    lim = [min(bx.min(), min(p["y"] for p in pts)) * 0.95, max(bx.max(), max(p["y"] for p in pts)) * 1.05]
    ax.plot(lim, lim, ":", color="grey", lw=1, label="y = x")
    ax.set_xlabel(f"alignment with n_c = {res['n_c_low']} caption(s)")
    ax.set_ylabel(f"alignment with n_c = {res['n_c_high']} captions")
    ax.set_title(f"1 vs {res['n_c_high']} captions across models (N = {res['n_points']} pairs)", fontsize=10)
    ax.legend(fontsize=7, loc="upper left")
    return fig


# ------------------------------------------------------------------------------------------------
# Figs 11 / 12: vision x text matrix of best scores with layer indices
# ------------------------------------------------------------------------------------------------

@dataclass
class ScoreMatrix:
    vision: list[str]
    text: list[str]
    n_c: int
    n_f: dict[str, int]
    scores: list[list[float]]           # [V][T]; nan where the cell is missing or n/a
    ci_lo: list[list[float]]
    ci_hi: list[list[float]]
    x_layer: list[list[int]]            # vision layer index of the best pair (-1 where missing)
    y_layer: list[list[int]]            # text layer index
    x_layer_name: list[list[str]]
    y_layer_name: list[list[str]]
    chance: float | None
    best_text: dict[str, str]           # per vision encoder: its best text encoder (row argmax)
    best_vision: dict[str, str]         # per text encoder: its best vision encoder (column argmax)
    best: dict[str, Any]                # the matrix argmax
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def best_score_matrix(rows: Sequence[dict], *, n_c: int = 1, n_f: NFChoice = None) -> ScoreMatrix:
    """The vision x text matrix of the sweep's best-layer-pair scores at n_c captions, each vision
    encoder at its n_f (`choose_n_f`), with the best layer indices and intervals of every cell."""
    rows = _check_rows(rows)
    swept_nc = sorted({int(r["n_c"]) for r in rows})
    if int(n_c) not in swept_nc:
        raise VlgapError(f"n_c={n_c} is not an n_c of the sweep; swept: {', '.join(map(str, swept_nc))}")
    n_fs, _ = choose_n_f(rows, n_f)
    vision = list(dict.fromkeys(r["vision"] for r in rows))
    text = list(dict.fromkeys(r["text"] for r in rows))
    nan = float("nan")
    shape = (len(vision), len(text))
    sc, lo, hi = np.full(shape, nan), np.full(shape, nan), np.full(shape, nan)
    xl, yl = np.full(shape, -1, dtype=int), np.full(shape, -1, dtype=int)
    xn = [["" for _ in text] for _ in vision]
    yn = [["" for _ in text] for _ in vision]
    notes, chances = [], set()
    for i, v in enumerate(vision):
        for j, t in enumerate(text):
            r = _row(rows, v, t, n_fs[v], int(n_c))
            if r is None:
                notes.append(f"{v} × {t}: no cell at n_f={n_fs[v]}, n_c={n_c}")
                continue
            if not _finite(r["score"]):
                notes.append(f"{v} × {t}: n/a ({r.get('na_reason') or 'no score'})")
                continue
            sc[i, j] = float(r["score"])
            ci = _ci(r)
            if ci:
                lo[i, j], hi[i, j] = ci
            xl[i, j], yl[i, j] = int(r.get("x_layer", -1)), int(r.get("y_layer", -1))
            xn[i][j], yn[i][j] = str(r.get("x_layer_name") or xl[i, j]), str(r.get("y_layer_name") or yl[i, j])
            if _finite(r.get("chance")):
                chances.add(round(float(r["chance"]), 12))
    if len(chances) > 1:
        notes.append(f"cells differ in chance level ({', '.join(map(str, sorted(chances)))}): different N or k")
    best_text = {v: text[int(np.nanargmax(sc[i]))] for i, v in enumerate(vision) if np.isfinite(sc[i]).any()}
    best_vision = {t: vision[int(np.nanargmax(sc[:, j]))] for j, t in enumerate(text) if np.isfinite(sc[:, j]).any()}
    best: dict[str, Any] = {}
    if np.isfinite(sc).any():
        i, j = np.unravel_index(int(np.nanargmax(sc)), sc.shape)
        best = {"vision": vision[i], "text": text[j], "score": float(sc[i, j]), "x_layer": int(xl[i, j]),
                "y_layer": int(yl[i, j]), "n_f": n_fs[vision[i]]}
    return ScoreMatrix(vision, text, int(n_c), n_fs, sc.tolist(), lo.tolist(), hi.tolist(), xl.tolist(), yl.tolist(),
                       xn, yn, min(chances) if chances else None, best_text, best_vision, best, notes)


def score_matrix_figure(mat: ScoreMatrix, title: str = ""):
    """Heatmap of the matrix, each cell "score (vision layer, text layer)"; each vision encoder's best
    text encoder framed."""
    from matplotlib.patches import Rectangle

    from vlgap.probe.figures import pyplot

    plt = pyplot()
    sc = np.asarray(mat.scores, dtype=float)
    v, t = sc.shape
    fig, ax = plt.subplots(figsize=(max(4.5, 1.6 * t + 2.5), max(3.0, 0.7 * v + 1.8)))
    cmap = plt.get_cmap("viridis").with_extremes(bad="#dddddd")
    finite = sc[np.isfinite(sc)]
    vmin = float(finite.min()) if finite.size else 0.0
    vmax = float(finite.max()) if finite.size else 1.0
    if mat.chance is not None:
        vmin = min(vmin, mat.chance)
    im = ax.imshow(np.ma.masked_invalid(sc), cmap=cmap, vmin=vmin, vmax=max(vmax, vmin + 1e-6), aspect="auto")
    for i in range(v):
        for j in range(t):
            if not np.isfinite(sc[i, j]):
                ax.text(j, i, "n/a", ha="center", va="center", fontsize=8)
                continue
            bright = (sc[i, j] - vmin) / max(vmax - vmin, 1e-12) > 0.6
            ax.text(j, i, f"{sc[i, j]:.3f}\n({mat.x_layer[i][j]}, {mat.y_layer[i][j]})", ha="center", va="center",
                    fontsize=8, color="k" if bright else "w")
    for i, name in enumerate(mat.vision):
        if name in mat.best_text:
            j = mat.text.index(mat.best_text[name])
            ax.add_patch(Rectangle((j - 0.46, i - 0.46), 0.92, 0.92, fill=False, ec="red", lw=2))
    ax.set_xticks(range(t), mat.text, rotation=30, ha="right", fontsize=8)
    ax.set_yticks(range(v), [f"{n} (n_f={mat.n_f[n]})" for n in mat.vision], fontsize=8)
    cb = fig.colorbar(im, ax=ax)
    cb.set_label("best-layer-pair alignment" + (f" (chance {mat.chance:.3f})" if mat.chance is not None else ""))
    ax.set_title(title or f"vision × text, n_c = {mat.n_c}: score (vision layer, text layer); red: row best",
                 fontsize=9)
    return fig


# ------------------------------------------------------------------------------------------------
# orchestration: the run folder, the report sections
# ------------------------------------------------------------------------------------------------

def read_sweep(run_dir: str | Path) -> dict[str, Any]:
    """RUN_DIR/sweep.json, refused when it was changed after the sweep sealed it."""
    from vlgap.reuse import check_artefact

    run = Path(run_dir)
    path = run / "sweep.json"
    if not path.is_file():
        raise VlgapError(f"{run} holds no sweep.json: run `vlgap sweep ... --out {run}` (or `vlgap demo`) first")
    verdict = check_artefact(path)
    if verdict.status == "corrupt":
        raise VlgapError(f"{verdict.message()}; rerun `vlgap sweep ... --out {run}` to rewrite it")
    return json.loads(path.read_text())


def cross_model_figures(rows: Sequence[dict], *, n_f: NFChoice = None, text: str | Sequence[str] | None = None,
                        n_c_low: int = 1, n_c_high: int | None = None, n_bootstrap: int = 2000,
                        confidence: float = 0.95, seed: int = 0) -> dict[str, Any]:
    """Figs 7, 11 and 12 from sweep rows (no features needed): the per-encoder n_f table, the caption
    gain fit, and the vision x text matrices at n_c_low and n_c_high."""
    rows = _check_rows(rows)
    n_fs, how = choose_n_f(rows, n_f)
    high = int(n_c_high) if n_c_high is not None else max(int(r["n_c"]) for r in rows)
    swept_nc = sorted({int(r["n_c"]) for r in rows})
    for name, value in (("n_c_low", n_c_low), ("n_c_high", high)):  # a bad request fails here, not as "no line"
        if value not in swept_nc:
            raise VlgapError(f"{name}={value} is not an n_c of the sweep; swept: {', '.join(map(str, swept_nc))}")
    texts = [text] if isinstance(text, str) else list(text or [])
    unknown = [t for t in texts if t not in {r["text"] for r in rows}]
    if unknown:
        raise VlgapError(f"text encoder {', '.join(unknown)} is not in the sweep; its text encoders: "
                         f"{', '.join(dict.fromkeys(r['text'] for r in rows))}")
    out: dict[str, Any] = {"n_f": n_fs, "n_f_choice": how, "n_f_table": n_f_table(rows), "n_c_low": int(n_c_low),
                           "n_c_high": high}
    try:
        out["caption_gain"] = caption_gain_fit(rows, n_c_low=n_c_low, n_c_high=high, n_f=n_fs, text=text,
                                               n_bootstrap=n_bootstrap, confidence=confidence, seed=seed)
    except VlgapError as err:  # too few pairs (or one n_c): the matrices are still drawn, and why is said
        out["caption_gain"] = {"error": str(err)}
    out["matrices"] = {str(nc): best_score_matrix(rows, n_c=nc, n_f=n_fs).to_dict()
                       for nc in dict.fromkeys([int(n_c_low), high])}
    random = sorted({r["vision"] for r in rows if r.get("vision_weights")} | {r["text"] for r in rows if r.get("text_weights")})
    if random:
        out["random_weights"] = random
    return out


def run_cross_model_figures(run_dir: str | Path, *, n_f: NFChoice = None, text: str | Sequence[str] | None = None,
                            n_c_low: int = 1, n_c_high: int | None = None, n_bootstrap: int = 2000,
                            confidence: float = 0.95, seed: int = 0, encoder_matrix: bool = False,
                            matrix_n_c: int = 1, matrix_bootstrap: int = 200, features=None,
                            out: str | Path | None = None) -> dict[str, Any]:
    """The cross-model figures of a sweep's run folder: Figs 7, 11, 12 from sweep.json; with
    `encoder_matrix`, Fig 10 too (every vision encoder at its n_f and the sweep's text encoders on
    `matrix_n_c` captions, features from the cache with the sweep's settings, or `features`). Writes
    out/cross_model/figures.json and the report sections (out defaults to run_dir)."""
    t0 = time.perf_counter()
    sweep = read_sweep(run_dir)
    rows = sweep["rows"]
    res = cross_model_figures(rows, n_f=n_f, text=text, n_c_low=n_c_low, n_c_high=n_c_high, n_bootstrap=n_bootstrap,
                              confidence=confidence, seed=seed)
    out_dir = Path(out) if out is not None else Path(run_dir)
    if encoder_matrix:
        res["encoder_matrix"] = encoder_matrix_from_sweep(sweep, n_f=res["n_f"], n_c=matrix_n_c,
                                                          n_bootstrap=matrix_bootstrap, seed=seed, features=features,
                                                          out=out_dir)
    res["seconds"] = round(time.perf_counter() - t0, 1)
    write_cross_model_section(res, out_dir)
    return res


def sweep_features(config: dict[str, Any], progress: bool = False):
    """A FeatureSource with the sweep's extraction settings (its cache, pooling, image size...)."""
    from vlgap.features.source import FeatureOptions, FeatureSource

    return FeatureSource(FeatureOptions(cache_dir=config.get("cache_dir"), device=config.get("device", "cpu"),
                                        dtype=config.get("dtype", "float32"), image_size=config.get("image_size"),
                                        text_pooling=config.get("text_pooling"),
                                        temporal_pooling=config.get("temporal_pooling") or "mean",
                                        random_weights=bool(config.get("random_weights")), progress=progress))


def encoder_matrix_from_sweep(sweep: dict[str, Any], *, n_f: dict[str, int], n_c: int = 1, n_bootstrap: int = 200,
                              seed: int = 0, features=None, out: str | Path | None = None) -> dict[str, Any]:
    """Fig 10 for a sweep: vision encoders at their n_f and the sweep's text encoders (n_c captions)
    in one clustered matrix on the sweep's manifest, with its k, metric and preset. The vision x text
    cells are compared with the sweep's own cells (`sweep_agreement`: equal when the items are)."""
    from vlgap.probe.cross_model import run_cross_alignment

    cfg, rows = sweep.get("config") or {}, sweep["rows"]
    if not cfg.get("manifest"):
        raise VlgapError("sweep.json records no manifest: the encoder matrix needs the sweep's data")
    vision = list(dict.fromkeys(r["vision"] for r in rows))
    text = list(dict.fromkeys(r["text"] for r in rows))
    d = run_cross_alignment(cfg["manifest"], vision, n_f=dict(n_f), text=text, n_c=n_c, k=int(cfg.get("k", 10)),
                            metric=cfg.get("metric", "mutual_knn"), preset=cfg.get("preset"), n_bootstrap=n_bootstrap,
                            seed=seed, features=features if features is not None else sweep_features(cfg))
    d["sweep_agreement"] = sweep_agreement(d, rows, n_c)
    if out is not None:
        write_encoder_matrix_section(d, out)
    return d


def sweep_agreement(d: dict[str, Any], rows: Sequence[dict], n_c: int) -> dict[str, Any]:
    """Largest |matrix cell - sweep cell| over the vision x text cells (same encoders, n_f, n_c)."""
    names = d["names"]
    diffs = []
    for v, nf in (d.get("n_f_per_encoder") or {}).items():
        for t in d.get("text") or []:
            r = _row(rows, v, t, nf, n_c)
            if r is not None and _finite(r["score"]):
                diffs.append(abs(d["scores"][names.index(v)][names.index(t)] - float(r["score"])))
    return {"n_cells": len(diffs), "max_abs_difference": max(diffs) if diffs else None}


def write_encoder_matrix_section(d: dict[str, Any], out: str | Path) -> Path:
    from vlgap.probe.cross_model import CrossAlignment, write_cross_section

    res = CrossAlignment(d["names"], np.asarray(d["scores"]), np.asarray(d["ci_lo"], dtype=float),
                         np.asarray(d["ci_hi"], dtype=float), d["layers"], d["order"],
                         None if d["linkage"] is None else np.asarray(d["linkage"]), d["n"], d["k"], d["metric"],
                         d["chance"], d["n_bootstrap"], d["seed"])
    agree = d.get("sweep_agreement") or {}
    lead = ("<p>Dynamic Reflections Fig 10 (app. A.5): video encoders form a cluster aligned with language (with "
            "Gemma2) and one aligned on geometry; here every vision encoder runs at the n_f where it aligns best "
            "in the sweep and the sweep's text encoders are extra rows.")
    if agree.get("n_cells"):
        lead += html.escape(f" Its {agree['n_cells']} vision × text cells repeat the sweep's cells at the same n_f "
                            f"and n_c: largest difference {number(agree['max_abs_difference'], 6)} (0 up to "
                            "rounding when the items are the same).")
    lead += "</p>"
    return write_cross_section(res, d, out, section="81_cross_encoder_matrix", json_name="cross_model/encoder_matrix.json",
                               figure_name="figures/cross_encoder_matrix.png",
                               title="Encoder × encoder alignment, vision at its best n_f, text rows (Fig 10)",
                               lead=lead)


def _pm(ci: list[float] | None) -> str:
    return interval(ci, 3)


def write_cross_model_section(res: dict[str, Any], out: str | Path) -> Path:
    """RUN_DIR/cross_model/figures.json, the figures, and the report section 80_cross_model."""
    out = Path(out)
    atomic_write_json(out / "cross_model" / "figures.json", res)
    figs, parts = [], []
    n_f_rows = []
    for v, t in res["n_f_table"].items():
        means = ", ".join(f"{nf}: {number(m, 3)}" for nf, m in t["mean_score"].items())
        n_f_rows.append([v, Num(str(res["n_f"][v])), Raw(html.escape(means)), t["n_cells"]])
    parts.append("<p>" + html.escape(
        f"Each vision encoder at its own n_f ({res['n_f_choice']}); the sweep's n_f with the encoder's mean score "
        "over the (text, n_c) cells present at every n_f:") + "</p>"
        + html_table(["vision", "n_f used", "mean score by n_f", "cells per mean"], n_f_rows))
    gain = res["caption_gain"]
    parts.append(f"<h3>1 vs {res['n_c_high']} captions across models (Fig 7)</h3>")
    if "error" in gain:
        parts.append(f"<p class='warn'>No line: {html.escape(gain['error'])}</p>")
    else:
        fit = gain["fit"]
        figs.append(save_figure(caption_gain_figure(gain), out, "figures/cross_caption_gain.png"))
        lvl = f"{fit['confidence']:.0%}"
        parts.append("<p>" + html.escape(
            f"The paper: y = 1.6 x − 0.018, r = 0.998, over its vision models against Gemma 2-9b-it at 1 vs 10 "
            f"captions on VATEX (no interval, no model count beside the line). Here: N = {gain['n_points']} "
            f"(vision, text) pairs ({gain['n_vision']} vision × {gain['n_text']} text encoders) at "
            f"n_c = {gain['n_c_low']} vs {gain['n_c_high']}: y = {number(fit['slope'], 3)} x "
            f"{'−' if fit['intercept'] < 0 else '+'} {number(abs(fit['intercept']), 3)}, slope {lvl} CI "
            f"{_pm(fit['slope_ci'])} (bootstrap over the {fit['n']} points, {fit['n_bootstrap']} resamples) and "
            f"{_pm(fit['slope_ci_t'])} (t, {fit['n'] - 2} df); intercept {_pm(fit['intercept_ci'])} (bootstrap), "
            f"{_pm(fit['intercept_ci_t'])} (t); r = {number(fit['r'], 3)} {_pm(fit['r_ci'])}; "
            f"y / x on average {number(fit['mean_ratio'], 2)} {_pm(fit['mean_ratio_ci'])} (the paper: ~1.6).")
            + "</p>")
        if gain["n_points"] < 10:
            parts.append("<p class='warn'>" + html.escape(
                f"N = {gain['n_points']} pairs is thin for a line across models: the bootstrap band is too narrow at "
                "this size, the t interval is the one to read, and the slope here says little beyond these "
                "encoders. The figure is the paper's Fig 7 on a sweep of many encoders (vlgap sweep --vision "
                "a,b,c,... then vlgap cross-model-figures RUN_DIR).") + "</p>")
        for note in gain["notes"]:
            parts.append(f"<p><small>{html.escape(note)}</small></p>")
        parts.append(html_table(
            ["vision", "text", "n_f", f"n_c = {gain['n_c_low']}", f"{lvl} CI", "layers (v, t)",
             f"n_c = {gain['n_c_high']}", f"{lvl} CI", "layers (v, t)", "ratio"],
            [[p["vision"], p["text"], Num(str(p["n_f"])), p["x"], Num(fmt_ci(p["x_ci"])),
              Raw(html.escape(f"{p['x_layers'][0]}, {p['x_layers'][1]}")), p["y"], Num(fmt_ci(p["y_ci"])),
              Raw(html.escape(f"{p['y_layers'][0]}, {p['y_layers'][1]}")), p["y"] / p["x"] if p["x"] else None]
             for p in gain["points"]]))
    mats = res["matrices"]
    parts.append("<h3>Vision × text best scores with layer indices (Figs 11, 12)</h3><p>" + html.escape(
        "Each cell: the best layer pair's score (vision layer index, text layer index) at the vision encoder's "
        "n_f; red frame: each vision encoder's best text encoder. Fig 11 is n_c = 1, Fig 12 the largest n_c. "
        "Intervals in the table below.") + "</p>")
    for nc, m in mats.items():
        mat = ScoreMatrix(**m)
        figs.append(save_figure(score_matrix_figure(mat), out, f"figures/cross_best_scores_c{nc}.png"))
    table_rows = []
    first = next(iter(mats.values()))
    for i, v in enumerate(first["vision"]):
        for j, t in enumerate(first["text"]):
            row: list[Any] = [v, t, Num(str(first["n_f"][v]))]
            for m in mats.values():
                ci = [m["ci_lo"][i][j], m["ci_hi"][i][j]]
                row += [m["scores"][i][j], Num(fmt_ci(ci)), Raw(html.escape(
                    f"{m['x_layer'][i][j]} ({m['x_layer_name'][i][j]}), {m['y_layer'][i][j]} ({m['y_layer_name'][i][j]})"))]
            table_rows.append(row)
    headers = ["vision", "text", "n_f"]
    for nc in mats:
        headers += [f"n_c = {nc}", "95% CI", "layers: vision, text"]
    parts.append(html_table(headers, table_rows))
    for nc, m in mats.items():
        b = m["best"]
        if b:
            parts.append("<p>" + html.escape(
                f"n_c = {nc}: best pair {b['vision']} × {b['text']} {number(b['score'], 3)} at layers "
                f"({b['x_layer']}, {b['y_layer']}), n_f = {b['n_f']}; best text per vision: "
                + ", ".join(f"{v} → {t}" for v, t in m["best_text"].items()) + ".") + "</p>")
        for note in m["notes"]:
            parts.append(f"<p class='warn'>{html.escape(note)}</p>")
    return write_section(out, "80_cross_model", "Cross-model figures: 1 vs n_c captions, vision × text matrices",
                         "".join(parts), figs, random_weights=res.get("random_weights") or None)


# ------------------------------------------------------------------------------------------------
# vlgap demo --preset dr-full
# ------------------------------------------------------------------------------------------------

@section("80_cross_model")
def demo_cross_model_section(cfg, result, progress: bool = True) -> None:
    """Figs 7, 11, 12 from the demo's sweep rows (seconds: no features, no encoders)."""
    res = cross_model_figures(result.rows, n_bootstrap=2000, seed=cfg.seed)
    write_cross_model_section(res, cfg.out)


@section("81_cross_encoder_matrix")
def demo_encoder_matrix_section(cfg, result, progress: bool = True) -> None:
    """Fig 10 on the demo's data: both vision encoders at their best n_f, both text encoders at n_c = 1,
    features from the demo's cache (extracted by the sweep)."""
    sweep = read_sweep(cfg.out)
    n_fs = best_n_f(result.rows)
    encoder_matrix_from_sweep(sweep, n_f=n_fs, n_c=1, n_bootstrap=int(cfg.n_bootstrap), seed=cfg.seed,
                              features=sweep_features(sweep.get("config") or {}, progress=progress), out=cfg.out)
