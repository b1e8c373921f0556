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
