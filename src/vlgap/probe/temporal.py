"""Does alignment see temporal order? Three probes (Dynamic Reflections sec. 8) plus the controls the
paper lacked, each reported with N and an interval.

1. Test of Time (`run_test_of_time`): mutual k-NN alignment at k = 1, 2, 3 on the 180 generated
   (video, caption) items, and, for every caption, which of its three logically related captions each
   space ranks nearest (equivalent / colour swap = same words / relation swap = same colour order).
2. Reorder (`run_reorder`, VideoComp style): alignment with the positive captions against alignment
   with each negative (same events, other order) substituted for its positive; paired bootstrap
   interval on the drop. Triples come from the shapes manifest (meta["reorder"]) or a JSON file
   (`read_reorder_json`: our form or VideoComp's).
3. Frame order (`run_frame_order`): alignment with the sampled frames of every video reversed or
   shuffled against ordered frames, each difference with a paired bootstrap interval.

Duplicates in Test of Time. The generator writes 90 videos for 180 items (the two logically
equivalent captions of a video share its file) and each caption text appears three times (once per
placement of the two circles: captions do not name positions). Identical inputs have identical
features, so neighbour ranks tie exactly, and the usual tie rule (smaller item index first) would
make the k = 1, 2 scores depend on the order of the manifest. We keep all 180 items (the paper's N and
protocol) and score ties in expectation: j counts as a k-neighbour of i with the probability it gets
when ties are broken uniformly at random (`tie_aware_neighbours`); without ties this is exactly the
usual mutual k-NN. A second view keeps one placement per colour pair (60 items, every caption text
unique within the view), the structure the paper describes, so that caption repetition cannot drive
the score. Intervals: delete-one-group jackknife (a group = the 4 items of one colour pair and
placement, which share videos and words and so are not independent), layer pair fixed.

What the reorder and frame-order bootstraps resample. Mutual k-NN per-item overlaps depend on the
whole set (each item's neighbours are other items), so resampling fixed per-item overlaps would
understate the variance (the score behaves like a U-statistic; see vlgap.metrics.uncertainty).
Instead every resample draws N items with replacement (the same draws for both conditions: paired)
and recomputes every neighbour list inside the resample, as the layer-search bootstrap does
(vlgap.metrics.uncertainty): an item's neighbours are the k nearest *distinct* drawn items other than
itself, and its overlap counts as often as it was drawn; a negative caption's neighbours are searched
among the drawn positives of the other videos. Simulated check of the drop's standard error (latent
content + order factors, 40 independent data sets per case, N = 120 / k = 5 and N = 300 / k = 10, no
effect and an effect of ~0.08): this bootstrap gave 1.1-1.4x the true SD (conservative); resampling
fixed per-item differences gave 0.82-1.05x (too narrow when there is an effect); counting copies of a
neighbour as separate neighbours gave ~1.7x. The interval is the percentile interval of the resampled difference re-centred on the
observed difference (the resamples' common scale shift removed, as in the layer-search bootstrap).
The layer pair is chosen once, by the mean of the two conditions' scores (so selection favours
neither condition), and held fixed in the resamples.

Image encoders that average per-frame embeddings are order-invariant by construction: their
reversed or shuffled features equal the ordered ones up to float rounding, so every frame-order
difference is exactly 0 for them. The report says so instead of implying a measured null effect.
"""
from __future__ import annotations

import html
import json
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from vlgap.errors import VlgapError
from vlgap.probe.report import Raw as _Raw, fmt, fmt_ci, html_table, save_figure, write_section  # noqa: F401
from vlgap.io_utils import atomic_write_bytes, atomic_write_json

#: the three logically related captions of a Test of Time item, in the order used everywhere
RELATIONS = ("equivalent", "colour_swap", "relation_swap")
RELATION_LABELS = {"equivalent": "equivalent (same meaning, other words)",
                   "colour_swap": "colour swap (same words, opposite meaning)",
                   "relation_swap": "relation swap (same colour order, other relation word)"}
#: similarities closer than this count as ties (identical inputs give identical features)
TIE_TOLERANCE = 1e-6


# ==================================================================================================
# report sections: helpers live in vlgap.probe.report (fmt, fmt_ci, html_table, Raw, save_figure, write_section)
# ==================================================================================================

def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


# ==================================================================================================
# pure arrays: neighbour rankings and the paired bootstrap of two k-NN conditions
# ==================================================================================================

def _prepared_layers(xs, name: str):
    import torch

    from vlgap.metrics.prepare import as_layers, prepare

    return [prepare(t) for t in as_layers(xs, name, torch.device("cpu"))]


