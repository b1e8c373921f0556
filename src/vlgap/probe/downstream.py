"""Does alignment predict downstream performance? Correlations with intervals, held-out prediction and a
correction for testing several tasks (the controls Dynamic Reflections sec. 7 lacked: 9 models, one
family dominating, no held-out prediction, six uncorrected tests).

For every task, over the models that have both a downstream score and an alignment score:
- Pearson r with a Fisher-z interval (tanh(atanh r +- z / sqrt(n - 3))) and its t-test p-value;
- Spearman rho with a percentile bootstrap interval over models and a permutation p-value (exact
  enumeration of all n! orders for n <= 8);
- leave-one-out prediction: a straight line fitted on the other n - 1 models predicts the held-out
  one; RMSE and MAE of those errors against the same procedure with the mean of the other models
  (Q^2 = 1 - PRESS / PRESS_mean: above 0 means alignment helps), and leave-one-family-out when
  models carry a family (the paper's 4DS models would otherwise vouch for each other);
- Holm's step-down adjustment of the Pearson and of the Spearman p-values across tasks.
Error metrics (lower is better) give negative correlations; nothing is flipped.
"""
from __future__ import annotations

import html
import itertools
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from vlgap.caveats import caveat, reports_caveats
from vlgap.errors import VlgapError
from vlgap.keywords import renamed_keywords
from vlgap.io_utils import atomic_write_json


# ==================================================================================================
# pure statistics
# ==================================================================================================

def holm(p_values: Sequence[float]) -> np.ndarray:
    """Holm (1979) step-down adjusted p-values, in the input order: with p_(1) <= ... <= p_(m),
    adj_(i) = max_{j <= i} min(1, (m - j + 1) p_(j)). NaN entries stay NaN and do not count in m."""
    p = np.asarray(p_values, dtype=float)
    if p.ndim != 1:
        raise VlgapError(f"p-values must be one value per test, got shape {p.shape}")
    ok = np.isfinite(p)
    if np.any((p[ok] < 0) | (p[ok] > 1)):
        raise VlgapError(f"p-values must lie in [0, 1], got {p[ok][(p[ok] < 0) | (p[ok] > 1)][:5].tolist()}")
    out = np.full(p.shape, np.nan)
    idx = np.flatnonzero(ok)
    m = idx.size
    if m == 0:
        return out
    order = idx[np.argsort(p[idx], kind="stable")]
    scaled = np.minimum(1.0, (m - np.arange(m)) * p[order])
    out[order] = np.maximum.accumulate(scaled)
    return out


def _check_xy(x, y) -> tuple[np.ndarray, np.ndarray]:
    from vlgap.arguments import as_numbers

    x = as_numbers(x, "x", what="a 1-D array of numbers (one per model)", min_items=0)
    y = as_numbers(y, "y", what="a 1-D array of numbers (one per model)", min_items=0)
    if x.ndim != 1 or x.shape != y.shape:
        raise VlgapError(f"x and y must be 1-D arrays of the same length, got {x.shape} and {y.shape}")
    bad = np.flatnonzero(~(np.isfinite(x) & np.isfinite(y)))
    if bad.size:
        raise VlgapError(f"non-finite values at positions {bad[:5].tolist()}")
    return x, y


def pearson_fisher(x, y, confidence: float = 0.95) -> dict[str, Any]:
    """Pearson r, its Fisher-z interval (needs n >= 4, else "ci_reason") and the two-sided t-test p-value."""
    from scipy import stats

    from vlgap.stats.resampling import too_few_items_reason

    x, y = _check_xy(x, y)
    n = x.size
    if n < 3 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return {"r": float("nan"), "ci": None, "p": float("nan"), "n": int(n)}
    res = stats.pearsonr(x, y)
    r = float(np.clip(res.statistic, -1.0, 1.0))
    ci, ci_reason = None, too_few_items_reason(n, 4) + " (Fisher z)"
    if n >= 4:
        ci_reason = None
        zc = float(stats.norm.ppf(0.5 + confidence / 2))
        z = math.atanh(min(max(r, -1 + 1e-15), 1 - 1e-15))
        se = 1.0 / math.sqrt(n - 3)
        ci = [math.tanh(z - zc * se), math.tanh(z + zc * se)]
    return {"r": r, "ci": ci, "p": float(res.pvalue), "n": int(n), "ci_reason": ci_reason}


