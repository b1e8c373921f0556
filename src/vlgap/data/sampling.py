"""Frame sampling as in Dynamic Reflections (sec. 3.4): n_f frames by uniform linear interpolation over
the whole video (nearest frame), split into n_f / n0 consecutive sub-clips of the encoder's native length."""
from __future__ import annotations

import numpy as np

from vlgap.errors import VlgapError


def frame_indices(num_frames: int, n_f: int) -> np.ndarray:
    """Indices of n_f frames spread uniformly from the first to the last frame (rounded to the nearest).
    n_f = 1 gives the first frame, the paper's "image on image" setting. n_f may exceed num_frames
    (frames then repeat, nearest-neighbour interpolation); extraction refuses such videos unless
    --allow-repeated-frames or --skip-bad (features.chunk_steps.VisionSteps.collect)."""
    if num_frames < 1:
        raise VlgapError(f"a video needs at least one frame, got {num_frames}")
    if n_f < 1:
        raise VlgapError(f"n_f must be >= 1, got {n_f}")
    if n_f == 1:
        return np.zeros(1, dtype=np.int64)
    return np.rint(np.linspace(0, num_frames - 1, n_f)).astype(np.int64)


def nearest_valid_n_f(n_f: int, n0: int) -> list[int]:
    lower = (n_f // n0) * n0
    upper = lower + n0
    return [v for v in (lower, upper) if v >= 1]


def subclips(indices: np.ndarray, n0: int) -> np.ndarray:
    """Split sampled indices into consecutive sub-clips of n0 frames -> [n_f // n0, n0]. When n_f <= n0
    the single clip holds all n_f frames (the encoder sees a shorter clip, as in the paper)."""
    n_f = len(indices)
    if n_f <= n0:
        return indices[None, :]
    if n_f % n0:
        raise VlgapError(
            f"n_f={n_f} exceeds the encoder's native clip length n0={n0} and is not a multiple of it; "
            f"nearest valid values: {nearest_valid_n_f(n_f, n0)}"
        )
    return indices.reshape(n_f // n0, n0)


def check_n_f(n_f: int, n0: int) -> None:
    if n_f < 1 or (n_f > n0 and n_f % n0):
        raise VlgapError(
            f"n_f={n_f} is not valid for an encoder with native clip length n0={n0}: use n_f <= {n0} or a "
            f"multiple of {n0}; nearest valid values: {nearest_valid_n_f(max(n_f, 1), n0)}"
        )


def join_captions(captions: tuple[str, ...] | list[str], n_c: int, item_id: str = "?") -> str:
    """The paper's caption aggregation: the first n_c captions concatenated into one string."""
    if n_c < 1:
        raise VlgapError(f"n_c must be >= 1, got {n_c}")
    if len(captions) < n_c:
        raise VlgapError(f"item {item_id!r} has {len(captions)} captions but n_c={n_c} were requested")
    parts = []
    for c in captions[:n_c]:
        c = c.strip()
        if not c:
            raise VlgapError(f"item {item_id!r} has an empty caption")
        parts.append(c if c[-1] in ".!?" else c + ".")
    return " ".join(parts)
