"""The 2x2 (training-caption operator x inference operator) and the third-operator contrast, from
per-prompt scores, through vlgap's existing factorial and paired code (`vlgap compare --factorial`).

Scores arrive as {(train_op, infer_op, seed): [N] per-prompt scores over the same prompts}. Seeds are
averaged per prompt first (the generator-training seed is a nuisance inside a cell), then prompts are
the resampling unit: factor A = training captions (rewriter -> pe), factor B = inference rewrites
(rewriter -> pe). The interaction (pe/pe + rw/rw) - (pe/rw + rw/pe) is the two-sided alignment effect the
paper claims; the main effect of A is "PE captions are better training text" whatever rewrites prompts.
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from vlgap.errors import VlgapError


def cell_scores(scores: Mapping[tuple[str, str, int], Sequence[float]], train: str, infer: str) -> np.ndarray:
    """Per-prompt mean over seeds of one cell; an error if the cell or a seed's length is off."""
    runs = [np.asarray(v, float) for (t, i, _s), v in sorted(scores.items()) if t == train and i == infer]
    if not runs:
        raise VlgapError(f"no scores for cell train={train}, infer={infer}")
    n = runs[0].shape
    if any(r.shape != n or r.ndim != 1 for r in runs):
        raise VlgapError(f"cell train={train}, infer={infer}: seeds scored different prompt sets {[r.shape for r in runs]}")
    return np.mean(np.stack(runs), axis=0)


def two_by_two(scores: Mapping[tuple[str, str, int], Sequence[float]], *, high: str = "pe", low: str = "rewriter",
               third: str | None = "third", n_bootstrap: int = 2000, n_permutations: int = 10000,
               seed: int = 0) -> dict[str, Any]:
    """Cells, main effects, interaction and (if scored) the third-operator contrasts. Keys: cells (list of
    {train, infer, mean, ci, n_items, n_seeds, seed_means}), main_effects {training_captions,
    inference_rewrites}, interaction, third_operator."""
    from vlgap.stats.factorial import factorial_effects
    from vlgap.stats.paired import paired_comparison

    y = {(a, b): cell_scores(scores, a, b) for a in (low, high) for b in (low, high)}
    fx = factorial_effects(y[(low, low)], y[(low, high)], y[(high, low)], y[(high, high)],
                           n_bootstrap=n_bootstrap, n_permutations=n_permutations, seed=seed)
    cells = []
    for (a, b), key in zip([(low, low), (low, high), (high, low), (high, high)], ("00", "01", "10", "11")):
        seeds = sorted(s for (t, i, s) in scores if t == a and i == b)
        cells.append({"train": a, "infer": b, "mean": fx["cells"][key]["mean"], "ci": fx["cells"][key]["ci"],
                      "ci_reason": fx["cells"][key]["ci_reason"],
                      "n_items": fx["n_items"], "n_seeds": len(seeds),
                      "seed_means": [float(np.mean(scores[(a, b, s)])) for s in seeds]})
    out: dict[str, Any] = {
        "cells": cells,
        "main_effects": {"training_captions": {**fx["main_a"], "contrast": f"train {high} - train {low}"},
                         "inference_rewrites": {**fx["main_b"], "contrast": f"infer {high} - infer {low}"}},
        "interaction": {**fx["interaction"],
                        "contrast": f"({high}/{high} + {low}/{low}) - ({high}/{low} + {low}/{high}): matching gain"},
        "n_items": fx["n_items"],
    }
    out["third_operator"] = None
    if third is not None and any(t == third for (t, _i, _s) in scores):
        contrasts = {}
        ref = y[(high, high)]
        for infer in (high, third):
            if any(t == third and i == infer for (t, i, _s) in scores):
                c = paired_comparison(cell_scores(scores, third, infer), ref,
                                      names=(f"{third}/{infer}", f"{high}/{high}"),
                                      n_bootstrap=n_bootstrap, n_permutations=n_permutations, seed=seed)
                c["estimate"] = c["difference"]
                contrasts[f"{third}/{infer} - {high}/{high}"] = c
                cells.append({"train": third, "infer": infer, "mean": c["mean_a"], "ci": c["ci_a"],
                              "ci_reason": c["ci_a_reason"],
                              "n_items": c["n_items"], "n_seeds": len([1 for (t, i, _s) in scores
                                                                      if t == third and i == infer]),
                              "seed_means": [float(np.mean(v)) for (t, i, _s), v in sorted(scores.items())
                                             if t == third and i == infer]})
        out["third_operator"] = contrasts
    return out


def verdict(effect: Mapping[str, Any], alpha: float = 0.05) -> str:
    """One line: estimate, interval, p, and "no significant difference" when that is the honest answer.

    The interval inverts the same sign-flip test as p (`vlgap.stats.resampling.sign_flip_inference`), so
    it excludes 0 exactly when the verdict says "significant"; a withheld interval prints "n/a (why)"."""
    from vlgap.formatting import interval
    from vlgap.stats.resampling import is_significant

    p = effect["p_value"]
    sig = "significant" if is_significant(p, alpha) else "no significant difference"
    ci = interval(effect.get("ci"), 4, effect.get("ci_reason"), signed=True)
    return f"{effect['estimate']:+.4f} {ci}, p = {p:.3g} ({sig} at alpha={alpha})"
