"""The paper's cross-model figures from a sweep over many encoders (Dynamic Reflections Figs 7, 10, 11,
12): the numbers, read from the sweep's rows (one per vision, text, n_f, n_c with the best layer pair,
its score and interval), each vision encoder at its own n_f: the n_f at which it aligns best in the
sweep (`best_n_f`), one n_f for all, or one given per encoder.

- Fig 7, `caption_gain_fit`: each (vision, text) pair a point, x = its score with n_c_low captions
  (1), y = with n_c_high (the sweep's largest; the paper's 10), and the least-squares line through
  the points with a bootstrap over the points (models) and a t interval (`vlgap.stats.line_fit`). The
  paper reports y = 1.6 x - 0.018, r = 0.998 across its vision models.
- Figs 11 and 12, `best_score_matrix`: the vision x text matrix of best scores at n_c = 1 (Fig 11)
  and at n_c_high (Fig 12), each cell with its best layer indices and interval.
- Fig 10 needs features, not rows: `vlgap.probe.cross_model_report.encoder_matrix_from_sweep`.

The figures, report sections, `run_cross_model_figures(RUN_DIR)` (CLI `vlgap cross-model-figures`)
and the dr-full sections live in `vlgap.probe.cross_model_report`.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from vlgap.errors import VlgapError

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


# ------------------------------------------------------------------------------------------------
# the run folder's rows, all figures' numbers
# ------------------------------------------------------------------------------------------------

def read_sweep(run_dir: str | Path) -> dict[str, Any]:
    """RUN_DIR/sweep.json, refused when it was changed after the sweep sealed it, and checked field by
    field (vlgap.runs.schemas) whether sealed or not."""
    from vlgap.runs.schemas import SWEEP, read_run_json

    run = Path(run_dir)
    path = run / "sweep.json"
    if not path.is_file():
        raise VlgapError(f"{run} holds no sweep.json: run `vlgap sweep ... --out {run}` (or `vlgap demo`) first")
    return read_run_json(path, SWEEP, fix=f"rerun `vlgap sweep ... --out {run}` to rewrite it")


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


