"""Representation-alignment metrics between two sets of features of the same N items.

Names and definitions follow platonic-rep (Huh et al. 2024, `metrics.AlignmentMetrics`):
`mutual_knn`, `cycle_knn`, `cknna`, `cka`, `unbiased_cka`, `svcca`, and the order-aware
`lcs_knn`, `edit_distance_knn` (vlgap.metrics.ordinal). As in platonic-rep's
`compute_score(normalize=True)`, features are optionally clamped at the q-quantile of |x|
(`remove_outliers`, q=0.95 there; off here unless asked, or `preset="platonic-rep"` in
`layer_search`/`align`) and rows are L2-normalised before any metric.

Deliberate differences from platonic-rep, each making a score exact and deterministic:
- neighbour ties are broken by the smaller item index (platonic-rep: unspecified argsort order).
  This holds for exact ties (equal similarities); two similarities that differ only by rounding
  may be ordered differently by another BLAS or another block size (vlgap.metrics.knn);
- `cka`, `unbiased_cka`, `cknna` divide by sqrt(HSIC_xx HSIC_yy) without the +1e-6 (which biases
  small HSIC values: identical spaces then score 1 exactly, up to rounding);
- `svcca` uses an exact SVD (not the randomised `svd_lowrank`) and exact canonical correlations
  (singular values of U_x^T U_y, i.e. cosines of principal angles) instead of scikit-learn's
  iterative CCA plus added noise.

Each metric is an object with per-layer state, so that a layer search computes every layer's state
(neighbour lists, Gram matrices, SVD bases) once and then scores all L_x x L_y pairs from the states.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from functools import partial

import numpy as np
import torch

from vlgap.errors import VlgapError
from vlgap.metrics.base import (AlignmentMetric, KnnMetric, Neighbours, chance_level, check_k,  # noqa: F401
                                ZeroVarianceError, constant_message, inverse_permutation, is_constant)
from vlgap.metrics.knn import DENSE_TABLE_BYTES, NeighbourLookup, active_memo, walk_rows, weighted_neighbours
from vlgap.metrics.knn_bits import bits_pay, n_words, neighbour_bits, overlap_totals, stack_layers
from vlgap.metrics.ordinal import EditDistanceKnn, LcsKnn
from vlgap.metrics.prepare import DEFAULT_CHUNK_BYTES, as_matrix, check_same_items, prepare, resolve_device
from vlgap.stats.bounds import ScoreRange

METRIC_NAMES: tuple[str, ...] = ("mutual_knn", "cycle_knn", "cknna", "cka", "unbiased_cka", "svcca",
                                 "lcs_knn", "edit_distance_knn")

#: memory allowed for per-layer Gram matrices in CKA (float64); above it CKA uses feature products
GRAM_BYTES = 1024 * 2**20
#: memory for one batch of bootstrap work (tables and look-up keys) and for permutation keys
BATCH_BYTES = 192 * 2**20
KEY_BYTES = 64 * 2**20
#: memory for the dense neighbour tables kept across a permutation run (one per X layer)
TABLES_BYTES = 1024 * 2**20


class MutualKnn(KnnMetric):
    """Mean over items of |kNN_X(i) & kNN_Y(i)| / k (Huh et al. 2024; the paper's A_MkNN).

    Bootstrap resamples (see vlgap.metrics.uncertainty): with `bootstrap_neighbours="distinct"`
    (default) an item's neighbours in a resample are the k nearest distinct drawn items; with
    "copies" every copy of a drawn item is a separate candidate (the literal rerun on the resample,
    as the generic path of the other metrics does). Either way an item never neighbours its own
    copies and each item's overlap counts as many times as it was drawn.
    """

    name = "mutual_knn"
    score_range = ScoreRange(0.0, 1.0, "a mean over items of |kNN_X & kNN_Y| / k")
    trivial_at_all = True

    def __init__(self, k: int, *, depth: int | None = None, chunk_bytes: int = DEFAULT_CHUNK_BYTES,
                 bootstrap_neighbours: str = "distinct"):
        super().__init__(k, depth=depth, chunk_bytes=chunk_bytes)
        if bootstrap_neighbours not in ("distinct", "copies"):
            raise VlgapError(f"bootstrap_neighbours={bootstrap_neighbours!r}: use 'distinct' or 'copies'")
        self.bootstrap_neighbours = bootstrap_neighbours

    @property
    def _count_dtype(self) -> torch.dtype:
        # per-item overlaps are <= k: the narrowest integer type that holds them sums fastest
        return torch.uint8 if self.k < 256 else torch.int32

    def overlap_counts(self, sx: list, sy: list) -> torch.Tensor:
        """Per-item overlaps [L_x, L_y, N] (integers 0..k)."""
        k = self.k
        n = sx[0].ids.shape[0]
        rows = torch.arange(n, device=sx[0].ids.device)[:, None]
        keys = rows * n + torch.stack([s.ids[:, :k] for s in sy])             # [L_y, N, k], shared
        # one table at a time: a dense table is N^2 bytes
        return torch.stack([NeighbourLookup(s.ids[:, :k]).take(keys).sum(dim=2, dtype=torch.int64)
                            for s in sx])

    def pair_scores(self, sx, sy):
        n = sx[0].ids.shape[0]
        totals = self.overlap_counts(sx, sy).sum(dim=2).cpu().numpy()
        return totals / (n * self.k)

    # --- fast resampling: neighbour lists are computed once, resamples only re-walk them -------
    def _use_bits(self, states, n: int) -> bool:
        # bitsets run in numpy on the CPU; on a GPU the look-up tables are fast already
        return states[0].ids.device.type == "cpu" and bits_pay(n, self.k)

    def permutation_scores(self, fx, fy, sx, sy, perms):
        k = self.k
        n = perms.shape[1]
        dev = sx[0].ids.device
        if self._use_bits(sx, n):
            return self._permutation_bits(sx, sy, perms)
        # every X table is used for every batch: dense ones only while they all fit together
        dense = len(sx) * (n * n + 1) <= TABLES_BYTES
        tables = [NeighbourLookup(s.ids[:, :k], dense_bytes=DENSE_TABLE_BYTES if dense else 0) for s in sx]
        rows = torch.arange(n, device=dev)[:, None]
        y_ids = [s.ids[:, :k] for s in sy]
        batch = max(1, KEY_BYTES // (8 * len(sy) * n * k))
        out = np.empty((perms.shape[0], len(sx), len(sy)))
        for start in range(0, perms.shape[0], batch):
            p = torch.from_numpy(perms[start:start + batch]).to(dev)          # [P, N]
            nb = p.shape[0]
            inv = inverse_permutation(p)
            # item i is now paired with Y-row p[i]: its Y-neighbours, named by X-item; the look-up
            # keys are shared by every X layer, so they are built once per batch
            keys = torch.stack([tables[0].keys(rows, torch.gather(inv, 1, ids[p].reshape(nb, -1)).view(nb, n, k))
                                for ids in y_ids], dim=2)                      # [P, N, L_y, k]
            for a, table in enumerate(tables):
                tot = table.take(keys).sum(dim=3, dtype=self._count_dtype).sum(dim=1, dtype=torch.int64)
                out[start:start + nb, a, :] = tot.cpu().numpy() / (n * k)
        return out

    def bootstrap_scores(self, fx, fy, sx, sy, weights):
        k = self.k
        b_total, n = weights.shape
        dev = sx[0].ids.device
        if self.bootstrap_neighbours == "distinct" and self._use_bits(sx, n):
            return self._bootstrap_bits(fx, fy, sx, sy, weights)
        value_dtype = torch.uint8 if k < 256 else torch.int32  # copies taken per neighbour <= k
        per_resample = n * n * (1 if k < 256 else 4) + len(sy) * n * k * (8 + 4 + 4)
        batch = max(1, min(b_total, BATCH_BYTES // per_resample))
        rows = torch.arange(n, device=dev)[:, None]
        out = np.empty((b_total, len(sx), len(sy)))
        for start in range(0, b_total, batch):
            w = torch.from_numpy(weights[start:start + batch]).to(dev, torch.int32)   # [B, N]
            nb = w.shape[0]
            # multiplicities that neighbour lists are walked with (1 per drawn item, or its copies)
            distinct = self.bootstrap_neighbours == "distinct"
            walk = (w > 0).to(torch.int32) if distinct else w
            y_ids, y_taken = zip(*(self._resample_lists(s, partial(fy.__getitem__, i), walk)
                                   for i, s in enumerate(sy)))
            # layout [B, N, L_y, k]: all queries of one (resample, item) row hit one table row
            y_ids = torch.stack(y_ids, dim=2)
            y_taken = torch.stack(y_taken, dim=2)
            row_base = ((torch.arange(nb, device=dev)[:, None] * n + rows.T) * n)[:, :, None, None]
            absent = nb * n * n                                                # NeighbourLookup.absent_key
            keys = torch.where(y_taken > 0, row_base + y_ids, absent)
            y_taken = y_taken.to(value_dtype)
            w64 = w.to(torch.float64)
            for a, s in enumerate(sx):
                ids, taken = self._resample_lists(s, partial(fx.__getitem__, a), walk)
                got = NeighbourLookup(ids, taken.to(value_dtype)).take(keys)   # [B, N, L_y, k]
                if not distinct:  # copies on both sides: shared draws = min of the two counts
                    got = torch.minimum(got, y_taken)
                overlap = got.sum(dim=3, dtype=self._count_dtype)              # [B, N, L_y]
                # each draw counts; integer sums are exact in float64
                tot = torch.einsum("bnl,bn->bl", overlap.to(torch.float64), w64)
                out[start:start + nb, a, :] = tot.cpu().numpy() / (n * k)
        return out

    # --- the same scores from bitsets (vlgap.metrics.knn_bits): exact, faster for small N -------
    def _bits_batch(self, n: int, n_y: int, total: int) -> int:
        return max(1, min(total, BATCH_BYTES // (8 * n_words(n) * n * n_y)))

    def _bootstrap_bits(self, fx, fy, sx, sy, weights):
        b_total, n = weights.shape
        out = np.empty((b_total, len(sx), len(sy)))
        step = self._bits_batch(n, len(sy), b_total)
        for start in range(0, b_total, step):
            w = weights[start:start + step]
            walk = torch.from_numpy(w).to(sx[0].ids.device, torch.int32).gt(0).to(torch.int32)
            digest = _batch_digest(walk, self.k, "bits")

            def bits(state, feats, i):
                ids, taken = self._fresh_resample_lists(state, partial(feats.__getitem__, i), walk)
                return neighbour_bits(ids, n, taken > 0)

            xb = [_kept(s, digest, partial(bits, s, fx, a)) for a, s in enumerate(sx)]
            # the Y side is kept as one stack (what every X layer is AND-ed with), not layer by layer
            yb = _kept(sy[0], _stack_digest(digest, sy), lambda: stack_layers(
                [bits(s, fy, i) for i, s in enumerate(sy)]))
            out[start:start + len(w)] = overlap_totals(xb, yb, w, max_count=self.k) / (n * self.k)
        return out

    def _permutation_bits(self, sx, sy, perms):
        k, (p_total, n) = self.k, perms.shape
        xb = [neighbour_bits(s.ids[None, :, :k], n) for s in sx]              # [W, 1, N]: not permuted
        out = np.empty((p_total, len(sx), len(sy)))
        step = self._bits_batch(n, len(sy), p_total)
        for start in range(0, p_total, step):
            p = torch.from_numpy(perms[start:start + step]).to(sx[0].ids.device)
            inv = inverse_permutation(p)
            digest = _batch_digest(p, k, "permuted bits")

            def bits(state):
                # item i paired with Y-row p[i]: its Y-neighbours, named by X-item
                named = torch.gather(inv, 1, state.ids[:, :k][p].reshape(len(p), -1)).view(len(p), n, k)
                return neighbour_bits(named, n)

            yb = _kept(sy[0], _stack_digest(digest, sy), lambda: stack_layers([bits(s) for s in sy]))
            out[start:start + len(p)] = overlap_totals(xb, yb, max_count=k) / (n * k)
        return out

    def _resample_lists(self, state: Neighbours, get_feats: Callable[[], torch.Tensor], w: torch.Tensor):
        memo = active_memo()
        if memo is None:
            return self._fresh_resample_lists(state, get_feats, w)

        def narrow():  # stored narrow (ids < N, copies taken <= k), widened again below: the same values
            ids, taken = self._fresh_resample_lists(state, get_feats, w)
            return (ids.to(torch.int32 if ids.shape[-2] < 2**31 else ids.dtype),
                    taken.to(torch.uint8 if self.k < 256 else torch.int32))

        ids, taken = memo.get_or_build(state, memo.digest(w, self.k), narrow)
        return ids.to(state.ids.dtype), taken.to(torch.int32)

    def _fresh_resample_lists(self, state: Neighbours, get_feats: Callable[[], torch.Tensor], w: torch.Tensor):
        ids, taken, short = weighted_neighbours(state.ids, w, self.k)
        short &= w > 0
        if bool(short.any()):
            # the stored ranking was too shallow for these rows: rank them against every item
            feats = get_feats()
            for b, i in torch.nonzero(short).tolist():
                sims = feats[i:i + 1] @ feats.T
                sims[0, i] = float("-inf")
                full = torch.sort(sims, dim=1, descending=True, stable=True).indices[:, :-1]
                fi, ft, _ = walk_rows(full, w[b:b + 1].to(torch.float32).gather(1, full), self.k)
                ids[b, i], taken[b, i] = fi[0], ft[0]
        return ids, taken.to(torch.int32)


def _batch_digest(batch: torch.Tensor, k: int, kind: str) -> bytes | None:
    """Memo key of one batch of resamples (None outside a resample memo)."""
    memo = active_memo()
    return None if memo is None else memo.digest(batch, k, kind)


def _stack_digest(digest: bytes | None, states: list) -> bytes | None:
    """Key of a stack of every layer's value: the batch's key and which layer states (the memo checks
    the first one by weak reference; a side's states live and die together)."""
    if digest is None:
        return None
    import hashlib

    return hashlib.blake2b(digest + ",".join(str(id(s)) for s in states).encode(), digest_size=16).digest()


def _kept(owner, digest: bytes | None, build: Callable[[], np.ndarray]) -> np.ndarray:
    """build() once per (owner, digest) inside a resample memo (vlgap.metrics.knn.ResampleMemo)."""
    memo = active_memo()
    if memo is None or digest is None:
        return build()
    return memo.get_or_build(owner, digest, lambda: (build(),))[0]


class CycleKnn(KnnMetric):
    """Fraction of items i that are among the X-neighbours of at least one of their Y-neighbours
    (platonic-rep `cycle_knn(feats_A=X, feats_B=Y)`: knn_A[knn_B] contains i)."""

    name = "cycle_knn"
    score_range = ScoreRange(0.0, 1.0, "a fraction of items")
    trivial_at_all = True

    def pair_scores(self, sx, sy):
        k = self.k
        n = sx[0].ids.shape[0]
        own = torch.arange(n, device=sx[0].ids.device)[:, None]
        out = np.empty((len(sx), len(sy)))
        for a, s in enumerate(sx):
            table = NeighbourLookup(s.ids[:, :k])
            for b, t in enumerate(sy):
                hit = table.get(t.ids[:, :k], own).amax(dim=1)  # is i in kNN_X(j) for j in kNN_Y(i)
                out[a, b] = hit.sum().item() / n
        return out


def _sparse_hsic_unbiased(n: int, rows, cols, a, b) -> float:
    """Unbiased HSIC (Song et al. 2012, eq. 5; platonic-rep `hsic_unbiased`) of two N x N matrices
    A, B that are zero except at the shared entries (rows, cols) (no diagonal entries), in O(nnz)."""
    if rows.numel() == 0:
        return 0.0
    a = a.double()
    b = b.double()
    keys = rows * n + cols
    order = torch.argsort(keys)
    skeys, sb = keys[order], b[order]
    tkeys = cols * n + rows
    pos = torch.searchsorted(skeys, tkeys).clamp_(max=skeys.numel() - 1)
    found = skeys[pos] == tkeys
    trace_term = (a * torch.where(found, sb[pos], torch.zeros_like(sb[pos]))).sum()   # sum A * B^T
    col_a = torch.zeros(n, dtype=torch.float64, device=a.device).index_add_(0, cols, a)
    row_b = torch.zeros(n, dtype=torch.float64, device=a.device).index_add_(0, rows, b)
    value = (trace_term + a.sum() * b.sum() / ((n - 1) * (n - 2))
             - 2.0 * (col_a * row_b).sum() / (n - 2)) / (n * (n - 3))
    return float(value)


class Cknna(KnnMetric):
    """CKNNA (Huh et al. 2024): unbiased-HSIC CKA restricted to mutual k-NN entries,
    HSIC(M*K, M*L) / sqrt(HSIC(M_K*K, M_K*K) HSIC(M_L*L, M_L*L)), M = M_K * M_L."""

    name = "cknna"
    keep_sims = True
    #: no fixed range: the unbiased HSIC of masked, non-symmetric kernels is not an inner product, so
    #: Cauchy-Schwarz does not bound the ratio by 1 (random data at N < 30 reach 1.13)
    score_range = ScoreRange(why="unbiased HSIC of masked kernels: no fixed range (values above 1 occur)")

    def check(self, n):
        check_k(self.k, n, 2, self.name)
        if n < 4:
            raise VlgapError(f"cknna needs at least 4 items (unbiased HSIC), got N={n}")

    def _finish_state(self, state):
        k = self.k
        n = state.ids.shape[0]
        rows = torch.arange(n, device=state.ids.device).repeat_interleave(k)
        cols = state.ids[:, :k].reshape(-1)
        vals = state.sims[:, :k].reshape(-1)
        state.extra["self_hsic"] = _sparse_hsic_unbiased(n, rows, cols, vals, vals)

    def pair_scores(self, sx, sy):
        k = self.k
        n = sx[0].ids.shape[0]
        dev = sx[0].ids.device
        rows = torch.arange(n, device=dev)[:, None].expand(n, k)
        positions = torch.arange(1, k + 1, device=dev, dtype=torch.int32).expand(n, k)
        out = np.empty((len(sx), len(sy)))
        for b, t in enumerate(sy):
            in_y = NeighbourLookup(t.ids[:, :k], positions.contiguous())
            for a, s in enumerate(sx):
                pos_y = in_y.get(rows, s.ids[:, :k])          # 1-based position in Y's list, 0 = absent
                mask = pos_y > 0
                r, c = rows[mask], s.ids[:, :k][mask]
                va = s.sims[:, :k][mask]
                vb = t.sims[:, :k].gather(1, (pos_y - 1).clamp(min=0).long())[mask]
                cross = _sparse_hsic_unbiased(n, r, c, va, vb)
                denom = math.sqrt(s.extra["self_hsic"] * t.extra["self_hsic"]) if (
                    s.extra["self_hsic"] * t.extra["self_hsic"] > 0) else float("nan")
                out[a, b] = cross / denom
        return out


class Cka(AlignmentMetric):
    """Linear CKA, HSIC(K, L) / sqrt(HSIC(K, K) HSIC(L, L)), K = X X^T, with the biased HSIC
    trace(K H L H) (Kornblith et al. 2019) or, `unbiased=True`, Song et al.'s unbiased HSIC."""

    def __init__(self, *, unbiased: bool = False, chunk_bytes: int = DEFAULT_CHUNK_BYTES):
        super().__init__(None, chunk_bytes=chunk_bytes)
        self.unbiased = unbiased
        self.name = "unbiased_cka" if unbiased else "cka"
        self.use_gram = True
        # biased HSIC is trace(K H L H) >= 0; the unbiased one is an inner product of U-centred Gram matrices
        # (Szekely & Rizzo 2014), so Cauchy-Schwarz bounds the ratio by 1 in absolute value
        self.score_range = (ScoreRange(-1.0, 1.0, "unbiased HSIC ratio (Cauchy-Schwarz)") if unbiased
                            else ScoreRange(0.0, 1.0, "HSIC ratio of centred Gram matrices"))

    def check(self, n):
        if self.unbiased and n < 4:
            raise VlgapError(f"unbiased_cka needs at least 4 items, got N={n}")

    def plan(self, n, n_layers):
        # Gram matrices: O(N^2) per pair after O(N^2 D) per layer; features: O(N D_x D_y) per pair
        self.use_gram = n_layers * n * n * 8 <= GRAM_BYTES

    def layer_state(self, feats, groups=None):
        x = feats.double()
        if self.use_gram:
            return self._from_gram(x @ x.T)
        return self._from_features(x)

    def _from_gram(self, k: torch.Tensor) -> dict:
        n = k.shape[0]
        if self.unbiased:
            kt = k.clone()
            kt.fill_diagonal_(0.0)
            row = kt.sum(dim=1)
            st = {"gram": k, "flat": kt.reshape(-1), "row": row, "total": row.sum(), "diag": None}
        else:
            kc = k - k.mean(dim=0, keepdim=True)
            kc = kc - kc.mean(dim=1, keepdim=True)
            st = {"gram": k, "flat": kc.reshape(-1)}
        st["self"] = self._hsic(st, st, float(st["flat"] @ st["flat"]), n)
        return st

    def _from_features(self, x: torch.Tensor) -> dict:
        n = x.shape[0]
        if self.unbiased:
            diag = (x * x).sum(dim=1)
            colsum = x.sum(dim=0)
            st = {"x": x, "diag": diag, "row": x @ colsum - diag, "total": colsum @ colsum - diag.sum()}
        else:
            st = {"x": x - x.mean(dim=0, keepdim=True)}
        st["self"] = self._hsic(st, st, self._cross(st, st), n)
        return st

    @staticmethod
    def _cross(s: dict, t: dict) -> float:
        # sum(K * L) from features: ||X^T Y||_F^2 (minus the diagonal for the unbiased version)
        v = float(torch.linalg.matrix_norm(s["x"].T @ t["x"]) ** 2)
        if s.get("diag") is not None:
            v -= float(s["diag"] @ t["diag"])
        return v

    def _hsic(self, s: dict, t: dict, cross: float, n: int) -> float:
        if not self.unbiased:
            return cross
        return float((cross + s["total"] * t["total"] / ((n - 1) * (n - 2))
                      - 2.0 * (s["row"] @ t["row"]) / (n - 2)) / (n * (n - 3)))

    def pair_scores(self, sx, sy):
        n = (sx[0]["gram"] if "gram" in sx[0] else sx[0]["x"]).shape[0]
        if "flat" in sx[0]:
            cross = (torch.stack([s["flat"] for s in sx]) @ torch.stack([t["flat"] for t in sy]).T).cpu()
        out = np.empty((len(sx), len(sy)))
        for a, s in enumerate(sx):
            for b, t in enumerate(sy):
                c = float(cross[a, b]) if "flat" in s else self._cross(s, t)
                denom = s["self"] * t["self"]
                out[a, b] = self._hsic(s, t, c, n) / math.sqrt(denom) if denom > 0 else float("nan")
        return out

    def resample_state(self, state, feats, idx):
        if "gram" in state:
            return self._from_gram(state["gram"][idx][:, idx])
        return self._from_features(feats().double()[idx])

    def permute_state(self, state, feats, perm):
        return self.resample_state(state, feats, perm)


class Svcca(AlignmentMetric):
    """SVCCA (Raghu et al. 2017; platonic-rep `svcca`): standardise columns, keep the top `cca_dim`
    left singular vectors of each side, report the mean canonical correlation between them."""

    name = "svcca"
    score_range = ScoreRange(0.0, 1.0, "a mean canonical correlation")

    def __init__(self, *, cca_dim: int = 10, chunk_bytes: int = DEFAULT_CHUNK_BYTES):
        super().__init__(None, chunk_bytes=chunk_bytes)
        self.cca_dim = cca_dim

    def check(self, n):
        if not 1 <= self.cca_dim < n:
            raise VlgapError(f"cca_dim={self.cca_dim}: need 1 <= cca_dim < N = {n}")

    def layer_state(self, feats, groups=None):
        x = feats.double()
        if x.shape[1] < self.cca_dim:
            raise VlgapError(f"svcca: a layer has {x.shape[1]} features, fewer than cca_dim={self.cca_dim}; "
                             "lower cca_dim")
        x = x - x.mean(dim=0)
        x = x / (x.std(dim=0) + 1e-8)
        u = torch.linalg.svd(x, full_matrices=False).U[:, :self.cca_dim]
        return u

    def pair_scores(self, sx, sy):
        out = np.empty((len(sx), len(sy)))
        for a, u in enumerate(sx):
            for b, v in enumerate(sy):
                out[a, b] = float(torch.linalg.svdvals(u.T @ v).clamp(max=1.0).mean())
        return out


def make_metric(metric: str, k: int | None = 10, *, cca_dim: int = 10, depth: int | None = None,
                chunk_bytes: int = DEFAULT_CHUNK_BYTES) -> AlignmentMetric:
    """The metric engine for `metric` (one of METRIC_NAMES)."""
    if metric == "mutual_knn":
        return MutualKnn(k, depth=depth, chunk_bytes=chunk_bytes)
    if metric == "cycle_knn":
        return CycleKnn(k, chunk_bytes=chunk_bytes)
    if metric == "cknna":
        return Cknna(k, chunk_bytes=chunk_bytes)
    if metric in ("cka", "unbiased_cka"):
        return Cka(unbiased=metric == "unbiased_cka", chunk_bytes=chunk_bytes)
    if metric == "svcca":
        return Svcca(cca_dim=cca_dim, chunk_bytes=chunk_bytes)
    if metric == "lcs_knn":
        return LcsKnn(k, chunk_bytes=chunk_bytes)
    if metric == "edit_distance_knn":
        return EditDistanceKnn(k, chunk_bytes=chunk_bytes)
    raise VlgapError(f"metric={metric!r}: choose one of {', '.join(METRIC_NAMES)}")


def metric_range(metric: str, k: int | None = 10) -> ScoreRange:
    """The range `metric`'s score can take with k neighbours (each metric's declared `score_range`)."""
    return make_metric(metric, k if k else 10).score_range


# ------------------------------------------------------------------------------------------------
# one pair of feature matrices
# ------------------------------------------------------------------------------------------------

def _pair(metric: str, feats_a, feats_b, k, *, q=None, normalize=True, device=None, **options) -> float:
    dev = resolve_device(device, feats_a)
    a = prepare(as_matrix(feats_a, "X", dev), q, normalize)
    b = prepare(as_matrix(feats_b, "Y", dev), q, normalize)
    n = check_same_items([a], [b])
    engine = make_metric(metric, k, **options)
    engine.check(n)
    for label, t in (("feats_A", a), ("feats_B", b)):
        if is_constant(t):
            raise ZeroVarianceError(constant_message(metric, label, [0], 1, n))
    engine.plan(n, 2)
    return float(engine.pair_scores([engine.layer_state(a)], [engine.layer_state(b)])[0, 0])


def mutual_knn(feats_A, feats_B, topk: int = 10, *, q: float | None = None, normalize: bool = True,
               device=None) -> float:
    """Mutual k-NN alignment in [0, 1]; chance k/(N-1)."""
    return _pair("mutual_knn", feats_A, feats_B, topk, q=q, normalize=normalize, device=device)


def cycle_knn(feats_A, feats_B, topk: int = 10, *, q: float | None = None, normalize: bool = True,
              device=None) -> float:
    return _pair("cycle_knn", feats_A, feats_B, topk, q=q, normalize=normalize, device=device)


def cknna(feats_A, feats_B, topk: int = 10, *, q: float | None = None, normalize: bool = True,
          device=None) -> float:
    return _pair("cknna", feats_A, feats_B, topk, q=q, normalize=normalize, device=device)


def cka(feats_A, feats_B, *, unbiased: bool = False, q: float | None = None, normalize: bool = True,
        device=None) -> float:
    return _pair("unbiased_cka" if unbiased else "cka", feats_A, feats_B, None, q=q, normalize=normalize,
                 device=device)


def unbiased_cka(feats_A, feats_B, *, q: float | None = None, normalize: bool = True, device=None) -> float:
    return _pair("unbiased_cka", feats_A, feats_B, None, q=q, normalize=normalize, device=device)


def svcca(feats_A, feats_B, cca_dim: int = 10, *, q: float | None = None, normalize: bool = True,
          device=None) -> float:
    return _pair("svcca", feats_A, feats_B, None, q=q, normalize=normalize, device=device, cca_dim=cca_dim)


def lcs_knn(feats_A, feats_B, topk: int = 10, *, q: float | None = None, normalize: bool = True,
            device=None) -> float:
    """Mean longest common subsequence of the two ranked k-NN lists, in [0, k] (platonic-rep)."""
    return _pair("lcs_knn", feats_A, feats_B, topk, q=q, normalize=normalize, device=device)


def edit_distance_knn(feats_A, feats_B, topk: int = 10, *, q: float | None = None, normalize: bool = True,
                      device=None) -> float:
    """1 - mean edit distance / k of the two ranked k-NN lists, in [0, 1] (platonic-rep)."""
    return _pair("edit_distance_knn", feats_A, feats_B, topk, q=q, normalize=normalize, device=device)
