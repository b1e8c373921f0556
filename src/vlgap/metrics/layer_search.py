"""Layer search: score every (x layer, y layer) pair, report the whole matrix and the best pair.

Each layer's state (neighbour lists, Gram matrix, SVD basis) is computed once, never once per pair;
for mutual k-NN that is O(N k) memory per layer (chunked top-k), and a pair costs O(N k) look-ups.
`precompute_layers` exposes the states so that a sweep can reuse one side's layers across many
cells (e.g. the vision layers at one n_f against the text layers at every n_c). `align` is the
one-layer-per-side case.

Feature preparation: rows are L2-normalised per layer; `q` clamps each layer at its own q-quantile
threshold; `preset="platonic-rep"` applies platonic-rep's `prepare_features` (ONE threshold at the
0.95 quantile of |x| over all of a side's layers together, every layer clamped to it) before the
per-layer normalisation, exactly as its `compute_score` pipeline. The preset is recorded in results.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from vlgap.arguments import check_array_like
from vlgap.caveats import reports_caveats
from vlgap.errors import VlgapError
from vlgap.keywords import renamed_keywords
from vlgap.metrics.alignment import make_metric
from vlgap.metrics.base import AlignmentMetric, chance_level, ZeroVarianceError, constant_message, is_constant
from vlgap.metrics.prepare import DEFAULT_CHUNK_BYTES, as_layers, clamp_threshold, prepare, resolve_device
from vlgap.metrics.uncertainty import (BootstrapSummary, IntervalMethod, PermutationSummary,
                                       bootstrap_best_pair, bootstrap_depth, permutation_best_pair)


class PreparedLayers(Sequence):
    """Prepared (clamped, L2-normalised) layers, computed on access from the validated inputs.

    Nothing is copied up front: a search keeps only O(N k) neighbour lists per layer, and the
    rare code paths that need features again (bootstrap rows beyond the stored ranking, metrics
    without a fast resampling path) prepare one layer at a time.
    """

    def __init__(self, raw: list[torch.Tensor], q: float | None, name: str = "X",
                 threshold: torch.Tensor | None = None):
        self.raw = raw
        self.q = q
        self.name = name
        self.threshold = threshold  # one clamp for every layer (preset), else per layer from q

    def __len__(self) -> int:
        return len(self.raw)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        return prepare(self.raw[i], self.q, name=f"{self.name}[{i}]", threshold=self.threshold)


#: feature-preparation presets: name -> default clamp quantile (one threshold over all layers)
PRESETS = {"platonic-rep": 0.95}


def preset_quantile(preset: str | None, q: float | None) -> float | None:
    """The clamp quantile a preset implies (an explicit `q` overrides the preset's 0.95)."""
    if preset is None:
        return q
    if preset not in PRESETS:
        raise VlgapError(f"preset={preset!r}: use one of {', '.join(PRESETS)} or None (no preset)")
    return PRESETS[preset] if q is None else q


@dataclass
class LayerStates:
    """One side's layers and their metric states (from `precompute_layers`)."""

    metric: str
    k: int | None
    q: float | None
    cca_dim: int
    feats: PreparedLayers = field(repr=False)
    states: list[Any] = field(repr=False)
    engine: AlignmentMetric = field(repr=False)
    preset: str | None = None
    #: layers whose prepared features have zero variance (every item the same vector): no metric is
    #: defined on them (a k-NN ranking would be decided by index ties alone), see `layer_search`
    constant: list[int] = field(default_factory=list)

    def subset(self, keep: list[int]) -> "LayerStates":
        """The same side restricted to layers `keep` (in that order)."""
        feats = PreparedLayers([self.feats.raw[i] for i in keep], self.feats.q, self.feats.name, self.feats.threshold)
        return LayerStates(self.metric, self.k, self.q, self.cca_dim, feats, [self.states[i] for i in keep],
                           self.engine, self.preset, [])

    @property
    def n(self) -> int:
        return self.feats.raw[0].shape[0]

    @property
    def n_layers(self) -> int:
        return len(self.feats)


#: layouts of a 3-D array of per-layer features: [layers, items, dim] (vlgap's) or [items, layers, dim]
#: (platonic-rep's feature files, stacked transformers hidden states)
LAYOUTS = ("LND", "NLD")


def _check_layout(layout: str | None) -> None:
    if layout is not None and layout not in LAYOUTS:
        raise VlgapError(f"layout={layout!r}: use 'LND' ([layers, items, dim]) or 'NLD' ([items, layers, dim], "
                         "platonic-rep's stacked hidden states), or None (LND unless that is ambiguous)")


def _is_3d(obj) -> bool:
    return not isinstance(obj, (list, tuple, LayerStates)) and getattr(obj, "ndim", None) == 3


def _item_counts(obj, layout: str | None) -> dict[str, int]:
    """How many items each possible reading of `obj` gives: {layout: N} for a 3-D array (one entry when
    `layout` is given), {"fixed": N} for lists, 2-D arrays and LayerStates."""
    if isinstance(obj, LayerStates):
        return {"fixed": obj.n}
    if isinstance(obj, (list, tuple)):
        return {"fixed": int(obj[0].shape[0])} if obj and hasattr(obj[0], "shape") else {}
    shape = tuple(getattr(obj, "shape", ()))
    if len(shape) != 3:
        return {"fixed": int(shape[0])} if len(shape) == 2 else {}
    both = {"LND": int(shape[1]), "NLD": int(shape[0])}
    return {layout: both[layout]} if layout else both


def _ambiguous(shape, k: int | None) -> str:
    return (f"a 3-D array of shape {tuple(shape)} reads as [layers, items, dim] (N={shape[1]}) or as [items, "
            f"layers, dim] (N={shape[0]}), and both are >= k+1 = {(k or 1) + 1}")


def resolve_layouts(xs, ys, layout: str | None, k: int | None) -> tuple[str | None, str | None]:
    """The layout of each side's 3-D array (None for lists / 2-D / LayerStates). `layout` given: every
    3-D array is read that way. Otherwise a 3-D array is read the one way whose item count is at least
    k+1 and equals the other side's; when two readings remain (same N and L, both >= k+1, or two 3-D
    arrays that fit both ways) it is refused, never guessed."""
    _check_layout(layout)
    if layout is not None:
        return (layout if _is_3d(xs) else None), (layout if _is_3d(ys) else None)
    need = (k or 1) + 1
    cx = {lo: n for lo, n in _item_counts(xs, None).items() if lo == "fixed" or n >= need}
    cy = {lo: n for lo, n in _item_counts(ys, None).items() if lo == "fixed" or n >= need}
    combos = [(a, b) for a, na in cx.items() for b, nb in cy.items() if na == nb]
    if len(combos) == 1:
        a, b = combos[0]
        return (None if a == "fixed" else a), (None if b == "fixed" else b)
    if len(combos) > 1:
        which = [f"{lbl}: {_ambiguous(o.shape, k)}" for o, lbl in ((xs, "X"), (ys, "Y")) if _is_3d(o)
                 and len({c[0 if lbl == 'X' else 1] for c in combos}) > 1]
        raise VlgapError(f"cannot tell the layout of {'; '.join(which)}; pass layout='LND' or layout='NLD' "
                         "(platonic-rep's [N, L, D] files and stacked hidden states are NLD)")
    # no reading agrees: read as LND (the documented default); the item-count check then says what differs
    return ("LND" if _is_3d(xs) else None), ("LND" if _is_3d(ys) else None)


def as_lnd(obj, layout: str | None):
    """A 3-D array in [layers, items, dim] order (a view, no copy); anything else unchanged."""
    if layout == "NLD" and _is_3d(obj):
        return obj.transpose(0, 1) if isinstance(obj, torch.Tensor) else np.swapaxes(np.asarray(obj), 0, 1)
    return obj


def precompute_layers(xs, k: int | None = 10, metric: str = "mutual_knn", *, q: float | None = None,
                      preset: str | None = None, cca_dim: int = 10, n_layers_total: int | None = None,
                      for_bootstrap: bool = True, device=None, chunk_bytes: int = DEFAULT_CHUNK_BYTES,
                      name: str = "X", ray: str | bool | None = None, layout: str | None = None) -> LayerStates:
    """Prepare one side (list of [N, D_l] arrays or one 3-D array) for `layer_search`.

    layout: of a 3-D array, "LND" ([layers, items, dim]) or "NLD" ([items, layers, dim]); None reads
    LND, and refuses an array whose two first dimensions are both >= k+1 (it could be either).

    for_bootstrap keeps a deeper neighbour ranking (mutual k-NN), which makes later bootstraps
    fast; it costs a little memory (N x (4k+32) indices per layer). n_layers_total: layers on
    both sides (lets CKA decide whether Gram matrices fit in memory; default: twice this side).
    The input arrays are referenced, not copied (float32/float64 on the chosen device).
    preset="platonic-rep": one clamp threshold over all these layers together (see module doc).
    ray: compute the layers' states on a Ray cluster ("auto" or an address; see
    vlgap.distributed.knn: exact k-NN in row blocks, the same lists as here).
    """
    k = check_k_value(k)
    if not isinstance(xs, LayerStates):
        check_array_like(xs, name)
    q = preset_quantile(preset, q)
    _check_layout(layout)
    if _is_3d(xs) and layout is None:
        if min(xs.shape[0], xs.shape[1]) >= (k or 1) + 1:
            raise VlgapError(f"{name}: cannot tell the layout of {_ambiguous(xs.shape, k)}; pass layout='LND' or "
                             "layout='NLD' (platonic-rep's [N, L, D] files and stacked hidden states are NLD)")
        layout = "LND"
    xs = as_lnd(xs, layout)
    dev = resolve_device(device, xs[0] if isinstance(xs, (list, tuple)) and xs else xs)
    # finiteness is checked while preparing each layer (prepare reuses the row norms for it)
    raw = as_layers(xs, name, dev, check_finite=False)
    threshold = clamp_threshold(raw, q, chunk_bytes=chunk_bytes) if preset is not None else None
    feats = PreparedLayers(raw, q, name, threshold)
    n = feats.raw[0].shape[0]
    depth = bootstrap_depth(k, n) if (for_bootstrap and metric == "mutual_knn" and k) else None
    engine = make_metric(metric, k, cca_dim=cca_dim, depth=depth, chunk_bytes=chunk_bytes)
    engine.check(n)
    engine.plan(n, n_layers_total or 2 * len(feats))
    constant: list[int] = []
    if ray:
        from vlgap.distributed.knn import layer_states

        states = layer_states(engine, feats, ray=ray, device=str(dev))
        constant = [i for i in range(len(feats)) if is_constant(feats[i])]
    else:
        states = []
        for i in range(len(feats)):
            prepared = feats[i]
            states.append(engine.layer_state(prepared))
            if is_constant(prepared):
                constant.append(i)
    return LayerStates(metric, k if engine.uses_k else None, q, cca_dim, feats, states, engine, preset, constant)


@dataclass
class LayerSearchResult:
    """Scores of every layer pair, the best pair, and (when asked) its uncertainty."""

    metric: str
    scores: np.ndarray            # [L_x, L_y]
    best_score: float
    x_layer: int
    y_layer: int
    n: int
    k: int | None
    chance: float | None
    q: float | None
    seed: int | None
    bootstrap: BootstrapSummary | None = None
    permutation: PermutationSummary | None = None
    preset: str | None = None
    #: why some pairs are n/a (zero-variance layers), one line each
    notes: list[str] = field(default_factory=list)
    #: why the score means little for this input (vlgap.caveats), one line each
    warnings: list[str] = field(default_factory=list)

    @property
    def best(self) -> dict[str, Any]:
        return {"score": self.best_score, "x_layer": self.x_layer, "y_layer": self.y_layer}

    @property
    def ci(self) -> list[float] | None:
        return None if self.bootstrap is None else self.bootstrap.ci

    @property
    def ci_reason(self) -> str | None:
        """Why the bootstrap gave no interval (vlgap.stats.resampling's rule), None otherwise."""
        return None if self.bootstrap is None else self.bootstrap.reason

    @property
    def ci_note(self) -> str | None:
        """One line when the interval was clipped to the metric's range (vlgap.stats.bounds), None otherwise."""
        return None if self.bootstrap is None else self.bootstrap.note

    @property
    def small_sample(self) -> str | None:
        """The small-sample warning for N items and k neighbours (vlgap.stats.bounds), None when N is ample."""
        from vlgap.stats.bounds import small_sample_warning

        return small_sample_warning(self.n, self.k)

    @property
    def confidence(self) -> float | None:
        return None if self.bootstrap is None else self.bootstrap.confidence

    @property
    def p_value(self) -> float | None:
        return None if self.permutation is None else self.permutation.p_value

    @property
    def null_mean(self) -> float | None:
        return None if self.permutation is None else self.permutation.null_mean

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "metric": self.metric,
            "scores": self.scores.tolist(),
            "best": self.best,
            "chance": self.chance,
            "n": self.n,
            "k": self.k,
            "q": self.q,
            "preset": self.preset,
        }
        if self.bootstrap is not None:
            d["ci"], d["ci_reason"] = self.ci, self.ci_reason
            if self.ci_note:
                d["ci_note"] = self.ci_note
            d["bootstrap"] = self.bootstrap.to_dict()
        if self.small_sample:
            d["small_sample"] = self.small_sample
        if self.permutation is not None:
            d["p_value"] = self.permutation.p_value
            d["null_mean"] = self.permutation.null_mean
            d["permutation"] = self.permutation.to_dict()
        if self.notes:
            d["notes"] = list(self.notes)
        d["warnings"] = list(self.warnings)
        if self.bootstrap is not None or self.permutation is not None:
            d["seed"] = self.seed
        return d

    def to_frame(self):
        """pandas DataFrame, one row per layer pair: x_layer, y_layer, score (NaN: n/a), is_best, and
        the search's metric, n, k, chance (e.g. `df.pivot(index="x_layer", columns="y_layer",
        values="score")` is the matrix)."""
        from vlgap.frames import BOOL, FLOAT, INT, STRING, make_frame, require_pandas
        require_pandas(type(self).__name__)

        rows = [{"x_layer": i, "y_layer": j, "score": float(self.scores[i, j]),
                 "is_best": (i, j) == (self.x_layer, self.y_layer), "metric": self.metric, "n": self.n,
                 "k": self.k, "chance": self.chance}
                for i in range(self.scores.shape[0]) for j in range(self.scores.shape[1])]
        return make_frame(rows, {"x_layer": INT, "y_layer": INT, "score": FLOAT, "is_best": BOOL, "metric": STRING,
                                 "n": INT, "k": INT, "chance": FLOAT}, "LayerSearchResult")


