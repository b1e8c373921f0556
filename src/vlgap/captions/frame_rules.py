"""Which frames of a video the video caption scores (video CLIPScore, EMScore) embed, by name.

    all               every decoded frame, as the official EMScorer encodes a video (ShiYaya/emscore
                      utils.encode_video)
    int-linspace:N    N frames at int(linspace(0, frames - 1, N)), truncated: the VATEX-EVAL demo
                      (N = 10 there) sampling its cached per-frame features
    rint-linspace:N   N frames at rint(linspace(0, frames - 1, N)), nearest: the feature store's
                      sampler (vlgap.data.sampling.frame_indices), vlgap's rule before this one
A bare integer N is read as rint-linspace:N.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from vlgap.errors import VlgapError

RULES = ("all", "int-linspace", "rint-linspace")
HELP = "all (every frame, the official EMScorer) | int-linspace:N (the VATEX-EVAL demo, N = 10) | rint-linspace:N"


@dataclass(frozen=True)
class FrameRule:
    kind: str
    n: int | None = None

    @property
    def name(self) -> str:
        return self.kind if self.n is None else f"{self.kind}:{self.n}"

    def indices(self, num_frames: int) -> np.ndarray:
        if num_frames < 1:
            raise VlgapError(f"a video needs at least one frame, got {num_frames}")
        if self.kind == "all":
            return np.arange(num_frames, dtype=np.int64)
        grid = np.linspace(0, num_frames - 1, self.n)
        if self.kind == "int-linspace":
            return grid.astype(np.int64)  # int() of non-negative floats: truncation
        return np.rint(grid).astype(np.int64)


def parse_frame_rule(value) -> FrameRule:
    """A FrameRule from 'all', 'int-linspace:N', 'rint-linspace:N' or an integer N (rint-linspace:N)."""
    if isinstance(value, FrameRule):
        return value
    text = str(value).strip()
    if text == "all":
        return FrameRule("all")
    kind, sep, count = text.rpartition(":")
    if not sep:
        kind, count = "rint-linspace", text
    if kind in RULES[1:]:
        try:
            n = int(count)
        except ValueError:
            n = 0
        if n >= 1 and str(n) == count.strip():
            return FrameRule(kind, n)
    raise VlgapError(f"--frames {value!r} is not a frame rule: use {HELP}, with N >= 1")
