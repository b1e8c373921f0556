"""Nearest-neighbour lists by chunked top-k, and fast "is j a neighbour of i?" look-ups.

Ordering rule (deterministic, shared by every metric and by the naive references in the tests):
neighbours of i are the other items j ranked by similarity <x_i, x_j> descending, ties broken by the
smaller index j. Self (and, in a bootstrap resample, every copy of the same original item) is never a
neighbour. Similarities are computed in row blocks of at most `chunk_bytes`, so memory is O(N k) for
the lists plus one block, and N = 100,000 fits on one machine.

Exact ties (equal similarities, e.g. duplicated rows or small-integer-valued features whose
products are exact) always go to the smaller index, on any machine, for any block size.
Rounding: a similarity is one inner product, but its last bit depends on the BLAS, the CPU's vector
width and the block shape (one block holds every row when N^2 * 12 bytes <= chunk_bytes, e.g. N <=
4,700 by default). Two similarities that differ only by such rounding (near-ties within a few ulp)
may therefore be ordered differently on another machine or with another `chunk_bytes`; scores
built on them can then differ by one neighbour. Tests compare across code paths with a tolerance on
data checked to hold no near-ties, and test the tie rule itself on exact ties.
"""
from __future__ import annotations

import torch

from vlgap.errors import VlgapError
from vlgap.metrics.prepare import DEFAULT_CHUNK_BYTES

#: largest dense [N, N] membership table (bytes); above it look-ups use sorted keys instead
DENSE_TABLE_BYTES = 512 * 2**20


