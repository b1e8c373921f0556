"""What the official caption-score code does to a picture and a caption before CLIP sees them.

jmhessel/clipscore, aimagelab/pacscore and ShiYaya/emscore all feed CLIP through openai's `clip`
package; these are its two preparations, written against torchvision and ftfy:

    openai_transform   PIL bicubic resize of the short side to n_px, torchvision CenterCrop (which
                       rounds the offset), then RGB, ToTensor and Normalize. The picture is resized in
                       its own mode: a palette picture is resized (by Pillow, nearest) before it
                       becomes RGB.
    openai_clean       ftfy.fix_text, html.unescape twice, strip. The transformers CLIP tokenizer
                       already does the rest of openai's cleaning (whitespace runs to one space,
                       lower case, NFC) and the same byte-level BPE, so only this difference is added.

transformers' CLIPImageProcessor crops at int((W - w) / 2), which shifts the picture by one pixel
whenever the resized long side minus the crop is 3 mod 4, and converts to RGB before resizing.
"""
from __future__ import annotations

import html
from typing import Any

OPENAI_MEAN = (0.48145466, 0.4578275, 0.40821073)
OPENAI_STD = (0.26862954, 0.26130258, 0.27577711)


def openai_clean(text: str) -> str:
    """openai clip's basic_clean: ftfy.fix_text, html.unescape twice, strip."""
    import ftfy

    return html.unescape(html.unescape(ftfy.fix_text(text))).strip()


def openai_transform(n_px: int, mean=OPENAI_MEAN, std=OPENAI_STD):
    """openai clip's preprocess for an n_px model (clip.clip._transform): a callable PIL image -> tensor."""
    from torchvision.transforms import CenterCrop, Compose, InterpolationMode, Normalize, Resize, ToTensor

    return Compose([Resize(n_px, interpolation=InterpolationMode.BICUBIC), CenterCrop(n_px), _to_rgb, ToTensor(),
                    Normalize(mean, std)])


def _to_rgb(image: Any):
    return image.convert("RGB")
