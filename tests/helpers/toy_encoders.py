"""Deterministic stand-in encoders for fast orchestration tests (the real ones are tested elsewhere)."""
from __future__ import annotations

import time

import numpy as np
import torch

from vlgap.encoders.base import TextEncoder, VisionEncoder


class ToyVision(VisionEncoder):
    """Three 'layers': mean colour, a fixed random projection of a 4x4 thumbnail, its tanh."""

    def __init__(self, kind="image", n0=1, delay=0.0):
        self.name, self.kind, self.native_clip_len, self.delay = "toy-vision", kind, n0, delay
        self.layer_names = ["mean_rgb", "proj", "tanh"]
        self.device, self.dtype = torch.device("cpu"), torch.float32
        g = torch.Generator().manual_seed(0)
        self.w = torch.randn(48 * (n0 if kind == "video" else 1), 8, generator=g, dtype=torch.float64)

    def record(self):
        return {"name": self.name, "kind": self.kind, "n0": self.native_clip_len}

    def preprocess(self, frames: np.ndarray) -> torch.Tensor:
        x = torch.as_tensor(frames).permute(0, 3, 1, 2).float() / 255.0
        return torch.nn.functional.interpolate(x, size=(4, 4), mode="area")

    def forward_layers(self, x):
        if self.delay:
            time.sleep(self.delay)
        flat = x.reshape(x.shape[0], -1).double()
        mean = x.reshape(x.shape[0], -1, 3, 16).mean(dim=(1, 3)) if x.dim() == 5 else x.mean(dim=(2, 3))
        proj = flat @ self.w
        return [mean.float(), proj.float(), torch.tanh(proj).float()]


class ToyText(TextEncoder):
    """Bag of hashed character trigrams, two 'layers'."""

    def __init__(self):
        self.name, self.layer_names = "toy-text", ["bag", "sqrt"]
        self.device, self.dtype = torch.device("cpu"), torch.float32

    def record(self):
        return {"name": self.name, "pooling": "mean"}

    def encode(self, texts):
        out = torch.zeros(len(texts), 64)
        for i, t in enumerate(texts):
            for j in range(len(t) - 2):
                out[i, sum(map(ord, t[j:j + 3])) % 64] += 1
        return [out, out.sqrt()]
