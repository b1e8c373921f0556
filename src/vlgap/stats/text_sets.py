"""Caption sets for the gap: length matching, and embedding with any text encoder of the feature layer.

Caption length alone separates most writing styles (a prompt enhancer writes longer text than a
user), so a gap between two caption sets may only say "one set is longer". Length matching removes
that: both sets are subsampled (seeded) to the same token-length histogram, keeping in every length
bin min(count in A, count in B) items of each, and the numbers kept are reported.

Embedding goes through `vlgap.encoders.registry.get_encoder` (default "minilm", all-MiniLM-L6-v2,
mean-pooled over tokens); one layer is taken (default the last) and the texts are batched here.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from vlgap.errors import VlgapError

DEFAULT_TEXT_ENCODER = "minilm"


@dataclass
class LengthMatch:
    """Which items survive length matching (indices into the original lists, in original order)."""

    index_a: np.ndarray
    index_b: np.ndarray
    n_a_before: int
    n_b_before: int
    bin_width: int
    length_unit: str
    #: per kept bin: [low length, high length, items kept per side]
    bins: list[list[int]] = field(default_factory=list)

    @property
    def n_a_kept(self) -> int:
        return int(self.index_a.size)

    @property
    def n_b_kept(self) -> int:
        return int(self.index_b.size)

    def summary(self) -> dict[str, Any]:
        return {"n_a_before": self.n_a_before, "n_b_before": self.n_b_before, "n_a_kept": self.n_a_kept,
                "n_b_kept": self.n_b_kept, "bin_width": self.bin_width, "length_unit": self.length_unit,
                "bins": self.bins}


def check_captions(texts: Sequence[str], name: str) -> list[str]:
    texts = list(texts)
    for i, t in enumerate(texts):
        if not isinstance(t, str) or not t.strip():
            raise VlgapError(f"{name}: caption {i} is empty or not a string; every caption needs words")
    return texts


def token_lengths(texts: Sequence[str], tokenizer: Callable[[str], Any] | Any | None = None) -> np.ndarray:
    """Length of each text: whitespace words by default; with a Hugging Face tokenizer, the number
    of its tokens without special tokens; with any callable, len(callable(text))."""
    if tokenizer is None:
        return np.array([len(t.split()) for t in texts], dtype=int)
    if hasattr(tokenizer, "__call__") and hasattr(tokenizer, "add_special_tokens"):
        ids = tokenizer(list(texts), add_special_tokens=False)["input_ids"]
        return np.array([len(x) for x in ids], dtype=int)
    return np.array([len(tokenizer(t)) for t in texts], dtype=int)


def auto_bin_width(lengths: np.ndarray) -> int:
    """About 20 bins across the central 90% of pooled lengths, never narrower than 1 token."""
    lo, hi = np.percentile(lengths, [5, 95])
    return max(1, int(math.ceil((hi - lo) / 20.0)))


def length_match(
    lengths_a: Sequence[int],
    lengths_b: Sequence[int],
    *,
    bin_width: int | str = "auto",
    seed: int | None = 0,
    length_unit: str = "whitespace words",
) -> LengthMatch:
    """Subsample two sets to a common length histogram (see module docstring).

    bin_width: tokens per bin, or "auto" (`auto_bin_width` on the pooled lengths). Items are picked
    uniformly at random within a bin (seeded); kept indices are returned sorted.
    """
    la = np.asarray(lengths_a, dtype=int)
    lb = np.asarray(lengths_b, dtype=int)
    if la.size == 0 or lb.size == 0:
        raise VlgapError("length matching needs items on both sides")
    width = auto_bin_width(np.concatenate([la, lb])) if bin_width == "auto" else int(bin_width)
    if width < 1:
        raise VlgapError(f"bin_width={bin_width!r}: must be a positive number of tokens or 'auto'")
    rng = np.random.default_rng(seed)
    bins_a, bins_b = la // width, lb // width
    keep_a, keep_b, bins = [], [], []
    for bin_id in np.intersect1d(bins_a, bins_b):
        ia = np.flatnonzero(bins_a == bin_id)
        ib = np.flatnonzero(bins_b == bin_id)
        k = min(ia.size, ib.size)
        keep_a.append(rng.choice(ia, size=k, replace=False))
        keep_b.append(rng.choice(ib, size=k, replace=False))
        bins.append([int(bin_id * width), int(bin_id * width + width - 1), int(k)])
    index_a = np.sort(np.concatenate(keep_a)) if keep_a else np.array([], dtype=int)
    index_b = np.sort(np.concatenate(keep_b)) if keep_b else np.array([], dtype=int)
    return LengthMatch(index_a, index_b, int(la.size), int(lb.size), width, length_unit, bins)


def length_match_texts(
    texts_a: Sequence[str],
    texts_b: Sequence[str],
    *,
    tokenizer: Any | None = None,
    bin_width: int | str = "auto",
    seed: int | None = 0,
) -> LengthMatch:
    """`length_match` on caption lists, lengths from `token_lengths`. Raises if fewer than 2 items
    survive on a side (the sets share too few lengths to be compared)."""
    texts_a = check_captions(texts_a, "A")
    texts_b = check_captions(texts_b, "B")
    unit = "whitespace words" if tokenizer is None else f"{type(tokenizer).__name__} tokens"
    match = length_match(token_lengths(texts_a, tokenizer), token_lengths(texts_b, tokenizer),
                         bin_width=bin_width, seed=seed, length_unit=unit)
    if match.n_a_kept < 2:
        raise VlgapError(f"length matching kept {match.n_a_kept} of {match.n_a_before} / {match.n_b_before} "
                         f"captions (bin width {match.bin_width}): the sets barely share lengths; "
                         "use a wider --bin-width or compare without --length-match")
    return match


@dataclass
class EmbeddedTexts:
    array: np.ndarray
    layer: str
    encoder: dict[str, Any]
    #: captions cut at the encoder's input length (said in a warning)
    n_truncated: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"layer": self.layer, "encoder": self.encoder, "shape": list(self.array.shape),
                "n_truncated": self.n_truncated}


def load_text_encoder(name: str = DEFAULT_TEXT_ENCODER, *, device: Any = "cpu", dtype: Any = "float32",
                      pooling: str | None = None):
    try:
        from vlgap.encoders.registry import get_encoder
    except ImportError as err:
        raise VlgapError(f"text input needs the encoder registry (vlgap.encoders.registry): {err}") from None
    kwargs: dict[str, Any] = {"device": device, "dtype": dtype}
    if pooling is not None:
        kwargs["pooling"] = pooling
    encoder = get_encoder(name, **kwargs)
    if getattr(encoder, "modality", None) != "text":
        raise VlgapError(f"encoder {name!r} is a {getattr(encoder, 'modality', '?')} encoder; "
                         "caption sets need a text encoder (e.g. 'minilm')")
    return encoder


def resolve_layer(encoder: Any, layer: int | str) -> int:
    names = list(encoder.layer_names)
    if isinstance(layer, str) and not layer.lstrip("-").isdigit():
        if layer not in names:
            raise VlgapError(f"layer {layer!r} is not a layer of {encoder.name}; layers: {names}")
        return names.index(layer)
    idx = int(layer)
    if not -len(names) <= idx < len(names):
        raise VlgapError(f"layer {idx} is out of range for {encoder.name}, which has {len(names)} layers "
                         f"(0..{len(names) - 1}, or negative from the end)")
    return idx % len(names)


def embed_texts(
    texts: Sequence[str],
    encoder: Any = DEFAULT_TEXT_ENCODER,
    *,
    layer: int | str = -1,
    batch_size: int = 64,
    device: Any = "cpu",
    dtype: Any = "float32",
    pooling: str | None = None,
    name: str = "texts",
) -> EmbeddedTexts:
    """Embed captions -> [N, D_layer] float32 array, with the encoder's record and the layer name.
    `encoder` is a registry name or an already loaded TextEncoder (reused across calls). Captions longer
    than the encoder's input are cut there: said in one warning naming `name` (vlgap.caveats), never
    silently."""
    texts = check_captions(texts, name)
    if batch_size < 1:
        raise VlgapError(f"batch_size={batch_size}: must be at least 1")
    enc = load_text_encoder(encoder, device=device, dtype=dtype, pooling=pooling) if isinstance(encoder, str) else encoder
    li = resolve_layer(enc, layer)
    before = int(getattr(enc, "n_truncated", 0) or 0)
    chunks = []
    for start in range(0, len(texts), batch_size):
        out = enc.encode(texts[start:start + batch_size])
        chunks.append(out[li].detach().float().cpu().numpy())
    cut = int(getattr(enc, "n_truncated", 0) or 0) - before
    if cut:
        from vlgap.caveats import caveat

        caveat(f"{name}: {cut} of {len(texts)} captions are longer than the text encoder's "
               f"{getattr(enc, 'max_length', '?')} tokens and were truncated before embedding, so the statistics "
               "see only their beginnings")
    return EmbeddedTexts(np.concatenate(chunks), enc.layer_names[li], enc.record(), n_truncated=cut)
