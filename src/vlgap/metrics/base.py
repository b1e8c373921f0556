"""What every alignment metric shares: the engine interface (per-layer state, pair scores,
resampling hooks), the neighbour-list state of the k-NN metrics, and the chance level.

Lowest module of the alignment stack: `alignment` (the metrics), `ordinal` (order-aware k-NN
metrics), `uncertainty` (bootstrap, permutation null) and `layer_search` build on it; it imports
none of them.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np
import torch

from vlgap.errors import VlgapError
from vlgap.metrics.knn import topk_neighbours
from vlgap.metrics.prepare import DEFAULT_CHUNK_BYTES
from vlgap.stats.bounds import UNIT, ScoreRange


def chance_level(metric: str, n: int, k: int | None) -> float | None:
    """Expected score when the pairing of X and Y rows is random.

    mutual_knn: k/(N-1), exact (each row's Y-neighbours are then a uniform k-subset of the other
    N-1 items, so the overlap is hypergeometric with mean k^2/(N-1)). The other metrics have no
    closed form independent of the data: use the permutation null mean (`n_permutations`).
    """
    if metric == "mutual_knn" and k is not None:
        return k / (n - 1)
    return None


class ZeroVarianceError(VlgapError):
    """A metric asked of a layer whose items all have identical features (see `constant_message`)."""


def is_constant(feats: torch.Tensor) -> bool:
    """Zero variance: every row (item) is the same vector."""
    return feats.shape[0] > 1 and bool((feats == feats[:1]).all())


def constant_message(metric: str, label: str, layers: list[int], n_layers: int, n: int,
                     verdict: str = "undefined there") -> str:
    """One line naming the zero-variance layers of one side (a k-NN ranking of identical items would
    be decided by index ties alone, and a kernel metric would divide 0 by 0)."""
    which = (f"layer {layers[0]}" if len(layers) == 1 else f"layers {layers}") + f" of {n_layers}"
    verb = "has" if len(layers) == 1 else "have"
    return (f"{metric}: {label} {which} {verb} zero variance (all {n} items have identical features), so "
            f"{metric} is {verdict}; check the features of that layer (a constant encoder output?)")


class AlignmentMetric:
    """Base class. Subclasses define `layer_state` and `pair_scores`; resampling hooks have generic
    (recompute) defaults that faster subclasses override."""

    name = ""
    uses_k = False
    #: the values the score can take, declared once per metric (vlgap.stats.bounds): every interval of it is
    #: kept inside and flagged when its method would have left it
    score_range: ScoreRange = UNIT

    def __init__(self, k: int | None = None, *, chunk_bytes: int = DEFAULT_CHUNK_BYTES):
        self.k = k
        self.chunk_bytes = chunk_bytes

    def plan(self, n: int, n_layers: int) -> None:
        """Called once before states are built (lets a metric choose a memory strategy)."""

    def check(self, n: int) -> None:
        """Raise VlgapError if the metric is undefined for N items."""

    def layer_state(self, feats: torch.Tensor, groups: torch.Tensor | None = None) -> Any:
        raise NotImplementedError

    def pair_scores(self, sx: list, sy: list) -> np.ndarray:
        """[L_x, L_y] float64 scores."""
        raise NotImplementedError

    # --- resampling hooks -------------------------------------------------------------------
    # `feats` arguments below are zero-argument callables returning the prepared layer, so that
    # paths which do not need the features never materialise them.
    def resample_state(self, state: Any, feats: Callable[[], torch.Tensor], idx: torch.Tensor) -> Any:
        """State of the bootstrap resample `feats()[idx]` (idx sorted; repeated = copies)."""
        return self.layer_state(feats()[idx], groups=idx)

    def permute_state(self, state: Any, feats: Callable[[], torch.Tensor], perm: torch.Tensor) -> Any:
        """State of `feats()[perm]` (rows re-paired with the other side)."""
        return self.layer_state(feats()[perm])

    def bootstrap_scores(self, fx: Sequence, fy: Sequence, sx: list, sy: list, weights: np.ndarray) -> np.ndarray:
        """[B, L_x, L_y] scores on the resamples given by multiplicities `weights` [B, N].
        fx, fy: the prepared layers (indexable; may prepare on access)."""
        out = np.empty((weights.shape[0], len(sx), len(sy)))
        n = weights.shape[1]
        for b, w in enumerate(weights):
            idx = torch.from_numpy(np.repeat(np.arange(n), w)).to(state_device(sx, fx))
            rx = [self.resample_state(s, partial(fx.__getitem__, i), idx) for i, s in enumerate(sx)]
            ry = [self.resample_state(s, partial(fy.__getitem__, i), idx) for i, s in enumerate(sy)]
            out[b] = self.pair_scores(rx, ry)
        return out

    def permutation_scores(self, fx: Sequence, fy: Sequence, sx: list, sy: list, perms: np.ndarray) -> np.ndarray:
        """[P, L_x, L_y] scores with Y's rows shuffled by each permutation in `perms` [P, N]."""
        out = np.empty((perms.shape[0], len(sx), len(sy)))
        for p, perm in enumerate(perms):
            perm_t = torch.from_numpy(perm).to(state_device(sx, fx))
            out[p] = self.pair_scores(sx, [self.permute_state(s, partial(fy.__getitem__, i), perm_t)
                                           for i, s in enumerate(sy)])
        return out


