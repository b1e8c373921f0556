"""Native video models from transformers (VideoMAE and the like) as all-layer encoders on clips of n0 frames.

Input [B, n0, 3, h, w]; every hidden state (embeddings + each layer) pooled over tokens (mean, or CLS
for models that have one). Random-weight builds from configs ("config:videomae-large") exist to test
plumbing and measure speed without any download.
"""
from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import numpy as np
import torch

from vlgap.encoders._common import (IMAGENET_MEAN, IMAGENET_STD, dtype_name, pool_output, quiet_transformers,
                                    require, resolve_device, resolve_dtype, versions)
from vlgap.encoders.base import VisionEncoder
from vlgap.encoders.vision import DEFAULT_CROP_PCT, FramePreprocess
from vlgap.errors import VlgapError

#: VideoMAE sizes (the published ViT-S/B/L/H backbones), for random-weight builds
VIDEOMAE_SIZES = {
    "videomae-small": dict(hidden_size=384, num_hidden_layers=12, num_attention_heads=6, intermediate_size=1536),
    "videomae-base": dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072),
    "videomae-large": dict(hidden_size=1024, num_hidden_layers=24, num_attention_heads=16, intermediate_size=4096),
    "videomae-huge": dict(hidden_size=1280, num_hidden_layers=32, num_attention_heads=16, intermediate_size=5120),
}
_CLS_MODELS = {"timesformer", "vivit"}  # model types whose first token is a CLS token


class HFVideoEncoder(VisionEncoder):
    kind = "video"

    def __init__(self, *, name: str, model, preprocess: FramePreprocess, n0: int, pooling: str,
                 device: torch.device, dtype: torch.dtype, source: dict[str, Any]):
        self.name, self.model, self._pre = name, model, preprocess
        self.native_clip_len = int(n0)
        self.pooling, self.device, self.dtype, self.source = pooling, device, dtype, source
        self._lock = threading.Lock()
        model.eval().requires_grad_(False).to(device=device, dtype=dtype)
        with torch.inference_mode():
            s = preprocess.image_size
            probe = self.forward_layers(torch.zeros(1, self.native_clip_len, 3, s, s, device=device, dtype=dtype))
        self.layer_dims = [int(t.shape[1]) for t in probe]
        self.layer_names = ["embeddings"] + [f"hidden_states.{i}" for i in range(1, len(probe))]

    def preprocess(self, frames: np.ndarray) -> torch.Tensor:
        return self._pre(frames)

    @property
    def preprocessor(self):
        return self._pre

    def forward_layers(self, x: torch.Tensor) -> list[torch.Tensor]:
        if x.dim() != 5 or x.shape[1] != self.native_clip_len:
            raise VlgapError(f"{self.name}: expected clips [B, {self.native_clip_len}, 3, h, w], got {tuple(x.shape)}")
        with self._lock, torch.inference_mode():
            out = self.model(pixel_values=x, output_hidden_states=True, return_dict=True)
            prefix = 1 if self.model.config.model_type in _CLS_MODELS else 0
            return [pool_output(h, self.pooling, prefix_tokens=prefix) for h in out.hidden_states]

    def record(self) -> dict[str, Any]:
        return {
            "name": self.name, "modality": "vision", "kind": "video", "n0": self.native_clip_len, **self.source,
            "model_class": type(self.model).__name__, "model_type": self.model.config.model_type,
            "dtype": dtype_name(self.dtype), "device": self.device.type, "pooling": self.pooling,
            "pooling_detail": "CLS token" if self.pooling == "cls" else "mean over all space-time (patch) tokens",
            "preprocess": self._pre.record(), "layer_names": self.layer_names, "layer_dims": self.layer_dims,
            "n_parameters": int(sum(p.numel() for p in self.model.parameters())),
            "versions": versions(),
        }


def _pooling_for(model_type: str, pooling: str | None, name: str) -> str:
    has_cls = model_type in _CLS_MODELS
    allowed = ("cls", "mean") if has_cls else ("mean",)
    pooling = pooling or "mean"
    if pooling not in allowed:
        raise VlgapError(f"pooling {pooling!r} is not available for {name} ({model_type}); "
                         f"use one of {', '.join(allowed)}")
    return pooling


