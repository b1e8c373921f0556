"""The shapes renderer: numpy masks for each shape, plain or scikit-image photo backgrounds, and
`render(spec)` -> uint8 [T, H, W, 3], deterministic."""
from __future__ import annotations

import math
from functools import lru_cache
from pathlib import Path
from typing import Sequence

import numpy as np

from vlgap.data.shapes.spec import (COLOURS, DIRECTIONS, GROW_FACTOR, MOVE_DISTANCE, PHOTO_BACKGROUNDS,
                                    PLAIN_BACKGROUNDS, SHAPES, SIZES, SceneSpec, spec_from_dict)
from vlgap.errors import VlgapError


def _shape_mask(shape: str, u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Inside-test on coordinates normalised by the half-size (u right, v down); shapes fit |u|,|v| <= 1."""
    au, av_ = np.abs(u), np.abs(v)
    if shape == "circle":
        return u * u + v * v <= 1.0
    if shape == "square":
        return np.maximum(au, av_) <= 0.85
    if shape == "diamond":
        return au + av_ <= 1.0
    if shape == "triangle":
        return (v <= 0.8) & (au <= (v + 1.0) / 1.8)
    if shape == "hexagon":
        return (av_ <= 0.866) & (0.866 * au + 0.5 * av_ <= 0.866)
    if shape == "cross":
        return ((au <= 0.3) & (av_ <= 0.95)) | ((av_ <= 0.3) & (au <= 0.95))
    if shape == "heart":
        x, y = u * 1.15, -v * 1.15 + 0.15
        q = x * x + y * y - 1.0
        return q * q * q - x * x * y * y * y <= 0.0
    if shape == "star":
        n, inner = 5, 0.45
        rho = np.hypot(u, v)
        sector = 2 * np.pi / n
        beta = np.mod(np.arctan2(v, u) + np.pi / 2, sector)  # 0 at an outer point, the top one is up
        beta = np.minimum(beta, sector - beta)
        # edge from the outer vertex (1, 0) to the inner vertex at angle pi/n, in sector coordinates
        ix, iy = inner * math.cos(np.pi / n), inner * math.sin(np.pi / n)
        nx, ny = iy, 1.0 - ix  # normal of the edge line
        edge = nx / (nx * np.cos(beta) + ny * np.sin(beta))  # distance to the edge along the ray
        return rho <= edge
    raise VlgapError(f"unknown shape {shape!r}; valid: {list(SHAPES)}")


def parse_frame_size(size: int | Sequence[int]) -> tuple[int, int]:
    """(height, width) from an int or a pair; both even (yuv420p) and at least 16."""
    h, w = (size, size) if isinstance(size, (int, np.integer)) else tuple(size)
    h, w = int(h), int(w)
    if h < 16 or w < 16 or h % 2 or w % 2:
        raise VlgapError(f"frame size must be even and at least 16 pixels per side (yuv420p), got {h}x{w}")
    return h, w


def _skimage_data_dir() -> Path:
    import importlib.util

    spec = importlib.util.find_spec("skimage")
    if spec is None or not spec.submodule_search_locations:
        raise VlgapError("photo backgrounds need scikit-image (pip install scikit-image)")
    return Path(spec.submodule_search_locations[0]) / "data"


def photo_path(name: str) -> Path:
    """Local file of a scikit-image photo background; a clear error if it is not installed."""
    if name not in PHOTO_BACKGROUNDS:
        raise VlgapError(f"unknown photo background {name!r}; valid: {sorted(PHOTO_BACKGROUNDS)}")
    path = _skimage_data_dir() / PHOTO_BACKGROUNDS[name][0]
    if not path.is_file():
        raise VlgapError(f"photo background {name!r}: {path} is missing from the installed scikit-image")
    return path


@lru_cache(maxsize=64)
def _background(name: str, h: int, w: int) -> np.ndarray:
    """The background image, centre-cropped to the frame's aspect ratio and resized; read-only, cached."""
    if name in PLAIN_BACKGROUNDS:
        img = np.empty((h, w, 3), np.uint8)
        img[:] = PLAIN_BACKGROUNDS[name]
    else:
        from PIL import Image

        with Image.open(photo_path(name)) as im:
            if im.mode in ("RGBA", "LA", "P"):
                im = im.convert("RGBA")
                canvas = Image.new("RGBA", im.size, (255, 255, 255, 255))
                im = Image.alpha_composite(canvas, im)
            im = im.convert("RGB")
            iw, ih = im.size
            scale = max(w / iw, h / ih)
            cw, ch = w / scale, h / scale
            left, top = (iw - cw) / 2, (ih - ch) / 2
            im = im.resize((w, h), Image.BILINEAR, box=(left, top, left + cw, top + ch))
            img = np.asarray(im, dtype=np.uint8).copy()
    img.setflags(write=False)
    return img


def _timeline(spec: SceneSpec, t: np.ndarray):
    """Per object, arrays over frame times: centre x, y (fractions), scale, alpha, rgb colour."""
    n_obj, n_t = len(spec.objects), len(t)
    x = np.array([[o.x] * n_t for o in spec.objects], float)
    y = np.array([[o.y] * n_t for o in spec.objects], float)
    scale = np.ones((n_obj, n_t))
    rgb = np.array([[COLOURS[o.colour]] * n_t for o in spec.objects], float)
    alpha = np.ones((n_obj, n_t))
    for i in spec.time_order():
        e = spec.events[i]
        p = np.clip((t - e.start) / (e.end - e.start), 0.0, 1.0)
        k = e.obj
        if e.kind == "appear":
            alpha[k] *= p
        elif e.kind == "disappear":
            alpha[k] *= 1.0 - p
        elif e.kind == "move":
            dx, dy = DIRECTIONS[e.direction]
            x[k] += dx * MOVE_DISTANCE * p
            y[k] += dy * MOVE_DISTANCE * p
        elif e.kind in ("grow", "shrink"):
            scale[k] *= (GROW_FACTOR if e.kind == "grow" else 1 / GROW_FACTOR) ** p
        elif e.kind == "recolor":
            target = np.array(COLOURS[e.colour], float)
            rgb[k] = rgb[k] * (1 - p[:, None]) + target * p[:, None]
    return x, y, scale, alpha, rgb


def render(spec: SceneSpec | dict, n_frames: int = 32, size: int | Sequence[int] = 128) -> np.ndarray:
    """Draw a scene: uint8 array [n_frames, H, W, 3]. Deterministic; frame f shows time (f + 0.5) / n_frames.
    Appear/disappear fade, moves and size changes interpolate linearly within the event's time span."""
    if isinstance(spec, dict):
        spec = spec_from_dict(spec)
    if n_frames < 1:
        raise VlgapError(f"n_frames must be at least 1, got {n_frames}")
    h, w = parse_frame_size(size)
    frames = np.empty((n_frames, h, w, 3), np.uint8)
    frames[:] = _background(spec.background, h, w)
    t = (np.arange(n_frames) + 0.5) / n_frames
    x, y, scale, alpha, rgb = _timeline(spec, t)
    outline = spec.background in PHOTO_BACKGROUNDS
    side = min(h, w)
    for k, o in enumerate(spec.objects):
        base_r = SIZES[o.size] * side
        for f in range(n_frames):
            a = alpha[k, f]
            if a <= 0.0:
                continue
            r = base_r * scale[k, f]
            cx, cy = x[k, f] * w, y[k, f] * h
            pad = r + max(1.5, 0.12 * r) + 1
            x0, x1 = max(0, int(cx - pad)), min(w, int(math.ceil(cx + pad)))
            y0, y1 = max(0, int(cy - pad)), min(h, int(math.ceil(cy + pad)))
            if x0 >= x1 or y0 >= y1:
                continue
            u = (np.arange(x0, x1) + 0.5 - cx)[None, :]
            v = (np.arange(y0, y1) + 0.5 - cy)[:, None]
            win = frames[f, y0:y1, x0:x1].astype(np.float32)
            colour = rgb[k, f]
            layers = []
            if outline:
                ro = r + max(1.5, 0.12 * r)
                lum = 0.299 * colour[0] + 0.587 * colour[1] + 0.114 * colour[2]
                layers.append((_shape_mask(o.shape, u / ro, v / ro), (0.0, 0.0, 0.0) if lum > 90 else (255.0,) * 3))
            layers.append((_shape_mask(o.shape, u / r, v / r), colour))
            for mask, c in layers:
                m = mask.astype(np.float32)[..., None] * a
                win = win * (1.0 - m) + np.asarray(c, np.float32) * m
            frames[f, y0:y1, x0:x1] = np.clip(np.rint(win), 0, 255).astype(np.uint8)
    return frames