def _rows_per_chunk(n: int, chunk_bytes: int) -> int:
    # similarity block (4-8 bytes) + a few boolean/int masks of the same shape
    return max(1, min(n, chunk_bytes // max(1, 12 * n)))


def exact_topk(sims: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Top-k of each row by (value desc, column asc), exactly; returns (indices, values) [B, k]."""
    n = sims.shape[1]
    extra = 1 if k < n else 0
    vals, cols = torch.topk(sims, k + extra, dim=1, sorted=True)
    cols = cols[:, :k]
    if extra:
        # which tied columns torch.topk keeps at the k-th value is unspecified: redo those rows
        tied_rows = torch.nonzero(vals[:, k] == vals[:, k - 1]).flatten()
        if tied_rows.numel():
            sub = sims[tied_rows]
            kth = vals[tied_rows, k - 1:k]
            above = sub > kth
            equal = sub == kth
            need = k - above.sum(dim=1, keepdim=True)
            keep = above | (equal & (torch.cumsum(equal.to(torch.int32), dim=1) <= need))
            cols[tied_rows] = torch.nonzero(keep)[:, 1].view(-1, k)
    # order by value desc, then column asc: stable sort by value of the column-sorted list
    cols = torch.sort(cols, dim=1).values
    vals = torch.gather(sims, 1, cols)
    order = torch.sort(vals, dim=1, descending=True, stable=True).indices
    return torch.gather(cols, 1, order), torch.gather(vals, 1, order)


def topk_neighbours(
    feats: torch.Tensor,
    k: int,
    *,
    groups: torch.Tensor | None = None,
    chunk_bytes: int = DEFAULT_CHUNK_BYTES,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The k nearest neighbours of every row by inner product (cosine for L2-normalised rows).

    feats: [N, D]. groups: optional [N] labels; rows sharing a label never neighbour each other
    (used for bootstrap copies of one item). Returns (indices [N, k] int64, similarities [N, k]),
    ordered by similarity descending, ties by index ascending.
    """
    n = feats.shape[0]
    if groups is not None:
        _, counts = torch.unique(groups, return_counts=True)
        available = n - int(counts.max())
    else:
        available = n - 1
    if not 1 <= k <= available:
        raise VlgapError(f"k={k}: need 1 <= k <= {available} (N={n} items, self excluded)")
    out_idx = torch.empty((n, k), dtype=torch.int64, device=feats.device)
    out_val = torch.empty((n, k), dtype=feats.dtype, device=feats.device)
    for start, stop in row_blocks(n, chunk_bytes):
        out_idx[start:stop], out_val[start:stop] = topk_block(feats, start, stop, k, groups=groups)
    return out_idx, out_val


def row_blocks(n: int, chunk_bytes: int = DEFAULT_CHUNK_BYTES) -> list[tuple[int, int]]:
    """The row blocks [start, stop) that `topk_neighbours` works in. A distributed search hands whole
    blocks to workers (never splits one), so each similarity block is the same matrix product."""
    rows = _rows_per_chunk(n, chunk_bytes)
    return [(s, min(n, s + rows)) for s in range(0, n, rows)]


def topk_block(feats: torch.Tensor, start: int, stop: int, k: int, *,
               groups: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Top-k neighbours (self or same-group excluded) of rows start:stop against all N rows of
    `feats`: (indices [B, k], similarities [B, k]). Memory: one [B, N] similarity block plus masks."""
    sims = feats[start:stop] @ feats.T
    if groups is None:
        r = torch.arange(stop - start, device=feats.device)
        sims[r, r + start] = float("-inf")
    else:
        sims.masked_fill_(groups[start:stop, None] == groups[None, :], float("-inf"))
    return exact_topk(sims, k)


class NeighbourLookup:
    """Value stored for (i, j) if j is in row i's neighbour list, else 0, for many (i, j) at once.

    ids: [..., N, k] neighbour indices (leading batch axes allowed: several tables); values: same
    shape (counts, positions) or None for 1. A dense table of all (i, j) is used when it fits in
    `dense_bytes`, otherwise sorted keys and binary search. Entries with value 0 equal absence.
    Queries are flat keys `(table * N + i) * N + j` (see `keys`); `absent_key` (one past the last
    key) is never present, for padding.
    """

    def __init__(self, ids: torch.Tensor, values: torch.Tensor | None = None, *,
                 dense_bytes: int = DENSE_TABLE_BYTES):
        self.n = ids.shape[-2]
        n_tables = 1
        for d in ids.shape[:-2]:
            n_tables *= d
        if values is None:
            values = torch.ones(ids.shape, dtype=torch.uint8, device=ids.device)
        self.dtype = values.dtype
        keys = self.keys(torch.arange(self.n, device=ids.device)[:, None], ids,
                         _table_index(ids.shape[:-2], ids.device))
        flat_values = values.reshape(-1)
        size = n_tables * self.n * self.n
        self.absent_key = size
        self.dense = (size + 1) * values.element_size() <= dense_bytes
        if self.dense:
            # one trailing zero slot answers absent_key
            self.table = torch.zeros(size + 1, dtype=values.dtype, device=ids.device)
            self.table[keys.reshape(-1)] = flat_values
        else:
            self.sorted_keys, order = torch.sort(keys.reshape(-1))
            self.values = flat_values[order]

    def keys(self, rows: torch.Tensor, cols: torch.Tensor, table: torch.Tensor | int = 0) -> torch.Tensor:
        """Flat keys of (rows, cols) in table number `table`; the arguments broadcast together."""
        return (table * self.n + rows) * self.n + cols

    def take(self, keys: torch.Tensor) -> torch.Tensor:
        """Values at precomputed flat keys (any shape; absent_key gives 0)."""
        flat = keys.reshape(-1)
        if self.dense:
            return self.table.index_select(0, flat).view(keys.shape)
        pos = torch.searchsorted(self.sorted_keys, flat).clamp_(max=self.sorted_keys.numel() - 1)
        found = self.sorted_keys[pos] == flat
        out = torch.where(found, self.values[pos], torch.zeros((), dtype=self.dtype, device=flat.device))
        return out.view(keys.shape)

    def get(self, rows: torch.Tensor, cols: torch.Tensor, table: torch.Tensor | int = 0) -> torch.Tensor:
        """Value at (rows, cols) of table number `table`; the arguments broadcast together."""
        return self.take(self.keys(rows, cols, table))


def _table_index(batch_shape, device) -> torch.Tensor | int:
    if not len(batch_shape):
        return 0
    count = 1
    for d in batch_shape:
        count *= d
    return torch.arange(count, device=device).view(*batch_shape, 1, 1)


def _walk(ranked: torch.Tensor, weights: torch.Tensor, k: int):
    # weights are small integers held in float32 (exact; float cumsum is vectorised, int is not)
    b, (n, m) = weights.shape[0], ranked.shape
    w = weights.index_select(1, ranked.reshape(-1)).view(b, n, m)
    cum = torch.cumsum(w, dim=2)
    taken = torch.minimum(torch.clamp(k - cum + w, min=0), w)
    positive = taken > 0
    # compact the (at most k) positions with something taken into k slots, in ranking order
    slot = torch.cumsum(positive.to(w.dtype), dim=2).sub_(1).masked_fill_(~positive, k).long()
    ids = torch.zeros((b, n, k + 1), dtype=ranked.dtype, device=ranked.device)
    out_taken = torch.zeros((b, n, k + 1), dtype=w.dtype, device=w.device)
    ids.scatter_(2, slot, ranked.expand(b, n, m))
    out_taken.scatter_(2, slot, taken)
    return ids[:, :, :k], out_taken[:, :, :k], cum[:, :, -1] < k


def weighted_neighbours(ranked: torch.Tensor, weights: torch.Tensor, k: int
                        ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Neighbour lists in a resample given by item multiplicities, from precomputed rankings.

    ranked: [N, M] each item's M nearest other items in order (M >= k). weights: [B, N]
    multiplicities (bootstrap counts; 0 = not drawn; any dtype, used as float32). In the resample,
    the k nearest draws of an item are taken walking its ranking and counting every copy of a drawn
    neighbour (copies of the same item tie; they enter in copy order), never a copy of itself.
    Returns ids [B, N, k], taken [B, N, k] float32 (how many copies of ids[...] are among the k;
    0 for padding) and short [B, N] (True where the M ranked items held fewer than k draws, so the
    caller must extend the ranking for that row).
    """
    weights = weights.to(torch.float32)
    m = ranked.shape[1]
    # most rows reach k draws within ~k/0.63 positions: walk a shallow prefix, redo the rest deeper
    first = min(m, 2 * k + 8)
    ids, taken, short = _walk(ranked[:, :first], weights, k)
    if first < m and bool(short.any()):
        bs, rows = torch.nonzero(short, as_tuple=True)
        deep_w = weights[bs]                                           # [S, N]
        w = torch.gather(deep_w, 1, ranked[rows])                      # [S, M]
        d_ids, d_taken, d_short = walk_rows(ranked[rows], w, k)
        ids[bs, rows], taken[bs, rows], short[bs, rows] = d_ids, d_taken, d_short
    return ids, taken, short


def walk_rows(ranked_rows: torch.Tensor, w: torch.Tensor, k: int):
    """`_walk` for S individual rows, each with its own ranking [S, M] and weights w [S, M]."""
    s, m = ranked_rows.shape
    cum = torch.cumsum(w, dim=1)
    taken = torch.minimum(torch.clamp(k - cum + w, min=0), w)
    positive = taken > 0
    slot = torch.cumsum(positive.to(w.dtype), dim=1).sub_(1).masked_fill_(~positive, k).long()
    ids = torch.zeros((s, k + 1), dtype=ranked_rows.dtype, device=ranked_rows.device)
    out_taken = torch.zeros((s, k + 1), dtype=w.dtype, device=w.device)
    ids.scatter_(1, slot, ranked_rows)
    out_taken.scatter_(1, slot, taken)
    return ids[:, :k], out_taken[:, :k], cum[:, -1] < k


class ResampleMemo:
    """Resampled neighbour lists kept for reuse, at most `budget_bytes`, least recently used first out.

    A sweep scores every (vision side, text side) cell with the same item resamples (common random
    numbers, vlgap.probe.sweep), so one side's lists for one batch of multiplicities serve every cell
    that side enters. Entries are keyed by the layer state (checked by weak reference, so a recycled
    object id never hits) and a digest of the multiplicities; values are exact copies, so a hit returns
    what a recomputation would."""

    def __init__(self, budget_bytes: int):
        import threading
        from collections import OrderedDict

        self.budget = int(budget_bytes)
        self.used = 0
        self.hits = self.misses = 0
        self._entries: OrderedDict = OrderedDict()
        self._lock = threading.Lock()
        self._building: dict = {}   # (owner id, digest) -> Event of the thread computing it

    @staticmethod
    def digest(weights: torch.Tensor, k: int, kind: str = "lists") -> bytes:
        """Key of one batch of multiplicities (or permutations) for one kind of stored value."""
        import hashlib

        w = weights.detach().cpu().contiguous()
        h = hashlib.blake2b(digest_size=16)
        h.update(f"{kind}|{tuple(w.shape)}|{w.dtype}|{k}".encode())
        h.update(w.numpy().tobytes())
        return h.digest()

    def get(self, owner, digest: bytes):
        with self._lock:
            entry = self._entries.get((id(owner), digest))
            if entry is None or entry[0]() is not owner:
                self.misses += 1
                return None
            self._entries.move_to_end((id(owner), digest))
            self.hits += 1
            return entry[1]

    def get_or_build(self, owner, digest: bytes, build):
        """The kept value, else build() (a tuple) once: a thread asking for a value another thread is
        computing waits for it instead of computing it again (a sweep's worker threads start on cells
        that share a side)."""
        import threading

        key = (id(owner), digest)
        while True:
            kept = self.get(owner, digest)
            if kept is not None:
                return kept
            with self._lock:
                waiting = self._building.get(key)
                if waiting is None:
                    mine = self._building[key] = threading.Event()
                    break
            waiting.wait()
        try:
            value = build()
            self.put(owner, digest, value)
            return value
        finally:
            with self._lock:
                del self._building[key]
            mine.set()

    def put(self, owner, digest: bytes, value: tuple) -> None:
        import weakref

        size = sum(t.nbytes for t in value)  # torch tensors and numpy arrays alike
        if size > self.budget:
            return
        with self._lock:
            key = (id(owner), digest)
            old = self._entries.pop(key, None)
            if old is not None:
                self.used -= old[2]
            self._entries[key] = (weakref.ref(owner), value, size)
            self.used += size
            while self.used > self.budget:
                _, (_, _, freed) = self._entries.popitem(last=False)
                self.used -= freed


#: the memo in effect (None: every resample's lists are computed afresh); see `resample_memo`
_MEMO: ResampleMemo | None = None


def active_memo() -> ResampleMemo | None:
    return _MEMO


class resample_memo:
    """`with resample_memo(budget_bytes):` keeps resampled neighbour lists for reuse inside the block
    (a sweep's cells share them); nested blocks keep the outer memo."""

    def __init__(self, budget_bytes: int = 1024 * 2**20):
        self.budget = budget_bytes
        self.memo: ResampleMemo | None = None
        self._outer = False

    def __enter__(self) -> ResampleMemo:
        global _MEMO
        if _MEMO is not None:
            self._outer = True
            self.memo = _MEMO
            return _MEMO
        self.memo = _MEMO = ResampleMemo(self.budget)
        return self.memo

    def __exit__(self, *exc) -> None:
        global _MEMO
        if not self._outer:
            _MEMO = None
