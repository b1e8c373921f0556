"""The in-memory layout of a 3-D feature array is never guessed: layout="LND" ([layers, items, dim]) or
"NLD" ([items, layers, dim], platonic-rep's files and stacked hidden states); an array that reads both
ways is refused without layout=."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from vlgap.errors import VlgapError
from vlgap.metrics.layer_search import layer_search, precompute_layers, resolve_layouts

K = 3


def _features(n_layers: int, n_items: int, dim: int, seed: int) -> np.ndarray:
    """[L, N, D] features whose layers differ (a shared signal plus layer-specific noise)."""
    rng = np.random.default_rng(seed)
    base = rng.standard_normal((n_items, dim))
    return np.stack([base + (i + 1) * 0.7 * rng.standard_normal((n_items, dim)) for i in range(n_layers)]).astype(
        np.float32)


def test_nld_equals_the_transposed_lnd():
    x = _features(6, 30, 8, 0)       # [L=6, N=30, D]
    y = _features(5, 30, 7, 1)
    ref = layer_search(x, y, k=K)
    for x_in, y_in in ((x.transpose(1, 0, 2), y.transpose(1, 0, 2)),
                       (torch.from_numpy(x).transpose(0, 1), torch.from_numpy(y).transpose(0, 1))):
        got = layer_search(x_in, y_in, k=K, layout="NLD")
        np.testing.assert_array_equal(got.scores, ref.scores)
        assert (got.x_layer, got.y_layer) == (ref.x_layer, ref.y_layer)
    states = precompute_layers(x.transpose(1, 0, 2), k=K, layout="NLD")
    np.testing.assert_array_equal(layer_search(states, list(y), k=K).scores, ref.scores)


def test_ambiguous_array_is_refused_without_layout():
    x = _features(30, 30, 8, 0)      # N = L = 30: reads both ways
    y = [layer for layer in _features(4, 30, 5, 1)]
    with pytest.raises(VlgapError, match=r"cannot tell the layout.*\(30, 30, 8\).*layout='LND' or layout='NLD'"):
        layer_search(x, y, k=K)
    with pytest.raises(VlgapError, match="cannot tell the layout"):
        precompute_layers(_features(6, 30, 8, 0), k=K)  # one array alone, both dims >= k+1
    # two 3-D arrays that each fit either way against the other ([10, 10, D] twice)
    with pytest.raises(VlgapError, match="cannot tell the layout"):
        layer_search(_features(10, 10, 4, 0), _features(10, 10, 4, 1), k=K)
    # told, it runs, and NLD of the transposed array is the same search
    a = layer_search(x, y, k=K, layout="LND")
    b = layer_search(x.transpose(1, 0, 2), y, k=K, layout="NLD")
    np.testing.assert_array_equal(a.scores, b.scores)
    with pytest.raises(VlgapError, match="layout='XYZ'"):
        layer_search(x, y, k=K, layout="XYZ")


def test_unambiguous_arrays_still_work_without_layout():
    x = _features(3, 30, 8, 0)       # L = 3 < k+1: only [layers, items, dim] gives enough items
    y = _features(5, 30, 6, 1)
    ref = layer_search(list(x), list(y), k=K)
    np.testing.assert_array_equal(layer_search(x, y, k=K).scores, ref.scores)
    # [N=30, L=12, D] against a list of 30-item layers: only NLD gives 30 items
    x12 = _features(12, 30, 8, 2)
    got = layer_search(x12.transpose(1, 0, 2), list(y), k=K)
    np.testing.assert_array_equal(got.scores, layer_search(list(x12), list(y), k=K).scores)
    assert resolve_layouts(x12.transpose(1, 0, 2), list(y), None, K) == ("NLD", None)
    assert resolve_layouts(x12, list(y), None, K) == ("LND", None)
