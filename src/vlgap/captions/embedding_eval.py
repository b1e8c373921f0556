"""Orchestration of the embedding-based caption scores: CLIPScore, RefCLIPScore, EMScore, BERTScore.

Wires the adapters (captions.clip_model, captions.bertscore, pictures and video frames) to the
array scores (captions.embedding_scores) and returns the same MetricTable objects as the n-gram
metrics, so intervals, paired comparisons, per-item CSV and JSON come from one machinery.

An EmbeddingContext holds the loaded models and every embedding computed so far (pictures and
videos by item id, captions by their text): each distinct caption and each picture is embedded
once, also across the two systems of a paired comparison or the rows of a human-judgment file.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from vlgap.captions import embedding_scores as es
from vlgap.captions.registry import Scoring, caption_metric, mean_table
from vlgap.captions.tables import MetricTable
from vlgap.errors import BadItemError, VlgapError
from vlgap.stats.bounds import ScoreRange

HESSEL_PREFIX = "A photo depicts "


@dataclass(frozen=True)
class ClipConvention:
    """How a picture and a caption become CLIP-S and RefCLIP-S: w * max(cos, 0) with `prefix` before
    every caption; pixels through openai clip's preprocess ("openai") or the checkpoint's transformers
    image processor ("processor"); captions through openai clip's tokenisation (openai_text) or the
    checkpoint's transformers tokenizer; RefCLIP-S's text-text cosine clamped at 0 (the paper's eq. 2)
    or not (the official code)."""

    name: str
    w: float
    prefix: str
    pixels: str = "openai"
    openai_text: bool = True
    clamp_text_text: bool = False
    code: str = ""

    def as_dict(self) -> dict[str, Any]:
        out = {"name": self.name, "w": self.w, "prefix": self.prefix,
               "pixels": "openai clip preprocess (bicubic short side, torchvision CenterCrop, then RGB)"
               if self.pixels == "openai" else "the checkpoint's transformers image processor (after RGB)",
               "text": OPENAI_TEXT if self.openai_text else "the checkpoint's transformers tokenizer",
               "ref_text_text": "clamped at 0 (paper eq. 2)" if self.clamp_text_text else "unclamped (official code)"}
        if self.code:
            out["code"] = self.code
        return out


OPENAI_TEXT = ("openai clip's tokenizer on the checkpoint's BPE files (ftfy, html unescape, whitespace, "
               "Python's lower case, openai's word pattern, byte-level BPE)")
CLIP_CONVENTIONS = ("official", "transformers", "torchmetrics")
CLIP_CONVENTION_HELP = ("official (default; alias hessel): jmhessel/clipscore, or aimagelab/pacscore with a pacs: "
                        "checkpoint | transformers: the checkpoint's image processor and tokenizer, RefCLIP-S clamped "
                        "(vlgap's earlier default) | torchmetrics: 100 x max(cos, 0), no prefix")


def clip_convention(name: str = "official", *, w: float | None = None, prefix: str | None = None,
                    model_default_w: float = 2.5) -> ClipConvention:
    """official (alias hessel): as jmhessel/clipscore (w = 2.5) or aimagelab/pacscore (w = 2.0, a PAC-S
    checkpoint): prefix 'A photo depicts ', openai pixels and tokenisation, RefCLIP-S unclamped.
    transformers: the same w and prefix through the checkpoint's transformers processor and
    tokenizer, RefCLIP-S clamped as in the paper. torchmetrics: w = 100, no prefix, transformers'
    processor (torchmetrics' CLIPScore). Custom w / prefix override any (the name then says so)."""
    code = "jmhessel/clipscore" if model_default_w == 2.5 else "aimagelab/pacscore"
    if name in ("official", "hessel"):
        base = ClipConvention("official", model_default_w, HESSEL_PREFIX, "openai", True, False, code)
    elif name == "transformers":
        base = ClipConvention("transformers", model_default_w, HESSEL_PREFIX, "processor", False, True)
    elif name == "torchmetrics":
        base = ClipConvention("torchmetrics", 100.0, "", "processor", False, True)
    else:
        raise VlgapError(f"--clip-convention {name!r} is not known: use {CLIP_CONVENTION_HELP}; "
                         "--clip-w / --clip-prefix for others")
    if w is not None and w <= 0:
        raise VlgapError(f"--clip-w must be positive, got {w}")
    if (w is not None and w != base.w) or (prefix is not None and prefix != base.prefix):
        return replace(base, name=f"custom (from {base.name})", w=float(base.w if w is None else w),
                       prefix=base.prefix if prefix is None else prefix)
    return base


@dataclass
class EmbeddingOptions:
    clip: str | None = None
    clip_convention: str = "official"
    clip_w: float | None = None
    clip_prefix: str | None = None
    truncate: bool = True
    images: str | Path | None = None
    image_pattern: str | None = None  # file name of an item's picture in `images` (captions.pictures)
    videos: str | Path | None = None
    n_frames: Any = "all"          # a frame rule (captions.frame_rules): all | int-linspace:N | rint-linspace:N | N
    emscore_convention: str = "official"
    emscore_idf: bool | None = None  # EMScore's idf weights (None: the convention's, official on, content-tokens off)
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
    picture_cache: dict[tuple[str, str], np.ndarray] = field(default_factory=dict)  # (pixels, item) -> unit rows
    caption_cache: dict[tuple, tuple[np.ndarray | None, bool, list[int]]] = field(default_factory=dict)
    token_cache: dict[tuple, np.ndarray] = field(default_factory=dict)
    picture_folder: Any = None  # captions.pictures.PictureFolder of options.images, made on first use

    # ---- models ------------------------------------------------------------------------------
    def clip(self):
        if self.clip_model is None:
            if not self.options.clip:
                raise VlgapError("CLIPScore, RefCLIPScore and EMScore need a CLIP-family checkpoint: pass --clip "
                                 "hf:<hub id or folder> (e.g. hf:openai/clip-vit-base-patch32) or pacs:<file.pth>")
            from vlgap.captions.clip_model import load_clip

            self.convention = clip_convention(self.options.clip_convention, w=self.options.clip_w,
                                              prefix=self.options.clip_prefix)  # a bad name before the load
            self.frame_rule()
            self.clip_model = load_clip(self.options.clip, device=self.options.device, reuse=True)
            self.convention = clip_convention(self.options.clip_convention, w=self.options.clip_w,
                                              prefix=self.options.clip_prefix,
                                              model_default_w=self.clip_model.default_w)
        return self.clip_model

    def frame_rule(self):
        from vlgap.captions.frame_rules import parse_frame_rule

        return parse_frame_rule(self.options.n_frames)

    def openai_model(self, what: str, flag: str):
        """The CLIP model, refused where `what` (an official convention) cannot apply: openai's
        preprocessing is CLIP's, not SigLIP's."""
        model = self.clip()
        if model.family != "clip":
            raise VlgapError(f"{what} prepares pictures and text as openai CLIP does; {self.options.clip!r} is a "
                             f"{model.family} checkpoint: pass {flag}")
        return model

    def text(self):
        if self.text_model is None:
            from vlgap.captions.bertscore import load_text_token_model

            self.text_model = load_text_token_model(self.options.bertscore_model, device=self.options.device)
        return self.text_model

    # ---- captions ----------------------------------------------------------------------------
    def caption_embeddings(self, texts: Sequence[str], names: Sequence[Any], prefix: str | None = None, *,
                           openai: bool | None = None, truncate: bool | None = None, refusal: str | None = None
                           ) -> tuple[np.ndarray, np.ndarray]:
        """Embeddings (n, d) of prefix + caption (the convention's prefix and tokenisation unless given) and
        whether each was truncated; each distinct text is embedded once."""
        model = self.clip()
        prefix = self.convention.prefix if prefix is None else prefix
        openai = self.convention.openai_text if openai is None else openai
        truncate = self.options.truncate if truncate is None else truncate
        keys = self.tokenised(texts, names, prefix, openai=openai, truncate=truncate, refusal=refusal)
        todo = list(dict.fromkeys(k for k in keys if self.caption_cache[k][0] is None))
        if todo:
            vectors = model.embed_token_ids([self.caption_cache[k][2] for k in todo])
            for k, v in zip(todo, vectors):
                self.caption_cache[k] = (v, *self.caption_cache[k][1:])
        rows = [self.caption_cache[k] for k in keys]
        return np.stack([r[0] for r in rows]), np.array([r[1] for r in rows])

    def tokenised(self, texts: Sequence[str], names: Sequence[Any], prefix: str = "", *, openai: bool,
                  truncate: bool, refusal: str | None = None) -> list[tuple]:
        """Tokenise captions (each distinct text once) without embedding them; their cache keys."""
        model = self.clip()
        keys = [(openai, truncate, prefix + t) for t in texts]
        todo = list(dict.fromkeys(k for k in keys if k not in self.caption_cache))
        if todo:
            first = {k: names[i] for i, k in reversed(list(enumerate(keys)))}
            extra = {"refusal": refusal} if refusal else {}
            tokens = model.tokenise([k[2] for k in todo], truncate=truncate, names=[first[k] for k in todo],
                                    openai=openai, **extra)
            for k, cut, ids in zip(todo, tokens.truncated, tokens.ids):
                self.caption_cache[k] = (None, cut, ids)
        return keys

    def caption_ids(self, texts: Sequence[str], prefix: str = "", *, openai: bool, truncate: bool) -> list[list[int]]:
        """Token ids of captions already embedded by caption_embeddings with the same settings."""
        return [self.caption_cache[(openai, truncate, prefix + t)][2] for t in texts]

    def caption_tokens(self, texts: Sequence[str], prefix: str = "", *, openai: bool = False,
                       truncate: bool | None = None, specials_too: bool = False) -> list[np.ndarray]:
        """Per-token joint-space embeddings of captions already tokenised (caption_embeddings, tokenised)."""
        model = self.clip()
        truncate = self.options.truncate if truncate is None else truncate
        keys = [(openai, truncate, prefix + t) for t in texts]
        todo = list(dict.fromkeys(k for k in keys if (specials_too, k) not in self.token_cache))
        if todo:
            made = model.embed_caption_tokens([self.caption_cache[k][2] for k in todo], specials_too=specials_too)
            for k, tokens in zip(todo, made):
                self.token_cache[(specials_too, k)] = tokens
        return [self.token_cache[(specials_too, k)] for k in keys]

    # ---- pictures and videos -----------------------------------------------------------------
    def picture_frames(self, ids: Sequence[Any], pixels: str = "openai") -> list[np.ndarray]:
        """Per item, the unit-norm joint-space embeddings of its picture (one row) or its video's frames
        (the frame rule's), pictures prepared as `pixels` says (see ClipModel.embed_images)."""
        model = self.clip()
        todo = [str(i) for i in dict.fromkeys(str(i) for i in ids) if (pixels, str(i)) not in self.picture_cache]
        if self.options.videos is not None:
            for item in todo:
                self.picture_cache[(pixels, item)] = es.normalise_rows(self._video_embeddings(item, pixels))
        elif todo:
            batch = 64
            for start in range(0, len(todo), batch):
                chunk = todo[start:start + batch]
                vectors = model.embed_images([self._image(item, pixels) for item in chunk], pixels=pixels)
                for item, v in zip(chunk, es.normalise_rows(vectors)):
                    self.picture_cache[(pixels, item)] = v[None, :]
        return [self.picture_cache[(pixels, str(i))] for i in ids]

    def _image(self, item: str, pixels: str = "openai"):
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
                # openai's preprocess resizes the picture in its own mode and converts to RGB after
                return img.convert("RGB") if pixels != "openai" else _loaded(img)
        except Exception as err:  # Pillow raises many types for unreadable files
            raise BadItemError(item, f"cannot read picture {path}: {type(err).__name__}: {err}") from None

    def manifest(self) -> dict[str, Any]:
        if self.manifest_items is None:
            from vlgap.data.manifest import read_manifest

            self.manifest_items = {item.id: item for item in read_manifest(self.options.videos).items}
        return self.manifest_items

    def _video_embeddings(self, item_id: str, pixels: str = "openai") -> np.ndarray:
        """Joint-space embeddings of a video's frames (the frame rule's): read from the cache when an
        earlier run made them with the same checkpoint, video bytes, frame rule and decoding
        (vlgap.reuse), before the video is opened at all; else decoded and computed. The rule "all"
        decodes the video once; the others count its frames first (data.video.count_frames)."""
        import io

        from vlgap.data.frame_convert import DECODING
        from vlgap.data.manifest import _media_digest
        from vlgap.data.video import count_frames, read_frames
        from vlgap.reuse import key_digest, read_verified, write_artefact

        item = self.manifest().get(item_id)
        if item is None:
            raise BadItemError(item_id, f"not in the video manifest {self.options.videos}")
        rule = self.frame_rule()
        model = self.clip()
        identity = model.describe()
        path = key = None
        if self.options.frame_cache and (identity.get("weights_files") or identity.get("revision")):
            from vlgap.io_utils import cache_root

            # the frame rule stands for its frame indices: the same rule on the same bytes picks the same
            # frames. "decoding": how the frames were decoded (vlgap.data.frame_convert): embeddings of
            # frames an earlier reader decoded (phone videos sideways) are recomputed
            key = {"kind": "clip frame embeddings", "format": 3, "model": identity, "pixels": pixels,
                   "media": _media_digest(item.media), "frames": rule.name, "decoding": DECODING}
            path = cache_root(self.options.cache_dir) / "caption_frames" / f"{key_digest(key)[:24]}.npy"
            cached = read_verified(path, key, what=f"frame embeddings of item {item_id!r}")
            if cached is not None:
                return np.load(io.BytesIO(cached))
        indices = None if rule.kind == "all" else rule.indices(count_frames(item))
        frames, _ = read_frames(item, indices)  # no frame at all: refused by name there
        vectors = model.embed_images(list(frames), pixels=pixels)
        if path is not None:
            buf = io.BytesIO()
            np.save(buf, vectors)
            write_artefact(path, buf.getvalue(), key, extra={"item": item_id, "video": str(item.media)})
        return vectors

    def manifest_references(self, ids: Sequence[Any]) -> list[list[str]]:
        items = self.manifest()
        return [list(items[str(i)].captions) if str(i) in items else [] for i in ids]


def _loaded(img):
    """A picture read in full, left in its own mode (palette, greyscale, RGBA...)."""
    img.load()
    return img.copy()


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
        ctx.clip()
        if ctx.convention.pixels == "openai":
            ctx.openai_model("--clip-convention official", "--clip-convention transformers")
        cap_vecs, cut = ctx.caption_embeddings(data.predictions, names)
        frames = ctx.picture_frames(data.ids, pixels=ctx.convention.pixels)
        pictures = np.stack([f.mean(axis=0) for f in frames])  # a video: the mean of its unit frame embeddings
        conv = ctx.convention
        clip_s = es.clip_scores(pictures, cap_vecs, conv.w)
        info = {"convention": conv.as_dict(), "model": ctx.clip_model.describe(),
                "truncated_captions": int(cut.sum()), "visual": _visual(ctx)}
        return {"names": names, "cap_vecs": cap_vecs, "frames": frames, "clip_s": clip_s, "info": info}
    return s.shared("clip", make)


_PICTURES = dict(references="none", needs=("pictures", "clip model"), kind="model")


@caption_metric("clipscore", keys=("CLIPScore",), aliases=("clip-s", "pac-s"), **_PICTURES, order=110,
                score_range=ScoreRange(0.0, why="w x max(cos, 0): never negative, at most w (the convention's)"),
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
    ref_s = es.ref_clip_scores(shared["clip_s"], best, clamp=ctx.convention.clamp_text_text)
    text_text = ("max over references of cos, clamped at 0 (paper eq. 2)" if ctx.convention.clamp_text_text
                 else "max over references of cos, unclamped (jmhessel/clipscore, aimagelab/pacscore code)")
    return mean_table("RefCLIPScore", ref_s, {**shared["info"], "truncated_references": int(ref_cut.sum()),
                                              "text_text": text_text})


@caption_metric("emscore", keys=("EMScore", "EMScore-Ref"), **{**_PICTURES, "references": "optional"},
                manifest_references=True, order=130,
                summary="EMScore (Shi et al. 2022) over sampled frames; EMScore-Ref where every item has references")
def score_emscore(s: Scoring) -> MetricTable:
    from vlgap.captions.emscore_eval import emscore_table

    ctx = s.embedding()
    return emscore_table(s.data, ctx, [str(i) for i in s.data.ids], visual=lambda: _visual(ctx))


def _visual(ctx: EmbeddingContext) -> dict[str, Any]:
    if ctx.options.videos is not None:
        return {"videos": str(ctx.options.videos), "frames": ctx.frame_rule().name,
                "frame_rule": "see captions.frame_rules (all: every decoded frame, as the official EMScorer)",
                "video_embedding": "mean of unit-norm frame embeddings"}
    return {"images": str(ctx.options.images)}


def __getattr__(name: str):
    """EMBEDDING_METRICS and NEEDS_PICTURES, as they were: now read from the registry."""
    from vlgap.captions.registry import caption_metrics

    if name == "EMBEDDING_METRICS":
        return tuple(m.name for m in caption_metrics() if m.kind == "model")
    if name == "NEEDS_PICTURES":
        return tuple(m.name for m in caption_metrics() if "pictures" in m.needs)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
