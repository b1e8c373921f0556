"""Tie-aware mutual k-NN (Test of Time): neighbour sets whose ties are broken uniformly at random, scored
in expectation, with a delete-one-group jackknife; and which of an item's related items is nearest.

placement of the two circles: captions do not name positions). Identical inputs have identical
features, so neighbour ranks tie exactly, and the usual tie rule (smaller item index first) would
make the k = 1, 2 scores depend on the order of the manifest. We keep all 180 items (the paper's N and
protocol) and score ties in expectation: j counts as a k-neighbour of i with the probability it gets
when ties are broken uniformly at random (`tie_aware_neighbours`); without ties this is exactly the
usual mutual k-NN. A second view keeps one placement per colour pair (60 items, every caption text
unique within the view), the structure the paper describes, so that caption repetition cannot drive
the score. Intervals: delete-one-group jackknife (a group = the 4 items of one colour pair and
placement, which share videos and words and so are not independent), layer pair fixed.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from vlgap.errors import VlgapError

#: similarities closer than this count as ties (identical inputs give identical features)
TIE_TOLERANCE = 1e-6


def cosine_similarities(x) -> np.ndarray:
    """[N, N] float64 inner products of the L2-normalised rows."""
    x = np.asarray(x, dtype=np.float64)
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    x = x / np.where(norms > 0, norms, 1.0)
    return x @ x.T


def tie_aware_neighbours(sims: np.ndarray, k: int, tol: float = TIE_TOLERANCE) -> np.ndarray:
    """P[i, j]: probability that j is one of the k nearest neighbours of i (largest sims[i, j], j != i)
    when similarities within `tol` of the k-th largest are ties broken uniformly at random.
    Rows sum to k; without ties P is the 0/1 neighbour indicator."""
    s = np.array(sims, dtype=np.float64, copy=True)
    n = s.shape[0]
    if s.shape != (n, n):
        raise VlgapError(f"sims must be a square [N, N] matrix, got shape {s.shape}")
    if not 1 <= k <= n - 1:
        raise VlgapError(f"k={k}: need 1 <= k <= N-1 = {n - 1}")
    np.fill_diagonal(s, -np.inf)
    kth = -np.partition(-s, k - 1, axis=1)[:, k - 1:k]
    above = s > kth + tol
    tied = np.abs(s - kth) <= tol
    n_above = above.sum(axis=1, keepdims=True)
    share = (k - n_above) / tied.sum(axis=1, keepdims=True)
    return above + tied * share


def tie_aware_mutual_knn(sims_x: np.ndarray, sims_y: np.ndarray, k: int, tol: float = TIE_TOLERANCE) -> np.ndarray:
    """Per-item expected mutual k-NN overlap / k (ties broken at random, independently in each space);
    its mean is the alignment score (equal to the usual mutual k-NN when no similarities tie)."""
    return (tie_aware_neighbours(sims_x, k, tol) * tie_aware_neighbours(sims_y, k, tol)).sum(axis=1) / k


def _jackknife(values: np.ndarray, estimate: float, confidence: float) -> tuple[list[float], float]:
    from scipy import stats

    g = len(values)
    se = float(np.sqrt((g - 1) / g * np.sum((values - values.mean()) ** 2)))
    z = float(stats.norm.ppf(0.5 + confidence / 2))
    return [float(max(0.0, estimate - z * se)), float(min(1.0, estimate + z * se))], se


def all_tied(sims: np.ndarray, tol: float = TIE_TOLERANCE) -> bool:
    """Every off-diagonal similarity equal within `tol`: the layer ranks no item above another."""
    s = np.asarray(sims, dtype=np.float64)
    if s.shape[0] < 3:
        return False
    off = s[~np.eye(s.shape[0], dtype=bool)]
    return bool(off.max() - off.min() <= tol)


def tot_alignment(vision_layers, text_layers, groups: Sequence, *, ks: Sequence[int] = (1, 2, 3),
                  confidence: float = 0.95, tol: float = TIE_TOLERANCE) -> list[dict[str, Any]]:
    """Tie-aware mutual k-NN at each k (best layer pair per k) with a delete-one-group jackknife interval
    (pair fixed). groups[i] names item i's group of related items (items of one group are dependent)."""
    as_list = lambda v: list(v) if isinstance(v, (list, tuple)) else [v]  # noqa: E731
    return tot_alignment_from_sims([cosine_similarities(x) for x in as_list(vision_layers)],
                                   [cosine_similarities(y) for y in as_list(text_layers)], groups, ks=ks,
                                   confidence=confidence, tol=tol)


