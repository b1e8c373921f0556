"""Native video models from transformers (VideoMAE, V-JEPA 2, TimeSformer, ViViT, X-CLIP) on clips of n0 frames.

Loading by hub id or folder lives in the one transformers adapter (`vlgap.encoders.hf_families`, spec
`hf:<id>`; `hf-video:<id>` is an alias). Here: random-weight builds from published sizes
("config:videomae-large"), to test plumbing and measure speed without any download.
"""
from __future__ import annotations

import torch

from vlgap.encoders._common import require
from vlgap.encoders.hf_families import HFVisionEncoder, family_of, load_hf, resolve_pooling
from vlgap.encoders.vision import FramePreprocess
from vlgap.errors import VlgapError
from vlgap.runtime import parse_device, torch_dtype

#: VideoMAE sizes (the published ViT-S/B/L/H backbones), for random-weight builds
VIDEOMAE_SIZES = {
    "videomae-small": dict(hidden_size=384, num_hidden_layers=12, num_attention_heads=6, intermediate_size=1536),
    "videomae-base": dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072),
    "videomae-large": dict(hidden_size=1024, num_hidden_layers=24, num_attention_heads=16, intermediate_size=4096),
    "videomae-huge": dict(hidden_size=1280, num_hidden_layers=32, num_attention_heads=16, intermediate_size=5120),
}


def load_hf_video(src: str, **kwargs):
    """`hf-video:` is an alias of `hf:`: the config's model_type decides (see hf_families)."""
    return load_hf(src, **kwargs)


def build_videomae_from_config(size: str = "videomae-base", *, pooling: str | None = None,
                               image_size: int | None = None, num_frames: int = 16, device="cpu",
                               dtype="float32") -> HFVisionEncoder:
    """A VideoMAE with random weights from its published size (no download): for speed and plumbing.
    Its name says so ("config:..."), and its record's `weights` says so."""
    require("transformers", "transformers", for_what="a VideoMAE encoder")
    from transformers import VideoMAEConfig, VideoMAEModel

    if size not in VIDEOMAE_SIZES:
        raise VlgapError(f"unknown VideoMAE size {size!r}; use one of {', '.join(VIDEOMAE_SIZES)}")
    family = family_of("videomae")
    config = VideoMAEConfig(image_size=int(image_size or 224), num_frames=int(num_frames), **VIDEOMAE_SIZES[size])
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = VideoMAEModel(config)
    pre = FramePreprocess.make(config.image_size)
    source = {"library": "transformers", "architecture": "VideoMAEModel", "config": size,
              "weights": "random initialisation (seed 0), for speed measurements only"}
    return HFVisionEncoder(name=f"config:{size}", model=model, family=family, preprocess=pre, n0=config.num_frames,
                           pooling=resolve_pooling(pooling, family, size), prefix_tokens=0,
                           device=torch.device(parse_device(device)), dtype=torch_dtype(dtype), source=source)
