"""EMScore and EMScore-Ref per item (Shi et al. 2022), under a named convention.

    official        ShiYaya/emscore EMScorer.score with its defaults: pictures and captions prepared
                    as openai clip does (captions.openai_clip), no prefix; the tokens from [SOS] to the
                    first [EOS] (the active branch of utils.encode_text: the argmax of the ids, so a
                    literal '<|endoftext|>' in a caption ends it there, and the caption's embedding is
                    that position's), weighted by idf (idf=True) computed over the references, or over
                    the candidates when there are none, on their whole clip.tokenize rows
                    (embedding_scores.emscore_idf); with idf off (EMScorer.score(idf=False)) every
                    token weighs 1; recall over frames uniform; a caption longer than
                    the text tower's context refused (clip.tokenize raises on it); the frames of the
                    frame rule (default all, as encode_video). Its batches of 64 pad shorter items
                    with zero rows and take the best match over the padding too, so a shorter item's
                    best matches are at least 0: reproduced per batch, in the order of the predictions.
    content-tokens  vlgap's earlier EMScore: the caption's content tokens only, uniform weights, the
                    checkpoint's transformers processor, truncation as --no-truncate says.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from vlgap.captions import embedding_scores as es
from vlgap.captions.tables import MetricTable
from vlgap.errors import VlgapError

BATCH = 64  # EMScorer.score's batch_size

EMSCORE_CONVENTIONS = ("official", "content-tokens")
EMSCORE_CONVENTION_HELP = ("official (default): ShiYaya/emscore EMScorer.score: [SOS] to the first [EOS], idf, openai "
                           "pixels and text, over-long captions refused | content-tokens: content tokens only, "
                           "uniform weights, the checkpoint's processor, truncation (vlgap's earlier default)")


def _floors(rows: Sequence[tuple[int, int]], batch: int = BATCH) -> list[tuple[bool, bool]]:
    """Per (matched-against length, caption length) row: whether its best matches are floored at 0,
    i.e. whether a longer item shares its batch on that side (official zero padding)."""
    out = []
    for start in range(0, len(rows), batch):
        chunk = rows[start:start + batch]
        most_ref, most_hyp = max(r for r, _ in chunk), max(h for _, h in chunk)
        out.extend((r < most_ref, h < most_hyp) for r, h in chunk)
    return out


def _check_weights(weights: np.ndarray, who: str, item: str) -> None:
    if not np.sum(weights) > 0:
        raise VlgapError(f"item {item!r}: every token of the {who} has idf 0 (each occurs in every caption of the "
                         "idf corpus, e.g. a single caption), where the official EMScore divides by zero; score more "
                         "items, or weigh tokens uniformly (--no-emscore-idf, or --emscore-convention content-tokens)")


def emscore_table(data, ctx, names: Sequence[str], visual=dict) -> MetricTable:
    """EMScore (and EMScore-Ref where every item has references) of one system; ctx is the
    captions.embedding_eval.EmbeddingContext, visual() what the result records of the pictures."""
    from vlgap.captions.intervals import mean_statistic

    name = ctx.options.emscore_convention
    if name not in ("official", "content-tokens"):
        raise VlgapError(f"--emscore-convention {name!r} is not known: use {EMSCORE_CONVENTION_HELP}")
    official = name == "official"
    use_idf = official if ctx.options.emscore_idf is None else bool(ctx.options.emscore_idf)
    if use_idf and not official:
        raise VlgapError("--emscore-idf weights the official EMScore's tokens; --emscore-convention content-tokens "
                         "weighs its content tokens uniformly: drop --emscore-idf or use --emscore-convention official")
    model = ctx.openai_model("--emscore-convention official", "--emscore-convention content-tokens") \
        if official else ctx.clip()
    pixels = "openai" if official else "processor"
    truncate = False if official else ctx.options.truncate
    text = dict(openai=official, truncate=truncate)
    refusal = ("the official EMScore (clip.tokenize without truncation) raises on it; shorten it, or use "
               "--emscore-convention content-tokens") if official else None
    frames = ctx.picture_frames(data.ids, pixels=pixels)
    with_refs = all(data.references)
    flat = [r for refs in data.references for r in refs] if with_refs else []
    owners = [names[i] for i, refs in enumerate(data.references) for _ in refs] if with_refs else []

    def embed(texts, who):
        if official:  # one pass: the caption embedding is the [EOS] row of its tokens (encode_text's global_emb)
            ctx.tokenised(texts, who, refusal=refusal, **text)
            toks = ctx.caption_tokens(texts, specials_too=True, **text)
            return np.stack([t[-1] for t in toks]) if toks else np.zeros((0, 0)), toks
        vecs, _ = ctx.caption_embeddings(texts, who, prefix="", refusal=refusal, **text)
        return vecs, ctx.caption_tokens(texts, specials_too=False, **text)

    cap_vecs, tokens = embed(data.predictions, names)
    if with_refs:
        flat_vecs, flat_tokens = embed(flat, owners)
    weights: list[Any] = [None] * len(names)
    ref_weights: list[Any] = [None] * len(flat)
    video_floors = [(False, False)] * len(names)
    text_floors = [(False, False)] * len(flat)
    if official:
        cap_ids = ctx.caption_ids(data.predictions, **text)
        ref_ids = ctx.caption_ids(flat, **text) if with_refs else []
        if use_idf:  # counted over whole rows; each caption weighs the tokens it keeps (to its first [EOS])
            idf = es.emscore_idf(ref_ids if with_refs else cap_ids, model.max_length)
            weights = [idf(ids)[:len(t)] for ids, t in zip(cap_ids, tokens)]
            ref_weights = [idf(ids)[:len(t)] for ids, t in zip(ref_ids, flat_tokens)] if with_refs else []
            for w, item in zip(weights, names):
                _check_weights(w, "caption", item)
        video_floors = _floors([(len(f), len(t)) for f, t in zip(frames, tokens)])
        if with_refs:
            hyp_len = [len(tokens[i]) for i, refs in enumerate(data.references) for _ in refs]
            text_floors = _floors([(len(t), h) for t, h in zip(flat_tokens, hyp_len)])
    parts = [es.emscore_video(f, c, t, w, fl) for f, c, t, w, fl in zip(frames, cap_vecs, tokens, weights, video_floors)]
    per = {"EMScore": np.array([p.f1 for p in parts])}
    table_names = ["EMScore"]
    if with_refs:
        combined, k = [], 0
        for i, (refs, cap, tok, vpart) in enumerate(zip(data.references, cap_vecs, tokens, parts)):
            span = slice(k, k + len(refs))
            k += len(refs)
            if use_idf:
                for w in ref_weights[span]:
                    _check_weights(w, "reference", names[i])
            tpart = es.emscore_text(cap, tok, list(flat_vecs[span]), flat_tokens[span], weights[i],
                                    ref_weights[span], text_floors[span])
            combined.append(es.combine_emscore(vpart, tpart)[2])
        per["EMScore-Ref"] = np.array(combined)
        table_names.append("EMScore-Ref")
    stats = np.stack([per[n] for n in table_names], axis=1)
    extra = {"variant": "F: (coarse + fine F1) / 2; EMScore-Ref adds the reference side, EMScore(X, V, X*)",
             "convention": name,
             "parts": {"coarse": float(np.mean([p.coarse for p in parts])),
                       "fine_P": float(np.mean([p.fine.precision for p in parts])),
                       "fine_R": float(np.mean([p.fine.recall for p in parts])),
                       "fine_F": float(np.mean([p.fine.f1 for p in parts]))},
             "tokens": ("[SOS] to the first [EOS], " + (("idf over the " + ("references" if with_refs else "candidates")
                        + " (ShiYaya/emscore EMScorer.score defaults)") if use_idf else "uniform weights (idf=False)")
                        + ", openai clip's tokenizer, no prefix") if official
             else "the caption's content tokens (no prefix, special tokens left out), uniform weights",
             "idf": use_idf,
             "model": ctx.clip_model.describe(), "visual": visual()}
    statistic = (lambda s, n: np.asarray(s, dtype=float) / n) if with_refs else mean_statistic
    return MetricTable(table_names, stats, statistic, [float(x) for x in stats.mean(axis=0)], per, extra)
