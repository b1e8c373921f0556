"""MMD witness: which items carry the gap, so a user can see what differs.

The empirical witness function f(z) = mean_{x in A} k(z, x) - mean_{y in B} k(z, y) is the
direction in feature space along which the two mean embeddings differ (MMD = sup of the mean
difference over unit-norm functions, attained by f/||f||). f > 0 where A is denser than B. For an
item we leave the item itself out of its own side's mean, so a point is not "typical" merely for
being close to itself. The items of A with the largest f and the items of B with the smallest f
are the most characteristic of each side.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Sequence

import numpy as np
import torch

from vlgap.stats.kernels import Kernel, kernel_matrix, resolve_kernel, to_tensor, validate_pair


@dataclass(frozen=True)
class WitnessItem:
    side: str
    index: int
    witness: float
    label: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def witness_values(k: torch.Tensor, m: int) -> tuple[np.ndarray, np.ndarray]:
    """Leave-self-out witness values for the items of A (first m rows of the pooled kernel) and of B."""
    n = k.shape[0] - m
    diag = torch.diagonal(k).to(torch.float64)
    sum_to_a = k[:, :m].sum(dim=1, dtype=torch.float64)
    sum_to_b = k[:, m:].sum(dim=1, dtype=torch.float64)
    f_a = (sum_to_a[:m] - diag[:m]) / (m - 1) - sum_to_b[:m] / n
    f_b = sum_to_a[m:] / m - (sum_to_b[m:] - diag[m:]) / (n - 1)
    return f_a.cpu().numpy(), f_b.cpu().numpy()


def top_witnesses(
    f_a: np.ndarray,
    f_b: np.ndarray,
    *,
    top_k: int = 5,
    labels_a: Sequence[str] | None = None,
    labels_b: Sequence[str] | None = None,
) -> dict[str, list[dict[str, Any]]]:
    """{"a": items of A with the largest witness, "b": items of B with the smallest}, as dicts
    with side, index, witness value and label (e.g. the caption) when given."""
    order_a = np.argsort(-f_a, kind="stable")[:top_k]
    order_b = np.argsort(f_b, kind="stable")[:top_k]
    return {
        "a": [WitnessItem("a", int(i), float(f_a[i]), None if labels_a is None else str(labels_a[i])).to_dict()
              for i in order_a],
        "b": [WitnessItem("b", int(i), float(f_b[i]), None if labels_b is None else str(labels_b[i])).to_dict()
              for i in order_b],
    }


def witness(
    a: Any,
    b: Any,
    *,
    kernel: str | Kernel = "rbf",
    bandwidth: float | None = None,
    top_k: int = 5,
    labels_a: Sequence[str] | None = None,
    labels_b: Sequence[str] | None = None,
    seed: int = 0,
) -> dict[str, list[dict[str, Any]]]:
    """The `top_k` most characteristic items of each side (see module docstring)."""
    ta, tb = to_tensor(a, name="A"), to_tensor(b, name="B")
    validate_pair(ta, tb)
    z = torch.cat([ta, tb])
    k = resolve_kernel(kernel, z, bandwidth=bandwidth, seed=seed)
    f_a, f_b = witness_values(kernel_matrix(z, z, k), ta.shape[0])
    return top_witnesses(f_a, f_b, top_k=top_k, labels_a=labels_a, labels_b=labels_b)
