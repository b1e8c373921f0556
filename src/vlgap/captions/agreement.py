"""Agreement of a metric with human judgments: Kendall tau-b and tau-c, Pearson, Spearman, pairwise
preference accuracy, each with a bootstrap interval over items.

Pure functions on arrays. Rows are (item, caption) pairs: several captions of one item (several
systems, or Flickr8k-Expert's candidates per image) share an item, and the bootstrap resamples
*items* with all their rows, since captions of one picture are not independent judgments.

Conventions: tau-b (ties corrected on both sides; scipy.stats.kendalltau's default, used by
Flickr8k-Expert papers such as CLIPScore's) and tau-c (Stuart's, for rectangular tables with few
rating levels; used on Composite and Flickr8k-CF by PAC-S and others). Pairwise preference (A vs B
votes, e.g. CapArena, Pascal-50S): the metric agrees when it scores the preferred caption higher;
a metric tie counts 1/2 (Pascal-50S's convention), votes for a tie are left out and counted.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np
from scipy import stats as sps

from vlgap.errors import VlgapError
from vlgap.stats.resampling import MIN_ITEMS_FOR_INTERVAL, interval_reason, too_few_items_reason


def kendall_tau_b(x: Sequence[float], y: Sequence[float]) -> float:
    """Kendall's tau-b, (C - D) / sqrt((n0 - n1)(n0 - n2)); NaN when either side is constant."""
    return _kendall(x, y, "b")


def kendall_tau_c(x: Sequence[float], y: Sequence[float]) -> float:
    """Stuart's tau-c, 2m(C - D) / (n^2 (m - 1)) with m = min(distinct x, distinct y)."""
    return _kendall(x, y, "c")


def _kendall(x, y, variant: str) -> float:
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if np.ptp(x) == 0 or np.ptp(y) == 0:
        return float("nan")
    # scipy's O(n log n) merge-sort count: the bootstrap recomputes it a thousand times
    return float(sps.kendalltau(x, y, variant=variant).statistic)


def pearson(x, y) -> float:
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if np.ptp(x) == 0 or np.ptp(y) == 0:
        return float("nan")
    return float(np.corrcoef(x, y)[0, 1])


def spearman(x, y) -> float:
    return pearson(sps.rankdata(x), sps.rankdata(y))


CORRELATIONS: dict[str, Callable[[Any, Any], float]] = {
    "kendall_tau_b": kendall_tau_b, "kendall_tau_c": kendall_tau_c, "pearson": pearson, "spearman": spearman}


@dataclass
class Agreement:
    value: float
    low: float
    high: float


def _item_groups(items: Sequence[Any]) -> tuple[list[np.ndarray], int]:
    keys: dict[str, list[int]] = {}
    for row, item in enumerate(items):
        keys.setdefault(str(item), []).append(row)
    return [np.asarray(v) for v in keys.values()], len(keys)


def _resampled_rows(groups: list[np.ndarray], rng: np.random.Generator) -> np.ndarray:
    picks = rng.integers(0, len(groups), size=len(groups))
    return np.concatenate([groups[i] for i in picks])


def correlation_agreement(metric_scores: Sequence[float], human_ratings: Sequence[float], items: Sequence[Any],
                          *, n_bootstrap: int = 1000, confidence: float = 0.95, seed: int | None = 0
                          ) -> dict[str, dict[str, Any]]:
    """Kendall tau-b, tau-c, Pearson and Spearman between a metric and human ratings, each with a
    percentile bootstrap interval over items (all rows of a resampled item come along)."""
    x = np.asarray(metric_scores, dtype=np.float64)
    y = np.asarray(human_ratings, dtype=np.float64)
    if not (len(x) == len(y) == len(items)):
        raise VlgapError(f"agreement needs one metric score and one rating per row, got {len(x)} scores, "
                         f"{len(y)} ratings and {len(items)} items")
    if len(x) < 3:
        raise VlgapError(f"agreement with human ratings needs at least 3 rated captions, got {len(x)}")
    groups, n_items = _item_groups(items)
    out: dict[str, dict[str, Any]] = {name: {"value": fn(x, y)} for name, fn in CORRELATIONS.items()}
    if n_bootstrap and n_items < MIN_ITEMS_FOR_INTERVAL:
        for name in CORRELATIONS:  # vlgap.stats' small-n rule: "n/a (why)", never a too-short interval
            out[name].update(ci=None, ci_reason=too_few_items_reason(n_items, label="items"))
    elif n_bootstrap:
        rng = np.random.default_rng(seed)
        boot = {name: [] for name in CORRELATIONS}
        for _ in range(n_bootstrap):
            rows = _resampled_rows(groups, rng)
            for name, fn in CORRELATIONS.items():
                boot[name].append(fn(x[rows], y[rows]))
        alpha = (1 - confidence) / 2
        for name, values in boot.items():
            v = np.asarray(values)
            v = v[np.isfinite(v)]
            lo, hi = (float(np.quantile(v, alpha)), float(np.quantile(v, 1 - alpha))) if len(v) else (np.nan, np.nan)
            reason = interval_reason(lo, hi)
            out[name].update(ci=None if reason else [lo, hi], ci_reason=reason)
    return out


def preference_agreement(score_a: Sequence[float], score_b: Sequence[float], preference: Sequence[float],
                         items: Sequence[Any], *, n_bootstrap: int = 1000, confidence: float = 0.95,
                         seed: int | None = 0) -> dict[str, Any]:
    """Share of A-vs-B votes where the metric prefers the caption humans preferred.

    preference: +1 (A preferred), -1 (B preferred), 0 (a tie vote: left out and counted). A metric
    tie scores 1/2. The interval resamples items."""
    a, b = np.asarray(score_a, dtype=np.float64), np.asarray(score_b, dtype=np.float64)
    pref = np.sign(np.asarray(preference, dtype=np.float64))
    if not (len(a) == len(b) == len(pref) == len(items)):
        raise VlgapError("pairwise agreement needs one score for A, one for B and one vote per row")
    keep = pref != 0
    hits = np.where(np.sign(a - b) == pref, 1.0, np.where(a == b, 0.5, 0.0))[keep]
    kept_items = [it for it, k in zip(items, keep) if k]
    if len(hits) == 0:
        raise VlgapError("no decisive A-vs-B vote to compare with (every vote is a tie)")
    out: dict[str, Any] = {"value": float(hits.mean()), "n_votes": int(len(hits)),
                           "n_tie_votes_left_out": int((~keep).sum())}
    groups, n_items = _item_groups(kept_items)
    if n_bootstrap and n_items < MIN_ITEMS_FOR_INTERVAL:
        out.update(ci=None, ci_reason=too_few_items_reason(n_items, label="items"))
    elif n_bootstrap:
        rng = np.random.default_rng(seed)
        boot = np.array([hits[_resampled_rows(groups, rng)].mean() for _ in range(n_bootstrap)])
        alpha = (1 - confidence) / 2
        lo, hi = float(np.quantile(boot, alpha)), float(np.quantile(boot, 1 - alpha))
        reason = interval_reason(lo, hi)
        out.update(ci=None if reason else [lo, hi], ci_reason=reason)
    return out
