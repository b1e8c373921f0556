"""One cell of a sweep scored: the best layer pair of a vision and a text feature set, its bootstrap
interval (the selection redone inside each resample) and permutation p-value, for one caption draw or
combined over several (`vlgap.metrics.draws`). `vlgap.probe.sweep` and `vlgap.probe.split_scaling` score
their cells here."""
from __future__ import annotations

from typing import Any

import numpy as np


def score_cell(xs: list[np.ndarray], ys: list[np.ndarray], *, k: int, metric: str, n_bootstrap: int, n_permutations: int,
               seed: int, device: str = "cpu", preset: str | None = None) -> dict[str, Any]:
    """Best layer pair, its bootstrap interval (selection inside each resample) and permutation p-value.
    A cell where every layer of a side has zero variance is n/a: NaN numbers and `na_reason`."""
    from vlgap.metrics.base import ZeroVarianceError
    from vlgap.metrics.layer_search import layer_search

    from vlgap.caveats import collecting

    nan = float("nan")
    # xs / ys: per-layer arrays, or LayerStates from `precompute_layers` (reused across cells)
    try:
        with collecting() as lines:  # the cell's caveats, also where it ends n/a
            res = layer_search(xs, ys, k=k, metric=metric, n_bootstrap=n_bootstrap, n_permutations=n_permutations,
                               seed=seed, device=device, preset=preset)
    except ZeroVarianceError as err:
        n_x, n_y = (len(s.states) if hasattr(s, "states") else len(s) for s in (xs, ys))
        n = xs.n if hasattr(xs, "n") else len(xs[0])
        from vlgap.metrics.alignment import make_metric
        from vlgap.metrics.base import chance_level
        from vlgap.stats.bounds import small_sample_warning

        chance = chance_level(metric, n, k)
        return {"matrix": np.full((n_x, n_y), nan), "score": nan, "x_layer": -1, "y_layer": -1,
                "chance": chance if chance is not None else nan, "n": int(n), "k": int(k or 0), "ci_lo": nan,
                "ci_hi": nan, "p_value": nan, "null_mean": nan, "na_reason": str(err),
                **interval_fields(None, None, small_sample_warning(int(n), k if make_metric(metric, k).uses_k else None)),
                **({"warnings": list(lines)} if lines else {})}
    ci = res.ci
    return {"matrix": np.asarray(res.scores, dtype=np.float64), "score": float(res.best_score),
            "x_layer": int(res.x_layer), "y_layer": int(res.y_layer),
            "chance": float(res.chance) if res.chance is not None else nan, "n": int(res.n),
            "k": int(res.k) if res.k is not None else 0,
            "ci_lo": float(ci[0]) if ci else nan, "ci_hi": float(ci[1]) if ci else nan,
            "p_value": float(res.p_value) if res.p_value is not None else nan,
            "null_mean": float(res.null_mean) if res.null_mean is not None else nan,
            **interval_fields(res.ci_reason, res.ci_note, res.small_sample),
            **({"notes": list(res.notes)} if res.notes else {}),
            **({"warnings": list(res.warnings)} if res.warnings else {})}  # vlgap.caveats: in the JSON and report


def interval_fields(reason: str | None, note: str | None, small: str | None) -> dict[str, str]:
    """A cell's words about its interval, each only when there is one: ci_reason (why n/a), ci_note (clipped to
    the metric's range) and small_sample (the warning of vlgap.stats.bounds)."""
    return {key: value for key, value in (("ci_reason", reason), ("ci_note", note), ("small_sample", small)) if value}


def score_cell_draws(xs, ys_draws: list, *, k: int, metric: str, n_bootstrap: int, n_permutations: int, seed: int,
                     device: str = "cpu", preset: str | None = None, confidence: float = 0.95) -> dict[str, Any]:
    """`score_cell` over R caption draws (one text side per draw, same items): the score is the mean of
    the draws' best-pair scores, the interval combines the item bootstrap with the between-draw
    variance, the p-value tests the mean (vlgap.metrics.draws). Every draw uses the same seed, hence
    the same item resamples and permutations. The matrix is the mean of the draws' matrices; the
    reported layer pair is its best."""
    from vlgap.metrics.base import ZeroVarianceError
    from vlgap.metrics.draws import combine_draws, draws_p_value
    from vlgap.metrics.layer_search import layer_search

    nan = float("nan")
    runs = []
    for ys in ys_draws:
        try:
            runs.append(layer_search(xs, ys, k=k, metric=metric, n_bootstrap=n_bootstrap,
                                     n_permutations=n_permutations, seed=seed, device=device, preset=preset))
        except ZeroVarianceError:
            # a side without variance: the single-draw n/a cell, said once for all draws
            return {**score_cell(xs, ys, k=k, metric=metric, n_bootstrap=n_bootstrap, n_permutations=n_permutations,
                                 seed=seed, device=device, preset=preset), "caption_draws": len(ys_draws)}
    scores = [float(r.best_score) for r in runs]
    matrix = np.mean([np.asarray(r.scores, dtype=np.float64) for r in runs], axis=0)
    x_layer, y_layer = (int(i) for i in np.unravel_index(np.nanargmax(matrix), matrix.shape))
    first = runs[0]
    out = {"matrix": matrix, "score": float(np.mean(scores)), "x_layer": x_layer, "y_layer": y_layer,
           "chance": float(first.chance) if first.chance is not None else nan, "n": int(first.n),
           "k": int(first.k) if first.k is not None else 0, "ci_lo": nan, "ci_hi": nan, "p_value": nan,
           "null_mean": nan, "caption_draws": len(runs), "draw_scores": scores,
           "draw_sd": float(np.std(scores, ddof=1)) if len(scores) > 1 else 0.0}
    if n_bootstrap:
        from vlgap.stats.resampling import MIN_ITEMS_FOR_INTERVAL

        if first.n < MIN_ITEMS_FOR_INTERVAL:  # the small-n rule of every draw's own interval
            out["ci_reason"] = first.ci_reason
        else:
            from vlgap.metrics.alignment import metric_range

            iv = combine_draws(scores, [r.bootstrap.samples for r in runs], confidence,
                               metric_range(metric, k), metric)
            out.update(ci_lo=iv.low, ci_hi=iv.high, ci_items_lo=iv.item_low, ci_items_hi=iv.item_high,
                       **interval_fields(None if np.isfinite(iv.low) else iv.note,
                                         iv.note if np.isfinite(iv.low) else None, None))
    out.update(interval_fields(None, None, first.small_sample))
    if n_permutations:
        out["p_value"], out["null_mean"] = draws_p_value(scores, [r.permutation.samples for r in runs])
    notes = [n for r in runs for n in r.notes]
    if notes:
        out["notes"] = list(dict.fromkeys(notes))
    lines = [w for r in runs for w in r.warnings]
    if lines:
        out["warnings"] = list(dict.fromkeys(lines))
    return out
