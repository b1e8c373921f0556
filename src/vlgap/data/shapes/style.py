"""Render styles of the shapes world. "synthetic" is the clean look the renderer always had. "real" is a
camera-like domain for the same scenes, so that a synthetic-to-real gap can be measured rather than
assumed: hand-held shake (the view window wanders smoothly inside a small margin), textured
backgrounds instead of plain colours, a lighting drift over the clip (brightness and colour
temperature) with vignetting, defocus plus horizontal motion blur, signal-dependent sensor noise and
JPEG compression of every frame. Every random choice comes from one generator seeded by
(style_seed, the spec), so a (spec, style_seed) pair always gives the same frames."""
from __future__ import annotations

import hashlib
import io
import json

import numpy as np

STYLES = ("synthetic", "real")
#: short phrases for a render style (the Style field of a six-part prompt schema)
STYLE_DESCRIPTIONS = {
    "synthetic": "clean synthetic 2D animation: flat colours, sharp edges, steady light, no noise",
    "real": "hand-held camera footage: slight shake, soft focus and motion blur, sensor noise, drifting "
            "light and colour, compression artefacts, textured backgrounds",
}
SHAKE_MARGIN = 0.06  # the "real" view window is this much smaller than the nominal one, room to shake in


def style_rng(spec_dict: dict, style_seed: int) -> np.random.Generator:
    """The one generator behind a styled rendering: seeded by style_seed and a hash of the spec."""
    digest = hashlib.sha256(json.dumps(spec_dict, sort_keys=True).encode()).digest()
    return np.random.default_rng([int(style_seed), int.from_bytes(digest[:8], "little")])


def shake_windows(windows: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Hand-held shake: each frame's window [x0, y0, side] shrinks by SHAKE_MARGIN about its centre and
    wanders smoothly (a few random low-frequency sinusoids plus a little per-frame jitter) inside the
    nominal window, so it never leaves the scene."""
    n = len(windows)
    t = (np.arange(n) + 0.5) / n
    out = windows.astype(np.float64).copy()
    side = out[:, 2] * (1.0 - SHAKE_MARGIN)
    room = (out[:, 2] - side) / 2  # how far the smaller window may move from the centre, each way
    for axis in (0, 1):
        amp = rng.uniform(0.3, 1.0, size=3)
        freq = rng.uniform(1.0, 4.0, size=3)
        phase = rng.uniform(0.0, 2 * np.pi, size=3)
        wave = (amp[:, None] * np.sin(2 * np.pi * freq[:, None] * t[None, :] + phase[:, None])).sum(axis=0)
        wave += rng.normal(0.0, 0.15, size=n)
        wave /= amp.sum() + 0.6  # |wave| < 1 with overwhelming probability; clip makes it certain
        out[:, axis] += room * (1.0 + np.clip(wave, -1.0, 1.0))
    out[:, 2] = side
    return out


def apply_real_style(frames: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Camera artefacts on rendered uint8 frames [T, H, W, 3]: lighting drift and vignette, defocus and
    motion blur, sensor noise, JPEG compression. Returns new uint8 frames."""
    from PIL import Image
    from scipy.ndimage import gaussian_filter

    n, h, w, _ = frames.shape
    f = frames.astype(np.float32)
    t = ((np.arange(n) + 0.5) / n - 0.5).astype(np.float32)
    gain = 1.0 + rng.uniform(0.15, 0.3) * rng.choice((-1.0, 1.0)) * t  # brightness drifts over the clip
    temp = rng.uniform(0.05, 0.1) * rng.choice((-1.0, 1.0)) * t  # warmer or cooler light over the clip
    f *= gain[:, None, None, None]
    f[..., 0] *= (1.0 + temp)[:, None, None]
    f[..., 2] *= (1.0 - temp)[:, None, None]
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    r2 = ((xx - (w - 1) / 2) / (w / 2)) ** 2 + ((yy - (h - 1) / 2) / (h / 2)) ** 2
    f *= (1.0 - 0.06 * (r2 - r2.mean()))[None, :, :, None]  # vignette: corners ~8 % darker, centre ~4 % brighter
    scale = min(h, w) / 128
    sy = rng.uniform(0.6, 1.1) * scale + 0.3  # defocus
    sx = sy + rng.uniform(0.3, 1.0) * scale  # plus horizontal motion blur
    f = gaussian_filter(f, sigma=(0.0, sy, sx, 0.0), mode="nearest")
    noise_sd = np.sqrt(9.0 + 0.08 * np.clip(f, 0.0, None))  # read noise + shot noise
    f += rng.standard_normal(f.shape, dtype=np.float32) * noise_sd
    out = np.clip(np.rint(f), 0, 255).astype(np.uint8)
    quality = int(rng.integers(25, 46))
    for i in range(n):
        buf = io.BytesIO()
        Image.fromarray(out[i]).save(buf, format="JPEG", quality=quality)
        buf.seek(0)
        with Image.open(buf) as im:
            out[i] = np.asarray(im.convert("RGB"))
    return out
