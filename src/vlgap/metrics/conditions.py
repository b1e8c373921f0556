"""Paired comparison of two mutual k-NN conditions on the same items (the reorder probe's positive vs
negative captions, the frame-order probe's ordered vs reversed frames): rows ranked once per layer, the
layer pair fixed by the mean of both conditions, and a paired bootstrap of the difference.

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

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from vlgap.errors import VlgapError


def prepared_layers(xs, name: str):
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
        self.feats = prepared_layers(layers, name)
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


def _centred_p_value(estimate: float, samples: np.ndarray) -> float:
    """Two-sided p-value for "difference = 0" that inverts `_centred_interval`: the interval at level
    1 - alpha excludes 0 about when p < alpha. The bootstrap deviations stand in for the null
    distribution; (1 + count) / (B + 1) keeps p > 0 and at 1 for an exact zero difference."""
    dev = np.asarray(samples, dtype=np.float64) - np.mean(samples)
    tail = min(int(np.sum(dev <= -estimate)), int(np.sum(dev >= -estimate)))
    return float(min(1.0, 2 * (1 + tail) / (len(dev) + 1)))


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
    #: two-sided bootstrap p-value for A - B = 0, consistent with `ci` (None without resamples)
    p_value: float | None = None
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
        res.p_value = _centred_p_value(diff, d)
        res.samples = d
    return res


def negative_sides(ns: list, positive: Space, owner) -> list[_Side]:
    """Rows that rank the positives by similarity to each negative (prepared layers `ns`), never its own video's."""
    if len(ns) != len(positive):
        raise VlgapError(f"negatives have {len(ns)} layers but positives {len(positive)}: encode both with one "
                         "text encoder")
    if ns[0].shape[0] != owner.shape[0]:
        raise VlgapError(f"negative_owner has {owner.shape[0]} entries for {ns[0].shape[0]} negative rows")
    return [_Side(ng, p, owner) for ng, p in zip(ns, positive.feats)]


def owner_rows(negative_owner, n_rows: int, n: int):
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


def reorder_from_sides(x: Space, p: Space, neg_sides: list[_Side], owner, counts, **kw) -> PairedDifference:
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
    ns = negative_layers.feats if isinstance(negative_layers, Space) else prepared_layers(negative_layers, "negative")
    owner, counts = owner_rows(negative_owner, ns[0].shape[0], x.n)
    return reorder_from_sides(x, p, negative_sides(ns, p, owner), owner, counts, k=k,
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
