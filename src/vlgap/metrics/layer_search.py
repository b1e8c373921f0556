"""Layer search: score every (x layer, y layer) pair, report the whole matrix and the best pair.

Each layer's state (neighbour lists, Gram matrix, SVD basis) is computed once, never once per pair;
for mutual k-NN that is O(N k) memory per layer (chunked top-k), and a pair costs O(N k) look-ups.
`precompute_layers` exposes the states so that a sweep can reuse one side's layers across many
cells (e.g. the vision layers at one n_f against the text layers at every n_c).
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from vlgap.errors import VlgapError
from vlgap.metrics.alignment import AlignmentMetric, chance_level, make_metric
from vlgap.metrics.prepare import DEFAULT_CHUNK_BYTES, as_layers, prepare, resolve_device
from vlgap.metrics.uncertainty import (BootstrapSummary, IntervalMethod, PermutationSummary,
                                       bootstrap_best_pair, bootstrap_depth, permutation_best_pair)


class PreparedLayers(Sequence):
    """Prepared (clamped, L2-normalised) layers, computed on access from the validated inputs.

    Nothing is copied up front: a search keeps only O(N k) neighbour lists per layer, and the
    rare code paths that need features again (bootstrap rows beyond the stored ranking, metrics
    without a fast resampling path) prepare one layer at a time.
    """

    def __init__(self, raw: list[torch.Tensor], q: float | None, name: str = "X"):
        self.raw = raw
        self.q = q
        self.name = name

    def __len__(self) -> int:
        return len(self.raw)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        return prepare(self.raw[i], self.q, name=f"{self.name}[{i}]")


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

    @property
    def n(self) -> int:
        return self.feats.raw[0].shape[0]

    @property
    def n_layers(self) -> int:
        return len(self.feats)


def precompute_layers(xs, k: int | None = 10, metric: str = "mutual_knn", *, q: float | None = None,
                      cca_dim: int = 10, n_layers_total: int | None = None, for_bootstrap: bool = True,
                      device=None, chunk_bytes: int = DEFAULT_CHUNK_BYTES, name: str = "X",
                      ray: str | bool | None = None) -> LayerStates:
    """Prepare one side (list of [N, D_l] arrays or one [L, N, D] array) for `layer_search`.

    for_bootstrap keeps a deeper neighbour ranking (mutual k-NN), which makes later bootstraps
    fast; it costs a little memory (N x (4k+32) indices per layer). n_layers_total: layers on
    both sides (lets CKA decide whether Gram matrices fit in memory; default: twice this side).
    The input arrays are referenced, not copied (float32/float64 on the chosen device).
    ray: compute the layers' states on a Ray cluster ("auto" or an address; see
    vlgap.distributed.knn: exact k-NN in row blocks, the same lists as here).
    """
    dev = resolve_device(device, xs[0] if isinstance(xs, (list, tuple)) and xs else xs)
    # finiteness is checked while preparing each layer (prepare reuses the row norms for it)
    feats = PreparedLayers(as_layers(xs, name, dev, check_finite=False), q, name)
    n = feats.raw[0].shape[0]
    depth = bootstrap_depth(k, n) if (for_bootstrap and metric == "mutual_knn" and k) else None
    engine = make_metric(metric, k, cca_dim=cca_dim, depth=depth, chunk_bytes=chunk_bytes)
    engine.check(n)
    engine.plan(n, n_layers_total or 2 * len(feats))
    if ray:
        from vlgap.distributed.knn import layer_states

        states = layer_states(engine, feats, ray=ray, device=str(dev))
    else:
        states = [engine.layer_state(feats[i]) for i in range(len(feats))]
    return LayerStates(metric, k if engine.uses_k else None, q, cca_dim, feats, states, engine)


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

    @property
    def best(self) -> dict[str, Any]:
        return {"score": self.best_score, "x_layer": self.x_layer, "y_layer": self.y_layer}

    @property
    def ci(self) -> list[float] | None:
        return None if self.bootstrap is None else [self.bootstrap.low, self.bootstrap.high]

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
        }
        if self.bootstrap is not None:
            d["ci"] = self.ci
            d["bootstrap"] = self.bootstrap.to_dict()
        if self.permutation is not None:
            d["p_value"] = self.permutation.p_value
            d["null_mean"] = self.permutation.null_mean
            d["permutation"] = self.permutation.to_dict()
        if self.bootstrap is not None or self.permutation is not None:
            d["seed"] = self.seed
        return d


def _side(obj, other_layers: int, name: str, **kw) -> LayerStates:
    if isinstance(obj, LayerStates):
        return obj
    n_own = len(obj) if isinstance(obj, (list, tuple)) else (obj.shape[0] if obj.ndim == 3 else 1)
    return precompute_layers(obj, n_layers_total=n_own + other_layers, name=name, **kw)


def _n_layers(obj) -> int:
    if isinstance(obj, LayerStates):
        return obj.n_layers
    if isinstance(obj, (list, tuple)):
        return len(obj)
    return obj.shape[0] if getattr(obj, "ndim", 2) == 3 else 1


def layer_search(
    xs,
    ys,
    k: int | None = 10,
    metric: str = "mutual_knn",
    *,
    q: float | None = None,
    cca_dim: int = 10,
    n_bootstrap: int = 0,
    n_permutations: int = 0,
    confidence: float = 0.95,
    interval: IntervalMethod = "basic",
    seed: int | None = 0,
    device=None,
    chunk_bytes: int = DEFAULT_CHUNK_BYTES,
    ray: str | bool | None = None,
) -> LayerSearchResult:
    """Score every pair of X layers and Y layers and pick the best pair.

    xs, ys: lists of [N, D_l] arrays (numpy or torch), one [L, N, D] array, or `LayerStates` from
    `precompute_layers` (row i of every layer is the same item). k: neighbours for the k-NN
    metrics. q: outlier clamp quantile (None = off; platonic-rep uses 0.95).
    n_bootstrap > 0: interval over items for the best pair's score, the best pair re-selected in
    every resample; `interval` = "basic" (default), "percentile" or "simultaneous" (see
    vlgap.metrics.uncertainty for what each covers).
    n_permutations > 0: p-value of the best score against randomly re-paired rows (max over pairs).
    Ties for the best score go to the first pair in row-major order.
    ray: "auto" or a cluster address: every layer's neighbour lists in row blocks on Ray workers
    (vlgap.distributed.knn); the result equals the single-process one.
    """
    kw = dict(k=k, metric=metric, q=q, cca_dim=cca_dim, for_bootstrap=n_bootstrap > 0,
              device=device, chunk_bytes=chunk_bytes, ray=ray)
    lx, ly = _n_layers(xs), _n_layers(ys)
    sx = _side(xs, ly, "X", **kw)
    sy = _side(ys, lx, "Y", **kw)
    for side, label in ((sx, "X"), (sy, "Y")):
        if side.metric != metric or (side.engine.uses_k and side.k != k) or side.q != q:
            raise VlgapError(f"{label} was precomputed for metric={side.metric!r}, k={side.k}, q={side.q}; "
                             f"this search asks metric={metric!r}, k={k}, q={q}")
    if sx.n != sy.n:
        raise VlgapError(f"X has {sx.n} items but Y has {sy.n}: row i of X and of Y must be the same item")
    engine = sx.engine
    scores = engine.pair_scores(sx.states, sy.states)
    if np.all(np.isnan(scores)):
        raise VlgapError(f"{metric} is undefined for every layer pair (constant features?)")
    flat = int(np.nanargmax(scores))
    x_layer, y_layer = divmod(flat, scores.shape[1])
    best = float(scores[x_layer, y_layer])
    result = LayerSearchResult(metric=metric, scores=scores, best_score=best, x_layer=x_layer,
                               y_layer=y_layer, n=sx.n, k=sx.k, chance=chance_level(metric, sx.n, sx.k),
                               q=q, seed=seed)
    if n_bootstrap:
        for side, label in ((sx, "X"), (sy, "Y")):
            if metric == "mutual_knn" and side.states[0].ids.shape[1] < bootstrap_depth(k, side.n):
                raise VlgapError(f"{label} was precomputed with for_bootstrap=False; precompute it with "
                                 "for_bootstrap=True to bootstrap")
        result.bootstrap = bootstrap_best_pair(engine, sx.feats, sy.feats, sx.states, sy.states,
                                               observed=scores, n_resamples=n_bootstrap,
                                               confidence=confidence, method=interval, seed=seed)
    if n_permutations:
        result.permutation = permutation_best_pair(engine, sx.feats, sy.feats, sx.states, sy.states,
                                                   observed=best, n_permutations=n_permutations, seed=seed)
    return result
