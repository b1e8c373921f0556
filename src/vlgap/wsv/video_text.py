"""WSV's video-text models, the polisher's frozen judge: the latent tower's text side (MiniLM captions) or
a CLIP model over VAE-decoded frames (CLIP4Clip mean pooling), chosen by `--video-text`.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from vlgap.errors import VlgapError
from vlgap.runtime import torch_dtype
from vlgap.wsv.sources import _prefix, resolve_source

VIDEO_TEXT_SPECS = "latent-tower | clip:<hub id or folder>"


def minilm_embeddings(captions: Sequence[str], batch_size: int = 128) -> np.ndarray:
    """Frozen MiniLM (bundled) sentence embeddings, mean-pooled last layer, L2-normalised."""
    import torch

    from vlgap.encoders.registry import get_encoder

    enc = get_encoder("minilm")
    out = []
    with torch.inference_mode():
        for i in range(0, len(captions), batch_size):
            out.append(enc.encode(list(captions[i:i + batch_size]))[-1])
    e = torch.cat(out).numpy().astype(np.float32)
    return e / np.linalg.norm(e, axis=1, keepdims=True)


class LatentTower:
    """Offline default: a video tower over latents trained first (stage `head`, inside the model file)
    against frozen MiniLM caption embeddings, then frozen."""

    kind = "latent-tower"
    spec = "latent-tower"

    def record(self) -> dict[str, Any]:
        return {"spec": self.spec, "text": "minilm (bundled all-MiniLM-L6-v2, mean-pooled last layer)",
                "video": "VideoHead trained in stage 'head' (saved in the model file)"}

    def embed_texts(self, captions: Sequence[str]) -> np.ndarray:
        return minilm_embeddings(list(captions))


class ClipVideoText:
    """CLIP4Clip's mean-pooling variant over a latent: decode it with the VAE, embed every frame with
    CLIP's vision tower (CLIP's own preprocessing, done in torch so gradients reach the latent), L2-normalise
    each frame, mean over frames, L2-normalise; the caption side is CLIP's text embedding, L2-normalised."""

    kind = "clip"

    def __init__(self, src: str, encoder, *, device: str = "cpu", dtype: str = "float32"):
        from vlgap.captions.clip_model import load_clip

        folder, rec = resolve_source(src, "--video-text clip:")
        if not hasattr(encoder, "decode"):
            raise VlgapError(f"--video-text clip:{src} decodes the polished latent into frames: it needs a video VAE "
                             "as the latent space (--latents vae:<id or folder>, or a diffusers generator), not "
                             f"{encoder.record().get('encoder')}")
        self.clip = load_clip(f"hf:{folder}", device=device)
        self.clip.model.to(dtype=torch_dtype(dtype))
        self.encoder, self.device, self.dtype, self.spec = encoder, device, dtype, f"clip:{src}"
        ip = self.clip.processor.image_processor
        crop = getattr(ip, "crop_size", None) or {}
        size = getattr(ip, "size", None) or {}
        self.crop = (int(crop.get("height", 224)), int(crop.get("width", 224))) if crop else None
        self.short_edge = int(size.get("shortest_edge", 0) or 0) or None
        if self.short_edge is None and size.get("height"):
            self.resize_to = (int(size["height"]), int(size["width"]))
        else:
            self.resize_to = None
        self.mean = tuple(float(x) for x in ip.image_mean)
        self.std = tuple(float(x) for x in ip.image_std)
        self._record = {"spec": self.spec, **rec, "model_type": self.clip.source.get("model_type"),
                        "pooling": "CLIP4Clip meanP: per-frame L2-normalised image embeddings, mean over frames, "
                                   "L2-normalised", "dtype": dtype}

    def record(self) -> dict[str, Any]:
        return dict(self._record)

    def embed_texts(self, captions: Sequence[str]) -> np.ndarray:
        e, _ = self.clip.embed_texts(list(captions))
        e = np.asarray(e, np.float32)
        return e / np.linalg.norm(e, axis=1, keepdims=True)

    def pixels(self, frames):
        """[N, 3, H, W] in [-1, 1] -> CLIP pixel_values: resize (shortest edge, bicubic, antialiased),
        centre crop, normalise with the processor's mean and std."""
        import torch
        import torch.nn.functional as F

        x = (frames.float() + 1) / 2
        h, w = x.shape[-2:]
        if self.short_edge is not None:
            s = self.short_edge / min(h, w)
            new = (max(1, round(h * s)), max(1, round(w * s)))
        else:
            new = self.resize_to or (h, w)
        if tuple(new) != (h, w):
            x = F.interpolate(x, size=new, mode="bicubic", align_corners=False, antialias=True)
        if self.crop is not None:
            ch, cw = self.crop
            top, left = max(0, (x.shape[-2] - ch) // 2), max(0, (x.shape[-1] - cw) // 2)
            x = x[..., top:top + ch, left:left + cw]
        mean = torch.tensor(self.mean, device=x.device).view(1, 3, 1, 1)
        std = torch.tensor(self.std, device=x.device).view(1, 3, 1, 1)
        return (x - mean) / std

    def embed_videos(self, video):
        """[B, 3, T, H, W] in [-1, 1] -> [B, D] unit vectors (differentiable)."""
        import torch.nn.functional as F

        B, _, T = video.shape[:3]
        frames = video.transpose(1, 2).reshape(B * T, *video.shape[1:2], *video.shape[3:])
        px = self.pixels(frames).to(self.clip.model.dtype)
        out = self.clip.model.get_image_features(pixel_values=px)
        feats = out if hasattr(out, "detach") else out.pooler_output
        feats = F.normalize(feats.float(), dim=-1).view(B, T, -1).mean(1)
        return F.normalize(feats, dim=-1)

    def embed_latents(self, z):
        """Polished latents [B, C, F, H, W] -> [B, D]: decoded by the VAE, then embed_videos."""
        return self.embed_videos(self.encoder.decode(z))


def build_video_text(spec: str, encoder, *, device: str = "cpu", dtype: str = "float32"):
    head, rest = _prefix(spec, VIDEO_TEXT_SPECS, "--video-text")
    if spec == "latent-tower":
        return LatentTower()
    if head == "clip":
        return ClipVideoText(rest, encoder, device=device, dtype=dtype)
    raise VlgapError(f"--video-text {spec!r} is not valid; valid: {VIDEO_TEXT_SPECS}")
