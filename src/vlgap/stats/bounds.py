"""The range a statistic can take, intervals kept inside it, and the small-sample warning.

A metric declares its range once, where the metric is defined (`AlignmentMetric.score_range` for the
alignment metrics, `CaptionMetric.score_range` for the caption metrics); every interval of it then passes
through `keep_in_range` before it is stored or printed.

Which interval respects a range by construction, and which needs this guard:
  * percentile and BCa bootstrap intervals are quantiles of the statistic recomputed on resamples, so
    they lie inside any range the statistic itself respects (the guard never fires);
  * the basic (reflected) bootstrap interval 2T - q, the max-t band T +- c se, the draw-widened interval
    and Student-t intervals over seeds are T plus or minus a width, and leave the range when T is near a
    bound and the width is large (small N, k comparable to N): "1.000 [0.803, 1.403]" for mutual k-NN.
For those the interval is intersected with the range and flagged (`RangedInterval.note`, printed beside
it and stored in the JSON). Intersecting cannot lower coverage: the true value lies in the range, so it
is in the clipped interval exactly when it was in the raw one (tests/test_interval_ranges.py checks it
by simulation, beside the coverage of the raw interval near the bound). A transform (logit) would also
keep the interval inside, but is undefined at an estimate on the bound (mutual k-NN = 1.000 is common
at small N), where clipping is not. An interval that lies wholly outside the range is withheld
("n/a (why)"): it says nothing about the metric.

Small samples: an interval over N items is withheld below `resampling.MIN_ITEMS_FOR_INTERVAL` (10); from
there up to SMALL_N_ITEMS (30) it is printed with a warning line, as is any k-NN metric whose k is at least
N / SMALL_N_K_SHARE (see `small_sample_warning` for why those numbers).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

#: below this many items an interval is printed with a warning. Coverage of a nominal 95% percentile
#: bootstrap interval of a mean (3000 data sets x 400 resamples per n): normal data 0.90 at n = 10, 0.93 at
#: 20 and 30, 0.94 at 50; exponential data 0.86, 0.90, 0.91, 0.92. Below 30 a skewed score's interval
#: misses about twice as often as it says (tests/test_interval_ranges.py reruns the simulation).
SMALL_N_ITEMS = 30
#: k-NN metrics: a warning when k >= N / SMALL_N_K_SHARE
SMALL_N_K_SHARE = 4


@dataclass(frozen=True)
class ScoreRange:
    """The closed range [low, high] a statistic can take (either end may be infinite), with why."""

    low: float = -math.inf
    high: float = math.inf
    why: str = ""

    @property
    def bounded(self) -> bool:
        return math.isfinite(self.low) or math.isfinite(self.high)

    def text(self) -> str:
        """"[0, 1]", "[0, inf)", "(-inf, inf)"."""
        lo = f"[{self.low:g}" if math.isfinite(self.low) else "(-inf"
        hi = f"{self.high:g}]" if math.isfinite(self.high) else "inf)"
        return f"{lo}, {hi}"

    def to_dict(self) -> dict[str, Any]:
        return {"low": self.low if math.isfinite(self.low) else None,
                "high": self.high if math.isfinite(self.high) else None}


#: the mark printed beside an interval that was clipped to its metric's range (its note is printed below)
CLIPPED_MARK = "\u2020"

#: a statistic with no fixed range (differences of unbounded scores, test statistics)
UNBOUNDED = ScoreRange(why="no fixed range")
#: a proportion, an accuracy, a mean of per-item fractions
UNIT = ScoreRange(0.0, 1.0, "a fraction")


def difference_range(r: ScoreRange) -> ScoreRange:
    """The range of A - B when A and B both lie in `r`: [low - high, high - low]."""
    width = r.high - r.low
    return ScoreRange(-width, width, f"a difference of two scores in {r.text()}")


@dataclass(frozen=True)
class RangedInterval:
    """An interval after `keep_in_range`: the ends to print (None when withheld), the raw ends, the note."""

    low: float
    high: float
    raw_low: float
    raw_high: float
    #: one line when the raw interval left the range (clipped) or lay wholly outside it (withheld)
    note: str | None = None
    #: True when the interval is withheld (wholly outside the range)
    withheld: bool = False

    @property
    def ci(self) -> list[float] | None:
        return None if self.withheld or not (math.isfinite(self.low) and math.isfinite(self.high)) \
            else [self.low, self.high]

    @property
    def clipped(self) -> bool:
        return self.note is not None and not self.withheld


def keep_in_range(low: float, high: float, score_range: ScoreRange, *, method: str = "interval",
                  label: str = "the metric") -> RangedInterval:
    """Intersect [low, high] with `score_range` and say so when that changed it (module doc).

    method: how the interval was made, for the note ("basic bootstrap"); label: what the range belongs to
    ("mutual_knn"). Non-finite ends pass through (the caller's own rule withholds them)."""
    low, high = float(low), float(high)
    if not (math.isfinite(low) and math.isfinite(high)):
        return RangedInterval(low, high, low, high)
    lo, hi = max(low, score_range.low), min(high, score_range.high)
    if lo == low and hi == high:
        return RangedInterval(low, high, low, high)
    if abs(lo - low) <= _ROUNDING * (1 + abs(lo)) and abs(hi - high) <= _ROUNDING * (1 + abs(hi)):
        return RangedInterval(lo, hi, low, high)  # rounding (1.0000000000000004), nothing to flag
    raw = f"[{_g(low)}, {_g(high)}]"
    if lo > hi or (lo == hi and low != high):
        note = (f"the {method} interval {raw} lies outside {label}'s range {score_range.text()}: withheld "
                "(too few items for this interval)")
        return RangedInterval(math.nan, math.nan, low, high, note, withheld=True)
    note = f"clipped to {label}'s range {score_range.text()}: the {method} interval reached {raw}"
    return RangedInterval(lo, hi, low, high, note)


#: relative excess over a bound taken as floating-point rounding, clipped without a note
_ROUNDING = 1e-9


def _g(v: float) -> str:
    return f"{v:.4g}"


def small_sample_warning(n: int, k: int | None = None, *, what: str = "items") -> str | None:
    """One line when an interval over `n` items is printed but rests on few of them, else None.

    - n < SMALL_N_ITEMS (30): a nominal 95% bootstrap interval of a mean covers 0.90-0.93 at n = 20 (see
      SMALL_N_ITEMS), and a re-selected best layer pair is noisier still;
    - k >= n / SMALL_N_K_SHARE (k-NN metrics): each neighbour list holds a quarter or more of the items, so
      the chance level k/(N-1) is 0.25 or more and a score near 1 is reached by coarse structure alone;
      a bootstrap resample holds about 63 % distinct items, so its lists span 40 % or more of them.
    """
    parts = []
    if n < SMALL_N_ITEMS:
        parts.append(f"N = {n} < {SMALL_N_ITEMS} {what} (a nominal 95% interval covers about 0.90-0.93 at N = 20)")
    if k is not None and k > 0 and k * SMALL_N_K_SHARE >= n:
        share = k / max(n - 1, 1)
        parts.append(f"k = {k} >= N/{SMALL_N_K_SHARE} (each neighbour list holds {share:.0%} of the other items, "
                     f"chance level {share:.2f})")
    if not parts:
        return None
    return "small sample: " + "; ".join(parts) + ": read scores and intervals as rough"


def range_notes(rows: Sequence[dict], key: str = "ci_note") -> list[str]:
    """The distinct notes of `rows` (in order), for a console or report footer."""
    return list(dict.fromkeys(r[key] for r in rows if r.get(key)))
