"""Paired comparison of two systems scored on the same items, and the entry point `compare`.

    compare(scores_a, scores_b)                     two aligned per-item arrays
    compare("scores.csv")                           long table: item, system, score (two systems)
    compare("cells.csv", factorial=True)            long table: item, a, b, score (2x2 design)
    compare(rows, ...)                              the same tables as a list of dicts

The paired difference is mean(A) - mean(B) over items, with one inference for its interval and its
p-value: the two-sided sign-flip permutation test (exact enumeration for small N) and the interval
that inverts it (`vlgap.stats.resampling.sign_flip_inference`), so the interval excludes 0 exactly
when p < 1 - confidence and the printed verdict cannot contradict it. Each system's own mean gets a
bootstrap interval (BCa by default), withheld below MIN_ITEMS_FOR_INTERVAL items with the reason. Pairing removes item difficulty from the comparison, which is what makes small system
differences detectable at all.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from vlgap.caveats import reports_caveats
from vlgap.errors import VlgapError
from vlgap.keywords import renamed_keywords
from vlgap.stats.resampling import bootstrap_ci, sign_flip_or_none


@renamed_keywords(n_resamples="n_bootstrap", method="ci_method")
def paired_comparison(
    scores_a: Any,
    scores_b: Any,
    *,
    names: tuple[str, str] = ("A", "B"),
    n_bootstrap: int = 1000,
    n_permutations: int = 10000,
    confidence: float = 0.95,
    ci_method: str = "bca",
    seed: int | None = 0,
) -> dict[str, Any]:
    """Difference A - B of per-item scores (row i = same item): estimate, interval, p-value, N.

    "ci" inverts the sign-flip test whose p-value is "p_value" ("ci_method": "sign-flip inversion");
    "ci_a" / "ci_b" are bootstrap intervals of each system's mean (`method`). A withheld interval is
    None with its reason in "ci_reason" / "ci_a_reason" / "ci_b_reason"."""
    a = per_item_scores(scores_a, "scores_a")
    b = per_item_scores(scores_b, "scores_b")
    if a.ndim != 1 or b.ndim != 1 or a.shape != b.shape:
        raise VlgapError(f"paired scores must be two 1-D arrays over the same items, got shapes {a.shape} and {b.shape}")
    for name, arr in zip(names, (a, b)):
        bad = np.flatnonzero(~np.isfinite(arr))
        if bad.size:
            raise VlgapError(f"system {name!r} has NaN or Inf scores at item index {bad[:5].tolist()}")
    if a.size < 2:
        raise VlgapError(f"a paired comparison needs at least 2 items, got {a.size}")
    diff_iv, test = sign_flip_or_none(a - b, n_permutations=n_permutations, confidence=confidence, seed=seed)
    iv_a = bootstrap_ci(a, "mean", n_bootstrap=n_bootstrap, confidence=confidence, ci_method=ci_method, seed=seed)
    iv_b = bootstrap_ci(b, "mean", n_bootstrap=n_bootstrap, confidence=confidence, ci_method=ci_method, seed=seed)
    return {
        "system_a": names[0],
        "system_b": names[1],
        "n_items": int(a.size),
        "mean_a": iv_a.estimate,
        "ci_a": iv_a.ci,
        "ci_a_reason": iv_a.reason,
        "mean_b": iv_b.estimate,
        "ci_b": iv_b.ci,
        "ci_b_reason": iv_b.reason,
        "difference": diff_iv.estimate,
        "ci": diff_iv.ci,
        "ci_reason": diff_iv.reason,
        "p_value": None if test is None else test.p_value,
        "exact": False if test is None else test.exact,
        "wins_a": int(np.sum(a > b)),
        "wins_b": int(np.sum(b > a)),
        "ties": int(np.sum(a == b)),
        "confidence": confidence,
        "ci_method": diff_iv.method,
        "means_ci_method": ci_method,
        "n_bootstrap": n_bootstrap,
        "n_permutations": 0 if test is None else test.n_permutations,
    }


def per_item_scores(x: Any, name: str) -> np.ndarray:
    """One system's per-item scores as a float array, or VlgapError naming `name` (None, a str, a dict,
    a set or non-numbers refused; a list, tuple, numpy array or pandas Series passes)."""
    from vlgap.arguments import as_numbers

    return as_numbers(x, name, ndim=1, what="one score per item (a list or 1-D array of numbers)")


def score_rows(scores: Any, required: tuple[str, ...]) -> list[Mapping[str, Any]]:
    """The rows of a score table given as a list of dicts, an iterable of them or a pandas DataFrame, each
    checked to be a mapping: a VlgapError names `scores`, the row and the columns `required`."""
    need = ", ".join(required)
    if scores is None or isinstance(scores, (bytes, Mapping, set, frozenset)) or not hasattr(scores, "__iter__"):
        kind = "None" if scores is None else type(scores).__name__
        raise VlgapError(f"scores: expected a CSV path, a list of rows (dicts with keys {need}) or a pandas "
                         f"DataFrame with those columns, or system A's per-item scores together with scores_b; "
                         f"got {kind}")
    if hasattr(scores, "columns") and hasattr(scores, "to_dict"):  # a pandas DataFrame
        columns = [str(c) for c in scores.columns]
        missing = [c for c in required if c not in columns]
        if missing:
            raise VlgapError(f"scores: the DataFrame has columns {columns}; missing {missing} (need {need})")
        return scores.to_dict("records")
    rows = list(scores)
    for line, row in enumerate(rows, start=1):
        if not isinstance(row, Mapping):
            raise VlgapError(f"scores: row {line} is {type(row).__name__} {row!r:.40}, expected a dict with keys "
                             f"{need} (for two lists of per-item scores pass scores_b too)")
    return rows


def paired_from_rows(
    rows: Iterable[Mapping[str, Any]],
    *,
    system_a: str | None = None,
    system_b: str | None = None,
    **kwargs: Any,
) -> dict[str, Any]:
    """Paired comparison from long rows with keys item, system, score.

    Systems are taken in order of first appearance unless named; with more than two systems both
    must be named. Every item needs exactly one score per compared system.
    """
    table: dict[str, dict[str, float]] = {}
    systems: list[str] = []
    for line, row in enumerate(rows, start=1):
        try:
            item, system, score = str(row["item"]), str(row["system"]), row["score"]
        except KeyError as err:
            raise VlgapError(f"row {line}: missing column {err}; a paired table needs columns item, system, score") from None
        try:
            value = float(score)
        except (TypeError, ValueError):
            raise VlgapError(f"row {line} (item {item!r}): score {score!r} is not a number") from None
        if system not in systems:
            systems.append(system)
        per_item = table.setdefault(item, {})
        if system in per_item:
            raise VlgapError(f"item {item!r} has two scores for system {system!r}: one score per item and system")
        per_item[system] = value
    if not table:
        raise VlgapError("the score table has no rows")
    if system_a is None and system_b is None:
        if len(systems) != 2:
            raise VlgapError(f"found {len(systems)} systems {systems[:10]}; name the two to compare "
                             "(system_a=, system_b= / --a, --b)")
        system_a, system_b = systems
    if system_a is not None and system_a == system_b:
        raise VlgapError(f"--a and --b both name system {system_a!r}: a paired comparison needs two different "
                         f"systems; systems are {systems[:10]}")
    for s in (system_a, system_b):
        if s not in systems:
            raise VlgapError(f"system {s!r} is not in the table; systems are {systems[:10]}")
    a, b = [], []
    for item, per_item in table.items():
        for s in (system_a, system_b):
            if s not in per_item:
                raise VlgapError(f"item {item!r} has no score for system {s!r}: paired comparison needs both")
        a.append(per_item[system_a])
        b.append(per_item[system_b])
    return paired_comparison(a, b, names=(system_a, system_b), **kwargs)


@reports_caveats
@renamed_keywords(n_resamples="n_bootstrap", bootstrap="n_bootstrap", permutations="n_permutations",
                  method="ci_method")
def compare(
    scores: Any,
    scores_b: Any = None,
    *,
    factorial: bool = False,
    system_a: str | None = None,
    system_b: str | None = None,
    levels_a: Sequence[str] | None = None,
    levels_b: Sequence[str] | None = None,
    n_bootstrap: int = 1000,
    n_permutations: int = 10000,
    confidence: float = 0.95,
    ci_method: str = "bca",
    seed: int | None = 0,
) -> dict[str, Any]:
    """Compare systems on per-item scores: a paired difference, or with `factorial=True` a 2x2
    analysis (main effects A and B and their interaction, see `vlgap.stats.factorial`).

    scores: a CSV path, a list of row dicts, a pandas DataFrame with those columns, or (with `scores_b`)
    the per-item scores of system A. Every estimate comes with its number of items, a bootstrap interval
    and a p-value; n_permutations=0 asks for none (no p-value, and no interval for a difference, which
    inverts the test).
    """
    opts = dict(n_bootstrap=n_bootstrap, n_permutations=n_permutations, confidence=confidence,
                ci_method=ci_method, seed=seed)
    if scores_b is not None:
        if factorial:
            raise VlgapError("factorial=True needs one long table (item, a, b, score), not two arrays")
        names = (system_a or "A", system_b or "B")
        scores, scores_b = per_item_scores(scores, "scores"), per_item_scores(scores_b, "scores_b")
        return ComparisonResult({"analysis": "paired", **paired_comparison(scores, scores_b, names=names, **opts)})
    required = ("item", "a", "b", "score") if factorial else ("item", "system", "score")
    if isinstance(scores, (str, Path)):
        from vlgap.stats.inputs import read_table

        rows = read_table(scores, required)
    else:
        rows = score_rows(scores, required)
    if factorial:
        from vlgap.stats.factorial import factorial_from_rows

        return ComparisonResult({"analysis": "factorial",
                                 **factorial_from_rows(rows, levels_a=levels_a, levels_b=levels_b, **opts)})
    return ComparisonResult({"analysis": "paired",
                             **paired_from_rows(rows, system_a=system_a, system_b=system_b, **opts)})


class ComparisonResult(dict):
    """`compare`'s result: the JSON-ready dict it always was, plus `to_frame()`."""

    def to_frame(self):
        """pandas DataFrame, one row per estimate. Paired: each system's mean and the difference A - B
        (its p-value). 2x2: the four cells (`"a=<level>, b=<level>"`) and the effects main_a, main_b,
        interaction (with p-values). Columns quantity, estimate, ci_low, ci_high, p_value, n_items,
        confidence."""
        from vlgap.frames import FLOAT, INT, STRING, interval_bounds, make_frame, require_pandas
        require_pandas(type(self).__name__)

        if self["analysis"] == "factorial":
            rows = []
            for key, cell in self["cells"].items():
                level_a, level_b = self["levels_a"][int(key[0])], self["levels_b"][int(key[1])]
                rows.append({"quantity": f"a={level_a}, b={level_b}", "estimate": cell["mean"],
                             **interval_bounds(cell["ci"])})
            for name in ("main_a", "main_b", "interaction"):
                effect = self[name]
                rows.append({"quantity": name, "estimate": effect["estimate"], **interval_bounds(effect["ci"]),
                             "p_value": effect["p_value"]})
        else:
            rows = [{"quantity": f"mean {self['system_a']}", "estimate": self["mean_a"], **interval_bounds(self["ci_a"])},
                    {"quantity": f"mean {self['system_b']}", "estimate": self["mean_b"], **interval_bounds(self["ci_b"])},
                    {"quantity": "difference", "estimate": self["difference"], **interval_bounds(self["ci"]),
                     "p_value": self["p_value"]}]
        for row in rows:
            row.update(n_items=self["n_items"], confidence=self["confidence"])
        return make_frame(rows, {"quantity": STRING, "estimate": FLOAT, "ci_low": FLOAT, "ci_high": FLOAT,
                                 "p_value": FLOAT, "n_items": INT, "confidence": FLOAT}, "ComparisonResult")
