"""Test-time scaling law of alignment: score(n_f, n_c) = S_inf - (C_f n_f^-alpha + C_c n_c^-beta).

`fit_scaling` fits the law to a grid of (n_f, n_c, score) cells by bounded multi-start least
squares and reports what the Dynamic Reflections paper leaves out (its Limitation 4): bootstrap
intervals of the parameters, a held-out check (fit on the smaller budgets, predict the cells with
the largest n_f or n_c) and alternative forms compared by AIC, BIC and held-out error.

Fitting: for fixed exponents the law is linear in (S_inf, C_f, C_c), so starting points come from a
log grid of (alpha, beta) with bounded linear least squares at each point (variable projection);
the best few are refined jointly with scipy.optimize.least_squares (trust-region, bounds
C >= 0 and 1e-3 <= exponents <= 10).

Identifiability: every fit says which parameters the grid does not pin down (`identification`:
an estimate at a bound, a bootstrap interval reaching a bound, an exponent whose term is zero or
confounded), and the report and CLI print those as "not identified". With exponents free, the
frame term needs 3 distinct n_f and the caption term 3 distinct n_c (a 3 x 3 grid, 9 cells, 4 residual degrees of freedom, is the smallest grid that
identifies all five parameters); the held-out check needs one more value of each (4 x 4).
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np
from scipy import optimize, special

from vlgap.errors import VlgapError
from vlgap.keywords import renamed_keywords
from vlgap.scaling_batch import fit_batch

PARAM_NAMES = ("S_inf", "C_f", "C_c", "alpha", "beta")
EXPONENT_BOUNDS = (1e-3, 10.0)
#: allowed range of each parameter of the law (the fit is bounded there)
PARAM_BOUNDS = {"S_inf": (-math.inf, math.inf), "C_f": (0.0, math.inf), "C_c": (0.0, math.inf),
                "alpha": EXPONENT_BOUNDS, "beta": EXPONENT_BOUNDS}
#: a value within this fraction of a nonzero bound is "at" it (1e-6 of the score range for a zero bound)
BOUND_RTOL = 0.01
HELDOUT_TOO_FEW = "too few cells below the largest n_f, n_c to hold out"
MIN_DISTINCT = 3
MIN_CELLS = 6
_START_GRID, _N_STARTS = np.geomspace(0.05, 5.0, 12), 4
#: evaluations per bootstrap refit; one that spends them (a flat valley) goes on by scaling_batch.polish
BOOTSTRAP_MAX_NFEV = 200


# ------------------------------------------------------------------------------------------------
# models
# ------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class _Model:
    """A candidate functional form. `basis(exponents, nf, nc)` gives the design matrix of the
    parameters that are linear once the exponents are fixed (empty exponents: fully linear)."""

    name: str
    formula: str
    param_names: tuple[str, ...]
    n_exponents: int
    basis: Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]
    linear_bounds: tuple[tuple[float, ...], tuple[float, ...]]
    to_params: Callable[[np.ndarray, np.ndarray], np.ndarray]  # (linear, exponents) -> params
    #: d prediction / d exponents, [n, n_exponents] (analytic: the bootstrap refits 1000 times)
    exponent_jac: Callable[[np.ndarray, np.ndarray, np.ndarray, np.ndarray], np.ndarray] | None = None

    @property
    def n_params(self) -> int:
        return len(self.param_names)

    def split(self, params: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        lin_n = self.n_params - self.n_exponents
        return params[:lin_n], params[lin_n:]

    def predict(self, params: np.ndarray, nf, nc) -> np.ndarray:
        lin, ex = self.split(np.asarray(params, dtype=float))
        nf, nc = np.broadcast_arrays(np.asarray(nf, dtype=float), np.asarray(nc, dtype=float))
        return (self.basis(ex, nf.ravel(), nc.ravel()) @ lin).reshape(nf.shape)


def _additive_basis(ex, nf, nc):
    return np.column_stack([np.ones_like(nf), -nf ** -ex[0], -nc ** -ex[1]])


def _multiplicative_basis(ex, nf, nc):
    return np.column_stack([np.ones_like(nf), -(nf ** -ex[0]) * (nc ** -ex[1])])


def _additive_exponent_jac(lin, ex, nf, nc):
    return np.column_stack([lin[1] * nf ** -ex[0] * np.log(nf), lin[2] * nc ** -ex[1] * np.log(nc)])


def _multiplicative_exponent_jac(lin, ex, nf, nc):
    term = lin[1] * (nf ** -ex[0]) * (nc ** -ex[1])
    return np.column_stack([term * np.log(nf), term * np.log(nc)])


def _log_linear_basis(ex, nf, nc):
    return np.column_stack([np.ones_like(nf), np.log(nf), np.log(nc)])


SATURATING = _Model(
    "saturating_additive", "S_inf - (C_f n_f^-alpha + C_c n_c^-beta)", PARAM_NAMES, 2,
    _additive_basis, ((-np.inf, 0.0, 0.0), (np.inf, np.inf, np.inf)),
    lambda lin, ex: np.concatenate([lin, ex]), _additive_exponent_jac)
MULTIPLICATIVE = _Model(
    "multiplicative", "S_inf - C n_f^-alpha n_c^-beta", ("S_inf", "C", "alpha", "beta"), 2,
    _multiplicative_basis, ((-np.inf, 0.0), (np.inf, np.inf)),
    lambda lin, ex: np.concatenate([lin, ex]), _multiplicative_exponent_jac)
LOG_LINEAR = _Model(
    "log_linear", "a + b log n_f + c log n_c", ("a", "b", "c"), 0,
    _log_linear_basis, ((-np.inf,) * 3, (np.inf,) * 3),
    lambda lin, ex: lin)
MODELS = (SATURATING, LOG_LINEAR, MULTIPLICATIVE)


def _linear_fit(model: _Model, ex, nf, nc, y, sw):
    a = model.basis(ex, nf, nc) * sw[:, None]
    res = optimize.lsq_linear(a, y * sw, bounds=model.linear_bounds, method="bvls")
    return res.x, float(np.sum(res.fun ** 2))


def _bounds(model: _Model) -> tuple[np.ndarray, ...]:
    return tuple(np.concatenate([b, [e] * model.n_exponents]) for b, e in zip(model.linear_bounds, EXPONENT_BOUNDS))


def _fit_model(model: _Model, nf, nc, y, sw, starts: Sequence[np.ndarray] = (),
               max_nfev: int = 2000) -> tuple[np.ndarray, float]:
    """Weighted least squares fit; returns (params, weighted RSS)."""
    if model.n_exponents == 0:
        lin, rss = _linear_fit(model, np.empty(0), nf, nc, y, sw)
        return lin, rss
    candidates = [np.asarray(s, dtype=float) for s in starts]
    if not candidates:
        grid = [(_linear_fit(model, np.array([a, b]), nf, nc, y, sw), a, b)
                for a in _START_GRID for b in _START_GRID]
        grid.sort(key=lambda g: g[0][1])
        candidates = [model.to_params(g[0][0], np.array([g[1], g[2]])) for g in grid[:_N_STARTS]]
    lo, hi = _bounds(model)

    def residuals(p):
        return (model.predict(p, nf, nc) - y) * sw

    def jacobian(p):
        lin, ex = model.split(p)
        return np.column_stack([model.basis(ex, nf, nc), model.exponent_jac(lin, ex, nf, nc)]) * sw[:, None]

    best_p, best_rss = None, np.inf
    for x0 in candidates:
        x0 = np.clip(x0, lo, hi)  # least_squares moves starts on a bound strictly inside
        try:
            r = optimize.least_squares(residuals, x0, jac=jacobian if model.exponent_jac else "2-point",
                                       bounds=(lo, hi), method="trf",
                                       x_scale="jac", xtol=1e-12, ftol=1e-12, gtol=1e-12, max_nfev=max_nfev)
        except (ValueError, FloatingPointError):  # pragma: no cover - degenerate start
            continue
        rss = float(np.sum(r.fun ** 2))
        if rss < best_rss:
            best_p, best_rss = r.x, rss
    if best_p is None:  # pragma: no cover
        raise VlgapError(f"{model.name}: the least-squares fit failed from every starting point")
    return best_p, best_rss


# ------------------------------------------------------------------------------------------------
# input
# ------------------------------------------------------------------------------------------------

def _columns(grid: Any) -> dict[str, np.ndarray]:
    if hasattr(grid, "to_dict") and not isinstance(grid, dict):       # pandas / polars-like
        try:
            grid = grid.to_dict(orient="list")
        except TypeError:
            grid = grid.to_dict(as_series=False)
    if isinstance(grid, dict):
        cols = dict(grid)
    elif isinstance(grid, (list, tuple)) and grid and isinstance(grid[0], dict):
        keys = set().union(*(row.keys() for row in grid))
        cols = {key: [row.get(key) for row in grid] for key in keys}
    else:
        raise VlgapError("grid: pass a dict of columns (n_f, n_c, score), a list of row dicts or a "
                         "DataFrame with those columns")
    out: dict[str, np.ndarray] = {}
    for key in ("n_f", "n_c", "score", "score_lo", "score_hi"):
        if key not in cols or cols[key] is None:
            if key in ("n_f", "n_c", "score"):
                raise VlgapError(f"grid: missing column {key!r}; need n_f, n_c, score "
                                 f"(optionally score_lo, score_hi); got {sorted(cols)}")
            continue
        try:
            out[key] = np.asarray(cols[key], dtype=float).ravel()
        except (TypeError, ValueError) as err:
            raise VlgapError(f"grid column {key!r}: not numeric ({err})") from err
    n = out["score"].size
    for key, arr in out.items():
        if arr.size != n:
            raise VlgapError(f"grid column {key!r} has {arr.size} values but score has {n}")
    for key in ("n_f", "n_c", "score"):
        bad = np.flatnonzero(~np.isfinite(out[key]))
        if bad.size:
            raise VlgapError(f"grid column {key!r}: missing or non-finite value in row(s) {bad[:5].tolist()}")
    for key in ("n_f", "n_c"):
        bad = np.flatnonzero((out[key] <= 0) | (out[key] != np.round(out[key])))
        if bad.size:
            raise VlgapError(f"grid column {key!r} must hold positive whole numbers (a count of frames/captions); "
                             f"row {bad[0]} has {out[key][bad[0]]:g} (data rows counted from 0)")
    bad = np.flatnonzero(out["score_lo"] > out["score_hi"]) if "score_lo" in out and "score_hi" in out else []
    if len(bad):  # an inverted interval is a broken row, not one to drop silently
        raise VlgapError(f"grid row {bad[0]} (data rows counted from 0): score_lo {out['score_lo'][bad[0]]:.4g} > "
                         f"score_hi {out['score_hi'][bad[0]]:.4g} ({len(bad)} such row(s)); swap or remove them")
    _refuse_duplicate_cells(out)
    return out


def _refuse_duplicate_cells(cols: dict[str, np.ndarray]) -> None:
    """One score per (n_f, n_c): two rows for one cell (e.g. a sweep.csv of several encoder pairs)
    would be fitted as if they were independent measurements of one model."""
    seen: dict[tuple[float, float], int] = {}
    clashes: list[str] = []
    for i, (f, c) in enumerate(zip(cols["n_f"].tolist(), cols["n_c"].tolist())):
        first = seen.setdefault((f, c), i)
        if first != i:
            clashes.append(f"rows {first} and {i} (n_f={f:g}, n_c={c:g}, scores {cols['score'][first]:.4g} and "
                           f"{cols['score'][i]:.4g})")
    if clashes:
        more = f" and {len(clashes) - 3} more" if len(clashes) > 3 else ""
        raise VlgapError(f"grid has {len(clashes)} duplicate cell(s): " + "; ".join(clashes[:3]) + more
                         + " (data rows counted from 0); give one score per (n_f, n_c): for a sweep.csv of several "
                           "encoder pairs fit one pair at a time (`vlgap fit-scaling --vision V --text T`)")


def _sigmas(cols: dict[str, np.ndarray], confidence: float) -> np.ndarray | None:
    if "score_lo" not in cols or "score_hi" not in cols:
        return None
    lo, hi = cols["score_lo"], cols["score_hi"]
    if not (np.all(np.isfinite(lo)) and np.all(np.isfinite(hi))):
        return None
    width = hi - lo
    if np.any(width <= 0):
        return None
    # a central interval at `confidence` spans 2 z sigma for a normal estimate
    return width / (2.0 * special.ndtri(0.5 + confidence / 2.0))


def check_grid(n_f: np.ndarray, n_c: np.ndarray, *, what: str = "grid") -> None:
    """Refuse grids that cannot identify the five parameters, saying what is needed."""
    d_f, d_c, cells = len(np.unique(n_f)), len(np.unique(n_c)), len(n_f)
    problems = []
    if d_f < MIN_DISTINCT:
        problems.append(f"{d_f} distinct n_f (need >= {MIN_DISTINCT})")
    if d_c < MIN_DISTINCT:
        problems.append(f"{d_c} distinct n_c (need >= {MIN_DISTINCT})")
    if cells < MIN_CELLS:
        problems.append(f"{cells} cells (need >= {MIN_CELLS})")
    if problems:
        raise VlgapError(
            f"{what} too small for the 5-parameter law S_inf - (C_f n_f^-alpha + C_c n_c^-beta): "
            f"{'; '.join(problems)}. Each exponent is pinned down only by its own budgets, so the law needs "
            f">= {MIN_DISTINCT} distinct n_f, >= {MIN_DISTINCT} distinct n_c and >= {MIN_CELLS} cells "
            "(5 parameters + 1 residual degree of freedom): a full 3 x 3 grid (9 cells) is the smallest "
            "regular grid; the held-out check needs 4 x 4 (16 cells).")


# ------------------------------------------------------------------------------------------------
# result
# ------------------------------------------------------------------------------------------------

def _r2(y, pred) -> float:
    ss_tot = float(np.sum((y - y.mean()) ** 2))
    return 1.0 - float(np.sum((y - pred) ** 2)) / ss_tot if ss_tot > 0 else float("nan")


def _information(rss: float, n: int, p: int) -> dict[str, float]:
    # Gaussian log-likelihood with the error variance profiled out (+1 parameter for it)
    rss = max(rss, 1e-300)
    k = p + 1
    aic = n * math.log(rss / n) + 2 * k
    bic = n * math.log(rss / n) + k * math.log(n)
    aicc = aic + (2 * k * (k + 1) / (n - k - 1) if n - k - 1 > 0 else float("inf"))
    return {"aic": aic, "aicc": aicc, "bic": bic}


def _near(value: float, bound: float, atol: float) -> bool:
    if not math.isfinite(bound) or not math.isfinite(value):
        return False
    return abs(value - bound) <= (BOUND_RTOL * abs(bound) if bound != 0 else atol)


def identification(params: dict[str, float], param_ci: dict[str, Sequence[float]] | None = None,
                   score_range: float = 1.0) -> dict[str, dict[str, Any]]:
    """Which fitted parameters the grid pins down. A parameter is *not identified* when

    1. its estimate is at a bound of its allowed range (`PARAM_BOUNDS`; "at" = within `BOUND_RTOL`
       = 1 % of a nonzero bound, or within 1e-6 x the score range of a zero bound): the optimum lies
       outside what the law allows, so the number printed is the bound, not an estimate;
    2. its bootstrap interval reaches a bound (same tolerance): the data do not exclude the bound,
       so one end of the interval is set by the fit's limits, not by the data (for C_f, C_c: the
       term may be absent);
    3. it has no effect: an exponent whose coefficient C is at 0 (n^-alpha multiplies nothing); or
       it is confounded: when an exponent sits at its lower bound the term is ~C (1 - alpha log n),
       so S_inf and that C trade off and only their difference is determined (both also when only
       the exponent's interval reaches its lower bound: then they do so in part of the refits).

    Returns {name: {"identified", "at_bound" ("lower" | "upper" | None), "bounds" ([lo, hi], None
    for no bound), "why" (None when identified)}}.
    """
    atol = 1e-6 * (score_range if score_range > 0 else 1.0)
    ci = param_ci or {}
    out: dict[str, dict[str, Any]] = {}
    for name in PARAM_NAMES:
        lo, hi = PARAM_BOUNDS[name]
        v = params[name]
        at = "lower" if _near(v, lo, atol) else "upper" if _near(v, hi, atol) else None
        why = None
        if at:
            why = f"at its {at} bound {lo if at == 'lower' else hi:g}"
            if name in ("C_f", "C_c") and at == "lower":
                why += ": the score does not improve with this budget on this grid"
        else:
            c = [float(x) for x in (ci.get(name) or []) if x is not None and math.isfinite(float(x))]
            if len(c) == 2:
                reach = [b for b in (lo, hi) if any(_near(x, b, atol) for x in c)]
                if len(reach) == 2:
                    why = f"its interval spans the whole allowed range [{lo:g}, {hi:g}]"
                elif reach:
                    why = f"its interval reaches the bound {reach[0]:g}"
        out[name] = {"identified": why is None, "at_bound": at,
                     "bounds": [b if math.isfinite(b) else None for b in (lo, hi)], "why": why}
    for ex, coef in (("alpha", "C_f"), ("beta", "C_c")):
        ex_ci = [float(x) for x in (ci.get(ex) or []) if x is not None and math.isfinite(float(x))]
        if out[coef]["at_bound"] == "lower":  # the term is absent: its exponent is arbitrary
            out[ex].update(identified=False, why=f"no effect: {coef} = 0")
        elif out[ex]["at_bound"] == "lower":
            for name in ("S_inf", coef):
                if out[name]["identified"]:
                    out[name].update(identified=False,
                                     why=f"confounded: with {ex} at its lower bound only S_inf - {coef} is determined")
        for name, other in (("S_inf", coef), (coef, "S_inf")) if ex_ci and _near(min(ex_ci), EXPONENT_BOUNDS[0], atol) else ():
            if out[name]["identified"]:
                out[name].update(identified=False, why=f"confounded with {other} in part of the bootstrap refits "
                                                       f"({ex}'s interval reaches its lower bound)")
    return out


@dataclass
class ScalingFit:
    """Fitted law with intervals, held-out check and model comparison (see `to_dict`)."""

    params: dict[str, float]
    param_ci: dict[str, list[float]]
    r2: float
    rmse: float
    n_cells: int
    heldout: dict[str, Any]
    alternatives: dict[str, dict[str, Any]]
    best_by: dict[str, str]
    bootstrap: dict[str, Any]
    weighted: bool
    warnings: list[str] = field(default_factory=list)
    identification: dict[str, dict[str, Any]] = field(default_factory=dict)
    n_f_values: list[float] = field(default_factory=list)
    n_c_values: list[float] = field(default_factory=list)
    param_samples: np.ndarray | None = field(default=None, repr=False)

    formula = SATURATING.formula

    def predict(self, n_f, n_c) -> np.ndarray:
        """The fitted law at any (n_f, n_c) (broadcast), e.g. for plotting curves."""
        return SATURATING.predict(np.array([self.params[k] for k in PARAM_NAMES]), n_f, n_c)

    def predict_interval(self, n_f, n_c, confidence: float | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Pointwise percentile band of the fitted law over the bootstrap parameter samples."""
        if self.param_samples is None or not len(self.param_samples):
            raise VlgapError("no bootstrap samples: refit with n_bootstrap > 0")
        c = self.bootstrap["confidence"] if confidence is None else confidence
        preds = np.stack([SATURATING.predict(p, n_f, n_c) for p in self.param_samples])
        a = (1 - c) / 2
        return np.quantile(preds, a, axis=0), np.quantile(preds, 1 - a, axis=0)

    @property
    def not_identified(self) -> list[str]:
        """Names of the parameters the grid does not pin down (see `identification`)."""
        return [k for k, v in self.identification.items() if not v["identified"]]

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.formula,
            "params": self.params,
            "param_ci": self.param_ci,
            "identification": self.identification,
            "not_identified": self.not_identified,
            "r2": self.r2,
            "rmse": self.rmse,
            "n_cells": self.n_cells,
            "n_f_values": self.n_f_values,
            "n_c_values": self.n_c_values,
            "weighted": self.weighted,
            "bootstrap": self.bootstrap,
            "heldout": self.heldout,
            "alternatives": self.alternatives,
            "best_by": self.best_by,
            "warnings": self.warnings,
        }

    def to_frame(self):
        """pandas DataFrame, one row per parameter of the law (S_inf, C_f, alpha, C_c, beta): estimate,
        its bootstrap interval (NaN without a bootstrap), whether the grid identifies it, and the fit's
        confidence, r2 and n_cells."""
        from vlgap.frames import BOOL, FLOAT, INT, STRING, interval_bounds, make_frame, require_pandas
        require_pandas(type(self).__name__)

        rows = [{"parameter": name, "estimate": value, **interval_bounds(self.param_ci.get(name)),
                 "identified": self.identification.get(name, {}).get("identified"),
                 "confidence": self.bootstrap.get("confidence"), "r2": self.r2, "n_cells": self.n_cells}
                for name, value in self.params.items()]
        return make_frame(rows, {"parameter": STRING, "estimate": FLOAT, "ci_low": FLOAT, "ci_high": FLOAT,
                                 "identified": BOOL, "confidence": FLOAT, "r2": FLOAT, "n_cells": INT},
                          "ScalingFit")


