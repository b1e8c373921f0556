"""Fixtures whose neighbour rankings cannot depend on BLAS rounding.

Two kinds, used by every test that compares neighbour-based scores across code paths:
- `sign_rows`: entries in {-1, +1} with D a power of 4, so L2 normalisation divides by a power of
  two and every cosine is an exact multiple of 1/D in float32 and float64, whatever the BLAS, the
  summation order or the block size. Rankings are full of *exact* ties: they test the tie rule
  (smaller index first) on any machine.
- `assert_no_near_ties`: for continuous float64 data, checks (in float64) that no two similarities
  that decide a ranking lie within `margin` of each other. Rounding differences between code paths
  are ~1e-16 there, so a fixture that passes this check ranks identically everywhere.
"""
from __future__ import annotations

import numpy as np


def sign_rows(rng: np.random.Generator, latent: np.ndarray, width: int, noise: float) -> np.ndarray:
    """sign(latent @ W + noise * E) in {-1, +1}, [N, width]; width must be a power of 4."""
    assert width in (4, 16, 64, 256, 1024), "width must be a power of 4 for exact normalisation"
    raw = latent @ rng.normal(size=(latent.shape[1], width)) + noise * rng.normal(size=(latent.shape[0], width))
    return np.where(raw >= 0, 1.0, -1.0)


def cosine(x: np.ndarray) -> np.ndarray:
    f = np.asarray(x, dtype=np.float64)
    f = f / np.linalg.norm(f, axis=1, keepdims=True)
    return f @ f.T


def assert_no_near_ties(layers, depth: int | None = None, margin: float = 1e-10) -> None:
    """No row's `depth`+1 largest similarities to other items (all of them if depth is None) come
    closer than `margin` to each other."""
    for i, x in enumerate(layers):
        s = cosine(x)
        np.fill_diagonal(s, -np.inf)
        top = -np.sort(-s, axis=1)[:, :-1]          # self (-inf) dropped
        if depth is not None:
            top = top[:, :depth + 1]
        gap = float((top[:, :-1] - top[:, 1:]).min())
        assert gap > margin, f"fixture layer {i} has near-tied similarities (gap {gap:.2e}); change its seed"
