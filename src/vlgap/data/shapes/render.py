"""The shapes renderer: numpy masks for each shape drawn over a background, seen through the scene's
camera (a view window that pans or zooms over the clip) in a render style (`style.STYLES`):
`render(spec)` -> uint8 [T, H, W, 3], deterministic."""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from vlgap.data.shapes.backgrounds import TEXTURE_PHOTOS, background, photo_path, textured_background
from vlgap.data.shapes.spec import (CAMERAS, COLOURS, DIRECTIONS, GROW_FACTOR, MOVE_DISTANCE, PHOTO_BACKGROUNDS,
                                    PLAIN_BACKGROUNDS, SHAPES, SIZES, SceneSpec, spec_from_dict)
from vlgap.data.shapes.style import STYLES, apply_real_style, shake_windows, style_rng
from vlgap.errors import VlgapError

__all__ = ["PAN_FRACTION", "ZOOM_FACTOR", "camera_windows", "parse_frame_size", "photo_path", "render"]

PAN_FRACTION = 0.2  # a pan shows a window 1 - PAN_FRACTION wide that travels PAN_FRACTION of the scene
ZOOM_FACTOR = 1.5  # a zoom scales the window side between 1 and 1 / ZOOM_FACTOR about the centre


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


def camera_windows(camera: str, n_frames: int) -> np.ndarray:
    """[n_frames, 3] view window per frame: x0, y0 (top-left corner) and side, as fractions of the scene.
    "pan left": the window (1 - PAN_FRACTION wide) moves from the right of the scene to the left, so the
    content drifts right in the frame; "zoom in": the side shrinks from 1 to 1 / ZOOM_FACTOR about the
    centre, so the content grows. "static" is the whole scene in every frame."""
    if camera not in CAMERAS:
        raise VlgapError(f"unknown camera {camera!r}; valid: {list(CAMERAS)}")
    t = (np.arange(n_frames) + 0.5) / n_frames
    out = np.zeros((n_frames, 3))
    out[:, 2] = 1.0
    if camera.startswith("pan"):
        out[:, 2] = 1.0 - PAN_FRACTION
        out[:, 1] = PAN_FRACTION / 2
        out[:, 0] = PAN_FRACTION * ((1.0 - t) if camera == "pan left" else t)
    elif camera.startswith("zoom"):
        out[:, 2] = ZOOM_FACTOR ** -(t if camera == "zoom in" else 1.0 - t)
        out[:, 0] = out[:, 1] = (1.0 - out[:, 2]) / 2
    return out


def _fill_backgrounds(frames: np.ndarray, name: str, windows: np.ndarray, textured: str | None) -> None:
    """Each frame's background: the window of a background image rendered at the resolution the smallest
    window needs, resampled bilinearly (Pillow) to the frame size."""
    from PIL import Image

    _, h, w, _ = frames.shape
    if textured is None and name in PLAIN_BACKGROUNDS:
        frames[:] = PLAIN_BACKGROUNDS[name]
        return
    smallest = float(windows[:, 2].min())
    bh, bw = int(math.ceil(h / smallest)), int(math.ceil(w / smallest))
    base = textured_background(name, bh, bw, textured) if textured else background(name, bh, bw)
    image = Image.fromarray(base)
    for f, (x0, y0, s) in enumerate(windows):
        box = (x0 * bw, y0 * bh, (x0 + s) * bw, (y0 + s) * bh)
        frames[f] = np.asarray(image.resize((w, h), Image.BILINEAR, box=box))


def render(spec: SceneSpec | dict, n_frames: int = 32, size: int | Sequence[int] = 128, style: str = "synthetic",
           style_seed: int = 0) -> np.ndarray:
    """Draw a scene: uint8 array [n_frames, H, W, 3]. Deterministic given (spec, style_seed); frame f shows
    time (f + 0.5) / n_frames. Appear/disappear fade, moves and size changes interpolate linearly within
    the event's time span; the camera's window (`camera_windows`) maps the scene to the frame. style:
    "synthetic" (clean) or "real" (camera-like, see vlgap.data.shapes.style)."""
    if isinstance(spec, dict):
        spec = spec_from_dict(spec)
    if n_frames < 1:
        raise VlgapError(f"n_frames must be at least 1, got {n_frames}")
    if style not in STYLES:
        raise VlgapError(f"unknown render style {style!r}; valid: {list(STYLES)}")
    h, w = parse_frame_size(size)
    windows = camera_windows(spec.camera, n_frames)
    rng = None
    textured = None
    if style == "real":
        rng = style_rng(spec.to_dict(), style_seed)
        windows = shake_windows(windows, rng)
        if spec.background in PLAIN_BACKGROUNDS:
            textured = TEXTURE_PHOTOS[int(rng.integers(len(TEXTURE_PHOTOS)))]
    frames = np.empty((n_frames, h, w, 3), np.uint8)
    if style == "synthetic" and spec.camera == "static":
        frames[:] = background(spec.background, h, w)
    else:
        _fill_backgrounds(frames, spec.background, windows, textured)
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
            wx, wy, ws = windows[f]  # static: 0, 0, 1, which leaves every value below exactly as before
            r = base_r * scale[k, f] / ws
            cx, cy = (x[k, f] - wx) / ws * w, (y[k, f] - wy) / ws * h
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
    if style == "real":
        frames = apply_real_style(frames, rng)
    return frames