# ------------------------------------------------------------------------------------------------
# fitting
# ------------------------------------------------------------------------------------------------

def _heldout(model: _Model, nf, nc, y, sw) -> dict[str, Any]:
    test = (nf == nf.max()) | (nc == nc.max())
    train = ~test
    d_f, d_c, cells = len(np.unique(nf[train])), len(np.unique(nc[train])), int(train.sum())
    need_cells = max(MIN_CELLS, model.n_params + 1)
    if d_f < MIN_DISTINCT or d_c < MIN_DISTINCT or cells < need_cells:
        return {"skipped": f"{HELDOUT_TOO_FEW}: the cells with n_f < {nf.max():g} and n_c < {nc.max():g} hold "
                           f"{d_f} distinct n_f, {d_c} distinct n_c, {cells} cells; the law needs >= {MIN_DISTINCT}, "
                           f">= {MIN_DISTINCT} and >= {need_cells} (a 4 x 4 grid)",
                "reason": HELDOUT_TOO_FEW}
    params, _ = _fit_model(model, nf[train], nc[train], y[train], sw[train])
    pred = model.predict(params, nf[test], nc[test])
    err = np.abs(pred - y[test])
    return {
        "train": f"n_f < {nf.max():g} and n_c < {nc.max():g}",
        "n_train": int(train.sum()),
        "n_test": int(test.sum()),
        "mean_abs_error": float(err.mean()),
        "max_abs_error": float(err.max()),
        "cells": [{"n_f": float(a), "n_c": float(b), "observed": float(o), "predicted": float(p),
                   "abs_error": float(e)} for a, b, o, p, e in zip(nf[test], nc[test], y[test], pred, err)],
        "train_params": dict(zip(model.param_names, map(float, params))),
    }


