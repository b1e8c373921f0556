"""Frame sampling as in Dynamic Reflections (sec. 3.4): n_f frames by uniform linear interpolation over
the whole video (nearest frame), split into n_f / n0 consecutive sub-clips of the encoder's native length.
Controls beyond the paper: other frame-sampling strategies (`sample_frames`: random, stride:S,
keyframes) and random caption draws (`draw_captions`) instead of the first n_c captions."""
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


# -- caption draws (issue 22, item 1) ----------------------------------------------------------------

def _item_rng(*parts: object) -> np.random.Generator:
    import hashlib

    text = "|".join(map(str, parts))
    return np.random.default_rng(int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little"))


def caption_draw_indices(n_available: int, n_c: int, item_id: str, seed: int, draw: int) -> np.ndarray:
    """Which of an item's captions draw `draw` uses: n_c of them at random (seeded by the item's id,
    the seed and the draw number), kept in their original order. Draws are nested across n_c (the n_c=2
    draw holds the n_c=1 one), as the paper's first-n_c captions are."""
    if n_c > n_available:
        raise VlgapError(f"item {item_id!r} has {n_available} captions but n_c={n_c} were requested")
    perm = _item_rng("caption-draw", item_id, int(seed), int(draw)).permutation(n_available)
    return np.sort(perm[:n_c])


def draw_captions(captions: tuple[str, ...] | list[str], n_c: int, item_id: str = "?",
                  draw: tuple[int, int] | None = None) -> str:
    """The text of n_c captions: the first n_c (draw=None, the paper's rule, `join_captions`) or the
    random draw `draw` = (seed, draw number) of `caption_draw_indices`, joined the same way."""
    if draw is None:
        return join_captions(captions, n_c, item_id)
    if n_c < 1:
        raise VlgapError(f"n_c must be >= 1, got {n_c}")
    idx = caption_draw_indices(len(captions), n_c, item_id, *draw)
    return join_captions([captions[i] for i in idx], n_c, item_id)


# -- frame-sampling strategies (issue 22, item 2) ----------------------------------------------------

FRAME_SAMPLINGS = ("uniform", "random", "stride:S", "keyframes")


def parse_frame_sampling(text: str | None) -> str:
    """The canonical spelling of a frame-sampling strategy: uniform (the paper) | random | stride:S
    (S >= 1 frames apart) | keyframes; a one-line VlgapError for anything else."""
    s = "uniform" if text is None else str(text).strip().lower()
    if s in ("uniform", "random", "keyframes"):
        return s
    if s.startswith("stride:"):
        try:
            step = int(s.split(":", 1)[1])
        except ValueError:
            step = 0
        if step >= 1:
            return f"stride:{step}"
    raise VlgapError(f"frame sampling {text!r} is not valid: use one of uniform | random | stride:S (S an integer "
                     ">= 1, e.g. stride:4) | keyframes")


def parse_frame_samplings(text: str | list[str] | tuple[str, ...] | None) -> list[str]:
    """A comma-separated list (or a list) of strategies, canonical, without repeats; default ["uniform"]."""
    parts = ([p for p in str(text).split(",")] if isinstance(text, str) or text is None else list(text))
    out = list(dict.fromkeys(parse_frame_sampling(p) for p in parts if p is None or str(p).strip()))
    return out or ["uniform"]


def strided_indices(num_frames: int, n_f: int, step: int, item_id: str = "?") -> np.ndarray:
    """n_f frames `step` apart, the run centred in the video. A run longer than the video is refused
    (it would need frames that do not exist) with the longest stride that fits."""
    span = (n_f - 1) * step + 1
    if span > num_frames:
        fits = (num_frames - 1) // (n_f - 1) if n_f > 1 else step
        raise VlgapError(f"item {item_id!r}: stride:{step} with n_f={n_f} spans {span} frames but its video has "
                         f"{num_frames}; use stride:{max(fits, 1)} or less, or fewer frames")
    start = (num_frames - span) // 2
    return start + step * np.arange(n_f, dtype=np.int64)


def random_indices(num_frames: int, n_f: int, item_id: str) -> np.ndarray:
    """n_f distinct frames at random (seeded by the item's id, nested across n_f), in time order. More
    frames than the video holds: every frame, then uniform repeats (the repeated-frames rule applies)."""
    if n_f > num_frames:
        return frame_indices(num_frames, n_f)
    perm = _item_rng("frame-sampling", item_id).permutation(num_frames)
    return np.sort(perm[:n_f]).astype(np.int64)


def scene_change_scores(frames: np.ndarray) -> np.ndarray:
    """Per frame, the mean absolute change from the previous frame (grey levels 0-255); frame 0 gets
    +inf (a shot always starts there)."""
    grey = np.asarray(frames, dtype=np.float32)
    if grey.ndim == 4:
        grey = grey.mean(axis=3)
    change = np.abs(np.diff(grey, axis=0)).reshape(len(grey) - 1, -1).mean(axis=1) if len(grey) > 1 else np.zeros(0)
    return np.concatenate([[np.inf], change])


def keyframe_indices(num_frames: int, n_f: int, keyframes: np.ndarray | list[int],
                     scene_change: np.ndarray | None) -> tuple[np.ndarray, str]:
    """n_f frames from the container's key frames (spread uniformly over them when there are more);
    when it has fewer than n_f, the key frames plus the frames of largest scene-change score
    (`scene_change_scores` of the decoded frames), in time order. Returns (indices, source)."""
    keys = np.unique(np.asarray(keyframes, dtype=np.int64))
    keys = keys[(keys >= 0) & (keys < num_frames)]
    if len(keys) >= n_f:
        return keys[frame_indices(len(keys), n_f)], "container key frames"
    if n_f > num_frames:
        return frame_indices(num_frames, n_f), "every frame (fewer frames than n_f)"
    if scene_change is None:
        raise VlgapError("keyframes: the container has fewer key frames than n_f and no scene-change scores were given")
    score = np.asarray(scene_change, dtype=np.float64).copy()
    score[keys] = np.inf  # key frames first
    order = np.lexsort((np.arange(num_frames), -score))  # largest change first, earlier frame on ties
    return np.sort(order[:n_f]).astype(np.int64), ("container key frames + scene-change score" if len(keys)
                                                   else "scene-change score")


def sample_frames(num_frames: int, n_f: int, strategy: str = "uniform", item_id: str = "?",
                  keyframes: np.ndarray | list[int] | None = None,
                  scene_change: np.ndarray | None = None) -> np.ndarray:
    """Frame indices for one item under a strategy (`parse_frame_sampling`). "uniform" is the paper's
    `frame_indices`; "keyframes" needs the container's key-frame indices (and scene-change scores when
    there are fewer key frames than n_f), see data.video.keyframe_info."""
    if num_frames < 1:
        raise VlgapError(f"a video needs at least one frame, got {num_frames}")
    if n_f < 1:
        raise VlgapError(f"n_f must be >= 1, got {n_f}")
    strategy = parse_frame_sampling(strategy)
    if strategy == "uniform":
        return frame_indices(num_frames, n_f)
    if strategy == "random":
        return random_indices(num_frames, n_f, item_id)
    if strategy == "keyframes":
        return keyframe_indices(num_frames, n_f, [] if keyframes is None else keyframes, scene_change)[0]
    return strided_indices(num_frames, n_f, int(strategy.split(":")[1]), item_id)
