"""MetricTable: one metric family's per-item statistics and how to reduce them (shared by the n-gram
scorers in captions.evaluate and the model-based ones in captions.embedding_eval)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np


@dataclass
class MetricTable:
    """One metric family on one system: per-item sufficient statistics and how to reduce them."""

    names: list[str]                      # output keys, e.g. BLEU-1..BLEU-4
    stats: np.ndarray                     # (items, k) summable statistics
    statistic: Callable[[np.ndarray, int], np.ndarray]   # (sums, n) -> (..., len(names))
    estimates: list[float]                # the exact corpus numbers (pycocoevalcap's)
    per_item: dict[str, np.ndarray] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)
