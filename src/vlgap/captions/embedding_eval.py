"""Orchestration of the embedding-based caption scores: CLIPScore, RefCLIPScore, EMScore, BERTScore.

Wires the adapters (captions.clip_model, captions.bertscore, pictures and video frames) to the
array scores (captions.embedding_scores) and returns the same MetricTable objects as the n-gram
metrics, so intervals, paired comparisons, per-item CSV and JSON come from one machinery.

An EmbeddingContext holds the loaded models and every embedding computed so far (pictures and
videos by item id, captions by their text): each distinct caption and each picture is embedded
once, also across the two systems of a paired comparison or the rows of a human-judgment file.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from vlgap.captions import embedding_scores as es
from vlgap.captions.registry import Scoring, caption_metric, mean_table
from vlgap.captions.tables import MetricTable
from vlgap.errors import BadItemError, VlgapError

HESSEL_PREFIX = "A photo depicts "


@dataclass(frozen=True)
class ClipConvention:
    """How a cosine becomes CLIP-S: w * max(cos, 0), with `prefix` put before every caption."""

    name: str
    w: float
    prefix: str

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "w": self.w, "prefix": self.prefix}


def clip_convention(name: str = "hessel", *, w: float | None = None, prefix: str | None = None,
                    model_default_w: float = 2.5) -> ClipConvention:
    """hessel: w = 2.5 (2.0 for a PAC-S checkpoint), prefix 'A photo depicts ' (jmhessel/clipscore);
    torchmetrics: w = 100, no prefix; custom w / prefix override either (the name then says so)."""
    if name == "hessel":
        base = ClipConvention("hessel" if model_default_w == 2.5 else "pacs", model_default_w, HESSEL_PREFIX)
    elif name == "torchmetrics":
        base = ClipConvention("torchmetrics", 100.0, "")
    else:
        raise VlgapError(f"--clip-convention {name!r} is not known: use hessel (w = 2.5, 'A photo depicts ') or "
                         "torchmetrics (100 x cosine, no prefix), and --clip-w / --clip-prefix for others")
    if w is not None and w <= 0:
        raise VlgapError(f"--clip-w must be positive, got {w}")
    if (w is not None and w != base.w) or (prefix is not None and prefix != base.prefix):
        return ClipConvention(f"custom (from {base.name})", float(base.w if w is None else w),
                              base.prefix if prefix is None else prefix)
    return base


@dataclass
class EmbeddingOptions:
    clip: str | None = None
    clip_convention: str = "hessel"
    clip_w: float | None = None
    clip_prefix: str | None = None
    truncate: bool = True
    images: str | Path | None = None
    image_pattern: str | None = None  # file name of an item's picture in `images` (captions.pictures)
    videos: str | Path | None = None
    n_frames: int = 8
    bertscore_model: str = "minilm"
    bertscore_layer: int | None = None
    idf: bool = False
    bertscore_baseline: Any = None
    device: str = "cpu"
    cache_dir: str | Path | None = None   # per-frame embeddings of videos, reused across runs (None: VLGAP_CACHE)
    frame_cache: bool = True

    def __post_init__(self):
        if self.image_pattern is not None:
            from vlgap.captions.pictures import check_pattern

            check_pattern(self.image_pattern)
            if self.images is None:
                raise VlgapError(f"--image-pattern {self.image_pattern!r} names files in the --images folder: "
                                 "pass --images DIR too")


@dataclass
class EmbeddingContext:
    options: EmbeddingOptions
    clip_model: Any = None
    text_model: Any = None
    convention: ClipConvention | None = None
    manifest_items: dict[str, Any] | None = None
    picture_cache: dict[str, np.ndarray] = field(default_factory=dict)  # item -> (frames, d) unit rows
    caption_cache: dict[str, tuple[np.ndarray, bool, list[int]]] = field(default_factory=dict)
    token_cache: dict[str, np.ndarray] = field(default_factory=dict)
    picture_folder: Any = None  # captions.pictures.PictureFolder of options.images, made on first use

    # ---- models ------------------------------------------------------------------------------
    def clip(self):
        if self.clip_model is None:
            if not self.options.clip:
                raise VlgapError("CLIPScore, RefCLIPScore and EMScore need a CLIP-family checkpoint: pass --clip "
                                 "hf:<hub id or folder> (e.g. hf:openai/clip-vit-base-patch32) or pacs:<file.pth>")
            from vlgap.captions.clip_model import load_clip

            self.clip_model = load_clip(self.options.clip, device=self.options.device)
            self.convention = clip_convention(self.options.clip_convention, w=self.options.clip_w,
                                              prefix=self.options.clip_prefix,
                                              model_default_w=self.clip_model.default_w)
        return self.clip_model

    def text(self):
        if self.text_model is None:
            from vlgap.captions.bertscore import load_text_token_model

            self.text_model = load_text_token_model(self.options.bertscore_model, device=self.options.device)
        return self.text_model

    # ---- captions ----------------------------------------------------------------------------
    def caption_embeddings(self, texts: Sequence[str], names: Sequence[Any], prefix: str | None = None
                           ) -> tuple[np.ndarray, np.ndarray]:
        """Embeddings (n, d) of prefix + caption (the convention's prefix unless given) and whether each
        was truncated; each distinct text is embedded once."""
        model = self.clip()
        prefix = self.convention.prefix if prefix is None else prefix
        prefixed = [prefix + t for t in texts]
        todo = list(dict.fromkeys(t for t in prefixed if t not in self.caption_cache))
        if todo:
            first = {t: names[i] for i, t in reversed(list(enumerate(prefixed)))}
            tokens = model.tokenise(todo, truncate=self.options.truncate, names=[first[t] for t in todo])
            vectors = model.embed_token_ids(tokens.ids)
            for t, v, cut, ids in zip(todo, vectors, tokens.truncated, tokens.ids):
                self.caption_cache[t] = (v, cut, ids)
        rows = [self.caption_cache[t] for t in prefixed]
        return np.stack([r[0] for r in rows]), np.array([r[1] for r in rows])

    def caption_tokens(self, texts: Sequence[str], prefix: str = "") -> list[np.ndarray]:
        """Per-token joint-space embeddings of captions already embedded by caption_embeddings."""
        model = self.clip()
        prefixed = [prefix + t for t in texts]
        todo = list(dict.fromkeys(t for t in prefixed if t not in self.token_cache))
        if todo:
            for t, tokens in zip(todo, model.embed_caption_tokens([self.caption_cache[t][2] for t in todo])):
                self.token_cache[t] = tokens
        return [self.token_cache[t] for t in prefixed]

    # ---- pictures and videos -----------------------------------------------------------------
    def picture_frames(self, ids: Sequence[Any]) -> list[np.ndarray]:
        """Per item, the unit-norm joint-space embeddings of its picture (one row) or sampled frames."""
        model = self.clip()
        todo = [str(i) for i in dict.fromkeys(str(i) for i in ids) if str(i) not in self.picture_cache]
        if self.options.videos is not None:
            for item in todo:
                self.picture_cache[item] = es.normalise_rows(self._video_embeddings(item))
        elif todo:
            batch = 64
            for start in range(0, len(todo), batch):
                chunk = todo[start:start + batch]
                vectors = model.embed_images([self._image(item) for item in chunk])
                for item, v in zip(chunk, es.normalise_rows(vectors)):
                    self.picture_cache[item] = v[None, :]
        return [self.picture_cache[str(i)] for i in ids]

    def _image(self, item: str):
        from PIL import Image

        if self.options.images is None:
            raise VlgapError("CLIPScore needs the pictures: pass --images DIR (files DIR/<image_id>.jpg|jpeg|png|webp, "
                             "COCO's names, or --image-pattern) or --videos manifest.jsonl")
        if self.picture_folder is None:
            from vlgap.captions.pictures import PictureFolder

            self.picture_folder = PictureFolder(self.options.images, self.options.image_pattern)
        path = self.picture_folder.path(item)
        try:
            with Image.open(path) as img:
                return img.convert("RGB")
        except Exception as err:  # Pillow raises many types for unreadable files
            raise BadItemError(item, f"cannot read picture {path}: {type(err).__name__}: {err}") from None

    def manifest(self) -> dict[str, Any]:
        if self.manifest_items is None:
            from vlgap.data.manifest import read_manifest

            self.manifest_items = {item.id: item for item in read_manifest(self.options.videos).items}
        return self.manifest_items

    def _video_embeddings(self, item_id: str) -> np.ndarray:
        """Joint-space embeddings of a video's sampled frames: read from the cache when an earlier run
        made them with the same checkpoint, video bytes and frame indices (vlgap.reuse), else computed."""
        import io

        from vlgap.data.manifest import _media_digest
        from vlgap.data.sampling import frame_indices
        from vlgap.data.video import count_frames, read_frames
        from vlgap.reuse import key_digest, read_verified, write_artefact

        item = self.manifest().get(item_id)
        if item is None:
            raise BadItemError(item_id, f"not in the video manifest {self.options.videos}")
        if self.options.n_frames < 1:
            raise VlgapError(f"--frames must be >= 1, got {self.options.n_frames}")
        # the feature store's sampler: n_f frames spread uniformly over the video, nearest frame
        indices = frame_indices(count_frames(item), self.options.n_frames)
        model = self.clip()
        identity = model.describe()
        path = key = None
        if self.options.frame_cache and (identity.get("weights_files") or identity.get("revision")):
            from vlgap.io_utils import cache_root

            key = {"kind": "clip frame embeddings", "format": 1, "model": identity,
                   "media": _media_digest(item.media), "frame_indices": indices.tolist()}
            path = cache_root(self.options.cache_dir) / "caption_frames" / f"{key_digest(key)[:24]}.npy"
            cached = read_verified(path, key, what=f"frame embeddings of item {item_id!r}")
            if cached is not None:
                return np.load(io.BytesIO(cached))
        frames, _ = read_frames(item, indices)
        vectors = model.embed_images(list(frames))
        if path is not None:
            buf = io.BytesIO()
            np.save(buf, vectors)
            write_artefact(path, buf.getvalue(), key, extra={"item": item_id, "video": str(item.media)})
        return vectors

    def manifest_references(self, ids: Sequence[Any]) -> list[list[str]]:
        items = self.manifest()
        return [list(items[str(i)].captions) if str(i) in items else [] for i in ids]


def embedding_tables(data, metrics: Sequence[str], ctx: EmbeddingContext) -> dict[str, Any]:
    """MetricTables of the requested embedding scores for one system (see captions.evaluate)."""
    from vlgap.captions.registry import Scoring, ScoringSettings, check_references, get_metric

    check_references(data, metrics)
    s = Scoring(data, ScoringSettings(embedding_ctx=ctx))
    return {m: get_metric(m).compute(s) for m in metrics}


def _clip_shared(s: Scoring) -> dict[str, Any]:
    """What CLIPScore, RefCLIPScore and EMScore share for one system: caption embeddings (with the
    convention's prefix), the pictures' frame embeddings and the CLIP-S of every item."""
    def make() -> dict[str, Any]:
        ctx, data = s.embedding(), s.data
        names = [str(i) for i in data.ids]
        cap_vecs, cut = ctx.caption_embeddings(data.predictions, names)
        frames = ctx.picture_frames(data.ids)
        pictures = np.stack([f.mean(axis=0) for f in frames])  # a video: the mean of its unit frame embeddings
        conv = ctx.convention
        clip_s = es.clip_scores(pictures, cap_vecs, conv.w)
        info = {"convention": conv.as_dict(), "model": ctx.clip_model.describe(),
                "truncated_captions": int(cut.sum()), "visual": _visual(ctx)}
        return {"names": names, "cap_vecs": cap_vecs, "frames": frames, "clip_s": clip_s, "info": info}
    return s.shared("clip", make)


_PICTURES = dict(references="none", needs=("pictures", "clip model"), kind="model")


@caption_metric("clipscore", keys=("CLIPScore",), aliases=("clip-s", "pac-s"), **_PICTURES, order=110,
                summary="CLIPScore (Hessel et al. 2021); PAC-S with a pacs: checkpoint")
def score_clipscore(s: Scoring) -> MetricTable:
    shared = _clip_shared(s)
    return mean_table("CLIPScore", shared["clip_s"], shared["info"])


@caption_metric("refclipscore", keys=("RefCLIPScore",), aliases=("refclip-s",), order=120,
                **{**_PICTURES, "references": "required"}, manifest_references=True,
                summary="RefCLIPScore: harmonic mean of CLIP-S and the best reference cosine")
def score_refclipscore(s: Scoring) -> MetricTable:
    shared, data, ctx = _clip_shared(s), s.data, s.embedding()
    names = shared["names"]
    flat = [r for refs in data.references for r in refs]
    owner = [names[i] for i, refs in enumerate(data.references) for _ in refs]
    ref_vecs, ref_cut = ctx.caption_embeddings(flat, owner)
    per_item, k = [], 0
    for refs in data.references:
        per_item.append(ref_vecs[k:k + len(refs)])
        k += len(refs)
    best = es.best_reference_cosines(shared["cap_vecs"], per_item)
    ref_s = es.ref_clip_scores(shared["clip_s"], best)
    return mean_table("RefCLIPScore", ref_s, {**shared["info"], "truncated_references": int(ref_cut.sum()),
                                              "text_text": "max over references of cos, clamped at 0 (paper eq. 2)"})


@caption_metric("emscore", keys=("EMScore", "EMScore-Ref"), **{**_PICTURES, "references": "optional"},
                manifest_references=True, order=130,
                summary="EMScore (Shi et al. 2022) over sampled frames; EMScore-Ref where every item has references")
def score_emscore(s: Scoring) -> MetricTable:
    shared = _clip_shared(s)
    return _emscore_table(s.data, s.embedding(), shared["frames"], shared["names"])


def _visual(ctx: EmbeddingContext) -> dict[str, Any]:
    if ctx.options.videos is not None:
        return {"videos": str(ctx.options.videos), "frames": ctx.options.n_frames,
                "sampling": "uniform over the whole video, nearest frame (vlgap.data.sampling.frame_indices)",
                "video_embedding": "mean of unit-norm frame embeddings"}
    return {"images": str(ctx.options.images)}


def _emscore_table(data, ctx: EmbeddingContext, frames: list[np.ndarray], names):
    from vlgap.captions.intervals import mean_statistic

    # EMScore reads the caption as written: no prompt prefix (Shi et al. 2022)
    cap_vecs, _ = ctx.caption_embeddings(data.predictions, names, prefix="")
    tokens = ctx.caption_tokens(data.predictions)
    parts = [es.emscore_video(f, c, t) for f, c, t in zip(frames, cap_vecs, tokens)]
    video_f = np.array([p.f1 for p in parts])
    per = {"EMScore": video_f}
    table_names = ["EMScore"]
    with_refs = all(data.references)
    if with_refs:
        combined = []
        for i, (refs, cap, tok, vpart) in enumerate(zip(data.references, cap_vecs, tokens, parts)):
            ref_vecs, _ = ctx.caption_embeddings(refs, [names[i]] * len(refs), prefix="")
            ref_tokens = ctx.caption_tokens(refs)
            tpart = es.emscore_text(cap, tok, list(ref_vecs), ref_tokens)
            combined.append(es.combine_emscore(vpart, tpart)[2])
        per["EMScore-Ref"] = np.array(combined)
        table_names.append("EMScore-Ref")
    stats = np.stack([per[n] for n in table_names], axis=1)
    extra = {"variant": "F: (coarse + fine F1) / 2; EMScore-Ref adds the reference side, EMScore(X, V, X*)",
             "parts": {"coarse": float(np.mean([p.coarse for p in parts])),
                       "fine_P": float(np.mean([p.fine.precision for p in parts])),
                       "fine_R": float(np.mean([p.fine.recall for p in parts])),
                       "fine_F": float(np.mean([p.fine.f1 for p in parts]))},
             "tokens": "the caption's content tokens (no prefix, special tokens left out), uniform weights",
             "model": ctx.clip_model.describe(), "visual": _visual(ctx)}
    statistic = (lambda s, n: np.asarray(s, dtype=float) / n) if with_refs else mean_statistic
    return MetricTable(table_names, stats, statistic, [float(x) for x in stats.mean(axis=0)], per, extra)


def __getattr__(name: str):
    """EMBEDDING_METRICS and NEEDS_PICTURES, as they were: now read from the registry."""
    from vlgap.captions.registry import caption_metrics

    if name == "EMBEDDING_METRICS":
        return tuple(m.name for m in caption_metrics() if m.kind == "model")
    if name == "NEEDS_PICTURES":
        return tuple(m.name for m in caption_metrics() if "pictures" in m.needs)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
