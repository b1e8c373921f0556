"""Figures, report sections and the run-folder command of the paper's cross-model figures
(Dynamic Reflections Figs 7, 10, 11, 12; the numbers come from `vlgap.probe.cross_figures`).

`run_cross_model_figures(RUN_DIR)` (CLI `vlgap cross-model-figures RUN_DIR`) writes
RUN_DIR/cross_model/figures.json and the report section 80_cross_model (Figs 7, 11, 12) and, with
`encoder_matrix=True`, 81_cross_encoder_matrix (Fig 10: every vision encoder at its n_f and the
sweep's text encoders as rows, features from the sweep's cache); `vlgap report RUN_DIR` includes
them. The same two sections run in `vlgap demo --preset dr-full` (registered here).
"""
from __future__ import annotations

import html
import time
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from vlgap.errors import VlgapError
from vlgap.formatting import interval, number
from vlgap.io_utils import atomic_write_json
from vlgap.probe.cross_figures import (NFChoice, ScoreMatrix, best_n_f, cross_model_figures, read_sweep,
                                       sweep_agreement)
from vlgap.probe.dr_full import section
from vlgap.probe.report import Num, Raw, fmt_ci, html_table, save_figure, write_section


# ------------------------------------------------------------------------------------------------
# figures
# ------------------------------------------------------------------------------------------------

def caption_gain_figure(res: dict[str, Any]):
    """Fig 7: points with their intervals (both axes), the fitted line with its bootstrap band, y = x."""
    from vlgap.probe.figures import legend_outside, pyplot

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
    legend_outside(ax)
    return fig


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
# the run folder, the report sections
# ------------------------------------------------------------------------------------------------

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
                                        dtype=config.get("dtype", "float32"), text_dtype=config.get("text_dtype"),
                                        image_size=config.get("image_size"),
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
                f"N = {gain['n_points']} pairs is thin for a line across models: the bootstrap over so few points is "
                "unreliable, the t interval is the one to read, and the slope here says little beyond these "
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
