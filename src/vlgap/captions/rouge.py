"""ROUGE-L as coco-caption computes it: LCS-based F-measure with beta = 1.2, mean over items.

For each reference the longest common subsequence with the candidate gives precision LCS/|c| and
recall LCS/|r|; the item score combines the *largest* precision and the *largest* recall over the
references (they may come from different references). Tokens come from `str.split(" ")`, as in
pycocoevalcap, so an empty caption is one empty token. The LCS length uses the bit-parallel
algorithm of Hyyrö (2004) on Python integers: one pass over the reference, a few integer
operations per token.
"""
from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

from vlgap.captions.io import coco_pairs
from vlgap.captions.registry import Scoring, caption_metric, mean_table
from vlgap.captions.tables import MetricTable
from vlgap.errors import VlgapError

BETA = 1.2


def lcs_length(a: Sequence[str], b: Sequence[str]) -> int:
    """Length of the longest common subsequence of two token lists."""
    if len(a) < len(b):
        a, b = b, a
    m = len(b)
    if m == 0:
        return 0
    masks: dict[str, int] = {}
    for j, tok in enumerate(b):
        masks[tok] = masks.get(tok, 0) | (1 << j)
    full = (1 << m) - 1
    v = full
    for tok in a:
        match = masks.get(tok)
        if match:
            u = v & match
            v = ((v + u) | (v - u)) & full
    return m - v.bit_count()


def rouge_l(candidate: str, references: Sequence[str], beta: float = BETA) -> float:
    """pycocoevalcap's Rouge.calc_score for one tokenised candidate and its references."""
    if not references:
        raise VlgapError("ROUGE-L needs at least one reference per item")
    token_c = candidate.split(" ")
    masks: dict[str, int] = {}
    for j, tok in enumerate(token_c):
        masks[tok] = masks.get(tok, 0) | (1 << j)
    m = len(token_c)
    full = (1 << m) - 1
    prec_max = 0.0
    rec_max = 0.0
    for ref in references:
        token_r = ref.split(" ")
        v = full
        for tok in token_r:
            match = masks.get(tok)
            if match:
                u = v & match
                v = ((v + u) | (v - u)) & full
        lcs = m - v.bit_count()
        prec = lcs / float(m)
        rec = lcs / float(len(token_r))
        if prec > prec_max:
            prec_max = prec
        if rec > rec_max:
            rec_max = rec
    if prec_max != 0 and rec_max != 0:
        return ((1 + beta ** 2) * prec_max * rec_max) / float(rec_max + beta ** 2 * prec_max)
    return 0.0


def rouge_l_scores(candidates: Sequence[str], references: Sequence[Sequence[str]], beta: float = BETA) -> np.ndarray:
    """Per-item ROUGE-L (tokenised strings in, one float per item out)."""
    if len(candidates) != len(references):
        raise VlgapError(f"{len(candidates)} candidates but {len(references)} reference lists")
    return np.array([rouge_l(c, r, beta) for c, r in zip(candidates, references)], dtype=float)


class Rouge:
    """Drop-in for pycocoevalcap.rouge.Rouge: compute_score(gts, res) -> (mean, per-item array)."""

    def __init__(self, beta: float = BETA):
        self.beta = beta

    def compute_score(self, gts: Mapping, res: Mapping):
        keys, preds, refs = coco_pairs(gts, res, "ROUGE-L")
        scores = rouge_l_scores(preds, refs, self.beta)
        return float(np.mean(scores)), scores

    def method(self) -> str:
        return "Rouge"


@caption_metric("rouge", keys=("ROUGE-L",), aliases=("rouge-l",), default=True, order=30,
                summary="ROUGE-L F (beta 1.2) as coco-caption, mean over items")
def score_rouge(s: Scoring) -> MetricTable:
    hyps, refs = s.tokens()
    return mean_table("ROUGE-L", rouge_l_scores(hyps, refs))
