"""When a caption stage counts as converged: pure functions of a loss curve (no torch), shared by training
(which may go on until converged) and the experiment's loss table (which marks rows that had not)."""
from __future__ import annotations

#: the held-out loss counts as converged when its lowest point improved by at most this share over the last
#: fifth of the caption steps (WSVConfig.max_caption_steps stops there; the experiment's loss table marks rows
#: above it as still falling)
STILL_FALLING = 0.01


def late_fall(curve, fraction: float = 0.2) -> float | None:
    """How much a loss curve's lowest point ([[step, loss], ...]) still improved over its last `fraction` of
    steps: (the lowest loss up to the start of that stretch - the lowest loss overall) / the former. Minima
    on both sides, so one noisy validation does not make a flat curve look falling (a single point against
    the stretch's minimum did: on the held-out loss of 100 captions it read flat oracle curves as 1.4 %
    falls). 0 when the stretch set no new low; None when the curve has no point on one side."""
    if not curve:
        return None
    start = curve[-1][0] * (1 - fraction)
    before, within = [v for t, v in curve if t <= start], [v for t, v in curve if t > start]
    if not before or not within:
        return None
    return max(min(before) - min(within), 0.0) / min(before)


def validation_curve(history: list) -> list[tuple[int, float]]:
    """A training history's held-out losses ([(stage, step, loss), ...] entries of stage "val") as (step, loss)."""
    return [(h[1], h[2]) for h in history if h[0] == "val"]


def converged(history: list) -> bool:
    """Whether the held-out loss's lowest point improved by at most STILL_FALLING over the last fifth of the
    steps so far."""
    fall = late_fall(validation_curve(history))
    return fall is not None and fall <= STILL_FALLING