def _rank_rows(a: np.ndarray) -> np.ndarray:
    from scipy.stats import rankdata

    return rankdata(a, axis=-1)


def _row_corr(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a = a - a.mean(axis=-1, keepdims=True)
    b = b - b.mean(axis=-1, keepdims=True)
    den = np.sqrt((a * a).sum(axis=-1) * (b * b).sum(axis=-1))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, (a * b).sum(axis=-1) / den, np.nan)


@renamed_keywords(n_resamples="n_bootstrap")
def spearman_bootstrap(x, y, *, n_bootstrap: int = 2000, confidence: float = 0.95, seed: int = 0,
                       n_permutations: int = 20000) -> dict[str, Any]:
    """Spearman rho (average ranks for ties), a percentile bootstrap interval over items (resamples
    with a constant side are dropped and counted) and a two-sided permutation p-value (all n! orders
    when n <= 8, else `n_permutations` random ones, p = (1 + hits) / (1 + B)).
    The interval follows vlgap.stats' small-n rule: below MIN_ITEMS_FOR_INTERVAL items, or when
    degenerate, "ci" is None and "ci_reason" says why; "note" is one line when interval and p disagree."""
    from vlgap.stats.resampling import (
        MIN_ITEMS_FOR_INTERVAL,
        disagreement_note,
        interval_reason,
        percentile_interval,
        too_few_items_reason,
    )

    x, y = _check_xy(x, y)
    n = x.size
    rx, ry = _rank_rows(x), _rank_rows(y)
    rho = float(_row_corr(rx, ry))
    out: dict[str, Any] = {"rho": rho, "ci": None, "p": float("nan"), "n": int(n), "n_resamples": n_bootstrap,
                           "degenerate_resamples": 0, "p_method": None, "ci_reason": None, "note": None}
    if n < 3 or not np.isfinite(rho):
        return out
    rng = np.random.default_rng([0x5B, int(seed)])
    idx = rng.integers(0, n, size=(n_bootstrap, n))  # drawn either way: the permutation stream stays the same
    if n < MIN_ITEMS_FOR_INTERVAL:
        out["ci_reason"] = too_few_items_reason(n)
    else:
        boot = _row_corr(_rank_rows(x[idx]), _rank_rows(y[idx]))
        out["degenerate_resamples"] = int(np.count_nonzero(~np.isfinite(boot)))
        lo, hi = percentile_interval(boot, confidence)
        out["ci_reason"] = interval_reason(lo, hi)
        out["ci"] = None if out["ci_reason"] else [lo, hi]
    tol = 1e-12
    if n <= 8:
        perms = np.array(list(itertools.permutations(range(n))))
        null = _row_corr(rx[None, :], ry[perms])
        out["p"] = float(np.mean(np.abs(null) >= abs(rho) - tol))
        out["p_method"] = f"exact permutation ({len(perms)} orders)"
    else:
        perms = np.argsort(rng.random((n_permutations, n)), axis=1)
        null = _row_corr(rx[None, :], ry[perms])
        out["p"] = float((1 + np.count_nonzero(np.abs(null) >= abs(rho) - tol)) / (1 + n_permutations))
        out["p_method"] = f"Monte-Carlo permutation ({n_permutations})"
    out["note"] = disagreement_note(out["ci"], out["p"], 1.0 - confidence,
                                    "the interval is a bootstrap over items and the p-value an exact permutation "
                                    "test; the verdict follows the p-value")
    return out


