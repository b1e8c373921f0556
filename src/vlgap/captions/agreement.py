"""Agreement of a metric with human judgments: Kendall tau-b and tau-c, Pearson, Spearman, pairwise
preference accuracy, each with a bootstrap interval over items.

Pure functions on arrays. Rows are (item, caption) pairs: several captions of one item (several
systems, or Flickr8k-Expert's candidates per image) share an item, and the bootstrap resamples
*items* with all their rows, since captions of one picture are not independent judgments.

The protocol of the CLIPScore and PAC-S papers (jmhessel/clipscore flickr8k_example): one row per
human rating, so a Flickr8k-Expert candidate judged by three experts is three rows sharing its metric
score (ties on the metric side), and one tau over all rows. Flickr8k-Expert and Composite are reported
as tau-c (Stuart's, for few rating levels), Flickr8k-CrowdFlower as tau-b; both are computed here by
pair counting (Knight's method, ties on both sides) and equal scipy.stats.kendalltau(variant='b'/'c').
Pairwise preference (A vs B
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


def _tied_pairs(ranks: np.ndarray) -> int:
    counts = np.bincount(ranks)
    return int((counts * (counts - 1) // 2).sum())


def _discordant(y: np.ndarray, levels: int) -> int:
    """Pairs i < j with y[i] > y[j] (y: dense ranks 0..levels-1): per level, the earlier rows above it."""
    if levels <= 64:
        total = 0
        above = np.zeros(len(y), dtype=np.int64)  # rows before each row whose rank exceeds the current level
        for level in range(levels - 1, 0, -1):
            hit = y == level
            above += np.cumsum(hit) - hit
            total += int(above[y == level - 1].sum())
        return total
    # many levels: a bottom-up merge sort, counting at each merge the left-half rows above each right row
    total, width, n = 0, 1, len(y)
    keys = y.astype(np.int64)
    while width < n:
        block = np.arange(n) // width
        pair, right = block // 2, (block % 2).astype(bool)
        shifted = pair * levels + keys  # sorted within each block, blocks in order
        left_keys = shifted[~right]
        ends = np.searchsorted(left_keys, (pair[right] + 1) * levels)
        total += int((ends - np.searchsorted(left_keys, shifted[right], side="right")).sum())
        keys = np.sort(shifted, kind="stable") - pair * levels
        width *= 2
    return total


def concordance(x: Sequence[float], y: Sequence[float]) -> tuple[int, int, int, int, int, int]:
    """(n, C - D, pairs tied in x, pairs tied in y, distinct x, distinct y) by Knight's method: sort by
    (x, y), then the pairs that disagree are the inversions of y; O(n log n) or O(n * levels)."""
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    rx = np.unique(x, return_inverse=True)[1].ravel()
    ry = np.unique(y, return_inverse=True)[1].ravel()
    kx, ky = int(rx.max()) + 1 if len(x) else 0, int(ry.max()) + 1 if len(y) else 0
    n = len(x)
    n0 = n * (n - 1) // 2
    n1, n2 = _tied_pairs(rx), _tied_pairs(ry)
    if kx < ky:  # count inversions along the side with fewer levels (C - D is symmetric)
        rx, ry, kx, ky = ry, rx, ky, kx
    order = np.lexsort((ry, rx))
    sx, sy = rx[order], ry[order]
    starts = np.flatnonzero(np.r_[True, (sx[1:] != sx[:-1]) | (sy[1:] != sy[:-1])]) if n else np.zeros(0, int)
    runs = np.diff(np.r_[starts, n])
    n3 = int((runs * (runs - 1) // 2).sum())  # pairs tied on both sides
    discordant = _discordant(sy, ky)
    return n, (n0 - n1 - n2 + n3) - 2 * discordant, n1, n2, min(kx, ky), max(kx, ky)


def kendall_taus(x: Sequence[float], y: Sequence[float]) -> tuple[float, float]:
    """(tau-b, tau-c) as scipy.stats.kendalltau(variant='b' / 'c') defines them (ties on both sides),
    from one pass of `concordance`; NaN when either side is constant."""
    n, s, n1, n2, m, _ = concordance(x, y)
    n0 = n * (n - 1) // 2
    if m < 2:
        return float("nan"), float("nan")
    tau_b = float(s / np.sqrt(float(n0 - n1) * float(n0 - n2)))
    return tau_b, float(min(1.0, max(-1.0, 2.0 * s / (n * n * (m - 1) / m))))


def _kendall(x, y, variant: str) -> float:
    return kendall_taus(x, y)[0 if variant == "b" else 1]


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
            xs, ys = x[rows], y[rows]
            taus = kendall_taus(xs, ys)  # one pair count for both taus
            for name, fn in CORRELATIONS.items():
                boot[name].append(taus[0] if name == "kendall_tau_b" else taus[1] if name == "kendall_tau_c"
                                  else fn(xs, ys))
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