def _side(obj, other_layers: int, name: str, **kw) -> LayerStates:
    """Layer states of one side, `obj` already in LND order when 3-D."""
    if isinstance(obj, LayerStates):
        return obj
    n_own = len(obj) if isinstance(obj, (list, tuple)) else (obj.shape[0] if obj.ndim == 3 else 1)
    return precompute_layers(obj, n_layers_total=n_own + other_layers, name=name,
                             layout="LND" if _is_3d(obj) else None, **kw)


def _n_layers(obj) -> int:
    if isinstance(obj, LayerStates):
        return obj.n_layers
    if isinstance(obj, (list, tuple)):
        return len(obj)
    return obj.shape[0] if getattr(obj, "ndim", 2) == 3 else 1


def check_k_value(k) -> int | None:
    """k's type, before anything reads it: a whole number (not a bool, not a str) as an int, or None."""
    if k is None:
        return None
    if not isinstance(k, (bool, np.bool_)) and isinstance(k, (int, np.integer)):
        return int(k)
    if isinstance(k, (float, np.floating)) and float(k).is_integer():
        return int(k)
    raise VlgapError(f"k={k!r}: need a whole number of neighbours >= 1 (e.g. 10 for N=1024, as the paper), "
                     "or None for the metrics without k")


def _check_side(obj, name: str) -> None:
    if not isinstance(obj, LayerStates):
        check_array_like(obj, name, "a list of [N, D] arrays, one [L, N, D] array or precompute_layers' LayerStates")