def _line(x: np.ndarray, y: np.ndarray) -> tuple[float, float] | None:
    if x.size < 2 or np.ptp(x) == 0:
        return None
    dx = x - x.mean()
    slope = float((dx * (y - y.mean())).sum() / (dx * dx).sum())
    return slope, float(y.mean() - slope * x.mean())


def loo_linear(x, y, groups: Sequence | None = None) -> dict[str, Any]:
    """Held-out prediction of y from x with a straight line (least squares).

    Leave-one-out (groups=None) or leave-one-group-out: each item (group) is predicted by the line fitted
    on all the others. Returns predictions, errors (y - prediction), RMSE, MAE, the same for the
    mean-of-the-others baseline, and Q^2 = 1 - PRESS / PRESS_baseline. Items whose training set has
    fewer than two distinct x values get no prediction (NaN)."""
    x, y = _check_xy(x, y)
    n = x.size
    labels = np.arange(n) if groups is None else np.asarray(groups)
    if labels.shape[0] != n:
        raise VlgapError(f"groups must give one label per item ({n}), got {labels.shape[0]}")
    pred = np.full(n, np.nan)
    base = np.full(n, np.nan)
    for g in np.unique(labels):
        test = labels == g
        fit = _line(x[~test], y[~test])
        if fit is not None:
            pred[test] = fit[0] * x[test] + fit[1]
        if np.any(~test):
            base[test] = y[~test].mean()
    err, err0 = y - pred, y - base
    ok = np.isfinite(err) & np.isfinite(err0)
    press, press0 = float(np.sum(err[ok] ** 2)), float(np.sum(err0[ok] ** 2))
    return {"predictions": pred.tolist(), "errors": err.tolist(), "n_predicted": int(ok.sum()),
            "rmse": float(np.sqrt(press / ok.sum())) if ok.any() else float("nan"),
            "mae": float(np.mean(np.abs(err[ok]))) if ok.any() else float("nan"),
            "baseline_rmse": float(np.sqrt(press0 / ok.sum())) if ok.any() else float("nan"),
            "baseline_mae": float(np.mean(np.abs(err0[ok]))) if ok.any() else float("nan"),
            "q2": float(1 - press / press0) if ok.any() and press0 > 0 else float("nan"),
            "scheme": "leave-one-out" if groups is None else "leave-one-group-out"}


# ==================================================================================================
# inputs
# ==================================================================================================

def _read_csv(path: str | Path) -> tuple[list[str], list[dict[str, str]]]:
    from vlgap.csv_files import read_csv  # folder, missing, non-UTF-8, a row with extra fields

    p = Path(path).expanduser()
    cols, rows = read_csv(p, "CSV file", lower=True)
    if not rows:
        raise VlgapError(f"{p} has no data rows")
    return cols, rows


def _number(value: str, where: str) -> float:
    try:
        v = float(value)
    except ValueError:
        raise VlgapError(f"{where}: {value!r} is not a number") from None
    if not math.isfinite(v):
        raise VlgapError(f"{where}: {value!r} is not a finite number")
    return v


def read_downstream_scores(path: str | Path) -> list[dict[str, Any]]:
    """Long CSV: columns model, task, score (optional family). One row per (model, task)."""
    cols, rows = _read_csv(path)
    missing = [c for c in ("model", "task", "score") if c not in cols]
    if missing:
        raise VlgapError(f"{path}: missing columns {missing}; expected a long table with columns model, task, score "
                         "(optional family), one row per model and task")
    out, seen = [], set()
    for i, r in enumerate(rows, 2):
        key = (r["model"], r["task"])
        if not r["model"] or not r["task"]:
            raise VlgapError(f"{path} line {i}: empty model or task")
        if key in seen:
            raise VlgapError(f"{path} line {i}: model {r['model']!r} has a second score for task {r['task']!r}")
        seen.add(key)
        out.append({"model": r["model"], "task": r["task"], "score": _number(r["score"], f"{path} line {i}"),
                    "family": r.get("family") or None})
    return out


