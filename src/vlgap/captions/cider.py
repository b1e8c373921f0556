"""CIDEr as coco-caption computes it (pycocoevalcap 1.2's Cider, i.e. the CIDEr-D variant).

For n = 1..4, every caption becomes a tf-idf vector over its n-grams, with
idf(g) = log(N) - log(max(1, df(g))) where df(g) counts the items whose references contain g and
N is the number of items. Candidate and reference vectors are compared with a clipped cosine
(sum of min(c_g, r_g) * r_g over the norms), damped by a Gaussian in the difference of their
bigram counts (sigma = 6); the item score is the mean over n of the sum over references, divided
by the number of references, times 10. The corpus score is the mean over items.

Because df comes from the references being evaluated, an item's score depends on which other
items are in the set. `DocumentFrequencies.from_references(...)` freezes df (and N) from a given
reference corpus so per-item scores stay fixed under resampling or subsetting; the default
("corpus") reproduces coco-caption.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Sequence

import numpy as np

from vlgap.captions.ngrams import NgramIndex, distinct, index_ngrams, reference_join, reference_layout
from vlgap.captions.io import coco_pairs
from vlgap.captions.registry import Scoring, caption_metric, mean_table
from vlgap.captions.tables import MetricTable
from vlgap.errors import VlgapError
from vlgap.stats.bounds import ScoreRange


@dataclass(frozen=True)
class DocumentFrequencies:
    """n-gram document frequencies over the items of a reference corpus (one document per item)."""

    counts: dict = field(repr=False)   # tuple of tokens -> number of items whose references hold it
    n_documents: int
    n: int = 4

    @classmethod
    def from_references(cls, references: Sequence[Sequence[str]], n: int = 4) -> "DocumentFrequencies":
        """Count, for each 1..n-gram, the items (reference lists of tokenised strings) containing it."""
        if not references:
            raise VlgapError("need at least one reference item to compute document frequencies")
        counts_per_item = np.fromiter((len(r) for r in references), dtype=np.int64, count=len(references))
        flat = [r for refs in references for r in refs]
        index = index_ngrams(flat, n)
        item_of_doc = np.repeat(np.arange(len(references), dtype=np.int64), counts_per_item)
        counts: dict = {}
        for k in range(1, n + 1):
            df = _df_of_order(index, k, item_of_doc)
            for gram, value in zip(index.gram_tuples(k), df.tolist()):
                counts[gram] = value
        return cls(counts=counts, n_documents=len(references), n=n)


def _df_of_order(index: NgramIndex, k: int, item_of_doc: np.ndarray) -> np.ndarray:
    """Number of distinct items holding each gram id of order k (over the documents given)."""
    c = index.orders[k - 1]
    g = max(1, c.n_grams)
    pairs = distinct(item_of_doc[c.doc] * g + c.gram)
    return np.bincount(pairs % g, minlength=c.n_grams).astype(float)


def cider_d_scores(candidates: Sequence[str], references: Sequence[Sequence[str]], *, n: int = 4,
                   sigma: float = 6.0, df: DocumentFrequencies | None = None,
                   index: NgramIndex | None = None) -> np.ndarray:
    """Per-item CIDEr (coco-caption's CIDEr-D), tokenised strings in; df=None uses these references.

    `index` may pass a prebuilt `index_ngrams(flat references + candidates, n)` (shared with BLEU)."""
    if len(candidates) != len(references):
        raise VlgapError(f"{len(candidates)} candidates but {len(references)} reference lists")
    n_items = len(candidates)
    if n_items == 0:
        return np.zeros(0)
    ref_counts, n_refs, item_of_ref, index = reference_layout(candidates, references, n, index, "CIDEr")
    if df is not None and df.n < n:
        raise VlgapError(f"frozen document frequencies cover n-grams up to {df.n}, but CIDEr uses n={n}")
    n_docs = n_refs + n_items
    ref_len = np.log(float(n_items if df is None else df.n_documents))

    # bigram counts: pycocoevalcap's "length" adds up the term frequencies of 2-grams
    bigrams = np.maximum(index.lengths - 1, 0).astype(float)
    delta = bigrams[n_refs:][item_of_ref] - bigrams[:n_refs]
    penalty = np.e ** (-(delta ** 2) / (2 * sigma ** 2))

    sims = np.zeros((n_refs, n))
    for k in range(1, n + 1):
        c = index.orders[k - 1]
        join = reference_join(index, k, n_refs, item_of_ref)  # (gram, item) keys of the references, shared with BLEU
        if df is None:
            # items holding each gram = the distinct (item, gram) keys of the references
            dfk = np.bincount(join.keys // n_items, minlength=c.n_grams).astype(float)
        else:
            dfk = np.array([df.counts.get(t, 0) for t in index.gram_tuples(k)], dtype=float)
        idf = ref_len - np.log(np.maximum(1.0, dfk))
        weight = c.count * idf[c.gram]
        norm = np.sqrt(np.bincount(c.doc, weights=weight ** 2, minlength=n_docs))
        ref_doc = c.doc[join.is_ref]
        ref_w = weight[join.is_ref]
        # the candidate's weight of each reference row's gram (0 where the candidate lacks it): the
        # candidate rows' weights put on the keys they find, read back at the reference rows' keys
        by_key = np.zeros(join.keys.size)
        by_key[join.hyp_slot[join.hyp_hit]] = weight[~join.is_ref][join.hyp_hit]
        cand_w = by_key[join.ref_slot]
        val = np.bincount(ref_doc, weights=np.minimum(cand_w, ref_w) * ref_w, minlength=n_refs)
        norm_h = norm[n_refs:][item_of_ref]
        norm_r = norm[:n_refs]
        both = (norm_h != 0) & (norm_r != 0)
        val[both] = val[both] / (norm_h[both] * norm_r[both])
        sims[:, k - 1] = val * penalty
    per_item = np.stack([np.bincount(item_of_ref, weights=sims[:, k], minlength=n_items) for k in range(n)], axis=1)
    return per_item.mean(axis=1) / ref_counts * 10.0


class Cider:
    """Drop-in for pycocoevalcap.cider.Cider: compute_score(gts, res) -> (mean, per-item array).

    df: None (document frequencies from the references being scored, as coco-caption does) or a
    frozen `DocumentFrequencies`."""

    def __init__(self, n: int = 4, sigma: float = 6.0, df: DocumentFrequencies | None = None):
        self._n = n
        self._sigma = sigma
        self._df = df

    def compute_score(self, gts: Mapping, res: Mapping):
        keys, preds, refs = coco_pairs(gts, res, "CIDEr")
        scores = cider_d_scores(preds, refs, n=self._n,
                                sigma=self._sigma, df=self._df)
        return float(np.mean(scores)), scores

    def method(self) -> str:
        return "CIDEr"


CiderD = Cider


#: what coco-caption (and so vlgap) calls "CIDEr" is CIDEr-D: clipped n-gram counts, a Gaussian length
#: penalty (sigma 6), scaled by 10 (Vedantam et al. 2015, section 5)
CIDER_VARIANT = "CIDEr-D"


@caption_metric("cider", keys=("CIDEr",), aliases=("cider-d",), default=True, order=40,
                score_range=ScoreRange(0.0, why="10 x a mean of clipped tf-idf cosines: never negative; reported "
                                           "without an upper bound"),
                summary="CIDEr-D as coco-caption; document frequencies of the references, or frozen (cider_df)")
def score_cider(s: Scoring) -> MetricTable:
    hyps, refs = s.tokens()
    df = s.option("cider_df")
    if (len(refs) if df is None else df.n_documents) < 2:
        from vlgap.caveats import caveat

        caveat("CIDEr: document frequencies from 1 item give every n-gram idf = log(1 / 1) = 0, so CIDEr is 0 "
               "whatever the captions (as coco-caption scores it); score at least 2 items, or freeze the document "
               "frequencies of a larger reference set (cider_df=)")
    scores = cider_d_scores(hyps, refs, df=df, index=s.ngram_index(4) if df is None else None)
    return mean_table("CIDEr", scores, {"variant": CIDER_VARIANT,
                                        "df": "corpus" if df is None else f"frozen ({df.n_documents} items)"})