class _Side:
    """Rows to rank in one space: row r ranks the `pool` items by similarity to `query[r]` (inner
    product of L2-normalised rows; ties: smaller pool index first), never pool item `exclude[r]`.
    Rankings of all rows are memoised (a shallower ranking is a prefix of a deeper one)."""

    def __init__(self, query, pool, exclude):
        self.query, self.pool, self.exclude = query, pool, exclude
        self._ranked = None

    @classmethod
    def self_rows(cls, feats, rows=None):
        import torch

        if rows is None:
            return cls(feats, feats, torch.arange(feats.shape[0]))
        return cls(feats[rows], feats, rows)

    @property
    def n_rows(self) -> int:
        return self.query.shape[0]

    def rank(self, depth: int, rows=None):
        """[R, depth] int64 rankings (all rows, or the given row indices)."""
        import torch

        from vlgap.metrics.knn import exact_topk
        from vlgap.metrics.prepare import DEFAULT_CHUNK_BYTES

        n = self.pool.shape[0]
        depth = min(depth, n - 1)
        if rows is None and self._ranked is not None and self._ranked.shape[1] >= depth:
            return self._ranked[:, :depth]
        q = self.query if rows is None else self.query[rows]
        ex = self.exclude if rows is None else self.exclude[rows]
        out = torch.empty((q.shape[0], depth), dtype=torch.int64)
        step = max(1, min(q.shape[0], DEFAULT_CHUNK_BYTES // max(1, 12 * n)))
        for s in range(0, q.shape[0], step):
            sims = q[s:s + step] @ self.pool.T
            sims[torch.arange(sims.shape[0]), ex[s:s + step]] = float("-inf")
            out[s:s + step] = exact_topk(sims, depth)[0]
        if rows is None:
            self._ranked = out
        return out


class Space:
    """One encoder's layers, L2-normalised once, with memoised neighbour rankings per layer: give the
    same Space to several comparisons (e.g. one vision encoder against several text encoders) and each
    layer is ranked once."""

    def __init__(self, layers, name: str = "X"):
        self.name = name
        self.feats = _prepared_layers(layers, name)
        self.sides = [_Side.self_rows(f) for f in self.feats]

    @property
    def n(self) -> int:
        return int(self.feats[0].shape[0])

    def __len__(self) -> int:
        return len(self.feats)


def _space(obj, name: str) -> Space:
    return obj if isinstance(obj, Space) else Space(obj, name)


@dataclass
class KnnCondition:
    """One alignment measurement as rows: row r belongs to item `owner[r]` and counts with `weight[r]`
    (1 for an item's own row; 1/m for each of an item's m negatives). `x[l]` / `y[l]` are the rows of
    X layer l / Y layer l. Score = sum_r weight_r |kNN_X(r) & kNN_Y(r)| / (k N)."""

    name: str
    x: list[_Side]
    y: list[_Side]
    owner: Any  # torch int64 [R]
    weight: Any  # torch float64 [R]


def _pair_score_matrix(cond: KnnCondition, k: int, n_items: int) -> np.ndarray:
    """[L_x, L_y] scores from top-k lists (each layer ranked once): per X layer a membership table
    [R, N] answers "is j among row r's X-neighbours" for every Y list at once."""
    import torch

    ly = torch.stack([s.rank(k) for s in cond.y])                               # [L_y, R, k]
    n_rows = ly.shape[1]
    cols = ly.permute(1, 0, 2).reshape(n_rows, -1)                             # [R, L_y * k]
    w = cond.weight.to(torch.float64)
    out = np.empty((len(cond.x), ly.shape[0]))
    for a, side in enumerate(cond.x):
        member = torch.zeros((n_rows, n_items), dtype=torch.float64)
        member.scatter_(1, side.rank(k), 1.0)
        hits = member.gather(1, cols).view(n_rows, ly.shape[0], k).sum(dim=2)  # [R, L_y]
        out[a] = ((w @ hits) / (k * n_items)).numpy()
    return out


def _resampled_lists(side: _Side, ranked, weights, k: int):
    """Each row's k nearest draws in each resample: ids, taken [B, R, k]."""
    import torch

    from vlgap.metrics.knn import walk_rows, weighted_neighbours

    ids, taken, short = weighted_neighbours(ranked, weights, k)
    full_depth = side.pool.shape[0] - 1
    if ranked.shape[1] < full_depth and bool(short.any()):
        # the stored ranking held fewer than k draws for these rows: rank them against every item
        for b, r in torch.nonzero(short).tolist():
            full = side.rank(full_depth, rows=torch.tensor([r]))
            w = weights[b:b + 1].to(torch.float32).gather(1, full)
            fi, ft, _ = walk_rows(full, w, k)
            ids[b, r], taken[b, r] = fi[0], ft[0]
    return ids, taken


def _resampled_scores(cond: KnnCondition, xa: int, yb: int, weights, k: int, n: int, depth: int,
                      memo: dict):
    """Scores of `cond` at layer pair (xa, yb) in each resample of `weights` [B, N]; `memo` keeps the
    resampled lists of sides shared with another condition (same draws, same lists)."""
    import torch

    w = torch.from_numpy(weights).to(torch.int32)
    # neighbours are the k nearest distinct drawn items (as in vlgap.metrics.uncertainty); each row
    # then counts as often as its item was drawn
    walk = (w > 0).to(torch.int32)

    def lists(side):
        if id(side) not in memo:
            memo[id(side)] = _resampled_lists(side, side.rank(depth), walk, k)
        return memo[id(side)]

    ix, tx = lists(cond.x[xa])
    iy, ty = lists(cond.y[yb])
    r = ix.shape[1]
    step = max(1, (16 * 2**20) // max(1, r * k * k))
    overlap = torch.empty(ix.shape[:2], dtype=torch.float64)
    for s in range(0, ix.shape[0], step):
        eq = ix[s:s + step, :, :, None] == iy[s:s + step, :, None, :]
        m = torch.minimum(tx[s:s + step, :, :, None], ty[s:s + step, :, None, :])
        overlap[s:s + step] = (eq * m).sum(dim=(2, 3)).to(torch.float64)
    row_w = w.to(torch.float64)[:, cond.owner] * cond.weight[None, :]
    return ((overlap * row_w).sum(dim=1) / (k * n)).numpy()


def _centred_interval(estimate: float, samples: np.ndarray, confidence: float) -> list[float]:
    from vlgap.stats.resampling import percentile_interval

    lo, hi = percentile_interval(samples - np.mean(samples), confidence)
    return [float(estimate + lo), float(estimate + hi)]


@dataclass
class PairedDifference:
    """Alignment in condition A and B on the same N items, and A - B with a paired bootstrap interval."""

    name_a: str
    name_b: str
    score_a: float
    score_b: float
    difference: float
    ci: list[float] | None
    ci_a: list[float] | None
    ci_b: list[float] | None
    se: float | None
    n: int
    n_rows_b: int
    k: int
    chance: float
    x_layer: int
    y_layer: int
    n_bootstrap: int
    confidence: float
    seed: int
    method: str = ("paired bootstrap over items, neighbours recomputed in every resample; percentile "
                   "interval re-centred on the observed value; layer pair fixed (best mean of A and B)")
    scores_a: np.ndarray | None = field(default=None, repr=False)
    scores_b: np.ndarray | None = field(default=None, repr=False)
    samples: np.ndarray | None = field(default=None, repr=False)

    @property
    def excludes_zero(self) -> bool:
        return self.ci is not None and (self.ci[0] > 0 or self.ci[1] < 0)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        for key in ("scores_a", "scores_b", "samples"):
            d.pop(key)
        return d


def compare_conditions(a: KnnCondition, b: KnnCondition, *, n_items: int, k: int, n_bootstrap: int = 1000,
                       confidence: float = 0.95, seed: int = 0) -> PairedDifference:
    """Score conditions A and B at every layer pair, fix the pair with the best mean of the two, and
    bootstrap the difference A - B over items (see the module docstring)."""
    from vlgap.metrics.uncertainty import bootstrap_weight_batches

    if not 1 <= k <= n_items - 2:
        raise VlgapError(f"k={k}: need 1 <= k <= N-2 = {n_items - 2} (N = {n_items} items)")
    sa = _pair_score_matrix(a, k, n_items)
    sb = _pair_score_matrix(b, k, n_items)
    mean = (sa + sb) / 2
    xa, yb = divmod(int(np.argmax(mean)), mean.shape[1])
    score_a, score_b = float(sa[xa, yb]), float(sb[xa, yb])
    diff = score_a - score_b
    res = PairedDifference(a.name, b.name, score_a, score_b, diff, None, None, None, None, n_items,
                           int(b.owner.shape[0]), k, k / (n_items - 1), xa, yb, int(n_bootstrap), confidence,
                           int(seed), scores_a=sa, scores_b=sb)
    if n_bootstrap:
        depth = a.x[xa].pool.shape[0] - 1
        if max(a.x[xa].n_rows, b.x[xa].n_rows) * depth > 4_000_000:
            depth = 4 * k + 32  # shallow rankings; rows that run short are re-ranked in full
        out_a, out_b = [], []
        for weights in bootstrap_weight_batches(n_items, n_bootstrap, seed):
            memo: dict = {}
            out_a.append(_resampled_scores(a, xa, yb, weights, k, n_items, depth, memo))
            out_b.append(_resampled_scores(b, xa, yb, weights, k, n_items, depth, memo))
        boot_a, boot_b = np.concatenate(out_a), np.concatenate(out_b)
        d = boot_a - boot_b
        res.ci = _centred_interval(diff, d, confidence)
        res.ci_a = _centred_interval(score_a, boot_a, confidence)
        res.ci_b = _centred_interval(score_b, boot_b, confidence)
        res.se = float(np.std(d, ddof=1)) if len(d) > 1 else None
        res.samples = d
    return res


def _negative_sides(ns: list, positive: Space, owner) -> list[_Side]:
    """Rows that rank the positives by similarity to each negative (prepared layers `ns`), never its own video's."""
    if len(ns) != len(positive):
        raise VlgapError(f"negatives have {len(ns)} layers but positives {len(positive)}: encode both with one "
                         "text encoder")
    if ns[0].shape[0] != owner.shape[0]:
        raise VlgapError(f"negative_owner has {owner.shape[0]} entries for {ns[0].shape[0]} negative rows")
    return [_Side(ng, p, owner) for ng, p in zip(ns, positive.feats)]


def _owner(negative_owner, n_rows: int, n: int):
    import torch

    owner = torch.arange(n_rows) if negative_owner is None else torch.as_tensor(
        np.asarray(negative_owner, dtype=np.int64))
    if owner.ndim != 1 or owner.shape[0] != n_rows or (n_rows and (int(owner.min()) < 0 or int(owner.max()) >= n)):
        raise VlgapError(f"negative_owner must give, for each of the {n_rows} negative rows, a video index in "
                         f"0..{n - 1}")
    counts = torch.bincount(owner, minlength=n)
    if bool((counts == 0).any()):
        missing = torch.nonzero(counts == 0).flatten()[:5].tolist()
        raise VlgapError(f"videos {missing} have no negative caption; drop them from every input first")
    return owner, counts


def _reorder_from_sides(x: Space, p: Space, neg_sides: list[_Side], owner, counts, **kw) -> PairedDifference:
    import torch

    n = x.n
    if p.n != n:
        raise VlgapError(f"positives have {p.n} rows but vision has {n}: one positive per video")
    one_each = bool(torch.equal(owner, torch.arange(n)))
    cond_a = KnnCondition("positive", x.sides, p.sides, torch.arange(n), torch.ones(n, dtype=torch.float64))
    # with one negative per video its vision rows are the positive condition's rows: share them
    x_b = x.sides if one_each else [_Side.self_rows(f, owner) for f in x.feats]
    cond_b = KnnCondition("negative", x_b, neg_sides, owner, 1.0 / counts[owner].to(torch.float64))
    return compare_conditions(cond_a, cond_b, n_items=n, **kw)


def reorder_drop(vision_layers, positive_layers, negative_layers, negative_owner: Sequence[int] | None = None, *,
                 k: int = 5, n_bootstrap: int = 1000, confidence: float = 0.95, seed: int = 0) -> PairedDifference:
    """VideoComp-style temporal reorder probe on arrays.

    vision_layers: [N, D] array or list of per-layer arrays (row i = video i), or a `Space`;
    positive_layers: the positive caption of every video (same rows); negative_layers: [R, D] per text
    layer, row r a negative caption of video `negative_owner[r]` (default: row r belongs to video r).
    Condition A: mutual k-NN of videos and positives. Condition B: each negative in turn replaces its
    positive, its text neighbours searched among the positives of the other videos; an item's m
    negatives count 1/m each. Returns A - B (the drop) with a paired bootstrap interval over videos."""
    x, p = _space(vision_layers, "vision"), _space(positive_layers, "positive")
    if p.n != x.n:
        raise VlgapError(f"positives have {p.n} rows but vision has {x.n}: one positive per video")
    ns = negative_layers.feats if isinstance(negative_layers, Space) else _prepared_layers(negative_layers, "negative")
    owner, counts = _owner(negative_owner, ns[0].shape[0], x.n)
    return _reorder_from_sides(x, p, _negative_sides(ns, p, owner), owner, counts, k=k,
                               n_bootstrap=n_bootstrap, confidence=confidence, seed=seed)


def frame_order_difference(ordered_layers, control_layers, text_layers, *, k: int = 10, n_bootstrap: int = 1000,
                           confidence: float = 0.95, seed: int = 0, control: str = "control") -> PairedDifference:
    """Alignment with ordered frames minus alignment with a frame-order control (reversed, shuffled):
    the vision features of the same N videos under both orders against the same text features (arrays,
    lists of per-layer arrays, or `Space`s; giving the same Space twice means identical features)."""
    import torch

    xo, xc, ys = _space(ordered_layers, "ordered"), _space(control_layers, control), _space(text_layers, "text")
    n = xo.n
    if xc.n != n or ys.n != n:
        raise VlgapError(f"ordered ({n}), {control} ({xc.n}) and text ({ys.n}) features must hold the same items "
                         "in the same order")
    if len(xc) != len(xo):
        raise VlgapError(f"{control} features have {len(xc)} layers, ordered {len(xo)}: use one vision encoder")
    ones, rows = torch.ones(n, dtype=torch.float64), torch.arange(n)
    cond_a = KnnCondition("ordered", xo.sides, ys.sides, rows, ones)
    cond_b = KnnCondition(control, xc.sides, ys.sides, rows, ones)
    return compare_conditions(cond_a, cond_b, n_items=n, k=k, n_bootstrap=n_bootstrap, confidence=confidence,
                              seed=seed)


# ==================================================================================================
# pure arrays: Test of Time (tie-aware mutual k-NN, nearest related caption)
# ==================================================================================================

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
    labels = np.unique(groups)
    out = []
    for k in ks:
        px = np.stack([tie_aware_neighbours(s, k, tol).ravel() for s in sx])
        py = np.stack([tie_aware_neighbours(s, k, tol).ravel() for s in sy])
        scores = px @ py.T / (n * k)
        a, b = divmod(int(np.argmax(scores)), scores.shape[1])
        est = float(scores[a, b])
        ci, se = None, None
        if len(labels) >= 3:
            loo = []
            for g in labels:
                keep = groups != g
                loo.append(tie_aware_mutual_knn(sx[a][np.ix_(keep, keep)], sy[b][np.ix_(keep, keep)], k, tol).mean())
            ci, se = _jackknife(np.asarray(loo), est, confidence)
        out.append({"k": int(k), "score": est, "ci": ci, "se": se, "x_layer": a, "y_layer": b, "n": n,
                    "n_groups": int(len(labels)), "chance": k / (n - 1), "scores": scores})
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


def _group_fraction_ci(credit: np.ndarray, groups: np.ndarray, n_resamples: int, confidence: float,
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
                          n_resamples=n_resamples, confidence=confidence, method="percentile", seed=seed + r)
        out.append(iv.ci)
    return out


# ==================================================================================================
# data adapters: Test of Time set, reorder triples (shapes manifest, our JSON, VideoComp JSON)
# ==================================================================================================

def tot_dataset(seed: int = 0, size: int = 128, cache_dir: str | Path | None = None) -> Path:
    """Generate the Test of Time set once per (seed, size) in the cache; reuse it afterwards."""
    from vlgap.data.test_of_time import generate_test_of_time
    from vlgap.features.store import cache_root

    out = cache_root(cache_dir) / "data" / f"test-of-time-s{seed}-{size}px"
    manifest = out / "manifest.jsonl"
    if not manifest.is_file():
        generate_test_of_time(out, seed=seed, size=size)
    return manifest


@dataclass
class ReorderTriple:
    id: str
    video: Path
    positive: str
    negatives: list[str]
    meta: dict[str, Any] = field(default_factory=dict)


def reorder_triples(manifest) -> list[ReorderTriple]:
    """Triples of a shapes manifest: items whose meta holds {"reorder": {"positive", "negative"}}."""
    from vlgap.data.manifest import Manifest, read_manifest

    man = manifest if isinstance(manifest, Manifest) else read_manifest(manifest)
    out = []
    for it in man.items:
        r = it.meta.get("reorder")
        if isinstance(r, dict) and r.get("positive") and r.get("negative"):
            out.append(ReorderTriple(it.id, it.media, str(r["positive"]), [str(r["negative"])],
                                     {"swapped_events": r.get("swapped_events")}))
    if not out:
        raise VlgapError(f"manifest {man.path} has no item with meta.reorder (positive, negative); generate it with "
                         "`vlgap make-data shapes` or give a reorder JSON file")
    return out


def _flat_get(entry: dict, *names: str):
    for name in names:
        if name in entry:
            return entry[name]
        head, _, tail = name.partition("/")
        if tail and isinstance(entry.get(head), dict) and tail in entry[head]:
            return entry[head][tail]
    return None


def read_reorder_json(path: str | Path, *, video_dir: str | Path | None = None,
                      types: Sequence[str] = ("reorder",), video_template: str = "{video_id}.mp4") -> list[ReorderTriple]:
    """(video, positive, negatives) triples from a JSON list in either form:

    - vlgap form: [{"id": "...", "video": "clip.mp4", "positive": "...", "negatives": ["...", ...]}, ...]
      (`negative`: one string is accepted too; relative video paths resolve against the file's folder
      or `video_dir`).
    - VideoComp (Kim et al. 2025, github.com/google-deepmind/video_comp): entries with `key`, `video_id`
      (YouTube id), `type` (disruption type), `positive_text`, `negative_text` and query start/end times
      (flat "query_video/start_time" keys or nested objects). Entries whose type contains one of `types`
      (case-insensitive substring; default: the temporal reordering subset) are kept; entries sharing a
      video and positive become one triple with several negatives. Videos are local files
      `video_dir/<video_template>` (fields: key, video_id, type): the query clips, already trimmed.
    """
    p = Path(path).expanduser()
    if not p.is_file():
        raise VlgapError(f"reorder file {str(p)!r} does not exist")
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise VlgapError(f"{p} is not valid JSON ({err.msg} at line {err.lineno})") from None
    if isinstance(data, dict):
        data = data.get("data") or data.get("items") or list(data.values())
    if not isinstance(data, list) or not data:
        raise VlgapError(f"{p}: expected a non-empty JSON list of triples")
    root = Path(video_dir).expanduser() if video_dir else p.resolve().parent
    triples: dict[tuple[str, str], ReorderTriple] = {}
    wanted = [t.lower() for t in types]
    for i, e in enumerate(data):
        if not isinstance(e, dict):
            raise VlgapError(f"{p} entry {i}: expected an object")
        if "positive_text" in e:  # VideoComp
            kind = str(e.get("type", ""))
            if wanted and not any(t in kind.lower() for t in wanted):
                continue
            fields = {"key": e.get("key", i), "video_id": e.get("video_id", ""), "type": kind}
            try:
                rel = video_template.format(**fields)
            except (KeyError, IndexError) as err:
                raise VlgapError(f"video_template {video_template!r} uses an unknown field {err}; "
                                 "available: key, video_id, type") from None
            video, pos = root / rel, str(e["positive_text"])
            negs = [str(e["negative_text"])] if e.get("negative_text") else []
            meta = {"type": kind, "key": e.get("key"), "video_id": e.get("video_id"),
                    "query_start": _flat_get(e, "query_video/start_time"),
                    "query_end": _flat_get(e, "query_video/end_time", "query_videl/end_time")}
            tid = str(e.get("video_id") or e.get("key") or i)
        else:
            if "video" not in e or "positive" not in e:
                raise VlgapError(f"{p} entry {i}: needs 'video' and 'positive' (and 'negatives'), or VideoComp's "
                                 "'positive_text'/'negative_text'")
            video = Path(str(e["video"])).expanduser()
            video = video if video.is_absolute() else root / video
            pos = str(e["positive"])
            negs = e.get("negatives", e.get("negative", []))
            negs = [negs] if isinstance(negs, str) else [str(x) for x in negs]
            meta = {}
            tid = str(e.get("id", i))
        if not negs:
            raise VlgapError(f"{p} entry {i} ({tid!r}): no negative caption")
        key = (str(video), pos)
        if key in triples:
            triples[key].negatives.extend(x for x in negs if x not in triples[key].negatives)
        else:
            triples[key] = ReorderTriple(tid, video, pos, list(negs), meta)
    if not triples:
        raise VlgapError(f"{p}: no entry of type {list(types)} (VideoComp 'type' values are matched as substrings)")
    out, seen = [], {}
    for t in triples.values():  # ids must be unique: one video may carry several positives
        seen[t.id] = seen.get(t.id, 0) + 1
        if seen[t.id] > 1:
            t.id = f"{t.id}#{seen[t.id]}"
        out.append(t)
    return out


def _text_manifest(rows: list[tuple[str, Path, str]]):
    """A manifest of (id, media, one caption) rows: text features of captions that are not in any file."""
    from vlgap.data.manifest import Item, Manifest

    return Manifest(None, [Item(i, media, "video", (txt,), {}) for i, media, txt in rows])


# ==================================================================================================
# feature access: cache first, each encoder loaded at most once and only if something is missing
# ==================================================================================================

class _LazyEncoder:
    """Stands in for an encoder in `extract`; loads the real one on first attribute access."""

    def __init__(self, loader):
        self._loader, self._obj = loader, None

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        if self._obj is None:
            self._obj = self._loader()
        return getattr(self._obj, name)


class FeatureSource:
    """Features by (manifest, encoder, n_f or n_c, frame order): from the cache, else extracted with an
    encoder that is loaded once per name (or taken from `encoders`)."""

    def __init__(self, *, cache_dir=None, device: str = "cpu", dtype: str = "float32", image_size: int | None = None,
                 text_pooling: str | None = None, encoders: dict[str, Any] | None = None, progress: bool = True,
                 skip_bad: bool = False):
        self.cache_dir, self.device, self.dtype = cache_dir, device, dtype
        self.image_size, self.text_pooling = image_size, text_pooling
        self.progress, self.skip_bad = progress, skip_bad
        self.encoders: dict[str, Any] = dict(encoders or {})

    def _encoder(self, name: str, vision: bool):
        if name not in self.encoders:
            def load():
                from vlgap.encoders.registry import get_encoder

                return get_encoder(name, device=self.device, dtype=self.dtype,
                                   pooling=None if vision else self.text_pooling,
                                   image_size=self.image_size if vision else None)
            self.encoders[name] = _LazyEncoder(load)
        return self.encoders[name]

    def vision(self, man, name: str, n_f: int, frame_order: str = "ordered", shard=None):
        from vlgap.features.extract import extract

        res = extract(man, name, n_frames=[n_f], cache_dir=self.cache_dir, device=self.device, dtype=self.dtype,
                      image_size=self.image_size, frame_order=frame_order, shard=shard, skip_bad=self.skip_bad,
                      progress=self.progress, loaded_encoder=self._encoder(name, True))
        return res.features[n_f]

    def text(self, man, name: str, n_c: int = 1):
        from vlgap.features.extract import extract

        res = extract(man, name, n_captions=[n_c], cache_dir=self.cache_dir, device=self.device, dtype=self.dtype,
                      pooling=self.text_pooling, skip_bad=self.skip_bad, progress=self.progress,
                      loaded_encoder=self._encoder(name, False))
        return res.features[n_c]

    def is_cached(self, man, name: str, param: str, value: int) -> bool:
        from vlgap.features.extract import encoder_key
        from vlgap.features.store import Entry, FeatureKey, cache_root

        key = FeatureKey(encoder_key(name, self.dtype, self.text_pooling if param == "n_c" else None,
                                     self.image_size if param == "n_f" else None), man.fingerprint(), param, value)
        return Entry(key, cache_root(self.cache_dir)).is_complete()


def _layer_name(fs, i: int) -> str:
    names = fs.record.get("encoder", {}).get("layer_names") or []
    return names[i] if i < len(names) else str(i)


def _common(sets: list, ids: list[str]) -> list[str]:
    keep = set(ids)
    for fs in sets:
        keep &= set(fs.ids)
    return [i for i in ids if i in keep]


# ==================================================================================================
# 1. Test of Time
# ==================================================================================================

def _tot_views(items) -> dict[str, np.ndarray]:
    from vlgap.data.test_of_time import PLACEMENTS

    one = np.array([i for i, it in enumerate(items) if it.meta.get("placement") == PLACEMENTS[0]], dtype=np.int64)
    return {"one placement per colour pair": one, "all items (paper's N)": np.arange(len(items))}


def analyse_test_of_time(items, vision: dict[str, list[np.ndarray]], text: dict[str, list[np.ndarray]], *,
                         ks: Sequence[int] = (1, 2, 3), layer_names: dict[str, list[str]] | None = None,
                         n_bootstrap: int = 2000, confidence: float = 0.95, seed: int = 0) -> dict[str, Any]:
    """Test of Time analysis on per-item features (rows in the order of `items`, manifest items whose meta
    holds group, equivalent, colour_swap, relation_swap ids)."""
    ids = [it.id for it in items]
    pos = {x: i for i, x in enumerate(ids)}
    try:
        related = np.array([[pos[it.meta[r]] for r in RELATIONS] for it in items])
        groups = np.array([it.meta["group"] for it in items])
    except KeyError as err:
        raise VlgapError(f"Test of Time items need meta.group and meta.{'/'.join(RELATIONS)} naming items of the "
                         f"same set; missing {err}") from None
    layer_names = layer_names or {}
    views = _tot_views(items)
    sims = {name: [cosine_similarities(layer) for layer in layers] for name, layers in {**vision, **text}.items()}
    alignment = []
    for view, idx in views.items():
        if len(idx) < 8:
            continue
        sub = np.ix_(idx, idx)
        for v in vision:
            for t in text:
                for r in tot_alignment_from_sims([s[sub] for s in sims[v]], [s[sub] for s in sims[t]], groups[idx],
                                                 ks=ks, confidence=confidence):
                    r.pop("scores")
                    alignment.append({"vision": v, "text": t, "view": view, **r,
                                      "x_layer_name": (layer_names.get(v) or [None] * (r["x_layer"] + 1))[r["x_layer"]],
                                      "y_layer_name": (layer_names.get(t) or [None] * (r["y_layer"] + 1))[r["y_layer"]]})
    nearest, by_layer = [], {}
    for modality, spaces in (("vision", vision), ("text", text)):
        for name, layers in spaces.items():
            credits = [nearest_related(layer, related, sims=sm) for layer, sm in zip(layers, sims[name])]
            by_layer[name] = [c.mean(axis=0).tolist() for c in credits]
            last = len(layers) - 1
            c = credits[last]
            cis = _group_fraction_ci(c, groups, n_bootstrap, confidence, seed)
            nearest.append({"encoder": name, "modality": modality, "layer": last,
                            "layer_name": (layer_names.get(name) or [None] * len(layers))[last], "n": len(items),
                            "fractions": dict(zip(RELATIONS, c.mean(axis=0).tolist())),
                            "ci": dict(zip(RELATIONS, cis)),
                            "tied": float(np.mean(c.max(axis=1) < 1.0))})
    return {"n_items": len(items), "n_groups": int(len(np.unique(groups))), "ks": list(ks), "alignment": alignment,
            "nearest_related": nearest, "nearest_related_by_layer": by_layer,
            "views": {v: int(len(i)) for v, i in views.items()}, "confidence": confidence}


def run_test_of_time(vision: Sequence[str], text: Sequence[str], *, n_f: int = 8, ks: Sequence[int] = (1, 2, 3),
                     seed: int = 0, size: int = 128, manifest: str | Path | None = None, n_bootstrap: int = 2000,
                     confidence: float = 0.95, cache_dir=None, device: str = "cpu", dtype: str = "float32",
                     image_size: int | None = None, text_pooling: str | None = None,
                     encoders: dict[str, Any] | None = None, progress: bool = True,
                     out: str | Path | None = None, source: FeatureSource | None = None) -> dict[str, Any]:
    """Test of Time probe for every vision x text encoder (generates the set in the cache unless
    `manifest` is given). Vision features are extracted once per distinct video and text features once
    per distinct caption, then given to every item that shares them. With `out`, writes
    out/temporal/test_of_time.json and the report section."""
    from vlgap.data.manifest import Item, Manifest, read_manifest

    t0 = time.perf_counter()
    src = source or FeatureSource(cache_dir=cache_dir, device=device, dtype=dtype, image_size=image_size,
                                  text_pooling=text_pooling, encoders=encoders, progress=progress)
    man = read_manifest(manifest or tot_dataset(seed, size, src.cache_dir))
    items = man.items
    videos: dict[Path, Item] = {}
    captions: dict[str, Item] = {}
    for it in items:
        if len(it.captions) != 1:
            raise VlgapError(f"Test of Time item {it.id!r} has {len(it.captions)} captions; expected exactly one")
        videos.setdefault(it.media, Item(f"video{len(videos):03d}", it.media, it.kind, it.captions, {}))
        captions.setdefault(it.captions[0], Item(f"caption{len(captions):03d}", it.media, it.kind, it.captions, {}))
    vman, cman = Manifest(man.path, list(videos.values())), Manifest(man.path, list(captions.values()))
    vpos = {media: i for i, media in enumerate(videos)}
    cpos = {cap: i for i, cap in enumerate(captions)}
    vrow = [vpos[it.media] for it in items]
    crow = [cpos[it.captions[0]] for it in items]
    vis, txt, names = {}, {}, {}
    for v in vision:
        fs = src.vision(vman, v, n_f)
        if fs.ids != [x.id for x in vman.items]:
            raise VlgapError(f"{v}: some Test of Time videos could not be read ({fs.record.get('bad_items')})")
        vis[v] = [layer[vrow] for layer in fs.layers]
        names[v] = fs.record.get("encoder", {}).get("layer_names") or []
    for t in text:
        fs = src.text(cman, t, 1)
        txt[t] = [layer[crow] for layer in fs.layers]
        names[t] = fs.record.get("encoder", {}).get("layer_names") or []
    res = analyse_test_of_time(items, vis, txt, ks=ks, layer_names=names, n_bootstrap=n_bootstrap,
                               confidence=confidence, seed=seed)
    res.update({"manifest": str(man.path), "n_videos": len(videos), "n_distinct_captions": len(captions), "n_f": n_f,
                "n_c": 1, "seconds": round(time.perf_counter() - t0, 1)})
    if out is not None:
        atomic_write_json(Path(out) / "temporal" / "test_of_time.json", res)
        write_test_of_time_section(res, out)
    return res


def _tot_reading(res: dict[str, Any]) -> str:
    parts = []
    for r in res["nearest_related"]:
        if r["modality"] != "text":
            continue
        fr = r["fractions"]
        top = max(RELATIONS, key=lambda x: fr[x])
        reading = {"colour_swap": "a bag-of-words reading", "equivalent": "a logical (temporal) reading",
                   "relation_swap": "a word-order reading"}[top]
        parts.append(f"{html.escape(r['encoder'])} puts the {top.replace('_', ' ')} nearest for "
                     f"{fr[top]:.0%} of the captions ({reading})")
    return "<p><b>Reading.</b> " + "; ".join(parts) + ".</p>" if parts else ""


def write_test_of_time_section(res: dict[str, Any], run_dir: str | Path) -> Path:
    plt = _plt()
    run_dir = Path(run_dir)
    figs = []
    views = list(dict.fromkeys(r["view"] for r in res["alignment"]))
    fig, axes = plt.subplots(1, len(views), figsize=(6 * len(views), 4.2), squeeze=False)
    for ax, view in zip(axes[0], views):
        rows = [r for r in res["alignment"] if r["view"] == view]
        pairs = list(dict.fromkeys((r["vision"], r["text"]) for r in rows))
        width = 0.8 / max(1, len(res["ks"]))
        for j, k in enumerate(res["ks"]):
            sub = [next(r for r in rows if (r["vision"], r["text"]) == p and r["k"] == k) for p in pairs]
            x = np.arange(len(pairs)) + (j - (len(res["ks"]) - 1) / 2) * width
            y = np.array([r["score"] for r in sub])
            err = np.array([[r["score"] - r["ci"][0], r["ci"][1] - r["score"]] if r["ci"] else [0, 0] for r in sub]).T
            ax.bar(x, y, width, yerr=err, capsize=3, label=f"k={k} (chance {sub[0]['chance']:.3f})")
            for xi, yi in zip(x, y):
                ax.text(xi, yi + 0.02, f"{yi:.2f}", ha="center", fontsize=6)
        ax.set_xticks(np.arange(len(pairs)), [f"{v}\n× {t}" for v, t in pairs], fontsize=8)
        ax.set_ylim(0, 1.05)
        ax.set_ylabel("tie-aware mutual k-NN (best layer pair)")
        ax.set_title(f"Test of Time, {view} (N={rows[0]['n']})", fontsize=10)
        ax.legend(fontsize=7)
    figs.append(save_figure(fig, run_dir, "figures/test_of_time_alignment.png"))
    by_layer = res["nearest_related_by_layer"]
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.2))
    nr = res["nearest_related"]
    colours = {"equivalent": "#4c72b0", "colour_swap": "#dd8452", "relation_swap": "#55a868"}
    left = np.zeros(len(nr))
    for rel in RELATIONS:
        vals = np.array([r["fractions"][rel] for r in nr])
        axes[0].barh(np.arange(len(nr)), vals, left=left, color=colours[rel], label=RELATION_LABELS[rel])
        left += vals
    axes[0].set_yticks(np.arange(len(nr)), [f"{r['encoder']} ({r['modality']}, last layer)" for r in nr], fontsize=8)
    axes[0].set_xlabel("fraction of captions whose nearest related caption is ...")
    axes[0].legend(fontsize=7, loc="lower left", bbox_to_anchor=(0, 1.02))
    styles = ["-", "--", "-.", ":"]
    text_names = [r["encoder"] for r in nr if r["modality"] == "text"]
    for e_i, name in enumerate(text_names):
        fr = np.asarray(by_layer[name])
        depth = np.linspace(0, 1, len(fr)) if len(fr) > 1 else np.zeros(1)
        for rel_i, rel in enumerate(RELATIONS):
            axes[1].plot(depth, fr[:, rel_i], color=colours[rel], ls=styles[e_i % len(styles)],
                         label=name if rel_i == 1 else None)
    axes[1].set_xlabel("relative layer depth (0 = embeddings, 1 = last layer)")
    axes[1].legend(fontsize=7, title="text encoder (line style)", title_fontsize=7)
    axes[1].set_ylabel("fraction nearest")
    axes[1].set_title("text spaces: nearest related caption by layer (colour = relation)", fontsize=10)
    figs.append(save_figure(fig, run_dir, "figures/test_of_time_nearest.png"))

    rows = []
    for r in res["alignment"]:
        rows.append([r["view"], r["vision"], r["text"], r["n"], r["k"], r["score"], _Raw(fmt_ci(r["ci"])), r["chance"],
                     _Raw(html.escape(f"{r['x_layer_name'] or r['x_layer']} / {r['y_layer_name'] or r['y_layer']}"))])
    table1 = html_table(["items", "vision", "text", "N", "k", "score", "95% CI (group jackknife)", "chance k/(N-1)",
                         "layers (vision / text)"], rows)
    rows = []
    for r in res["nearest_related"]:
        rows.append([r["encoder"], r["modality"], r["layer_name"] or r["layer"], r["n"],
                     *[_Raw(f"{fmt(r['fractions'][rel])} {fmt_ci(r['ci'][rel])}") for rel in RELATIONS], r["tied"]])
    table2 = html_table(["encoder", "space", "layer", "N", *[RELATION_LABELS[x] for x in RELATIONS],
                         "fraction with a tie"], rows)
    body = (
        f"<p>{res['n_items']} generated (video, caption) items, {res['n_videos']} distinct videos, "
        f"{res['n_distinct_captions']} distinct caption texts, {res['n_groups']} groups of 4 related items; "
        f"n_f = {res['n_f']} frames, one caption. Every caption has three logically related captions in its "
        "group: the equivalent one (same video, same meaning, other words), the colour swap (same words, "
        "opposite meaning: the bag-of-words neighbour) and the relation swap (same colour order, the other "
        "relation word, opposite meaning).</p>"
        "<p><b>Duplicates.</b> Two equivalent captions share one video file and each caption text occurs once "
        "per placement (captions do not name positions), so identical inputs tie exactly. All items are kept "
        "(the paper's protocol) and ties are scored in expectation (uniformly random tie-breaking), which "
        "makes the score independent of item order and equal to the usual mutual k-NN when nothing ties. "
        "The first view keeps one placement per colour pair, where each caption text is unique and all "
        "related captions of a caption are in its group (the structure the paper describes); in the view with all items every caption's nearest text neighbours are its "
        "verbatim copies from the other placements (outside its group), so there the k = 1, 2 scores reflect "
        "caption repetition and ties, not the ranking of related captions. Intervals: delete-one-group "
        "jackknife with the layer pair fixed (items of a group share videos and words); a zero-width interval "
        "means every group contributes alike.</p>"
        + table1 +
        "<h3>Which related caption does each space put nearest?</h3>"
        "<p>Last layer of each encoder (the figure shows every layer); intervals resample groups. In the "
        "vision spaces the equivalent caption's item has the same video, so it is nearest by construction, "
        "and the colour and relation swaps share the other video of the group (always a tie): the vision rows "
        "only confirm the data structure. The text rows are the finding: a bag-of-words reading puts the "
        "colour swap first, a temporal (logical) reading the equivalent caption.</p>" + table2 + _tot_reading(res))
    return write_section(run_dir, "40_test_of_time", "Temporal: Test of Time", body, figs)


# ==================================================================================================
# 2. Reorder (VideoComp style)
# ==================================================================================================

def run_reorder(source: str | Path, vision: Sequence[str], text: Sequence[str], *, n_f: int = 8, k: int = 5,
                n_bootstrap: int = 1000, confidence: float = 0.95, seed: int = 0, video_dir=None,
                types: Sequence[str] = ("reorder",), video_template: str = "{video_id}.mp4", cache_dir=None,
                device: str = "cpu", dtype: str = "float32", image_size: int | None = None,
                text_pooling: str | None = None, encoders: dict[str, Any] | None = None, progress: bool = True,
                skip_bad: bool = False, out: str | Path | None = None,
                features: FeatureSource | None = None) -> dict[str, Any]:
    """Reorder probe for every vision x text encoder. `source`: a manifest (.jsonl) whose items carry
    meta.reorder (shapes), or a reorder JSON file (`read_reorder_json`: vlgap or VideoComp form)."""
    from vlgap.data.manifest import Item, Manifest, read_manifest

    t0 = time.perf_counter()
    vision, text = list(vision), list(text)
    src = features or FeatureSource(cache_dir=cache_dir, device=device, dtype=dtype, image_size=image_size,
                                    text_pooling=text_pooling, encoders=encoders, progress=progress, skip_bad=skip_bad)
    path = Path(source)
    if path.suffix.lower() == ".json":
        triples = read_reorder_json(path, video_dir=video_dir, types=types, video_template=video_template)
        vman = Manifest(None, [Item(t.id, t.video, "video", (t.positive,), {}) for t in triples])
    else:
        man = read_manifest(path)
        triples = reorder_triples(man)
        ids = {t.id for t in triples}
        # reuse the whole manifest's cached features (e.g. from the sweep) when they exist
        whole = all(src.is_cached(man, v, "n_f", n_f) for v in vision)
        vman = man if whole else man.subset(ids)
    t_ids = [t.id for t in triples]
    pman = _text_manifest([(t.id, t.video, t.positive) for t in triples])
    negatives = [(f"{t.id}~{j}", t.id, t.video, x) for t in triples for j, x in enumerate(t.negatives)]
    owner_of = {nid: tid for nid, tid, _, _ in negatives}
    nman = _text_manifest([(nid, media, x) for nid, _, media, x in negatives])
    vis = {v: src.vision(vman, v, n_f) for v in vision}
    pos = {t: src.text(pman, t) for t in text}
    neg = {t: src.text(nman, t) for t in text}
    ids = _common(list(vis.values()) + list(pos.values()), t_ids)
    rows, spaces = [], {}
    for ti, t in enumerate(text):
        with_neg = {owner_of[x] for x in neg[t].ids}
        keep = [i for i in ids if i in with_neg]  # videos with a readable positive, negative and video
        row_of = {i: r for r, i in enumerate(keep)}
        nfs = neg[t].subset([x for x in neg[t].ids if owner_of[x] in row_of])
        psp = Space(pos[t].subset(keep).layers, f"{t} positives")
        owner, counts = _owner([row_of[owner_of[x]] for x in nfs.ids], nfs.n, len(keep))
        neg_sides = _negative_sides(_prepared_layers(nfs.layers, f"{t} negatives"), psp, owner)
        for vi, v in enumerate(vision):
            xs = vis[v].subset(keep)
            key = (v, tuple(keep))  # one Space per vision encoder and item set: its layers are ranked once
            spaces.setdefault(key, Space(xs.layers, v))
            d = _reorder_from_sides(spaces[key], psp, neg_sides, owner, counts, k=k, n_bootstrap=n_bootstrap,
                                    confidence=confidence, seed=seed + 101 * vi + ti)
            rows.append({"vision": v, "text": t, "kind": xs.record.get("encoder", {}).get("kind", "unknown"),
                         **d.to_dict(), "x_layer_name": _layer_name(xs, d.x_layer),
                         "y_layer_name": _layer_name(nfs, d.y_layer)})
    rows.sort(key=lambda r: (vision.index(r["vision"]), text.index(r["text"])))
    res = {"source": str(path), "n_triples": len(triples), "n_negatives": len(negatives), "n_f": n_f, "k": k,
           "rows": rows, "confidence": confidence, "seconds": round(time.perf_counter() - t0, 1),
           "example": {"positive": triples[0].positive, "negative": triples[0].negatives[0]}}
    if out is not None:
        atomic_write_json(Path(out) / "temporal" / "reorder.json", res)
        write_reorder_section(res, out)
    return res


def _difference_figure(rows: list[dict], labels: list[str], title: str, xlabel: str, label_b: str | None = None):
    plt = _plt()
    fig, axes = plt.subplots(1, 2, figsize=(12, max(2.5, 0.45 * len(rows) + 1.5)), sharey=True,
                             gridspec_kw={"wspace": 0.05})
    for r_i, r in enumerate(rows):
        for val, ci, mk, off, name in ((r["score_a"], r["ci_a"], "o", -0.12, r["name_a"]),
                                       (r["score_b"], r["ci_b"], "s", 0.12, label_b or r["name_b"])):
            err = [[val - ci[0]], [ci[1] - val]] if ci else None
            axes[0].errorbar([val], [r_i + off], xerr=err, fmt=mk, color="C0" if mk == "o" else "C3", capsize=3,
                             label=name if r_i == 0 else None)
        axes[0].plot([r["chance"]], [r_i], "|", color="grey", ms=12, label="chance k/(N-1)" if r_i == 0 else None)
        ci = r["ci"]
        err = [[r["difference"] - ci[0]], [ci[1] - r["difference"]]] if ci else None
        axes[1].errorbar([r["difference"]], [r_i], xerr=err, fmt="D", color="k", capsize=3)
    axes[0].set_yticks(np.arange(len(rows)), labels, fontsize=8)
    axes[0].invert_yaxis()
    axes[0].set_xlabel("mutual k-NN alignment (95% CI)")
    axes[0].legend(fontsize=7)
    axes[1].axvline(0, color="grey", lw=1)
    axes[1].set_xlabel(xlabel)
    fig.suptitle(title, fontsize=10)
    return fig


def write_reorder_section(res: dict[str, Any], run_dir: str | Path) -> Path:
    run_dir = Path(run_dir)
    rows = res["rows"]
    fig = _difference_figure(rows, [f"{r['vision']} × {r['text']}" for r in rows],
                             f"Reorder probe: N={rows[0]['n'] if rows else 0} videos, k={res['k']}",
                             "drop = positive - negative (paired bootstrap 95% CI)")
    figs = [save_figure(fig, run_dir, "figures/reorder_drop.png")]
    table = html_table(["vision", "text", "vision kind", "N", "positive", "95% CI", "negative", "95% CI", "drop",
                        "95% CI", "interval excludes 0", "chance", "layers (vision / text)"],
                       [[r["vision"], r["text"], r.get("kind", "-"), r["n"], r["score_a"], _Raw(fmt_ci(r["ci_a"])), r["score_b"],
                         _Raw(fmt_ci(r["ci_b"])), _Raw(fmt(r["difference"], 4)), _Raw(fmt_ci(r["ci"], 4)),
                         "yes" if r["ci"] and (r["ci"][0] > 0 or r["ci"][1] < 0) else "no", r["chance"],
                         _Raw(html.escape(f"{r['x_layer_name']} / {r['y_layer_name']}"))] for r in rows])
    ex = res["example"]
    body = (f"<p>VideoComp-style temporal reorder probe on {html.escape(res['source'])}: {res['n_triples']} "
            f"(video, positive, negative) triples, {res['n_negatives']} negatives, n_f = {res['n_f']}, k = {res['k']} "
            "(the paper's k for 512 triples). Each negative describes the same events in another order; it replaces "
            "its positive and its text neighbours are searched among the positives of the other videos. "
            "Intervals: paired bootstrap over videos with every neighbour list recomputed in each resample "
            f"({rows[0]['n_bootstrap'] if rows else 0} resamples); the layer pair is the best by the mean of "
            "both conditions and held fixed.</p>"
            f"<p>Example — positive: <i>{html.escape(ex['positive'])}</i><br>negative: "
            f"<i>{html.escape(ex['negative'])}</i></p>"
            "<p><b>Reading the drop.</b> A drop needs the text encoder to place the reordered caption elsewhere "
            "than the positive; it is evidence that the <i>vision</i> space sees order only beyond what an "
            "order-blind vision encoder shows. Image encoders that average frames are such a baseline by "
            "construction (vision kind 'image' below): any drop they show comes from how the text space moves "
            "the reordered caption relative to the content the vision side sees.</p>" + table)
    return write_section(run_dir, "41_reorder", "Temporal: event reorder (VideoComp style)", body, figs)


# ==================================================================================================
# 3. Frame order controls
# ==================================================================================================

def _max_rel_diff(a: list[np.ndarray], b: list[np.ndarray]) -> float:
    out = 0.0
    for x, y in zip(a, b):
        scale = max(float(np.max(np.abs(x))), 1e-12)
        out = max(out, float(np.max(np.abs(x - y))) / scale)
    return out


def run_frame_order(manifest: str | Path, vision: Sequence[str], text: Sequence[str], *, n_f: int = 8, n_c: int = 1,
                    k: int = 10, orders: Sequence[str] = ("reversed", "shuffled"), n_bootstrap: int = 1000,
                    confidence: float = 0.95, seed: int = 0, image_check_items: int | None = None, cache_dir=None,
                    device: str = "cpu", dtype: str = "float32", image_size: int | None = None,
                    text_pooling: str | None = None, encoders: dict[str, Any] | None = None, progress: bool = True,
                    out: str | Path | None = None, features: FeatureSource | None = None) -> dict[str, Any]:
    """Frame-order controls: for every vision x text encoder and every control order, alignment with
    ordered frames minus alignment with the control, with a paired bootstrap interval.

    image_check_items: for image encoders (per-frame embeddings averaged, order-invariant by
    construction) extract the controls only for about this many videos and check that they equal the
    ordered features; the difference is then exactly 0 and is reported as such. None: extract the
    controls for every video whatever the encoder."""
    from vlgap.data.manifest import read_manifest

    t0 = time.perf_counter()
    src = features or FeatureSource(cache_dir=cache_dir, device=device, dtype=dtype, image_size=image_size,
                                    text_pooling=text_pooling, encoders=encoders, progress=progress)
    man = read_manifest(manifest)
    for o in orders:
        if o not in ("reversed", "shuffled"):
            raise VlgapError(f"frame order control {o!r}: use 'reversed' or 'shuffled'")
    ordered = {v: src.vision(man, v, n_f) for v in vision}
    txt = {t: src.text(man, t, n_c) for t in text}
    ids = _common(list(ordered.values()) + list(txt.values()), man.ids)
    rows, checks = [], []
    text_spaces = {t: Space(txt[t].subset(ids).layers, t) for t in text}
    for vi, v in enumerate(vision):
        base = ordered[v].subset(ids)
        base_space = Space(base.layers, v)
        kind = base.record.get("encoder", {}).get("kind", "unknown")
        for oi, order in enumerate(orders):
            check = {"vision": v, "order": order, "kind": kind}
            if image_check_items and kind == "image":
                n_shards = max(1, len(man) // int(image_check_items))
                part = src.vision(man, v, n_f, frame_order=order, shard=(0, n_shards))
                rel = _max_rel_diff(part.layers, ordered[v].subset(part.ids).layers)
                check.update(checked_items=part.n, max_rel_diff=rel, invariant=rel < 1e-4)
                # features equal up to rounding: the control is the ordered space itself
                control = base_space if rel < 1e-4 else Space(
                    src.vision(man, v, n_f, frame_order=order).subset(ids).layers, order)
            else:
                control_fs = src.vision(man, v, n_f, frame_order=order).subset(ids)
                rel = _max_rel_diff(control_fs.layers, base.layers)
                check.update(checked_items=control_fs.n, max_rel_diff=rel, invariant=rel < 1e-4)
                control = Space(control_fs.layers, order)
            checks.append(check)
            for ti, t in enumerate(text):
                d = frame_order_difference(base_space, control, text_spaces[t], k=k, n_bootstrap=n_bootstrap,
                                           confidence=confidence, control=order, seed=seed + 1000 * vi + 10 * ti + oi)
                rows.append({"vision": v, "text": t, "order": order, "kind": kind, **d.to_dict(),
                             "by_construction": bool(check["invariant"] and kind == "image"),
                             "x_layer_name": _layer_name(base, d.x_layer), "y_layer_name": _layer_name(txt[t], d.y_layer)})
    res = {"manifest": str(man.path), "n": len(ids), "n_f": n_f, "n_c": n_c, "k": k, "orders": list(orders),
           "rows": rows, "checks": checks, "confidence": confidence, "image_check_items": image_check_items,
           "seconds": round(time.perf_counter() - t0, 1)}
    if out is not None:
        atomic_write_json(Path(out) / "temporal" / "frame_order.json", res)
        write_frame_order_section(res, out)
    return res


def write_frame_order_section(res: dict[str, Any], run_dir: str | Path) -> Path:
    run_dir = Path(run_dir)
    rows = res["rows"]
    fig = _difference_figure(rows, [f"{r['vision']} × {r['text']}, {r['order']}" for r in rows],
                             f"Frame order: N={res['n']} videos, n_f={res['n_f']}, n_c={res['n_c']}, k={res['k']}",
                             "ordered - control (paired bootstrap 95% CI)", label_b="control (reversed / shuffled)")
    figs = [save_figure(fig, run_dir, "figures/frame_order.png")]
    table = html_table(["vision", "text", "control", "encoder kind", "N", "ordered", "95% CI", "control", "95% CI",
                        "ordered - control", "95% CI", "note"],
                       [[r["vision"], r["text"], r["order"], r["kind"], r["n"], r["score_a"], _Raw(fmt_ci(r["ci_a"])),
                         r["score_b"], _Raw(fmt_ci(r["ci_b"])), _Raw(fmt(r["difference"], 4)), _Raw(fmt_ci(r["ci"], 4)),
                         "0 by construction (mean over frames)" if r["by_construction"] else
                         ("interval excludes 0" if r["ci"] and (r["ci"][0] > 0 or r["ci"][1] < 0) else
                          "interval contains 0")] for r in rows])
    checks = html_table(["vision", "control", "encoder kind", "videos checked", "max |Δ feature| / max |feature|",
                         "order-invariant"],
                        [[c["vision"], c["order"], c["kind"], c["checked_items"], _Raw(f"{c['max_rel_diff']:.2e}"),
                          "yes" if c["invariant"] else "no"] for c in res["checks"]])
    any_image = any(r["by_construction"] for r in rows)
    body = (f"<p>The sampled frames of every video (n_f = {res['n_f']}) are reversed or shuffled (a fixed random "
            "order per video) before encoding; the text side is unchanged (n_c = "
            f"{res['n_c']}), k = {res['k']}, N = {res['n']}. Each difference has a paired bootstrap interval over "
            "videos (neighbours recomputed in every resample; layer pair fixed, chosen by the mean of both "
            "conditions).</p>"
            + ("<p><b>Image encoders are order-invariant by construction</b>: they embed each frame on its own and "
               "average the embeddings, so reversing or shuffling the frames changes the features only by float "
               "rounding (checked below) and every difference is exactly 0. That zero is a property of the "
               "aggregation, not evidence that the videos carry no order information; only a native video "
               "encoder (e.g. hf-video:...) can show an order effect here.</p>" if any_image else "")
            + table + "<h3>Feature check</h3>" + checks)
    return write_section(run_dir, "42_frame_order", "Temporal: frame-order controls", body, figs)


# ==================================================================================================
# demo hook
# ==================================================================================================

def run_temporal_sections(cfg, result=None, progress: bool = True, encoders: dict[str, Any] | None = None,
                          n_bootstrap: int | None = None) -> dict[str, Any]:
    """Called by `vlgap demo` after the sweep: Test of Time, reorder and frame-order sections (and the
    vision x vision matrix when there are two or more vision encoders), written under cfg.out. Sized for
    the demo: n_f = 8 (or the largest swept n_f below it), cached features reused, each encoder loaded at
    most once, frame-order controls of image encoders checked on a few videos."""
    from vlgap.probe.demo import shapes_manifest
    from vlgap.progress import stderr_console

    out = Path(cfg.out)
    n_f = max([v for v in cfg.n_frames if v <= 8] or [min(cfg.n_frames)])
    n_c = max(cfg.n_captions)
    boot = n_bootstrap if n_bootstrap is not None else max(200, int(getattr(cfg, "bootstrap", 200)))
    src = FeatureSource(cache_dir=cfg.cache_dir, device=cfg.device, dtype=cfg.dtype, image_size=cfg.image_size,
                        encoders=encoders, progress=progress)
    timings: dict[str, float] = {}
    summary: dict[str, Any] = {}
    manifest = shapes_manifest(cfg)

    t = time.perf_counter()
    summary["test_of_time"] = run_test_of_time(cfg.vision, cfg.text, n_f=n_f, seed=cfg.seed, out=out, source=src,
                                               n_bootstrap=max(boot, 1000))
    timings["test_of_time"] = time.perf_counter() - t
    t = time.perf_counter()
    summary["reorder"] = run_reorder(manifest, cfg.vision, cfg.text, n_f=n_f, k=5, n_bootstrap=boot, seed=cfg.seed,
                                     out=out, features=src)
    timings["reorder"] = time.perf_counter() - t
    t = time.perf_counter()
    summary["frame_order"] = run_frame_order(manifest, cfg.vision, cfg.text, n_f=n_f, n_c=n_c, k=cfg.k,
                                             n_bootstrap=boot, seed=cfg.seed, image_check_items=16, out=out,
                                             features=src)
    timings["frame_order"] = time.perf_counter() - t
    if len(cfg.vision) >= 2:
        from vlgap.probe.cross_model import run_cross_alignment

        t = time.perf_counter()
        summary["cross_vision"] = run_cross_alignment(manifest, cfg.vision, n_f=n_f, k=cfg.k, n_bootstrap=boot,
                                                      seed=cfg.seed, out=out, features=src)
        timings["cross_vision"] = time.perf_counter() - t
    summary["seconds"] = {name: round(s, 1) for name, s in timings.items()}
    atomic_write_json(out / "temporal" / "summary.json", summary)
    stderr_console.print("temporal sections: " + ", ".join(f"{k} {v:.0f} s" for k, v in summary["seconds"].items()))
    return summary
