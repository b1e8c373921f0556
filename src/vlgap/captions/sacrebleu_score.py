"""Corpus BLEU through the sacrebleu package, reported with its signature string.

SacreBLEU reads the raw (detokenised) captions and applies its own tokeniser (13a by default), so
its number is comparable across papers that quote the same signature, unlike coco-caption's BLEU.
Items may have different numbers of references (sacrebleu pads with None). Per-item sufficient
statistics come from sacrebleu itself and are cached, so bootstrap replicates recompute the corpus
score from resampled sums without tokenising again.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from vlgap.errors import VlgapError
from vlgap.captions.registry import Scoring, caption_metric
from vlgap.captions.tables import MetricTable
from vlgap.stats.bounds import ScoreRange


@dataclass(frozen=True)
class SacreBleuResult:
    score: float            # corpus BLEU, 0-100 as sacrebleu reports it
    signature: str          # e.g. "nrefs:5|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0"
    statistics: np.ndarray  # (items, 2 + 2 * 4): sys_len, ref_len, correct_1..4, total_1..4
    metric: object          # the sacrebleu.BLEU object (scores further sums of statistics)

    def score_from_sums(self, sums: np.ndarray) -> float:
        return float(self.metric._compute_score_from_stats(np.asarray(sums).tolist()).score)


def sacrebleu_corpus(hypotheses: Sequence[str], references: Sequence[Sequence[str]], *,
                     lowercase: bool = False, tokenize: str | None = None) -> SacreBleuResult:
    """Corpus BLEU of raw captions with sacrebleu (default 13a tokenisation, exp smoothing)."""
    from sacrebleu.metrics import BLEU

    if len(hypotheses) != len(references):
        raise VlgapError(f"{len(hypotheses)} hypotheses but {len(references)} reference lists")
    if not hypotheses:
        raise VlgapError("SacreBLEU needs at least one item")
    max_refs = max(len(r) for r in references)
    if min(len(r) for r in references) < 1:
        raise VlgapError("every item needs at least one reference for SacreBLEU")
    # sacrebleu wants reference streams: stream j holds the j-th reference of every item (or None)
    streams = [[refs[j] if j < len(refs) else None for refs in references] for j in range(max_refs)]
    hyps = [h.replace("\n", " ") for h in hypotheses]
    streams = [[r.replace("\n", " ") if r is not None else None for r in s] for s in streams]
    metric = BLEU(lowercase=lowercase, tokenize=tokenize, force=True)
    stats = np.asarray(metric._extract_corpus_statistics(hyps, streams), dtype=np.int64)
    score = metric._compute_score_from_stats(stats.sum(axis=0).tolist())
    return SacreBleuResult(score=float(score.score), signature=str(metric.get_signature()),
                           statistics=stats, metric=metric)


@caption_metric("sacrebleu", keys=("SacreBLEU",), default=True, order=50,
                score_range=ScoreRange(0.0, 100.0, "BLEU on sacrebleu's 0-100 scale"),
                summary="corpus BLEU through sacrebleu (0-100, its own tokeniser), with its signature")
def score_sacrebleu(s: Scoring) -> MetricTable:
    res = sacrebleu_corpus(s.data.predictions, s.data.references, **(s.option("sacrebleu_options") or {}))

    def statistic(sums: np.ndarray, m: int) -> np.ndarray:
        sums = np.asarray(sums)
        flat = sums.reshape(-1, sums.shape[-1])
        vals = np.array([res.score_from_sums(row) for row in flat])
        return vals.reshape(sums.shape[:-1] + (1,))

    return MetricTable(["SacreBLEU"], res.statistics.astype(float), statistic, [res.score], {},
                       {"signature": res.signature})
