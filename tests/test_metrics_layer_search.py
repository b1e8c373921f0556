"""Layer search: the full L_x x L_y matrix must equal a naive per-pair computation."""
import numpy as np
import pytest
import torch

from vlgap.errors import VlgapError
from vlgap.metrics import alignment as al
from vlgap.metrics.layer_search import LayerStates, layer_search, precompute_layers

N = 200


def layers(seed=0, n=N, widths_x=(24, 40, 16, 64), widths_y=(32, 12, 48)):
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(n, 5))
    xs = [z @ rng.normal(size=(5, w)) + s * rng.normal(size=(n, w))
          for w, s in zip(widths_x, (0.5, 1.0, 2.0, 4.0))]
    ys = [z @ rng.normal(size=(5, w)) + s * rng.normal(size=(n, w)) for w, s in zip(widths_y, (3.0, 0.8, 1.5))]
    return xs, ys


def naive_pair_platonic(a, b, k):
    """platonic-rep style: neighbours recomputed for the pair, full N x N masks."""
    a = torch.nn.functional.normalize(torch.as_tensor(a), dim=1)
    b = torch.nn.functional.normalize(torch.as_tensor(b), dim=1)

    def knn(f):
        s = (f @ f.T).fill_diagonal_(float("-inf"))
        return torch.sort(s, dim=1, descending=True, stable=True).indices[:, :k]

    n = a.shape[0]
    r = torch.arange(n)[:, None]
    ma = torch.zeros(n, n)
    mb = torch.zeros(n, n)
    ma[r, knn(a)] = 1.0
    mb[r, knn(b)] = 1.0
    return (ma * mb).sum().item() / (n * k)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_mutual_knn_matrix_equals_naive_exactly(dtype):
    xs, ys = layers()
    xs = [x.astype(dtype) for x in xs]
    ys = [y.astype(dtype) for y in ys]
    res = layer_search(xs, ys, k=10)
    naive = np.array([[naive_pair_platonic(x, y, 10) for y in ys] for x in xs])
    assert res.scores.shape == (4, 3)
    assert np.array_equal(res.scores, naive)
    i, j = np.unravel_index(np.argmax(naive), naive.shape)
    assert (res.x_layer, res.y_layer, res.best_score) == (i, j, naive[i, j])


def test_chunked_search_equals_unchunked():
    xs, ys = layers(1)
    a = layer_search(xs, ys, k=7).scores
    b = layer_search(xs, ys, k=7, chunk_bytes=1).scores  # one row per similarity block
    assert np.array_equal(a, b)


@pytest.mark.parametrize("metric", ["cycle_knn", "cknna", "cka", "unbiased_cka", "svcca"])
def test_other_metrics_match_per_pair_function(metric):
    xs, ys = layers(2)
    res = layer_search(xs, ys, k=10, metric=metric)
    direct = np.array([[al.align(x, y, k=10, metric=metric).score for y in ys] for x in xs])
    np.testing.assert_allclose(res.scores, direct, rtol=1e-9, atol=1e-12)


def test_three_d_input_and_precomputed_states():
    xs, ys = layers(3, widths_x=(16, 16, 16), widths_y=(8, 8))
    res = layer_search(np.stack(xs), np.stack(ys), k=5)
    px = precompute_layers(xs, k=5)
    assert isinstance(px, LayerStates) and px.n_layers == 3 and px.n == N
    assert np.array_equal(layer_search(px, ys, k=5).scores, res.scores)
    with pytest.raises(VlgapError, match="precomputed"):
        layer_search(px, ys, k=6)


def test_to_dict_shape():
    xs, ys = layers(4)
    d = layer_search(xs, ys, k=10).to_dict()
    assert np.array(d["scores"]).shape == (4, 3)
    assert set(d["best"]) == {"score", "x_layer", "y_layer"}
    assert d["chance"] == pytest.approx(10 / (N - 1)) and d["n"] == N and d["k"] == 10
    assert "ci" not in d and "p_value" not in d


def test_layer_errors():
    xs, ys = layers(5)
    with pytest.raises(VlgapError, match=r"X\[1\] has 199 items"):
        layer_search([xs[0], xs[1][:-1]], ys)
    with pytest.raises(VlgapError, match="no layers"):
        layer_search([], ys)
    with pytest.raises(VlgapError, match="same item"):
        layer_search(xs, [y[:-1] for y in ys])