def _bootstrap(nf, nc, y, sw, params, method: str, n_resamples: int, seed: int | None,
               progress: Callable[[int, int], None] | None = None):
    """Parameter samples by residual bootstrap (refit on fitted + resampled residuals) or case
    bootstrap (refit on cells drawn with replacement). Returns (samples, n_failed)."""
    rng = np.random.default_rng([0x5CA1E, 0 if seed is None else int(seed)])
    n = y.size
    fitted = SATURATING.predict(params, nf, nc)
    # standardised residuals, inflated by sqrt(n / (n - p)) so their spread matches the errors'
    std_res = (y - fitted) * sw
    std_res = (std_res - std_res.mean()) * math.sqrt(n / max(1, n - SATURATING.n_params))
    draws, failed, samples = [], 0, np.empty((0, SATURATING.n_params))
    for _ in range(n_resamples):
        if method == "residual":
            draws.append((nf, nc, fitted + rng.choice(std_res, size=n, replace=True) / sw, sw))
            continue
        idx = rng.integers(0, n, size=n)
        if len(np.unique(nf[idx])) < MIN_DISTINCT or len(np.unique(nc[idx])) < MIN_DISTINCT:
            failed += 1
        else:
            draws.append((nf[idx], nc[idx], y[idx], sw[idx]))
    report = progress or (lambda done, total: None)
    report(0, n_resamples)
    if draws:  # all refits at once, warm-started at the estimate: scipy's trf in lockstep (vlgap.scaling_batch)
        fit = fit_batch(*map(np.array, zip(*draws)), params, *_bounds(SATURATING), max_nfev=BOOTSTRAP_MAX_NFEV)
        samples, failed = fit.x[fit.ok], failed + int(np.sum(~fit.ok))
    for i in range(1, n_resamples + 1):
        report(i, n_resamples)
    return samples, failed