def _preprocessor_json(folder: Path) -> dict[str, Any]:
    try:
        return json.loads((folder / "preprocessor_config.json").read_text())
    except (OSError, ValueError):
        return {}


def load_hf_video(src: str, *, name: str | None = None, pooling: str | None = None, image_size: int | None = None,
                  device="cpu", dtype="float32", revision: str | None = None) -> HFVideoEncoder:
    """A transformers video model (hub id or folder) through AutoModel; n0 = config.num_frames."""
    require("transformers", "transformers", for_what="a transformers video encoder")
    from transformers import AutoConfig, AutoModel

    folder = Path(src).expanduser()
    where = str(folder.resolve()) if folder.is_dir() else src
    try:
        with quiet_transformers():
            config = AutoConfig.from_pretrained(where, revision=revision)
            model = AutoModel.from_pretrained(where, revision=revision, dtype=resolve_dtype(dtype))
    except (OSError, ValueError) as err:
        raise VlgapError(f"could not load video model {src!r}: {str(err).splitlines()[0]} "
                         "(hub ids need network access or a populated Hugging Face cache)") from None
    n0 = getattr(config, "num_frames", None)
    native = getattr(config, "image_size", 224)
    if not n0:
        raise VlgapError(f"{src!r} ({config.model_type}) has no num_frames in its config: not a clip video model")
    if image_size and int(image_size) != int(native):
        raise VlgapError(f"{src!r} was trained at image_size {native}; pretrained video models here run at that size")
    proc = _preprocessor_json(folder) if folder.is_dir() else {}
    crop = proc.get("crop_size") or {}
    crop_size = crop.get("height", native) if isinstance(crop, dict) else int(crop or native)
    shortest = (proc.get("size") or {}).get("shortest_edge") if isinstance(proc.get("size"), dict) else None
    crop_pct = crop_size / shortest if shortest else DEFAULT_CROP_PCT
    pre = FramePreprocess.make(int(native), mean=proc.get("image_mean", IMAGENET_MEAN),
                               std=proc.get("image_std", IMAGENET_STD), crop_pct=min(1.0, crop_pct))
    source: dict[str, Any] = {"source": where, "library": "transformers"}
    if folder.is_dir():
        from vlgap.encoders.text import weights_of_folder

        source.update(weights_of_folder(folder))
    elif getattr(config, "_commit_hash", None) or revision:
        source["revision"] = getattr(config, "_commit_hash", None) or revision
    return HFVideoEncoder(name=name or f"hf-video:{src}", model=model, preprocess=pre, n0=int(n0),
                          pooling=_pooling_for(config.model_type, pooling, src), device=resolve_device(device),
                          dtype=resolve_dtype(dtype), source=source)


def build_videomae_from_config(size: str = "videomae-base", *, pooling: str | None = None,
                               image_size: int | None = None, num_frames: int = 16, device="cpu",
                               dtype="float32") -> HFVideoEncoder:
    """A VideoMAE with random weights from its published size (no download): for speed and plumbing."""
    require("transformers", "transformers", for_what="a VideoMAE encoder")
    from transformers import VideoMAEConfig, VideoMAEModel

    if size not in VIDEOMAE_SIZES:
        raise VlgapError(f"unknown VideoMAE size {size!r}; use one of {', '.join(VIDEOMAE_SIZES)}")
    config = VideoMAEConfig(image_size=int(image_size or 224), num_frames=int(num_frames), **VIDEOMAE_SIZES[size])
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = VideoMAEModel(config)
    pre = FramePreprocess.make(config.image_size)
    source = {"library": "transformers", "architecture": "VideoMAEModel", "config": size,
              "weights": "random initialisation (seed 0), for speed measurements only"}
    return HFVideoEncoder(name=f"config:{size}", model=model, preprocess=pre, n0=config.num_frames,
                          pooling=_pooling_for("videomae", pooling, size), device=resolve_device(device),
                          dtype=resolve_dtype(dtype), source=source)
