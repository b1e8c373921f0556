"""Nearest-neighbour lists by chunked top-k, and fast "is j a neighbour of i?" look-ups.

Ordering rule (deterministic, shared by every metric and by the naive references in the tests):
neighbours of i are the other items j ranked by similarity <x_i, x_j> descending, ties broken by the
smaller index j. Self (and, in a bootstrap resample, every copy of the same original item) is never a
neighbour. Similarities are computed in row blocks of at most `chunk_bytes`, so memory is O(N k) for
the lists plus one block, and N = 100,000 fits on one machine.

Rounding: when one block holds every row (N^2 * 12 bytes <= chunk_bytes, e.g. N <= 4,700 by default)
the similarities are bitwise those of the full matrix `X @ X.T`; with several blocks BLAS may round a
similarity differently in the last bit, which can only reorder neighbours whose similarities tie to
within one ulp.
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


def _exact_topk(sims: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Top-k of each row by (value desc, column asc), exactly; returns (indices, values) [B, k]."""
    kth = torch.topk(sims, k, dim=1, sorted=True).values[:, k - 1:k]
    selected = sims >= kth
    n_selected = selected.sum(dim=1)
    tied_rows = torch.nonzero(n_selected > k).flatten()
    if tied_rows.numel():
        # more candidates than slots because of ties at the k-th value: keep the smallest columns
        sub = sims[tied_rows]
        above = sub > kth[tied_rows]
        equal = sub == kth[tied_rows]
        need = k - above.sum(dim=1, keepdim=True)
        keep_equal = equal & (torch.cumsum(equal.to(torch.int32), dim=1) <= need)
        selected[tied_rows] = above | keep_equal
    cols = torch.nonzero(selected)[:, 1].view(sims.shape[0], k)  # column order within each row
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
    rows = _rows_per_chunk(n, chunk_bytes)
    out_idx = torch.empty((n, k), dtype=torch.int64, device=feats.device)
    out_val = torch.empty((n, k), dtype=feats.dtype, device=feats.device)
    for start in range(0, n, rows):
        stop = min(n, start + rows)
        sims = feats[start:stop] @ feats.T
        if groups is None:
            r = torch.arange(stop - start, device=feats.device)
            sims[r, r + start] = float("-inf")
        else:
            sims.masked_fill_(groups[start:stop, None] == groups[None, :], float("-inf"))
        out_idx[start:stop], out_val[start:stop] = _exact_topk(sims, k)
    return out_idx, out_val


class NeighbourLookup:
    """Value stored for (i, j) if j is in row i's neighbour list, else 0, for many (i, j) at once.

    ids: [..., N, k] neighbour indices (a leading batch axis is allowed); values: same shape (counts,
    positions) or None for 1. A dense [N, N] table is used when it fits in `dense_bytes`, otherwise
    sorted keys i*N+j and binary search. Entries with value 0 are the same as absent.
    """

    def __init__(self, ids: torch.Tensor, values: torch.Tensor | None = None, *,
                 dense_bytes: int = DENSE_TABLE_BYTES):
        self.n = ids.shape[-2]
        self.batch_shape = ids.shape[:-2]
        n_tables = int(torch.tensor(self.batch_shape).prod()) if len(self.batch_shape) else 1
        if values is None:
            values = torch.ones(ids.shape, dtype=torch.uint8, device=ids.device)
        self.dtype = values.dtype
        base = self._base(ids.shape, ids.device)
        keys = (base + ids).reshape(-1)
        flat_values = values.reshape(-1)
        self.dense = n_tables * self.n * self.n * values.element_size() <= dense_bytes
        if self.dense:
            self.table = torch.zeros(n_tables * self.n * self.n, dtype=values.dtype, device=ids.device)
            self.table[keys] = flat_values
        else:
            self.keys, order = torch.sort(keys)
            self.values = flat_values[order]

    def _base(self, shape: torch.Size, device) -> torch.Tensor:
        # offset of row i of table b in the flattened key space: (b * N + i) * N
        lead = int(torch.tensor(shape[:-1]).prod())
        return (torch.arange(lead, device=device) * self.n).view(*shape[:-1], 1)

    def get(self, rows: torch.Tensor, cols: torch.Tensor, table: torch.Tensor | int = 0) -> torch.Tensor:
        """Value at (rows, cols) of table number `table` (flattened batch index); the three
        arguments broadcast together."""
        table = torch.as_tensor(table, device=cols.device)
        rows, cols, table = torch.broadcast_tensors(rows, cols, table)
        keys = ((table * self.n + rows) * self.n + cols).reshape(-1)
        return self._get(keys).view(cols.shape)

    def _get(self, keys: torch.Tensor) -> torch.Tensor:
        if self.dense:
            return self.table.index_select(0, keys)
        pos = torch.searchsorted(self.keys, keys).clamp_(max=self.keys.numel() - 1)
        found = self.keys[pos] == keys
        return torch.where(found, self.values[pos], torch.zeros((), dtype=self.dtype, device=keys.device))


def weighted_neighbours(ranked: torch.Tensor, weights: torch.Tensor, k: int
                        ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Neighbour lists in a resample given by item multiplicities, from precomputed rankings.

    ranked: [N, M] each item's M nearest other items in order (M >= k). weights: [B, N] integer
    multiplicities (bootstrap counts; 0 = not drawn). In the resample, the k nearest draws of an item
    are taken walking its ranking and counting every copy of a drawn neighbour (copies of the same
    item tie; they enter in copy order), never a copy of itself.
    Returns ids [B, N, k], taken [B, N, k] (how many copies of ids[...] are among the k; 0 for padding)
    and short [B, N] (True where the M ranked items held fewer than k draws, so the caller must
    extend the ranking for that row).
    """
    m = ranked.shape[1]
    w = weights[:, ranked]                                     # [B, N, M]
    cum = torch.cumsum(w, dim=2)
    taken = torch.clamp(k - (cum - w), min=0).minimum(w)
    short = cum[:, :, -1] < k
    # first k positions with something taken, in ranking order (padding: positions with 0 taken)
    rank_key = torch.where(taken > 0, torch.arange(m, 0, -1, device=ranked.device), 0)
    pos = torch.topk(rank_key, min(k, m), dim=2, sorted=True).indices
    ids = torch.gather(ranked.expand(w.shape[0], -1, -1), 2, pos)
    return ids, torch.gather(taken, 2, pos), short
