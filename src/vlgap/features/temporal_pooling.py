"""Temporal pooling of per-frame embeddings (image encoders on video): [T, D] -> [D'].

An image encoder embeds each sampled frame on its own; how the T per-frame vectors become one video
vector decides whether the features can carry time at all:

- ``mean`` (default): the average, [D]. Order-invariant by construction: reversing or shuffling the
  frames changes the features only by float rounding, and more frames add no temporal information.
- ``segments:S``: the T frames, in the order sampled, split into S contiguous segments (segment j holds
  frames floor(j*T/S) .. floor((j+1)*T/S) - 1), each averaged, the S means concatenated: [S*D]. When
  T < S, segment j is the single frame floor(j*T/S) (nearest repeat, as sub-clips of video encoders
  are filled), so the width stays S*D for every n_f. Reversing the frames reverses the segment order
  exactly when S divides T.
- ``meandiff``: the mean concatenated with last frame minus first frame: [2D] (the difference is 0
  for T = 1).

Pure array code: works on numpy arrays and torch tensors alike (`x[a:b].mean(0)` and one
concatenation), so the ``mean`` mode is literally the expression extraction always used.
"""
from __future__ import annotations

import re

from vlgap.errors import VlgapError

DEFAULT = "mean"
#: the valid forms, for error messages and --help
FORMS = "mean | segments:S (S >= 2 contiguous segments, each averaged, concatenated) | meandiff (mean, last - first)"

_SEGMENTS = re.compile(r"^segments:(\d+)$")


def parse_mode(mode: str | None) -> str:
    """The canonical mode string ('mean', 'segments:S' or 'meandiff'); None means 'mean'.
    A one-line VlgapError naming the valid forms otherwise."""
    if mode is None:
        return DEFAULT
    text = str(mode).strip().lower().replace(" ", "")
    if text in ("mean", "meandiff"):
        return text
    m = _SEGMENTS.match(text)
    if m:
        s = int(m.group(1))
        if s < 2:
            raise VlgapError(f"temporal pooling {mode!r}: segments:S needs S >= 2 (segments:1 is 'mean'); "
                             f"valid forms: {FORMS}")
        return f"segments:{s}"
    raise VlgapError(f"temporal pooling {mode!r} is not valid; use {FORMS}")


def n_segments(mode: str) -> int | None:
    """S of a 'segments:S' mode, else None."""
    m = _SEGMENTS.match(parse_mode(mode))
    return int(m.group(1)) if m else None


def check_frames(mode: str | None, n_frames, label: str = "n_frames") -> None:
    """Refuse 'segments:S' where no requested n_f reaches S frames: every segment would be a repeat of one
    of those few frames, an S*D-wide vector of a handful of distinct ones. (n_f below S beside larger
    ones is the documented nearest repeat, which keeps the width of a sweep's cells equal.)"""
    s = n_segments(mode) if mode is not None else None
    values = [int(v) for v in n_frames or ()]
    if s is not None and values and max(values) < s:
        raise VlgapError(f"temporal pooling segments:{s} with {label} {values}: no cell samples {s} frames, so every "
                         f"one of the {s} segments would repeat one of at most {max(values)} frames; use "
                         f"segments:S with S <= {max(values)} (or sample more frames)")


def output_width(mode: str, d: int) -> int:
    """Width of the pooled vector for per-frame width d."""
    mode = parse_mode(mode)
    if mode == "mean":
        return d
    if mode == "meandiff":
        return 2 * d
    return n_segments(mode) * d


def segment_bounds(t: int, s: int) -> list[tuple[int, int]]:
    """[start, stop) of each of the s segments of t frames (nearest repeat when t < s)."""
    if t < 1:
        raise VlgapError("temporal pooling needs at least one frame")
    if t < s:
        return [((j * t) // s, (j * t) // s + 1) for j in range(s)]
    return [((j * t) // s, ((j + 1) * t) // s) for j in range(s)]


def describe(mode: str) -> str:
    """One line for records and reports."""
    mode = parse_mode(mode)
    if mode == "mean":
        return "mean over per-frame embeddings"
    if mode == "meandiff":
        return "mean over per-frame embeddings, concatenated with last frame - first frame"
    return (f"{n_segments(mode)} contiguous temporal segments (in sampled order), each averaged, concatenated "
            "(nearest repeat when n_f < segments)")


def _cat(parts):
    first = parts[0]
    if type(first).__module__.startswith("torch"):
        import torch

        return torch.cat(parts)
    import numpy as np

    return np.concatenate(parts)


def pool_frames(per_frame, mode: str | None = DEFAULT):
    """Pool per-frame embeddings [T, D] (numpy or torch, in the order the frames were sampled) into one
    vector: [D] for 'mean', [S*D] for 'segments:S', [2D] for 'meandiff'."""
    mode = parse_mode(mode)
    if not hasattr(per_frame, "ndim") or not hasattr(per_frame, "mean"):
        from vlgap.arguments import as_numbers

        per_frame = as_numbers(per_frame, "per_frame", ndim=2, what="a [T frames, D] array of numbers")
    if getattr(getattr(per_frame, "dtype", None), "kind", "f") not in "biuf":  # numpy; torch tensors are numbers
        raise VlgapError(f"per_frame: expected a [T frames, D] array of numbers, got dtype {per_frame.dtype}")
    if per_frame.ndim != 2 or per_frame.shape[0] < 1:
        raise VlgapError(f"per_frame: pool_frames needs a [T frames, D] array with T >= 1, got shape "
                         f"{tuple(per_frame.shape)}")
    if mode == "mean":
        return per_frame.mean(0)
    if mode == "meandiff":
        return _cat([per_frame.mean(0), per_frame[-1] - per_frame[0]])
    t, s = per_frame.shape[0], n_segments(mode)
    if t < s:
        from vlgap.caveats import caveat

        caveat(f"temporal pooling segments:{s} from {t} frame{'s' if t != 1 else ''}: {s - t} of the {s} segments "
               "repeat a frame (nearest repeat), so the vector holds only "
               f"{t} distinct frame embedding{'s' if t != 1 else ''}")
    return _cat([per_frame[a:b].mean(0) for a, b in segment_bounds(t, s)])