@reports_caveats
@renamed_keywords(bootstrap="n_bootstrap", permutations="n_permutations", interval="ci_method")
def layer_search(
    xs,
    ys,
    k: int | None = 10,
    metric: str = "mutual_knn",
    *,
    q: float | None = None,
    preset: str | None = None,
    cca_dim: int = 10,
    n_bootstrap: int = 0,
    n_permutations: int = 0,
    confidence: float = 0.95,
    ci_method: IntervalMethod = "basic",
    seed: int | None = 0,
    device=None,
    chunk_bytes: int = DEFAULT_CHUNK_BYTES,
    ray: str | bool | None = None,
    layout: str | None = None,
) -> LayerSearchResult:
    """Score every pair of X layers and Y layers and pick the best pair.

    xs, ys: lists of [N, D_l] arrays (numpy or torch), one [L, N, D] array, or `LayerStates` from
    `precompute_layers` (row i of every layer is the same item). k: neighbours for the k-NN
    metrics. q: outlier clamp quantile, each layer its own threshold (None = off).
    preset="platonic-rep": platonic-rep's `prepare_features` + `compute_score` conventions (one clamp
    threshold at the 0.95 quantile of |x| over all of a side's layers, then per-layer L2
    normalisation); `q` then overrides only the quantile.
    n_bootstrap > 0: interval over items for the best pair's score, the best pair re-selected in
    every resample; `ci_method` = "basic" (default), "percentile" or "simultaneous" (see
    vlgap.metrics.uncertainty for what each covers).
    n_permutations > 0: p-value of the best score against randomly re-paired rows (max over pairs).
    Ties for the best score go to the first pair in row-major order.
    ray: "auto" or a cluster address: every layer's neighbour lists in row blocks on Ray workers
    (vlgap.distributed.knn); the result equals the single-process one.
    layout: of 3-D arrays, "LND" ([layers, items, dim]) or "NLD" ([items, layers, dim], as platonic-rep's
    feature files and stacked hidden states). None: LND, unless the other side's item count says NLD;
    an array that reads both ways (same N and L, both >= k+1) is refused with a message, never guessed.
    """
    from vlgap.counts import check_count

    n_bootstrap = check_count("n_bootstrap", n_bootstrap, 0, flag="--bootstrap", example=1000)
    n_permutations = check_count("n_permutations", n_permutations, 0, flag="--permutations", example=1000)
    k = check_k_value(k)
    _check_side(xs, "xs")
    _check_side(ys, "ys")
    q = preset_quantile(preset, q)
    kw = dict(k=k, metric=metric, q=q, preset=preset, cca_dim=cca_dim, for_bootstrap=n_bootstrap > 0,
              device=device, chunk_bytes=chunk_bytes, ray=ray)
    lay_x, lay_y = resolve_layouts(xs, ys, layout, k)
    xs, ys = as_lnd(xs, lay_x), as_lnd(ys, lay_y)
    lx, ly = _n_layers(xs), _n_layers(ys)
    sx = _side(xs, ly, "X", **kw)
    sy = _side(ys, lx, "Y", **kw)
    for side, label in ((sx, "X"), (sy, "Y")):
        if (side.metric != metric or (side.engine.uses_k and side.k != k) or side.q != q
                or side.preset != preset):
            raise VlgapError(f"{label} was precomputed for metric={side.metric!r}, k={side.k}, q={side.q}, "
                             f"preset={side.preset!r}; this search asks metric={metric!r}, k={k}, q={q}, "
                             f"preset={preset!r}")
    if sx.n != sy.n:
        raise VlgapError(f"X has {sx.n} items but Y has {sy.n}: row i of X and of Y must be the same item")
    sx.engine.check(sx.n)  # precomputed sides were checked when prepared: their caveats (k near N) belong here too
    if sx.constant or sy.constant:
        return _search_without_constant_layers(sx, sy, metric=metric, k=k, q=q, preset=preset, cca_dim=cca_dim,
                                               n_bootstrap=n_bootstrap, n_permutations=n_permutations,
                                               confidence=confidence, ci_method=ci_method, seed=seed,
                                               chunk_bytes=chunk_bytes)
    engine = sx.engine
    scores = engine.pair_scores(sx.states, sy.states)
    if np.all(np.isnan(scores)):
        raise VlgapError(f"{metric} is undefined for every layer pair (constant features?)")
    flat = int(np.nanargmax(scores))
    x_layer, y_layer = divmod(flat, scores.shape[1])
    best = float(scores[x_layer, y_layer])
    result = LayerSearchResult(metric=metric, scores=scores, best_score=best, x_layer=x_layer,
                               y_layer=y_layer, n=sx.n, k=sx.k, chance=chance_level(metric, sx.n, sx.k),
                               q=q, seed=seed, preset=preset)
    if n_bootstrap:
        for side, label in ((sx, "X"), (sy, "Y")):
            if metric == "mutual_knn" and side.states[0].ids.shape[1] < bootstrap_depth(k, side.n):
                raise VlgapError(f"{label} was precomputed with for_bootstrap=False; precompute it with "
                                 "for_bootstrap=True to bootstrap")
        result.bootstrap = bootstrap_best_pair(engine, sx.feats, sy.feats, sx.states, sy.states,
                                               observed=scores, n_bootstrap=n_bootstrap,
                                               confidence=confidence, ci_method=ci_method, seed=seed)
    if n_permutations and sx.n <= 12:
        import math

        from vlgap.stats.resampling import few_permutations_caveat

        few_permutations_caveat(math.factorial(sx.n), n_permutations, f"pairings of {sx.n} items", exact=False)
    if n_permutations:
        result.permutation = permutation_best_pair(engine, sx.feats, sy.feats, sx.states, sy.states,
                                                   observed=best, n_permutations=n_permutations, seed=seed)
    return result


