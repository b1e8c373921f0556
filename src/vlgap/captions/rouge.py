"""ROUGE-L as coco-caption computes it: LCS-based F-measure with beta = 1.2, mean over items.

For each reference the longest common subsequence with the candidate gives precision LCS/|c| and
recall LCS/|r|; the item score combines the *largest* precision and the *largest* recall over the
references (they may come from different references). Tokens come from `str.split(" ")`, as in
pycocoevalcap, so an empty caption is one empty token. The LCS length uses the bit-parallel
algorithm of Hyyrö (2004) on Python integers: one pass over the reference, a few integer
operations per token. `rouge_l_scores` runs that recurrence for all (candidate, reference) pairs
at once on uint64 words (numpy), the shorter side of a pair as the bit mask, token ids shared with
the n-gram index; pairs longer than 64 tokens on both sides, and the last positions of the longest
references, in Python. The arithmetic after the LCS lengths is pycocoevalcap's, element-wise.
"""
from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

from vlgap.captions.io import coco_pairs
from vlgap.captions.ngrams import SplitCorpus, _numbering
from vlgap.captions.registry import Scoring, caption_metric, mean_table
from vlgap.captions.tables import MetricTable
from vlgap.errors import VlgapError
from vlgap.stats.bounds import ScoreRange

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


_WORD_BITS = 64        # a candidate (or reference) of up to this many tokens is one uint64 bit mask
_MIN_BATCH = 32        # positions where fewer pairs are still running finish in Python
_DENSE_TABLE = 1 << 23  # bit masks in a (mask document, token) table up to this many cells, else sorted keys
# whitespace that str.split() splits on and str.split(" ") does not (str.isspace, but the space): a
# table by code point, the last entry for all beyond U+3000 (none is whitespace)
_ODD_SPACE = np.array([chr(c).isspace() and c != 32 for c in range(0x3001)] + [False])


def _popcount(v: np.ndarray) -> np.ndarray:
    count = getattr(np, "bitwise_count", None)
    if count is not None:
        return count(v).astype(np.int64)
    return np.unpackbits(v.view(np.uint8).reshape(-1, 8), axis=1).sum(axis=1).astype(np.int64)  # pragma: no cover