@renamed_keywords(bootstrap="bootstrap_method")
def fit_scaling(
    grid: Any,
    *,
    n_bootstrap: int = 1000,
    bootstrap_method: str = "residual",
    confidence: float = 0.95,
    use_intervals: bool = True,
    seed: int | None = 0,
    progress: Callable[[int, int], None] | None = None,
) -> ScalingFit:
    """Fit score(n_f, n_c) = S_inf - (C_f n_f^-alpha + C_c n_c^-beta) to a grid of cells.

    grid: dict of columns, list of row dicts or a DataFrame with n_f, n_c, score (optionally
    score_lo, score_hi: each cell's interval at `confidence`; with `use_intervals` the fit is then
    weighted by 1/sigma^2). n_bootstrap: parameter intervals from `bootstrap_method` = "residual"
    (default; resample the fit's residuals) or "case" (resample cells). Reproducible by `seed`.
    progress: called as progress(refits done, n_bootstrap) during the bootstrap (it prints nothing
    itself; `vlgap.progress.counter` turns it into a bar).

    The result flags each parameter the grid does not pin down (`ScalingFit.identification`,
    `.not_identified`; rules in `identification`): e.g. beta at its upper bound 10 when the score
    jumps from n_c = 1 to 2 and stays flat. `heldout` holds the held-out cells and errors, or
    "skipped" with the reason when the grid is too small to hold cells out (below 4 x 4).
    """
    if not 0 < confidence < 1:
        raise VlgapError(f"confidence={confidence!r}: must be in (0, 1), e.g. 0.95")
    if bootstrap_method not in ("residual", "case"):
        raise VlgapError(f"bootstrap_method={bootstrap_method!r}: use 'residual' or 'case'")
    if int(n_bootstrap) != n_bootstrap or n_bootstrap < 0:
        raise VlgapError(f"n_bootstrap={n_bootstrap!r}: need an integer >= 0")
    cols = _columns(grid)
    nf, nc, y = cols["n_f"], cols["n_c"], cols["score"]
    check_grid(nf, nc)
    sigma = _sigmas(cols, confidence) if use_intervals else None
    sw = np.ones_like(y) if sigma is None else 1.0 / (sigma / sigma.mean())  # sqrt of relative weights

    params, rss = _fit_model(SATURATING, nf, nc, y, sw)
    pred = SATURATING.predict(params, nf, nc)
    n = y.size

    samples = np.empty((0, SATURATING.n_params))
    failed = 0
    if n_bootstrap:
        samples, failed = _bootstrap(nf, nc, y, sw, params, bootstrap_method, int(n_bootstrap), seed, progress)
    a = (1 - confidence) / 2
    param_ci = ({k: [float(v) for v in np.quantile(samples[:, i], [a, 1 - a])] for i, k in enumerate(PARAM_NAMES)}
                if len(samples) else {k: [float("nan"), float("nan")] for k in PARAM_NAMES})
    named = dict(zip(PARAM_NAMES, map(float, params)))
    ident = identification(named, param_ci if len(samples) else None, float(np.ptp(y)))
    warnings = [f"{k} = {(0.0 if v['at_bound'] == 'lower' and k in ('C_f', 'C_c') else named[k]):.3g} is not "
                f"identified: {v['why']}" for k, v in ident.items() if not v["identified"]]

    alternatives: dict[str, dict[str, Any]] = {}
    helds: dict[str, dict[str, Any]] = {}
    for model in MODELS:
        if model is SATURATING:
            p_m, rss_m, pred_m = params, rss, pred
        else:
            p_m, rss_m = _fit_model(model, nf, nc, y, sw)
            pred_m = model.predict(p_m, nf, nc)
        held = helds[model.name] = _heldout(model, nf, nc, y, sw)
        alternatives[model.name] = {
            "formula": model.formula,
            "params": dict(zip(model.param_names, map(float, p_m))),
            "n_params": model.n_params,
            "r2": _r2(y, pred_m),
            "rss": float(np.sum((y - pred_m) ** 2)),
            **_information(rss_m, n, model.n_params),
            "heldout_mean_abs_error": held.get("mean_abs_error"),
            "heldout_max_abs_error": held.get("max_abs_error"),
            "heldout_skipped": held.get("reason"),   # why there is no held-out error, when there is none
        }
    best_by = {crit: min(alternatives, key=lambda m: alternatives[m][crit]) for crit in ("aic", "aicc", "bic")}
    if all(alternatives[m]["heldout_mean_abs_error"] is not None for m in alternatives):
        best_by["heldout"] = min(alternatives, key=lambda m: alternatives[m]["heldout_mean_abs_error"])

    return ScalingFit(
        params=named,
        param_ci=param_ci,
        r2=_r2(y, pred),
        rmse=float(np.sqrt(np.mean((y - pred) ** 2))),
        n_cells=n,
        heldout=helds[SATURATING.name],
        alternatives=alternatives,
        best_by=best_by,
        bootstrap={"method": bootstrap_method, "n_resamples": int(n_bootstrap), "n_failed": failed,
                   "confidence": confidence, "seed": seed},
        weighted=sigma is not None,
        warnings=warnings,
        identification=ident,
        n_f_values=sorted(map(float, np.unique(nf))),
        n_c_values=sorted(map(float, np.unique(nc))),
        param_samples=samples,
    )