def state_device(states: list, feats: Sequence) -> torch.device:
    first = states[0]
    for t in (getattr(first, "ids", None), first if torch.is_tensor(first) else None,
              first.get("gram") if isinstance(first, dict) else None,
              first.get("x") if isinstance(first, dict) else None):
        if torch.is_tensor(t):
            return t.device
    return feats[0].device


def check_k(k: int | None, n: int, minimum: int = 1, metric: str = "", *, trivial_at_all: bool = False) -> int:
    """k as an int with minimum <= k <= N-1, else VlgapError naming k. trivial_at_all: the metric is 1
    whatever the features when every other item is a neighbour (mutual k-NN, cycle k-NN), so k = N-1 is
    refused too; a k whose chance level k/(N-1) is 0.5 or more is allowed with a caveat."""
    top = n - 2 if trivial_at_all else n - 1
    whole = not isinstance(k, (bool, np.bool_)) and isinstance(k, (int, float, np.integer, np.floating)) \
        and float(k).is_integer()
    if not whole or not minimum <= k <= top:
        if trivial_at_all and whole and k == n - 1 >= minimum:
            raise VlgapError(f"{metric}: k={k} with N={n} items: every item's k nearest neighbours are all the "
                             f"other items, so {metric} is 1 whatever the features (chance is 1 too); need "
                             f"{minimum} <= k <= N-2 = {n - 2}, e.g. k=10 for N=1024 as the paper")
        raise VlgapError(f"{metric}: k={k!r}: need an integer with {minimum} <= k <= N-{2 if trivial_at_all else 1} "
                         f"= {top}")
    if trivial_at_all and k / (n - 1) >= 0.5:
        from vlgap.caveats import caveat

        caveat(f"{metric}: k={k} of N={n} items: chance level is k/(N-1) = {k / (n - 1):.3f}, so the score has "
               "little room above chance; use k much smaller than N (the paper: k=10 for N=1024)")
    return int(k)


def inverse_permutation(perm: torch.Tensor) -> torch.Tensor:
    """Inverse of each permutation along the last axis."""
    return torch.argsort(perm, dim=-1)


@dataclass
class Neighbours:
    ids: torch.Tensor                 # [N, depth] ranked neighbours
    sims: torch.Tensor | None = None  # [N, depth] their similarities
    extra: dict = field(default_factory=dict)


class KnnMetric(AlignmentMetric):
    uses_k = True
    keep_sims = False

    def __init__(self, k: int, *, depth: int | None = None, chunk_bytes: int = DEFAULT_CHUNK_BYTES):
        super().__init__(k, chunk_bytes=chunk_bytes)
        self.depth = depth  # ranked list length kept per item (>= k; longer for fast bootstraps)

    #: the score is 1 whatever the features when k = N-1 (every other item a neighbour)
    trivial_at_all = False

    def check(self, n: int) -> None:
        check_k(self.k, n, 2 if self.name == "cknna" else 1, self.name, trivial_at_all=self.trivial_at_all)

    def layer_state(self, feats, groups=None):
        ids, sims = topk_neighbours(feats, self.list_depth(feats.shape[0], groups is not None), groups=groups,
                                    chunk_bytes=self.chunk_bytes)
        return self.state_from_lists(ids, sims)

    def list_depth(self, n: int, grouped: bool = False) -> int:
        """Length of the ranked neighbour list kept per item."""
        return self.k if grouped or self.depth is None else max(self.k, min(self.depth, n - 1))

    def state_from_lists(self, ids: torch.Tensor, sims: torch.Tensor):
        """A layer's state from its neighbour lists (computed here or by vlgap.distributed.knn)."""
        state = Neighbours(ids, sims if self.keep_sims else None)
        self._finish_state(state)
        return state

    def _finish_state(self, state: Neighbours) -> None:
        pass

    def permute_state(self, state, feats, perm):
        # re-pairing only relabels items: no neighbour search needed
        inv = inverse_permutation(perm)
        sims = None if state.sims is None else state.sims[perm]
        new = Neighbours(inv[state.ids[perm]], sims)
        self._finish_state(new)
        return new