def _space_tokens(docs: list[str], split: SplitCorpus | None) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """(token ids, tokens per document, where each document starts in the ids, number of ids) of
    every document's str.split(" ") tokens: equal tokens, equal ids. Taken from `split` (the
    documents' str.split() tokens, shared with the n-gram index) where a document splits alike
    both ways: it then holds no whitespace but single spaces between tokens."""
    # the documents' characters as numbers (numpy, which lets another thread run meanwhile), each
    # document followed by a space: the spaces in each (its tokens) and the documents holding other
    # whitespace
    joined = " ".join(docs) + " "
    if joined.isascii():
        chars = np.frombuffer(joined.encode("ascii"), dtype=np.uint8)
    else:  # UTF-16 units are the characters unless some are surrogates (a pair, or a lone one)
        chars = np.frombuffer(joined.encode("utf-16-le", "surrogatepass"), dtype=np.uint16)
        if bool(np.any((chars & 0xF800) == 0xD800)):
            chars = np.frombuffer(joined.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
    size = np.fromiter(map(len, docs), dtype=np.int64, count=len(docs)) + 1  # (its space included)
    ends = np.cumsum(size)
    lengths = np.add.reduceat(chars == 32, ends - size, dtype=np.int64) if docs else size
    maybe = np.flatnonzero((chars - 32) > 95)  # (unsigned) below 32 or above 127: whitespace but the space?
    odd = maybe[_ODD_SPACE[np.minimum(chars[maybe].astype(np.int64), _ODD_SPACE.size - 1)]]
    if split is None:
        vocab = _numbering()
        words = joined[:-1].split(" ")
        ids = np.fromiter(map(vocab.__getitem__, words), dtype=np.int64, count=len(words))
        return ids, lengths, np.cumsum(lengths) - lengths, len(vocab)
    redo = lengths != split.lengths
    redo[np.searchsorted(ends, odd, side="right")] = True
    starts = np.cumsum(split.lengths) - split.lengths
    ids, n_ids = split.ids, split.n_ids
    again = np.flatnonzero(redo)
    if again.size:
        # the documents split apart both ways: their str.split(" ") tokens appended to the ids, a token
        # no document's str.split() has (one holding a tab, say) numbered next by first appearance
        words = " ".join([docs[d] for d in again.tolist()]).split(" ")
        starts[again] = ids.size + np.cumsum(lengths[again]) - lengths[again]
        extra = split.token_ids(words)
        new_ids: dict[str, int] = {}
        for at in np.flatnonzero(extra < 0).tolist():
            extra[at] = new_ids.setdefault(words[at], n_ids + len(new_ids))
        ids = np.concatenate((ids, extra))
        n_ids += len(new_ids)
    return ids, lengths, starts, n_ids


def _lcs_pairs(mask_doc: np.ndarray, seq_doc: np.ndarray, ids: np.ndarray, lengths: np.ndarray,
               starts: np.ndarray, n_ids: int, docs: list[str]) -> np.ndarray:
    """LCS length of each pair of documents (mask_doc[p], seq_doc[p]): the bit-parallel recurrence of
    `lcs_length` for all pairs at once, document mask_doc[p] (at most 64 tokens) as the bit mask and
    seq_doc[p] as the sequence walked through, position by position; the few pairs still running
    when most have ended finish in Python."""
    n_pairs = mask_doc.size
    if n_pairs == 0:
        return np.zeros(0, dtype=np.int64)
    # bit masks: (mask document, token) -> OR of 1 << position
    mdocs, slot = np.unique(mask_doc, return_inverse=True)
    m_len = lengths[mdocs]
    tok_slot = np.repeat(np.arange(mdocs.size, dtype=np.int64), m_len)
    pos = np.arange(tok_slot.size, dtype=np.int64) - np.repeat(np.cumsum(m_len) - m_len, m_len)
    keys = tok_slot * n_ids + ids[np.repeat(starts[mdocs], m_len) + pos]
    order = np.argsort(keys, kind="stable")
    keys = keys[order]
    first = np.flatnonzero(np.concatenate(([True], keys[1:] != keys[:-1])))
    table_keys = keys[first]
    table_bits = np.bitwise_or.reduceat(np.left_shift(np.uint64(1), pos[order].astype(np.uint64)), first)
    dense = mdocs.size * n_ids <= _DENSE_TABLE
    if dense:
        table = np.zeros(mdocs.size * n_ids, dtype=np.uint64)
        table[table_keys] = table_bits
    # the sequences, longest first: at position q the pairs still running are a prefix
    s_len = lengths[seq_doc]
    by_len = np.argsort(-s_len, kind="stable")
    s_sorted = s_len[by_len]
    running = np.searchsorted(-s_sorted, -np.arange(1, int(s_sorted[0]) + 1), side="right")  # length > q
    steps = int(np.searchsorted(-running, -_MIN_BATCH, side="right"))  # positions run vectorised
    seq_start = starts[seq_doc[by_len]]
    base = slot[by_len] * n_ids
    m_pair = lengths[mask_doc]
    full = np.right_shift(np.uint64(0xFFFFFFFFFFFFFFFF), (_WORD_BITS - m_pair[by_len]).astype(np.uint64))
    v = full.copy()
    for q in range(steps):  # (uint64 sums wrap: their low m bits are the Python integers')
        c = int(running[q])
        query = base[:c] + ids[seq_start[:c] + q]
        if dense:
            match = table[query]
        else:
            at = np.minimum(np.searchsorted(table_keys, query), table_keys.size - 1)
            match = np.where(table_keys[at] == query, table_bits[at], np.uint64(0))
        vv = v[:c]
        u = vv & match
        v[:c] = ((vv + u) | (vv - u)) & full[:c]
    lcs = np.empty(n_pairs, dtype=np.int64)
    lcs[by_len] = m_pair[by_len] - _popcount(v)
    for p in np.flatnonzero(s_len > steps).tolist():  # the longest sequences: in Python
        lcs[p] = lcs_length(docs[int(mask_doc[p])].split(" "), docs[int(seq_doc[p])].split(" "))
    return lcs


def rouge_l_scores(candidates: Sequence[str], references: Sequence[Sequence[str]], beta: float = BETA,
                   split: SplitCorpus | None = None) -> np.ndarray:
    """Per-item ROUGE-L (tokenised strings in, one float per item out): `rouge_l` of every item, the
    LCS lengths of all (candidate, reference) pairs computed together (`_lcs_pairs`). `split` may
    pass `split_corpus(flat references + candidates)` to share the tokens with the n-gram index."""
    if len(candidates) != len(references):
        raise VlgapError(f"{len(candidates)} candidates but {len(references)} reference lists")
    n_items = len(candidates)
    ref_counts = np.fromiter(map(len, references), dtype=np.int64, count=n_items)
    if n_items and ref_counts.min() < 1:
        raise VlgapError("ROUGE-L needs at least one reference per item")
    if n_items == 0:
        return np.zeros(0)
    docs = [r for refs in references for r in refs]
    n_refs = len(docs)
    docs.extend(candidates)
    if split is not None and split.lengths.size != len(docs):
        raise VlgapError(f"the split corpus has {split.lengths.size} documents, not {len(docs)}")
    ids, lengths, starts, n_ids = _space_tokens(docs, split)
    ref = np.arange(n_refs, dtype=np.int64)
    cand = n_refs + np.repeat(np.arange(n_items, dtype=np.int64), ref_counts)
    c_len, r_len = lengths[cand], lengths[ref]
    # the bit mask is the candidate's, or the reference's when only that one fits 64 bits
    cand_mask = c_len <= _WORD_BITS
    vector = cand_mask | (r_len <= _WORD_BITS)
    lcs = np.empty(n_refs, dtype=np.int64)
    lcs[vector] = _lcs_pairs(np.where(cand_mask, cand, ref)[vector], np.where(cand_mask, ref, cand)[vector],
                             ids, lengths, starts, n_ids, docs)
    for p in np.flatnonzero(~vector).tolist():
        lcs[p] = lcs_length(docs[int(cand[p])].split(" "), docs[p].split(" "))
    # pycocoevalcap's arithmetic, element-wise: the largest precision and recall over the references
    prec = lcs.astype(float) / c_len.astype(float)
    rec = lcs.astype(float) / r_len.astype(float)
    offsets = np.cumsum(ref_counts) - ref_counts
    prec_max, rec_max = np.maximum.reduceat(prec, offsets), np.maximum.reduceat(rec, offsets)
    out = np.zeros(n_items)
    ok = (prec_max != 0) & (rec_max != 0)
    p, r = prec_max[ok], rec_max[ok]
    out[ok] = ((1 + beta ** 2) * p * r) / (r + beta ** 2 * p)
    return out


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


@caption_metric("rouge", keys=("ROUGE-L",), aliases=("rouge-l",), default=True, order=30, concurrent=True,
                score_range=ScoreRange(0.0, 1.0, "an F-measure of LCS precision and recall"),
                summary="ROUGE-L F (beta 1.2) as coco-caption, mean over items")
def score_rouge(s: Scoring) -> MetricTable:
    hyps, refs = s.tokens()
    return mean_table("ROUGE-L", rouge_l_scores(hyps, refs, split=s.split()))
