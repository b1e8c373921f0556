"""Text-to-video: `generate(captions, seed) -> videos` (or latents), offline or through diffusers.

`ShapesT2V` (offline default): the caption reader turns each caption into a scene spec (open facts
sampled from caption i's own stream (seed, i), as a T2V model samples what a prompt leaves open) and the
shapes renderer draws it in a render style ("synthetic" by default). `DiffusersT2V`: any diffusers
text-to-video pipeline that exposes a VAE (CogVideoX, Wan...) called with output_type="latent", so its
own latents are used directly, as in the paper.
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from vlgap.errors import VlgapError


def render_styled(spec, n_frames: int, size: int, style: str = "synthetic", style_seed: int = 0) -> np.ndarray:
    """The shapes renderer in a render style; 'synthetic' works with any version of the renderer."""
    from vlgap.data import shapes

    params = inspect.signature(shapes.render).parameters
    if "style" in params:
        return shapes.render(spec, n_frames=n_frames, size=size, style=style, style_seed=style_seed)
    if style != "synthetic":
        raise VlgapError(f"render style {style!r} needs the shapes renderer with styles (STYLES); this one only "
                         "draws 'synthetic'")
    return shapes.render(spec, n_frames, size)


def available_styles() -> tuple[str, ...]:
    from vlgap.data import shapes

    return tuple(getattr(shapes, "STYLES", ("synthetic",)))


@dataclass
class ShapesT2V:
    """Offline text-to-video for the shapes world."""

    style: str = "synthetic"
    n_frames: int = 16
    size: int = 64

    @property
    def name(self) -> str:
        return f"shapes-{self.style}"

    def record(self) -> dict[str, Any]:
        from vlgap.wsv.reader import READER_VERSION

        return {"generator": "shapes", "style": self.style, "n_frames": self.n_frames, "size": self.size,
                "reader": "vlgap.wsv.reader.read_caption", "reader_version": READER_VERSION}

    def read(self, captions: Sequence[str], seed: int = 0):
        from vlgap.wsv.reader import read_caption

        if not captions:
            raise VlgapError("generate() got no captions")
        return [read_caption(c, np.random.default_rng([seed, i])) for i, c in enumerate(captions)]

    def generate(self, captions: Sequence[str], seed: int = 0) -> list[np.ndarray]:
        readings = self.read(captions, seed)
        return [render_styled(r.spec, self.n_frames, self.size, self.style, style_seed=seed * 100003 + i)
                for i, r in enumerate(readings)]


class DiffusersT2V:
    """A diffusers text-to-video pipeline with a `.vae`: returns the pipeline's latents
    (output_type="latent"), shaped [N, C, F, H, W]."""

    def __init__(self, pipe, call_kwargs: dict[str, Any] | None = None):
        if not hasattr(pipe, "vae"):
            raise VlgapError(f"{type(pipe).__name__} exposes no .vae; the WSV adapter needs a latent-space T2V "
                             "pipeline such as CogVideoXPipeline or WanPipeline")
        self.pipe, self.call_kwargs = pipe, dict(call_kwargs or {})

    @property
    def name(self) -> str:
        return f"diffusers-{type(self.pipe).__name__}"

    def record(self) -> dict[str, Any]:
        return {"generator": "diffusers", "pipeline": type(self.pipe).__name__, "call_kwargs": self.call_kwargs}

    def generate_latents(self, captions: Sequence[str], seed: int = 0, first_index: int = 0) -> np.ndarray:
        """Latents [N, C, F, H, W] (float32); caption i of the corpus (first_index + its position here)
        gets its own CPU generator seeded seed * 100003 + i, so its latent ignores its batch and device."""
        import torch

        out = []
        for j, c in enumerate(captions):
            g = torch.Generator().manual_seed(seed * 100003 + first_index + j)
            res = self.pipe(prompt=c, generator=g, output_type="latent", **self.call_kwargs)
            z = getattr(res, "frames", None)
            if z is None:
                z = res[0] if isinstance(res, (tuple, list)) else res
            z = torch.as_tensor(z)
            if z.ndim == 5 and z.shape[0] == 1:
                z = z[0]
            if z.ndim != 4:
                raise VlgapError(f"{self.name} returned latents of shape {list(z.shape)}; expected [C, F, H, W]")
            # CogVideoX returns [F, C, H, W] latents (Wan [C, F, H, W]); the prompter wants channels first
            from vlgap.wsv.latents import latent_channels

            channels = latent_channels(self.pipe.vae)
            if z.shape[0] != channels and z.shape[1] == channels:
                z = z.transpose(0, 1)
            out.append(z.float().cpu().numpy())
        return np.stack(out)