def tot_alignment_from_sims(sx: list[np.ndarray], sy: list[np.ndarray], groups: Sequence, *,
                            ks: Sequence[int] = (1, 2, 3), confidence: float = 0.95,
                            tol: float = TIE_TOLERANCE) -> list[dict[str, Any]]:
    """`tot_alignment` on precomputed [N, N] similarity matrices per layer (`cosine_similarities`)."""
    n = sx[0].shape[0]
    groups = np.asarray(groups)
    if groups.shape[0] != n or sy[0].shape[0] != n:
        raise VlgapError(f"vision ({n}), text ({sy[0].shape[0]}) and groups ({groups.shape[0]}) must cover the "
                         "same items")
    from vlgap.metrics.base import ZeroVarianceError, constant_message

    labels = np.unique(groups)
    # a layer whose items all tie with each other (zero-variance features) ranks nothing: tie-aware
    # neighbours would make every item everyone's neighbour. Such layers are n/a, left out of the best pair.
    flat_x, flat_y = [i for i, s in enumerate(sx) if all_tied(s, tol)], [i for i, s in enumerate(sy) if all_tied(s, tol)]
    for label, flat, layers in (("vision", flat_x, sx), ("text", flat_y, sy)):
        if len(flat) == len(layers):
            raise ZeroVarianceError(constant_message("tie-aware mutual_knn", label, flat, len(layers), n))
    notes = [constant_message("tie-aware mutual_knn", label, flat, len(layers), n, verdict="n/a for those pairs")
             for label, flat, layers in (("vision", flat_x, sx), ("text", flat_y, sy)) if flat]
    out = []
    for k in ks:
        px = np.stack([tie_aware_neighbours(s, k, tol).ravel() for s in sx])
        py = np.stack([tie_aware_neighbours(s, k, tol).ravel() for s in sy])
        scores = px @ py.T / (n * k)
        scores[flat_x, :] = np.nan
        scores[:, flat_y] = np.nan
        a, b = divmod(int(np.nanargmax(scores)), scores.shape[1])
        est = float(scores[a, b])
        ci, se = None, None
        if len(labels) >= 3:
            loo = []
            for g in labels:
                keep = groups != g
                loo.append(tie_aware_mutual_knn(sx[a][np.ix_(keep, keep)], sy[b][np.ix_(keep, keep)], k, tol).mean())
            ci, se = _jackknife(np.asarray(loo), est, confidence)
        out.append({"k": int(k), "score": est, "ci": ci, "se": se, "x_layer": a, "y_layer": b, "n": n,
                    "n_groups": int(len(labels)), "chance": k / (n - 1), "scores": scores,
                    **({"notes": notes} if notes else {})})
    return out


def nearest_related(layer, related: np.ndarray, tol: float = TIE_TOLERANCE, *, sims: np.ndarray | None = None
                    ) -> np.ndarray:
    """[N, R] credit: for each item, which of its R related items (indices `related[i]`) is most similar
    (1 to the winner; ties within `tol` share the credit equally). `sims`: precomputed similarities."""
    sims = cosine_similarities(layer) if sims is None else sims
    related = np.asarray(related, dtype=np.int64)
    vals = np.take_along_axis(sims, related, axis=1)
    best = vals.max(axis=1, keepdims=True)
    win = vals >= best - tol
    return win / win.sum(axis=1, keepdims=True)


def group_fraction_ci(credit: np.ndarray, groups: np.ndarray, n_bootstrap: int, confidence: float,
                       seed: int) -> list[list[float]]:
    """Percentile intervals of the mean credit per relation, resampling whole groups."""
    from vlgap.stats.resampling import bootstrap_ci

    labels, inv = np.unique(groups, return_inverse=True)
    sums = np.zeros((len(labels), credit.shape[1]))
    np.add.at(sums, inv, credit)
    sizes = np.bincount(inv).astype(float)
    out = []
    for r in range(credit.shape[1]):
        iv = bootstrap_ci((sums[:, r], sizes), lambda s, c: s.sum(axis=-1) / c.sum(axis=-1), vectorized=True,
                          n_bootstrap=n_bootstrap, confidence=confidence, ci_method="percentile", seed=seed + r)
        out.append(iv.ci)
    return out