def read_alignment_scores(path: str | Path, *, text: str | None = None, n_f: int | None = None,
                          n_c: int | None = None) -> dict[str, dict[str, Any]]:
    """model -> {"alignment", "family"} from a CSV with columns model, alignment (optional family), or
    from a sweep.csv (vision, text, n_f, n_c, score; filter with text / n_f / n_c until each vision
    encoder has one row)."""
    cols, rows = _read_csv(path)
    if "model" in cols and "alignment" in cols:
        key, val = "model", "alignment"
    elif "vision" in cols and "score" in cols:
        key, val = "vision", "score"
        for name, want in (("text", text), ("n_f", n_f), ("n_c", n_c)):
            if want is not None:
                rows = [r for r in rows if r.get(name) == str(want)]
    else:
        raise VlgapError(f"{path}: expected columns model, alignment (optional family), or a sweep.csv with "
                         "vision, text, n_f, n_c, score")
    out: dict[str, dict[str, Any]] = {}
    for i, r in enumerate(rows, 2):
        m = r[key]
        if m in out:
            raise VlgapError(f"{path}: model {m!r} has more than one alignment row; "
                             + ("pass --text, --n-f and --n-c to choose one sweep cell" if key == "vision" else
                                "keep one row per model"))
        out[m] = {"alignment": _number(r[val], f"{path} row {m!r}"), "family": r.get("family") or None}
    if not out:
        raise VlgapError(f"{path}: no alignment rows left (check --text / --n-f / --n-c)")
    return out


# ==================================================================================================
# analysis
# ==================================================================================================

@dataclass
class DownstreamResult:
    tasks: list[dict[str, Any]]
    models: list[str]
    missing_alignment: list[str]
    confidence: float
    n_bootstrap: int
    seed: int
    notes: list[str] = field(default_factory=list)
    #: why a task's correlations are n/a or mean little (vlgap.caveats), one line each
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"tasks": self.tasks, "models": self.models, "missing_alignment": self.missing_alignment,
                "confidence": self.confidence, "n_bootstrap": self.n_bootstrap, "seed": self.seed, "notes": self.notes,
                "warnings": self.warnings}


def undefined_reason(x: np.ndarray, y: np.ndarray, what: str = "model") -> tuple[str, str] | None:
    """Why a correlation of y with x over these points is undefined, (short, sentence), or None: fewer than
    3 points, or a column that does not vary."""
    n = x.size
    if n < 3:
        return f"n={n} < 3", f"{n} {what}{'s' if n != 1 else ''}: a correlation needs at least 3"
    if np.ptp(x) == 0:
        return "constant alignment", f"every one of the {n} {what}s has the same alignment ({x[0]:.4g})"
    if np.ptp(y) == 0:
        return "constant score", f"every one of the {n} {what}s has the same score ({y[0]:.4g})"
    return None


def _undefined_entry(n: int, reason: str, rho: bool = False) -> dict[str, Any]:
    key = "rho" if rho else "r"
    return {key: float("nan"), "ci": None, "p": float("nan"), "n": n, "reason": reason, "ci_reason": reason}


def _given_rows(scores: Any) -> list[dict[str, Any]]:
    """The scores given in memory (a list of dicts or a pandas DataFrame), each row checked to hold model,
    task and score: a VlgapError naming `scores` and the row, not an AttributeError from a column name."""
    from vlgap.stats.paired import score_rows

    need = ("model", "task", "score")
    rows = [dict(r) for r in score_rows(scores, need)]
    for i, r in enumerate(rows, start=1):
        missing = [c for c in need if c not in r]
        if missing:
            raise VlgapError(f"scores: row {i} has no {', '.join(missing)} (its keys: {', '.join(map(str, r))}); "
                             "each row needs model, task, score")
    return rows


