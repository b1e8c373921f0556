"""Backgrounds of the shapes world: plain colours, scikit-image photos (files inside the installed wheel)
and, for the "real" render style, plain colours turned into a blurred photo texture tinted to that
colour (so the colour's name stays true)."""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import numpy as np

from vlgap.data.shapes.spec import PHOTO_BACKGROUNDS, PLAIN_BACKGROUNDS
from vlgap.errors import VlgapError

#: photos whose grey texture becomes a plain background's texture in the "real" style
TEXTURE_PHOTOS = ("brick", "grass", "coins", "moon", "camera", "coffee")


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
def background(name: str, h: int, w: int) -> np.ndarray:
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
            # clamped: rounding can put the exact-fit side a hair outside the image
            box = (max(0.0, left), max(0.0, top), min(float(iw), left + cw), min(float(ih), top + ch))
            im = im.resize((w, h), Image.BILINEAR, box=box)
            img = np.asarray(im, dtype=np.uint8).copy()
    img.setflags(write=False)
    return img


@lru_cache(maxsize=64)
def textured_background(name: str, h: int, w: int, texture: str) -> np.ndarray:
    """A plain background as a camera would see a real surface: the `texture` photo in grey, blurred,
    normalised to zero mean and unit SD, added to the plain colour with an SD of 16 grey levels, plus a
    soft diagonal light gradient, then shifted so that the mean colour is the plain colour even where
    0 or 255 clips the texture (white stays white, black black). Read-only, cached."""
    from PIL import Image, ImageFilter

    colour = np.asarray(PLAIN_BACKGROUNDS[name], np.float32)
    grey = Image.fromarray(background(texture, h, w)).convert("L")
    grey = grey.filter(ImageFilter.GaussianBlur(radius=max(0.6, 0.012 * min(h, w))))
    g = np.asarray(grey, np.float32)
    g = (g - g.mean()) / max(float(g.std()), 1e-3)
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    gradient = ((xx / max(w - 1, 1) + yy / max(h - 1, 1)) - 1.0) * 10.0  # +-10 grey levels corner to corner
    img = colour[None, None, :] + (16.0 * g + gradient)[..., None]
    for _ in range(3):  # near 0 or 255 clipping shifts the mean: move it back so the colour stays true
        img += colour - np.clip(img, 0, 255).reshape(-1, 3).mean(axis=0)
    img = np.clip(np.rint(img), 0, 255).astype(np.uint8)
    img.setflags(write=False)
    return img
