"""Embedding-based caption scores on arrays: CLIPScore, RefCLIPScore, EMScore, BERTScore greedy matching.

Pure functions: embeddings in, numbers out (no model, no file). The adapters that produce the
embeddings live in captions.clip_model (CLIP-family towers) and captions.bertscore (text encoders).

    clip_scores        w * max(cos(image, caption), 0)                  Hessel et al. 2021, eq. 1
    ref_clip_scores    harmonic mean of CLIP-S and max(max_r cos(c, r), 0)   eq. 2 (the paper's form)
    greedy_match       BERTScore P, R, F1 of one candidate against one reference (Zhang et al. 2020)
    emscore_video      EMScore(X, V): coarse video-caption cosine + fine token-frame matching (Shi et al. 2022)
    emscore_text       EMScore(X, X*): the same between candidate and reference captions
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from vlgap.errors import VlgapError


def normalise_rows(x: np.ndarray) -> np.ndarray:
    """Rows scaled to unit L2 norm (float64); a zero row stays zero rather than becoming NaN."""
    x = np.asarray(x, dtype=np.float64)
    norm = np.linalg.norm(x, axis=-1, keepdims=True)
    return x / np.where(norm > 0, norm, 1.0)


def row_cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """cos(a_i, b_i) for each row i."""
    a, b = normalise_rows(a), normalise_rows(b)
    if a.shape != b.shape:
        raise VlgapError(f"paired embeddings must have the same shape, got {a.shape} and {b.shape}")
    return np.einsum("nd,nd->n", a, b)


def clip_scores(image_embeddings: np.ndarray, caption_embeddings: np.ndarray, w: float = 2.5) -> np.ndarray:
    """CLIP-S per item: w * max(cos(E_I, E_C), 0). Rows are paired (item i's picture and caption)."""
    return w * np.maximum(row_cosines(image_embeddings, caption_embeddings), 0.0)


def harmonic_mean(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """2ab / (a + b), defined as 0 where a + b is 0 (both scores are non-negative here)."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    total = a + b
    return np.where(total > 0, 2 * a * b / np.where(total > 0, total, 1.0), 0.0)


def best_reference_cosines(caption_embeddings: np.ndarray, reference_embeddings: Sequence[np.ndarray]) -> np.ndarray:
    """max_r cos(E_C, E_r) per item; reference_embeddings[i] is (n_refs_i, d)."""
    cands = normalise_rows(caption_embeddings)
    out = np.empty(len(cands))
    for i, refs in enumerate(reference_embeddings):
        refs = normalise_rows(np.atleast_2d(refs))
        if refs.shape[0] == 0:
            raise VlgapError(f"item {i}: RefCLIPScore needs at least one reference caption")
        out[i] = float(np.max(refs @ cands[i]))
    return out


def ref_clip_scores(clip_s: np.ndarray, best_ref_cos: np.ndarray, clamp: bool = True) -> np.ndarray:
    """RefCLIP-S per item: harmonic mean of CLIP-S and max(max_r cos(c, r), 0) (the paper's eq. 2);
    clamp=False: of CLIP-S and the unclamped max_r cos(c, r), as jmhessel/clipscore's and
    aimagelab/pacscore's code compute it (0 where the two sum to 0, where that code divides by 0)."""
    best = np.maximum(best_ref_cos, 0.0) if clamp else np.asarray(best_ref_cos, dtype=np.float64)
    if clamp:
        return harmonic_mean(clip_s, best)
    a = np.asarray(clip_s, dtype=np.float64)
    total = a + best
    return np.where(total != 0, 2 * a * best / np.where(total != 0, total, 1.0), 0.0)


@dataclass
class GreedyMatch:
    precision: float
    recall: float
    f1: float


def greedy_match(candidate: np.ndarray, reference: np.ndarray, candidate_weights: np.ndarray | None = None,
                 reference_weights: np.ndarray | None = None, floor_precision: bool = False,
                 floor_recall: bool = False) -> GreedyMatch:
    """BERTScore between two token-embedding matrices (tokens x d): each candidate token matched to
    its most similar reference token (precision), each reference token to its most similar candidate
    token (recall), averaged with the given weights (idf; uniform when None) normalised to sum 1.
    F1 is 2PR / (P + R), 0 when P + R is 0 (bert-score sets its NaN to 0).
    floor_precision / floor_recall: each best match is at least 0, as in code that pads a batch with
    zero rows and takes the maximum over the padding too (EMScore's, for a shorter item in its batch)."""
    c, r = normalise_rows(candidate), normalise_rows(reference)
    if c.shape[0] == 0 or r.shape[0] == 0:
        return GreedyMatch(0.0, 0.0, 0.0)
    sim = c @ r.T
    wc = np.ones(len(c)) if candidate_weights is None else np.asarray(candidate_weights, dtype=np.float64)
    wr = np.ones(len(r)) if reference_weights is None else np.asarray(reference_weights, dtype=np.float64)
    best_p, best_r = sim.max(axis=1), sim.max(axis=0)
    p = _weighted_mean(np.maximum(best_p, 0.0) if floor_precision else best_p, wc)
    rec = _weighted_mean(np.maximum(best_r, 0.0) if floor_recall else best_r, wr)
    f = 2 * p * rec / (p + rec) if (p + rec) != 0 else 0.0
    return GreedyMatch(p, rec, float(f))


def _weighted_mean(values: np.ndarray, weights: np.ndarray) -> float:
    total = weights.sum()
    if total == 0:  # every token weighted 0 (bert-score divides by zero here and reports 0)
        return 0.0
    return float((values * weights).sum() / total)


@dataclass
class EMScoreParts:
    """EMScore of one caption: the coarse cosine, the fine P/R/F, and the combined (coarse + fine) / 2."""

    coarse: float
    fine: GreedyMatch

    @property
    def precision(self) -> float:
        return (self.coarse + self.fine.precision) / 2

    @property
    def recall(self) -> float:
        return (self.coarse + self.fine.recall) / 2

    @property
    def f1(self) -> float:
        return (self.coarse + self.fine.f1) / 2


def emscore_video(frame_embeddings: np.ndarray, caption_embedding: np.ndarray, token_embeddings: np.ndarray,
                  token_weights: np.ndarray | None = None, floors: tuple[bool, bool] = (False, False)
                  ) -> EMScoreParts:
    """EMScore(X, V) of one caption against one video (Shi et al. 2022).

    frame_embeddings (frames x d), caption_embedding (d,), token_embeddings (tokens x d) all in the
    joint space. Coarse: cos(mean of unit frame embeddings, caption). Fine: greedy matching of caption
    tokens to frames (precision: each token's best frame; recall: each frame's best token)."""
    frames = normalise_rows(frame_embeddings)
    video = frames.mean(axis=0)
    coarse = float(normalise_rows(video[None])[0] @ normalise_rows(np.asarray(caption_embedding)[None])[0])
    fine = greedy_match(token_embeddings, frames, token_weights, None, *floors)
    return EMScoreParts(coarse, fine)


def emscore_text(caption_embedding: np.ndarray, token_embeddings: np.ndarray,
                 reference_embeddings: Sequence[np.ndarray], reference_tokens: Sequence[np.ndarray],
                 token_weights: np.ndarray | None = None,
                 reference_token_weights: Sequence[np.ndarray | None] | None = None,
                 floors: Sequence[tuple[bool, bool]] | None = None) -> EMScoreParts:
    """EMScore(X, X*) of one caption against its references: coarse cosine and fine token matching
    per reference, each part's best reference kept (as bert-score keeps each of P, R, F)."""
    if not reference_embeddings:
        raise VlgapError("EMScore with references needs at least one reference caption")
    cap = normalise_rows(np.asarray(caption_embedding)[None])[0]
    coarse = max(float(normalise_rows(np.asarray(e)[None])[0] @ cap) for e in reference_embeddings)
    weights = reference_token_weights or [None] * len(reference_tokens)
    floors = floors or [(False, False)] * len(reference_tokens)
    matches = [greedy_match(token_embeddings, rt, token_weights, rw, *fl)
               for rt, rw, fl in zip(reference_tokens, weights, floors)]
    fine = GreedyMatch(max(m.precision for m in matches), max(m.recall for m in matches), max(m.f1 for m in matches))
    return EMScoreParts(coarse, fine)


def combine_emscore(video: EMScoreParts, text: EMScoreParts) -> tuple[float, float, float]:
    """EMScore(X, V, X*): the mean of EMScore(X, V) and EMScore(X, X*), for P, R and F."""
    return ((video.precision + text.precision) / 2, (video.recall + text.recall) / 2, (video.f1 + text.f1) / 2)


def idf_weights(reference_token_ids: Sequence[Sequence[int]]) -> "IdfTable":
    """Inverse document frequencies of token ids over references, as bert-score computes them:
    idf(t) = log((M + 1) / (df(t) + 1)) with M references; an unseen token gets log(M + 1)."""
    counts: dict[int, int] = {}
    for ids in reference_token_ids:
        for t in set(int(x) for x in ids):
            counts[t] = counts.get(t, 0) + 1
    return IdfTable(len(reference_token_ids), counts)


@dataclass
class IdfTable:
    n_documents: int
    counts: dict[int, int]
    values: dict[int, float] | None = None  # idf per id where it is not log((M + 1) / (count + 1))

    def __call__(self, token_ids: Sequence[int]) -> np.ndarray:
        m, values = self.n_documents, self.values or {}
        return np.array([values[int(t)] if int(t) in values else np.log((m + 1) / (self.counts.get(int(t), 0) + 1))
                         for t in token_ids], dtype=np.float64)


def emscore_idf(corpus_token_ids: Sequence[Sequence[int]], context_length: int, pad_id: int = 0) -> "IdfTable":
    """Inverse document frequencies as ShiYaya/emscore's EMScorer.score computes them (utils.get_idf_dict):
    each document is its openai clip.tokenize row, so a caption shorter than the context also holds
    the padding id 0; idf(t) = log((M + 1) / (df(t) + 1)) over the M documents, an unseen token
    log(M + 1); then the largest counted id (the end-of-text token) gets the mean of all counted idfs."""
    counts: dict[int, int] = {}
    for ids in corpus_token_ids:
        seen = set(int(x) for x in ids)
        if len(ids) < context_length:
            seen.add(pad_id)
        for t in seen:
            counts[t] = counts.get(t, 0) + 1
    m = len(corpus_token_ids)
    values = {t: float(np.log((m + 1) / (c + 1))) for t, c in counts.items()}
    if values:
        values[max(values)] = sum(values.values()) / len(values)
    return IdfTable(m, counts, values)