@reports_caveats
def downstream(scores: str | Path | list[dict[str, Any]], alignment: str | Path | dict[str, Any], *,
               n_bootstrap: int = 2000, confidence: float = 0.95, seed: int = 0, text: str | None = None,
               n_f: int | None = None, n_c: int | None = None) -> DownstreamResult:
    """Correlate per-model downstream scores with alignment, task by task (see the module docstring).

    scores: the long CSV (model, task, score[, family]), its rows or a pandas DataFrame of them; alignment: a CSV (model, alignment
    [, family] or a sweep.csv) or a dict model -> alignment (or -> {"alignment", "family"})."""
    rows = read_downstream_scores(scores) if isinstance(scores, (str, Path)) else _given_rows(scores)
    if isinstance(alignment, (str, Path)):
        align = read_alignment_scores(alignment, text=text, n_f=n_f, n_c=n_c)
    else:
        align = {m: (v if isinstance(v, dict) else {"alignment": float(v), "family": None}) for m, v in alignment.items()}
    family = {m: a.get("family") for m, a in align.items()}
    for r in rows:
        if r.get("family"):
            family[r["model"]] = r["family"]
    missing = sorted({r["model"] for r in rows} - set(align))
    if not {r["model"] for r in rows} & set(align):
        def _few(ms):
            ms = sorted(ms)
            return ", ".join(map(repr, ms[:8])) + (f" and {len(ms) - 8} more" if len(ms) > 8 else "")
        raise VlgapError(f"no model in common between the scores ({_few({r['model'] for r in rows})}) and the "
                         f"alignment ({_few(align)}): name the same models in both (as the sweep's --vision names "
                         "them)")
    tasks = list(dict.fromkeys(r["task"] for r in rows))
    out = []
    for ti, task in enumerate(tasks):
        sub = [r for r in rows if r["task"] == task and r["model"] in align]
        models = [r["model"] for r in sub]
        x = np.array([align[m]["alignment"] for m in models], dtype=float)
        y = np.array([r["score"] for r in sub], dtype=float)
        entry: dict[str, Any] = {"task": task, "n": len(models), "models": models, "alignment": x.tolist(),
                                 "score": y.tolist()}
        undefined = undefined_reason(x, y)
        why = undefined[0] if undefined else None
        if undefined:
            caveat(f"task {task!r}: {undefined[1]}, so its correlations, p-values and held-out prediction are n/a")
            entry["pearson"], entry["spearman"] = _undefined_entry(len(models), why), _undefined_entry(len(models), why, True)
            entry["loo"] = None
        else:
            entry["pearson"] = pearson_fisher(x, y, confidence)
            entry["spearman"] = spearman_bootstrap(x, y, n_bootstrap=n_bootstrap, confidence=confidence, seed=seed + ti)
            entry["loo"] = loo_linear(x, y)
        fams = [family.get(m) for m in models]
        if not why and all(fams) and len(set(fams)) >= 2:
            entry["lofo"] = loo_linear(x, y, groups=fams)
            entry["families"] = fams
        fit = _line(x, y)
        entry["fit"] = None if fit is None else {"slope": fit[0], "intercept": fit[1]}
        out.append(entry)
    for method, key in (("pearson", "p"), ("spearman", "p")):
        adj = holm([t[method][key] for t in out])
        for t, a in zip(out, adj):
            t[method]["p_holm"] = float(a)
    notes = []
    if any(t["n"] < 10 for t in out):
        notes.append("fewer than 10 models for some tasks: intervals are wide and one model can move r a lot")
    if missing:
        notes.append(f"models without an alignment score were left out: {missing}")
    return DownstreamResult(out, sorted({m for t in out for m in t["models"]}), missing, confidence, n_bootstrap,
                            seed, notes)


