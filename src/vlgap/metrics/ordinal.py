"""Order-aware k-NN alignment metrics of platonic-rep (`AlignmentMetrics.lcs_knn`,
`AlignmentMetrics.edit_distance_knn`): they compare each item's two *ranked* neighbour lists, not
only the sets.

For item i with ranked lists a = kNN_X(i) and b = kNN_Y(i) (k entries each, nearest first):
- `lcs_knn` = mean over items of the length of the longest common subsequence of a and b. As in
  platonic-rep it is not divided by k: the score lies in [0, k] (k for identical rankings).
- `edit_distance_knn` = 1 - mean over items of Levenshtein(a, b) / k (insertions, deletions and
  substitutions cost 1, as torchaudio's `edit_distance`), in [0, 1].

Ranking ties are broken by the smaller item index (vlgap.metrics.knn); platonic-rep's argsort leaves
them unspecified, so the two agree whenever no two similarities of an item tie. Neither metric has
a closed-form chance level: use the permutation null (`n_permutations`).

Both dynamic programmes run over all items (and all Y layers) at once: k^2 vector steps per X layer.
"""
from __future__ import annotations

import numpy as np
import torch

from vlgap.metrics.base import KnnMetric
from vlgap.stats.bounds import ScoreRange


def lcs_lengths(eq: torch.Tensor) -> torch.Tensor:
    """Longest-common-subsequence length of every pair of sequences, from their match table.

    eq[..., i, j] is True where a[i] == b[j]; returns [...] int32."""
    *batch, m, n = eq.shape
    prev = torch.zeros((*batch, n + 1), dtype=torch.int32, device=eq.device)
    for i in range(m):
        cols = [torch.zeros(batch, dtype=torch.int32, device=eq.device)]
        for j in range(n):
            cols.append(torch.where(eq[..., i, j], prev[..., j] + 1, torch.maximum(prev[..., j + 1], cols[j])))
        prev = torch.stack(cols, dim=-1)
    return prev[..., n]


def edit_distances(eq: torch.Tensor) -> torch.Tensor:
    """Levenshtein distance (unit costs) of every pair of sequences, from their match table
    eq[..., i, j] = (a[i] == b[j]); returns [...] int32."""
    *batch, m, n = eq.shape
    prev = torch.arange(n + 1, dtype=torch.int32, device=eq.device).expand(*batch, n + 1)
    for i in range(m):
        cols = [torch.full(batch, i + 1, dtype=torch.int32, device=eq.device)]
        for j in range(n):
            substitute = prev[..., j] + (~eq[..., i, j]).to(torch.int32)
            cols.append(torch.minimum(torch.minimum(prev[..., j + 1], cols[j]) + 1, substitute))
        prev = torch.stack(cols, dim=-1)
    return prev[..., n]


class _OrdinalKnn(KnnMetric):
    def per_item(self, eq: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def score(self, totals: np.ndarray, n: int) -> np.ndarray:
        raise NotImplementedError

    def pair_scores(self, sx, sy):
        k = self.k
        n = sx[0].ids.shape[0]
        ys = torch.stack([t.ids[:, :k] for t in sy])                           # [L_y, N, k]
        out = np.empty((len(sx), len(sy)))
        for a, s in enumerate(sx):
            eq = s.ids[None, :, :k, None] == ys[:, :, None, :]                  # [L_y, N, k, k]
            # integer totals: the mean is exact up to one final division
            out[a] = self.score(self.per_item(eq).sum(dim=1, dtype=torch.int64).cpu().numpy(), n)
        return out


class LcsKnn(_OrdinalKnn):
    """Mean longest common subsequence of the ranked k-NN lists (platonic-rep `lcs_knn`), in [0, k]."""

    name = "lcs_knn"

    @property
    def score_range(self) -> ScoreRange:
        return ScoreRange(0.0, float(self.k), "a mean common-subsequence length of two k-lists")

    def per_item(self, eq):
        return lcs_lengths(eq)

    def score(self, totals, n):
        return totals / n


class EditDistanceKnn(_OrdinalKnn):
    """1 - mean Levenshtein distance / k of the ranked k-NN lists (platonic-rep `edit_distance_knn`)."""

    name = "edit_distance_knn"
    score_range = ScoreRange(0.0, 1.0, "1 - a mean edit distance / k")

    def per_item(self, eq):
        return edit_distances(eq)

    def score(self, totals, n):
        return 1.0 - totals / (n * self.k)
