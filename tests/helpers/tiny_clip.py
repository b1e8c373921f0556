"""Tiny random-weight CLIP models saved to folders with a processor, built without files, and pictures.

No CLIP weights ship offline, so parity tests run on random weights: the numbers mean nothing, but
two implementations fed the same model must agree on them.
"""
from __future__ import annotations

from pathlib import Path


def clip_tokenizer(max_length: int):
    """A byte-level CLIP BPE tokenizer with no merges: every byte is a token (plus its `</w>` form)."""
    from transformers import CLIPTokenizer
    from transformers.convert_slow_tokenizer import bytes_to_unicode

    symbols = list(bytes_to_unicode().values())
    vocab: dict[str, int] = {}
    for s in symbols + [s + "</w>" for s in symbols] + ["<|startoftext|>", "<|endoftext|>"]:
        vocab.setdefault(s, len(vocab))
    return CLIPTokenizer(vocab=vocab, merges=[], model_max_length=max_length), len(vocab)


def learn_merges(corpus: list[str], n_merges: int) -> list[tuple[str, str]]:
    """A byte-level BPE merge list learnt from a corpus (most frequent adjacent pair first), as openai's
    vocabulary was made, on words split and lower-cased the way its tokenizer splits them."""
    import collections

    from official_caption_ports import OpenaiTokenizer, _bytes_to_unicode

    symbols = _bytes_to_unicode()
    split = OpenaiTokenizer({"<|startoftext|>": 0, "<|endoftext|>": 1}, [])
    words = collections.Counter()
    for text in corpus:
        for w in split.pat.findall(split.clean(text).lower()):
            pieces = [symbols[b] for b in w.encode("utf-8")]
            words[tuple(pieces[:-1] + [pieces[-1] + "</w>"])] += 1
    merges = []
    for _ in range(n_merges):
        pairs = collections.Counter()
        for w, c in words.items():
            for pair in zip(w, w[1:]):
                pairs[pair] += c
        if not pairs:
            break
        best = max(pairs, key=lambda p: (pairs[p], p))
        merges.append(best)
        merged = collections.Counter()
        for w, c in words.items():
            out, i = [], 0
            while i < len(w):
                if i + 1 < len(w) and (w[i], w[i + 1]) == best:
                    out.append(w[i] + w[i + 1])
                    i += 2
                else:
                    out.append(w[i])
                    i += 1
            merged[tuple(out)] += c
        words = merged
    return merges


def make_tiny_clip(folder: Path, *, seed: int = 0, max_length: int = 24, image_size: int = 32,
                   aligned: bool = False) -> Path:
    from vlgap.captions.clip_model import write_random_clip

    return write_random_clip(folder, seed=seed, max_length=max_length, image_size=image_size, aligned=aligned)


def write_images(folder: Path, ids, size: int = 40, seed: int = 0) -> Path:
    """Random RGB pictures named <id>.png (one .jpg among them, to exercise the suffix search)."""
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(seed)
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    for n, i in enumerate(ids):
        pixels = rng.integers(0, 256, (size, size + 7 * n % 11, 3), dtype=np.uint8)
        Image.fromarray(pixels).save(folder / (f"{i}.jpg" if n == 1 else f"{i}.png"))
    return folder