def select_rows(cols: dict[str, list], where: dict[str, str | None], *, what: str = "grid") -> dict[str, list]:
    """The rows whose columns equal `where`'s values (None: any), e.g. one encoder pair of a sweep.csv."""
    for name, want in where.items():
        if want is None:
            continue
        if name not in cols:
            raise VlgapError(f"{what}: no {name!r} column to select {name} = {want!r} from; columns: {sorted(cols)}")
        keep = [i for i, v in enumerate(cols[name]) if v == want]
        if not keep:
            raise VlgapError(f"{what}: no row with {name} = {want!r}; it has {sorted(set(map(str, cols[name])))}")
        cols = {k: [v[i] for i in keep] for k, v in cols.items()}
    return cols


def read_grid_csv(path: str | os.PathLike) -> dict[str, list[str]]:
    """Columns of a CSV file with a header row (n_f, n_c, score[, score_lo, score_hi]; `fit_scaling` ignores others)."""
    from vlgap.csv_files import read_csv  # a folder, a missing file, non-UTF-8 bytes, extra fields: one line each

    rows = read_csv(path, "GRID")[1]
    if not rows:
        raise VlgapError(f"{path}: no data rows (need a header n_f,n_c,score and one row per cell)")
    return {key: [row[key] if row[key] not in ("", None) else "nan" for row in rows] for key in rows[0]}
