"""2x2 within-item factorial analysis: two main effects and their interaction, from per-item scores.

Every item is scored in all four cells (a, b) in {low, high}^2 (e.g. caption writer x fine-tuning
captions, the two cells CAPE-T2V's reviewers asked for). Per item i, with y_ab its score:
    main effect A   = ((y_10 + y_11) - (y_00 + y_01)) / 2      (A high minus A low, averaged over B)
    main effect B   = ((y_01 + y_11) - (y_00 + y_10)) / 2
    interaction AB  = (y_11 - y_10) - (y_01 - y_00)            (difference of differences)
Each effect is the mean of its per-item contrast, with a sign-flip permutation p-value (H0: the
contrast is symmetric about 0) and the interval that inverts that same test
(`vlgap.stats.resampling.sign_flip_inference`), so an effect's interval excludes 0 exactly when its
p < 1 - confidence. Cell means get bootstrap intervals, withheld below MIN_ITEMS_FOR_INTERVAL items. Items are the unit of
resampling, so item difficulty cancels inside each contrast.
"""
from __future__ import annotations

from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from vlgap.errors import VlgapError
from vlgap.keywords import renamed_keywords
from vlgap.stats.resampling import bootstrap_ci, sign_flip_or_none

EFFECTS = ("main_a", "main_b", "interaction")


@renamed_keywords(n_resamples="n_bootstrap", method="ci_method")
def factorial_effects(
    y00: Any,
    y01: Any,
    y10: Any,
    y11: Any,
    *,
    n_bootstrap: int = 1000,
    n_permutations: int = 10000,
    confidence: float = 0.95,
    ci_method: str = "bca",
    seed: int | None = 0,
) -> dict[str, Any]:
    """Effects from four aligned per-item score arrays (index i is the same item in every cell).

    Returns {"n_items", "cells": {"00": {mean, ci, ci_reason}, ...}, "main_a" / "main_b" / "interaction":
    {estimate, ci, ci_reason, ci_method, p_value, ...}}; an effect's ci inverts its own sign-flip test.
    """
    cells = {key: np.asarray(v, dtype=float) for key, v in zip(("00", "01", "10", "11"), (y00, y01, y10, y11))}
    n = cells["00"].shape
    for key, arr in cells.items():
        if arr.ndim != 1 or arr.shape != n:
            raise VlgapError(f"cell {key}: expected {n[0] if n else '?'} per-item scores (1-D, same items in "
                             f"every cell), got shape {arr.shape}")
        bad = np.flatnonzero(~np.isfinite(arr))
        if bad.size:
            raise VlgapError(f"cell {key} has NaN or Inf scores at item index {bad[:5].tolist()}")
    if n[0] < 2:
        raise VlgapError(f"2x2 analysis needs at least 2 items, got {n[0]}")
    c = cells
    contrasts = {
        "main_a": ((c["10"] + c["11"]) - (c["00"] + c["01"])) / 2.0,
        "main_b": ((c["01"] + c["11"]) - (c["00"] + c["10"])) / 2.0,
        "interaction": (c["11"] - c["10"]) - (c["01"] - c["00"]),
    }
    out: dict[str, Any] = {"n_items": int(n[0]), "confidence": confidence, "ci_method": ci_method,
                           "effects_ci_method": "sign-flip inversion", "n_bootstrap": n_bootstrap}
    out["cells"] = {}
    for k, (key, arr) in enumerate(cells.items()):
        iv = bootstrap_ci(arr, "mean", n_bootstrap=n_bootstrap, confidence=confidence, ci_method=ci_method,
                          seed=None if seed is None else seed + k)
        out["cells"][key] = {"mean": iv.estimate, "ci": iv.ci, "ci_reason": iv.reason}
    for k, name in enumerate(EFFECTS):
        d = contrasts[name]
        sub_seed = None if seed is None else seed + 10 + k
        iv, test = sign_flip_or_none(d, n_permutations=n_permutations, confidence=confidence, seed=sub_seed)
        out[name] = {"estimate": iv.estimate, "ci": iv.ci, "ci_reason": iv.reason, "ci_method": iv.method,
                     "p_value": None if test is None else test.p_value,
                     "n_permutations": 0 if test is None else test.n_permutations,
                     "exact": False if test is None else test.exact}
    return out


def _level_order(values: Iterable[str], given: Sequence[str] | None, factor: str) -> list[str]:
    seen = sorted(set(values), key=lambda v: (not _is_number(v), float(v) if _is_number(v) else 0.0, v))
    if given is not None:
        given = [str(g) for g in given]
        if len(given) != 2 or set(given) != set(seen):
            raise VlgapError(f"factor {factor}: levels {given} do not match the table's levels {seen}")
        return given
    if len(seen) != 2:
        raise VlgapError(f"factor {factor} must have exactly 2 levels for a 2x2 analysis, found {len(seen)}: {seen[:10]}")
    return seen


def _is_number(v: str) -> bool:
    try:
        float(v)
        return True
    except ValueError:
        return False


def factorial_from_rows(
    rows: Iterable[Mapping[str, Any]],
    *,
    levels_a: Sequence[str] | None = None,
    levels_b: Sequence[str] | None = None,
    **kwargs: Any,
) -> dict[str, Any]:
    """2x2 analysis from long-format rows with keys item, a, b, score (e.g. read from a CSV).

    Levels are ordered low -> high: numbers numerically, otherwise alphabetically, unless given.
    Every item needs exactly one score in each of the four cells; a missing or duplicated cell is
    an error naming the item.
    """
    table: dict[str, dict[tuple[str, str], float]] = {}
    a_values, b_values = [], []
    for line, row in enumerate(rows, start=1):
        try:
            item, a, b, score = str(row["item"]), str(row["a"]), str(row["b"]), row["score"]
        except KeyError as err:
            raise VlgapError(f"row {line}: missing column {err}; a 2x2 table needs columns item, a, b, score") from None
        try:
            value = float(score)
        except (TypeError, ValueError):
            raise VlgapError(f"row {line} (item {item!r}): score {score!r} is not a number") from None
        cell = table.setdefault(item, {})
        if (a, b) in cell:
            raise VlgapError(f"item {item!r} has two scores for cell a={a}, b={b}: one score per item and cell")
        cell[(a, b)] = value
        a_values.append(a)
        b_values.append(b)
    if not table:
        raise VlgapError("the 2x2 table has no rows")
    la = _level_order(a_values, levels_a, "a")
    lb = _level_order(b_values, levels_b, "b")
    cells = {key: [] for key in ("00", "01", "10", "11")}
    for item, scores in table.items():
        for i, a in enumerate(la):
            for j, b in enumerate(lb):
                if (a, b) not in scores:
                    raise VlgapError(f"item {item!r} has no score for cell a={a}, b={b}: every item needs all four cells")
                cells[f"{i}{j}"].append(scores[(a, b)])
    out = factorial_effects(cells["00"], cells["01"], cells["10"], cells["11"], **kwargs)
    out["levels_a"] = la
    out["levels_b"] = lb
    return out
