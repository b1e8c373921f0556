"""Tiny random-weight CLIP (and SigLIP) models saved to folders with a processor, built without files.

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
    for s in symbols:
        vocab.setdefault(s, len(vocab))
    for s in symbols:
        vocab.setdefault(s + "</w>", len(vocab))
    vocab["<|startoftext|>"] = len(vocab)
    vocab["<|endoftext|>"] = len(vocab)
    tok = CLIPTokenizer(vocab=vocab, merges=[], model_max_length=max_length)
    return tok, len(vocab)


def make_tiny_clip(folder: Path, *, seed: int = 0, max_length: int = 24, image_size: int = 32,
                   aligned: bool = False) -> Path:
    """aligned: shift both towers' final layer norms and make the projections non-negative, so that
    every image-caption cosine is positive (random weights otherwise give cosines of either sign)."""
    import torch
    from transformers import CLIPConfig, CLIPImageProcessor, CLIPModel, CLIPProcessor

    tok, vocab_size = clip_tokenizer(max_length)
    eos = tok.convert_tokens_to_ids("<|endoftext|>")
    bos = tok.convert_tokens_to_ids("<|startoftext|>")
    config = CLIPConfig(
        text_config=dict(vocab_size=vocab_size, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=2, max_position_embeddings=max_length, eos_token_id=eos,
                         bos_token_id=bos, pad_token_id=eos),
        vision_config=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                           image_size=image_size, patch_size=8),
        projection_dim=16)
    torch.manual_seed(seed)
    model = CLIPModel(config).eval()
    if aligned:
        with torch.no_grad():
            model.text_model.final_layer_norm.bias += 2.0
            model.vision_model.post_layernorm.bias += 2.0
            model.text_projection.weight.abs_()
            model.visual_projection.weight.abs_()
    folder = Path(folder)
    model.save_pretrained(folder)
    proc = CLIPProcessor(image_processor=CLIPImageProcessor(size={"shortest_edge": image_size},
                                                            crop_size={"height": image_size, "width": image_size}),
                         tokenizer=tok)
    proc.save_pretrained(folder)
    return folder


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