def downstream_figure(res: DownstreamResult):
    from vlgap.probe.figures import figure_legend, pyplot

    plt = pyplot()

    t = len(res.tasks)
    cols = min(3, t)
    rows = math.ceil(t / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.6 * cols, 3.8 * rows), squeeze=False)
    for ax, task in zip(axes.ravel(), res.tasks):
        x, y = np.array(task["alignment"]), np.array(task["score"])
        fams = task.get("families") or [None] * len(x)
        for fam in dict.fromkeys(fams):
            sel = np.array([f == fam for f in fams])
            ax.scatter(x[sel], y[sel], s=28, label=fam if fam else None)
        for xi, yi, m in zip(x, y, task["models"]):
            ax.annotate(m, (xi, yi), fontsize=6, xytext=(2, 2), textcoords="offset points")
        if task["fit"]:
            grid = np.linspace(x.min(), x.max(), 20)
            ax.plot(grid, task["fit"]["slope"] * grid + task["fit"]["intercept"], "k--", lw=1)
        pe = task["pearson"]
        ci = pe["ci"]
        ax.set_title(f"{task['task']}: r={pe['r']:.2f}" + (f" [{ci[0]:.2f}, {ci[1]:.2f}]" if ci else "")
                     + f", Holm p={pe.get('p_holm', float('nan')):.3g}, n={task['n']}", fontsize=8)
        ax.set_xlabel("alignment")
        ax.set_ylabel("downstream score")
    for ax in axes.ravel()[t:]:
        ax.set_axis_off()
    fig.tight_layout()
    figure_legend(fig, axes.ravel()[:t], fontsize=6)  # the model families, shared by every panel
    return fig


def write_downstream_section(res: DownstreamResult, run_dir: str | Path) -> Path:
    from vlgap.probe.report import Raw, fmt_ci, html_table, save_figure, warning_paragraphs, write_section

    run_dir = Path(run_dir)
    atomic_write_json(run_dir / "temporal" / "downstream.json", res.to_dict())
    figs = [save_figure(downstream_figure(res), run_dir, "figures/downstream.png")]
    rows = []
    for t in res.tasks:
        pe, sp, lo = t["pearson"], t["spearman"], t.get("loo") or {}
        lofo = t.get("lofo")
        rows.append([t["task"], t["n"], pe["r"], Raw(fmt_ci(pe["ci"], 3, pe.get("ci_reason"))), pe["p"],
                     pe["p_holm"], sp["rho"], Raw(fmt_ci(sp["ci"], 3, sp.get("ci_reason"))), sp["p_holm"],
                     lo.get("rmse", float("nan")), lo.get("baseline_rmse", float("nan")), lo.get("q2", float("nan")),
                     lofo["q2"] if lofo else Raw("-")])
    conf = f"{res.confidence:.0%}"
    body = (f"<p>{len(res.models)} models, {len(res.tasks)} tasks. Pearson r with a Fisher-z {conf} interval; "
            f"Spearman rho with a percentile bootstrap interval over models ({res.n_bootstrap} resamples) and a "
            "permutation p-value; Holm-adjusted p-values across tasks. Held-out prediction: each model predicted "
            "by a line fitted on the others (RMSE), against predicting the others' mean (baseline RMSE); "
            "Q² = 1 - PRESS/PRESS(mean) > 0 means alignment predicts better than the mean. LOFO: leave one "
            "family out.</p>"
            + html_table(["task", "n", "Pearson r", f"{conf} CI", "p", "Holm p", "Spearman rho", f"{conf} CI",
                          "Holm p", "LOO RMSE", "baseline RMSE", "LOO Q²", "LOFO Q²"], rows)
            + "".join(f"<p class='warn'>{html.escape(n)}</p>" for n in res.notes) + warning_paragraphs(res.warnings))
    return write_section(run_dir, "50_downstream", "Alignment and downstream performance", body, figs)


def run_downstream(scores: str | Path, alignment: str | Path, *, out: str | Path | None = None, **kw) -> DownstreamResult:
    t0 = time.perf_counter()
    res = downstream(scores, alignment, **kw)
    res.notes.append(f"computed in {time.perf_counter() - t0:.1f} s")
    if out is not None:
        write_downstream_section(res, out)
    return res