def _search_without_constant_layers(sx: LayerStates, sy: LayerStates, *, metric: str, **kw) -> LayerSearchResult:
    """Zero-variance layers: a single pair (or a side with no other layer) is refused in one line;
    in a search over several layers each pair with such a layer is n/a (NaN in `scores`, excluded
    from the best pair, the bootstrap and the permutation null) and `notes` says why."""
    for side, label in ((sx, "X"), (sy, "Y")):
        if len(side.constant) == side.n_layers:
            raise ZeroVarianceError(constant_message(metric, label, side.constant, side.n_layers, side.n))
    keep_x = [i for i in range(sx.n_layers) if i not in sx.constant]
    keep_y = [j for j in range(sy.n_layers) if j not in sy.constant]
    sub = layer_search(sx.subset(keep_x), sy.subset(keep_y), metric=metric, **kw)
    scores = np.full((sx.n_layers, sy.n_layers), np.nan)
    scores[np.ix_(keep_x, keep_y)] = sub.scores
    sub.scores = scores
    sub.x_layer, sub.y_layer = keep_x[sub.x_layer], keep_y[sub.y_layer]
    if sub.bootstrap is not None:
        for f in sub.bootstrap.best_pair_frequency:
            f["x_layer"], f["y_layer"] = keep_x[f["x_layer"]], keep_y[f["y_layer"]]
    sub.notes = [constant_message(metric, label, side.constant, side.n_layers, side.n,
                                  "n/a for every pair with it (left out of the best pair)")
                 for side, label in ((sx, "X"), (sy, "Y")) if side.constant]
    return sub


