"""Block MMD^2 for sample sizes whose N x N kernel does not fit in memory (Zaremba et al. 2013).

Both samples are shuffled (seeded) and cut into the same number of blocks; each block pair gives an
unbiased MMD^2. Under H0 every block estimate has mean exactly 0 and the blocks are independent, so
their mean is an unbiased MMD^2 estimate whose null distribution is asymptotically normal; the test
is a one-sided t-test over blocks (t rather than z keeps it conservative when blocks are few), and
the interval is mean +- t * SE. Memory is O(block_size^2) and time O(N * block_size * D).
block_size=2 per side is Gretton's linear-time statistic; the default sqrt(min(m, n)) trades power
for speed as the B-test paper recommends.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
from scipy import stats

from vlgap.errors import VlgapError
from vlgap.stats.kernels import Kernel, kernel_matrix
from vlgap.stats.permutation import unbiased_from_blocks


def _block_unbiased(x: torch.Tensor, y: torch.Tensor, k: Kernel) -> float:
    m, n = x.shape[0], y.shape[0]
    kxx = kernel_matrix(x, x, k)
    kyy = kernel_matrix(y, y, k)
    kxy = kernel_matrix(x, y, k)
    s_xx = kxx.sum(dtype=torch.float64) - torch.diagonal(kxx).sum(dtype=torch.float64)
    s_yy = kyy.sum(dtype=torch.float64) - torch.diagonal(kyy).sum(dtype=torch.float64)
    s_xy = kxy.sum(dtype=torch.float64)
    return float(unbiased_from_blocks(s_xx, s_yy, s_xy, m, n))


def block_mmd_test(
    a: torch.Tensor,
    b: torch.Tensor,
    k: Kernel,
    *,
    block_size: int | None = None,
    confidence: float = 0.95,
    seed: int | None = 0,
) -> dict[str, Any]:
    """Block estimator and its test. `block_size` is the number of A items per block (B blocks
    get proportionally many); default floor(sqrt(min(m, n))), at least 2.
    Returns dict(mmd2, p_value, ci, se, n_blocks, block_size_a, block_size_b)."""
    m, n = a.shape[0], b.shape[0]
    small = min(m, n)
    if block_size is None:
        block_size = max(2, int(math.isqrt(small)))
    if block_size < 2:
        raise VlgapError(f"block_size={block_size}: each block needs at least 2 items per side")
    n_blocks = small // block_size
    if n_blocks < 2:
        raise VlgapError(
            f"block estimator with block_size={block_size} leaves {n_blocks} block(s) for {small} items; "
            "need at least 2 blocks: use a smaller block_size or method='quadratic'")
    rng = np.random.default_rng(seed)
    perm_a = torch.from_numpy(rng.permutation(m)).to(a.device)
    perm_b = torch.from_numpy(rng.permutation(n)).to(b.device)
    # np.array_split sizes: items are all used, block sizes differ by at most one
    chunks_a = torch.tensor_split(perm_a, n_blocks)
    chunks_b = torch.tensor_split(perm_b, n_blocks)
    values = np.array([
        _block_unbiased(a.index_select(0, ia), b.index_select(0, ib), k)
        for ia, ib in zip(chunks_a, chunks_b)
    ])
    mean = float(values.mean())
    se = float(values.std(ddof=1) / math.sqrt(n_blocks))
    df = n_blocks - 1
    if se > 0:
        p_value = float(stats.t.sf(mean / se, df))
        half = float(stats.t.ppf(0.5 + confidence / 2, df)) * se
    else:
        p_value = 1.0 if mean <= 0 else 0.0
        half = 0.0
    return {
        "mmd2": mean,
        "p_value": p_value,
        "ci": [mean - half, mean + half],
        "se": se,
        "n_blocks": n_blocks,
        "block_size_a": m // n_blocks,
        "block_size_b": n // n_blocks,
    }
