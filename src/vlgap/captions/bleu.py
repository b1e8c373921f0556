"""BLEU-1..4 exactly as coco-caption computes it (pycocoevalcap's BleuScorer, option "closest").

Per item the sufficient statistics are: hypothesis length, the *closest* reference length (ties go
to the shorter reference), and for k = 1..4 the number of hypothesis k-grams ("guess") and of
those clipped by the largest count in any one reference ("correct"). Corpus BLEU-k is the same
formula applied to the summed statistics, with coco-caption's tiny/small guards (1e-15, 1e-9) and
brevity penalty exp(1 - r/c) when the hypotheses are shorter. Because the statistic is a function
of sums over items, a bootstrap replicate only needs a weighted sum of the cached per-item rows.
"""
from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

from vlgap.captions.ngrams import NgramIndex, reference_join, reference_layout
from vlgap.captions.io import coco_pairs
from vlgap.captions.registry import Scoring, caption_metric
from vlgap.captions.tables import MetricTable
from vlgap.errors import VlgapError
from vlgap.stats.bounds import ScoreRange

_TINY = 1e-15
_SMALL = 1e-9


def stat_names(n: int = 4) -> list[str]:
    return ["testlen", "reflen"] + [f"guess{k}" for k in range(1, n + 1)] + [f"correct{k}" for k in range(1, n + 1)]


def bleu_statistics(hypotheses: Sequence[str], references: Sequence[Sequence[str]], n: int = 4,
                    index: NgramIndex | None = None) -> np.ndarray:
    """Per-item BLEU sufficient statistics, shape (items, 2 + 2n), columns as in `stat_names(n)`.

    Hypotheses and references are tokenised strings (split on whitespace). `index` may pass a
    prebuilt `index_ngrams(flat references + hypotheses, n)` to share it with CIDEr."""
    if len(hypotheses) != len(references):
        raise VlgapError(f"{len(hypotheses)} hypotheses but {len(references)} reference lists: need one list per hypothesis")
    n_items = len(hypotheses)
    ref_counts, n_refs, item_of_ref, index = reference_layout(hypotheses, references, n, index, "BLEU")
    ref_offsets = np.concatenate(([0], np.cumsum(ref_counts)[:-1])).astype(np.int64)

    stats = np.zeros((n_items, 2 + 2 * n), dtype=np.int64)
    testlen = index.lengths[n_refs:]
    stats[:, 0] = testlen
    if n_items:
        ref_len = index.lengths[:n_refs]
        diff = np.abs(ref_len - testlen[item_of_ref])
        scale = int(ref_len.max()) + 1 if n_refs else 1
        # min over (|r - c|, r): the closest length, the shorter one on a tie
        best = np.minimum.reduceat(diff * scale + ref_len, ref_offsets)
        stats[:, 1] = best % scale
    for k in range(1, n + 1):
        stats[:, 1 + k] = np.maximum(0, testlen - k + 1)
        counts = index.orders[k - 1]
        join = reference_join(index, k, n_refs, item_of_ref)  # the references' largest counts per (gram, item)
        clip = np.where(join.hyp_hit, join.maxima[join.hyp_slot], 0) if join.maxima.size else 0
        correct = np.minimum(counts.count[~join.is_ref], clip)
        stats[:, 1 + n + k] = np.bincount(join.hyp_item, weights=correct, minlength=n_items).astype(np.int64)
    return stats


def bleu_from_statistics(stats: np.ndarray, n: int = 4) -> np.ndarray:
    """BLEU-1..n from statistics rows (or sums of rows); vectorised over leading axes -> (..., n)."""
    s = np.asarray(stats, dtype=float)
    testlen, reflen = s[..., 0], s[..., 1]
    out = np.empty(s.shape[:-1] + (n,))
    running = np.ones(s.shape[:-1])
    for k in range(n):
        running = running * ((s[..., 2 + n + k] + _TINY) / (s[..., 2 + k] + _SMALL))
        out[..., k] = running ** (1.0 / (k + 1))
    ratio = (testlen + _TINY) / (reflen + _SMALL)
    with np.errstate(divide="ignore", over="ignore"):
        penalty = np.where(ratio < 1, np.exp(1 - 1 / ratio), 1.0)
    return out * penalty[..., None]


class Bleu:
    """Drop-in for pycocoevalcap.bleu.Bleu: compute_score(gts, res) -> ([BLEU-1..n], per-item lists)."""

    def __init__(self, n: int = 4):
        self._n = n

    def compute_score(self, gts: Mapping, res: Mapping, verbose: int = 0):
        keys, preds, refs = coco_pairs(gts, res, "BLEU")
        stats = bleu_statistics(preds, refs, self._n)
        corpus = bleu_from_statistics(stats.sum(axis=0), self._n)
        per_item = bleu_from_statistics(stats, self._n)
        return [float(x) for x in corpus], [per_item[:, j].tolist() for j in range(self._n)]

    def method(self) -> str:
        return "Bleu"


@caption_metric("bleu", keys=tuple(f"BLEU-{k}" for k in range(1, 5)), title="BLEU", aliases=("bleu-4",),
                score_range=ScoreRange(0.0, 1.0, "a brevity penalty times a geometric mean of precisions"),
                default=True, order=10, summary="BLEU-1..4 as coco-caption (PTB tokens, closest reference length)")
def score_bleu(s: Scoring) -> MetricTable:
    hyps, refs = s.tokens()
    stats = bleu_statistics(hyps, refs, 4, index=s.ngram_index(4))
    names = [f"BLEU-{k}" for k in range(1, 5)]
    per = bleu_from_statistics(stats)
    return MetricTable(names, stats, lambda sums, m: bleu_from_statistics(sums),
                       [float(x) for x in bleu_from_statistics(stats.sum(axis=0))],
                       {name: per[:, j] for j, name in enumerate(names)})