@dataclass
class AlignResult:
    """One alignment score with its chance level and sample size (and, when asked, its bootstrap
    interval and permutation p-value)."""

    metric: str
    score: float
    chance: float | None
    n: int
    k: int | None
    ci: list[float] | None = None
    confidence: float | None = None
    p_value: float | None = None
    null_mean: float | None = None
    n_bootstrap: int = 0
    n_permutations: int = 0
    preset: str | None = None
    q: float | None = None
    #: why there is no interval, and the line saying it was clipped to the metric's range
    ci_reason: str | None = None
    ci_note: str | None = None
    #: why the score means little for this input (vlgap.caveats), one line each
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        d = {"metric": self.metric, "score": self.score, "chance": self.chance, "n": self.n, "k": self.k,
             "q": self.q, "preset": self.preset, "warnings": list(self.warnings)}
        if self.n_bootstrap:
            d.update(ci=self.ci, confidence=self.confidence, n_bootstrap=self.n_bootstrap)
            if self.ci_reason:
                d["ci_reason"] = self.ci_reason
            if self.ci_note:
                d["ci_note"] = self.ci_note
        if self.n_permutations:
            d.update(p_value=self.p_value, null_mean=self.null_mean, n_permutations=self.n_permutations)
        return d


@reports_caveats
@renamed_keywords(bootstrap="n_bootstrap", permutations="n_permutations")
def align(X, Y, k: int = 10, metric: str = "mutual_knn", q: float | None = None, *,
          preset: str | None = None, cca_dim: int = 10, n_bootstrap: int = 0, n_permutations: int = 0,
          confidence: float = 0.95, seed: int = 0, device=None) -> AlignResult:
    """Alignment between X [N, D_x] and Y [N, D_y] (row i of each = the same item).

    Rows are clamped at quantile q (None = off; `preset="platonic-rep"`: 0.95, as platonic-rep)
    and L2-normalised, then `metric` (one of METRIC_NAMES) is computed. `n_bootstrap` > 0 adds a
    bootstrap interval over items, `n_permutations` > 0 a permutation p-value against shuffled
    pairing. For several layers per side use `layer_search`.
    """
    k = check_k_value(k)
    for name, arr in (("X", X), ("Y", Y)):
        check_array_like(arr, name, "one [N, D] array (numpy or torch)")
        try:
            ndim = arr.ndim if hasattr(arr, "ndim") else np.asarray(arr).ndim
        except ValueError as err:  # a ragged list
            raise VlgapError(f"{name}: cannot be read as an array [N items, D features] ({err})") from None
        if ndim != 2:
            raise VlgapError(f"{name}: align takes one [N, D] array per side, got {ndim}-D; "
                             "for per-layer features use vlgap.layer_search")
    res = layer_search([X], [Y], k=k, metric=metric, q=q, preset=preset, cca_dim=cca_dim,
                       n_bootstrap=n_bootstrap, n_permutations=n_permutations, confidence=confidence,
                       seed=seed, device=device)
    return AlignResult(metric=metric, score=res.best_score, chance=res.chance, n=res.n, k=res.k,
                       ci=res.ci, confidence=res.confidence if n_bootstrap else None,
                       p_value=res.p_value, null_mean=res.null_mean,
                       n_bootstrap=n_bootstrap, n_permutations=n_permutations, preset=preset, q=res.q,
                       ci_reason=res.ci_reason, ci_note=res.ci_note)
