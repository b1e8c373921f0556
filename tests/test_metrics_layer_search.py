"""Layer search: the full L_x x L_y matrix must equal a naive per-pair computation."""
import numpy as np
import pytest
import torch

from vlgap.errors import VlgapError
from vlgap.metrics.layer_search import LayerStates, align, layer_search, precompute_layers
from ties import assert_no_near_ties, sign_rows
from sequences import naive_lcs, naive_levenshtein

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


def sign_layers(seed=0, n=N, dtype=np.float32):
    """{-1, +1} layers of widths 4^j: exact cosines (multiples of 1/D) in any precision and BLAS,
    so rankings hold many exact ties and no rounding-dependent ones."""
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(n, 5))
    xs = [sign_rows(rng, z, w, s).astype(dtype) for w, s in ((16, 0.5), (64, 1.0), (4, 1.0), (256, 3.0))]
    ys = [sign_rows(rng, z, w, s).astype(dtype) for w, s in ((64, 2.0), (16, 0.8), (256, 1.5))]
    return xs, ys


@pytest.mark.parametrize("data", ["float64", "exact_ties_float32"])
def test_mutual_knn_matrix_equals_naive(data):
    if data == "float64":
        xs, ys = layers()
        assert_no_near_ties(xs + ys, depth=10)      # rounding cannot reorder a neighbour here
    else:
        xs, ys = sign_layers()
    res = layer_search(xs, ys, k=10)
    naive = np.array([[naive_pair_platonic(x, y, 10) for y in ys] for x in xs])
    assert res.scores.shape == (4, 3)
    np.testing.assert_allclose(res.scores, naive, rtol=0, atol=1e-12)
    i, j = np.unravel_index(np.argmax(naive), naive.shape)
    assert (res.x_layer, res.y_layer) == (i, j) and res.best_score == pytest.approx(naive[i, j], abs=1e-12)


@pytest.mark.parametrize("data", ["float64", "exact_ties_float32"])
def test_chunked_search_equals_unchunked(data):
    xs, ys = layers(1) if data == "float64" else sign_layers(1)
    if data == "float64":
        assert_no_near_ties(xs + ys, depth=7)
    a = layer_search(xs, ys, k=7).scores
    b = layer_search(xs, ys, k=7, chunk_bytes=1).scores  # one row per similarity block
    np.testing.assert_allclose(a, b, rtol=0, atol=1e-12)


@pytest.mark.parametrize("metric", ["cycle_knn", "cknna", "cka", "unbiased_cka", "svcca", "lcs_knn",
                                    "edit_distance_knn"])
def test_other_metrics_match_per_pair_function(metric):
    xs, ys = layers(2)
    res = layer_search(xs, ys, k=10, metric=metric)
    direct = np.array([[align(x, y, k=10, metric=metric).score for y in ys] for x in xs])
    np.testing.assert_allclose(res.scores, direct, rtol=1e-9, atol=1e-12)


def test_three_d_input_and_precomputed_states():
    xs, ys = layers(3, widths_x=(16, 16, 16), widths_y=(8, 8))
    res = layer_search(np.stack(xs), np.stack(ys), k=5)
    px = precompute_layers(xs, k=5)
    assert isinstance(px, LayerStates) and px.n_layers == 3 and px.n == N
    np.testing.assert_allclose(layer_search(px, ys, k=5).scores, res.scores, rtol=0, atol=1e-12)
    with pytest.raises(VlgapError, match="precomputed"):
        layer_search(px, ys, k=6)


def test_to_dict_shape():
    xs, ys = layers(4)
    d = layer_search(xs, ys, k=10).to_dict()
    assert np.array(d["scores"]).shape == (4, 3)
    assert set(d["best"]) == {"score", "x_layer", "y_layer"}
    assert d["chance"] == pytest.approx(10 / (N - 1)) and d["n"] == N and d["k"] == 10
    assert "ci" not in d and "p_value" not in d and d["preset"] is None


def test_layer_errors():
    xs, ys = layers(5)
    with pytest.raises(VlgapError, match=r"X\[1\] has 199 items"):
        layer_search([xs[0], xs[1][:-1]], ys)
    with pytest.raises(VlgapError, match="no layers"):
        layer_search([], ys)
    with pytest.raises(VlgapError, match="same item"):
        layer_search(xs, [y[:-1] for y in ys])


# ---------------------------------------------------------------- preset="platonic-rep"
# A test-local re-implementation of platonic-rep's pipeline (measure_alignment.prepare_features +
# compute_score, metrics.AlignmentMetrics), written from its formulas.

def platonic_prepare_features(feats, q=0.95, exact=False):
    """remove_outliers on one model's [N, L, D] features: ONE threshold for all layers."""
    if exact:
        q_val = feats.reshape(-1).abs().sort().values[int(q * feats.numel())]
    else:
        q_val = torch.quantile(feats.abs().flatten(start_dim=1), q, dim=1).mean()
    return feats.clamp(-q_val, q_val)


def platonic_knn(f, k):
    return (f @ f.T).fill_diagonal_(-1e8).argsort(dim=1, descending=True)[:, :k]


def platonic_measure(metric, a, b, topk):
    ka, kb = platonic_knn(a, topk), platonic_knn(b, topk)
    n = ka.shape[0]
    if metric == "mutual_knn":
        r = torch.arange(n)[:, None]
        ma, mb = torch.zeros(n, n, dtype=torch.float64), torch.zeros(n, n, dtype=torch.float64)  # exact sums
        ma[r, ka] = 1.0
        mb[r, kb] = 1.0
        return ((ma * mb).sum(dim=1) / topk).mean().item()
    if metric == "cycle_knn":
        return (ka[kb] == torch.arange(n).view(-1, 1, 1)).double().view(n, -1).max(dim=1).values.mean().item()
    rows = [(ka[i].tolist(), kb[i].tolist()) for i in range(n)]
    if metric == "lcs_knn":
        return float(np.mean([naive_lcs(x, y) for x, y in rows]))
    return 1 - float(np.mean([naive_levenshtein(x, y) for x, y in rows])) / topk   # edit_distance_knn


def platonic_compute_score(x_feats, y_feats, metric, topk):
    """[N, L, D] each; best score over layer pairs (first strictly larger wins) and all scores."""
    best, best_idx = 0, None
    scores = np.zeros((x_feats.shape[1], y_feats.shape[1]))
    for i in range(x_feats.shape[1]):
        for j in range(y_feats.shape[1]):
            x = torch.nn.functional.normalize(x_feats[:, i, :], p=2, dim=-1)
            y = torch.nn.functional.normalize(y_feats[:, j, :], p=2, dim=-1)
            scores[i, j] = score = platonic_measure(metric, x, y, topk)
            if score > best:
                best, best_idx = score, (i, j)
    return best, best_idx, scores


def heavy_tailed_model(rng, z, n_layers, width, scales):
    """[N, L, D] float64 with outliers (Student t, 2 d.o.f.) and very different layer scales."""
    w = rng.normal(size=(z.shape[1], width))
    return np.stack([s * (z @ w + (1 + l) * rng.standard_t(2, size=(z.shape[0], width)))
                     for l, s in zip(range(n_layers), scales)], axis=1)


@pytest.mark.parametrize("metric", ["mutual_knn", "lcs_knn", "edit_distance_knn", "cycle_knn"])
def test_platonic_rep_preset_equals_its_compute_score_pipeline(metric):
    rng = np.random.default_rng(21)
    z = rng.normal(size=(150, 4))
    fx = torch.from_numpy(heavy_tailed_model(rng, z, 3, 24, (1.0, 8.0, 0.3)))
    fy = torch.from_numpy(heavy_tailed_model(rng, z, 2, 16, (2.0, 0.5)))
    px, py = platonic_prepare_features(fx), platonic_prepare_features(fy)
    assert_no_near_ties([px[:, i, :].numpy() for i in range(3)] + [py[:, j, :].numpy() for j in range(2)],
                        depth=6)
    best, (i, j), ref = platonic_compute_score(px, py, metric, 6)

    xs = [fx[:, l, :].numpy() for l in range(3)]     # vlgap's layout: a list of [N, D] (or [L, N, D])
    ys = [fy[:, l, :].numpy() for l in range(2)]
    res = layer_search(xs, ys, k=6, metric=metric, preset="platonic-rep")
    np.testing.assert_allclose(res.scores, ref, rtol=0, atol=1e-12)
    assert (res.x_layer, res.y_layer) == (i, j) and res.best_score == pytest.approx(best, abs=1e-12)
    assert res.to_dict()["preset"] == "platonic-rep" and res.q == 0.95
    # one [N, D] per side: align with the preset is compute_score on one layer pair
    one, _, _ = platonic_compute_score(platonic_prepare_features(fx[:, 1:2]), platonic_prepare_features(fy[:, :1]),
                                       metric, 6)
    got = align(xs[1], ys[0], k=6, metric=metric, preset="platonic-rep")
    assert got.score == pytest.approx(one, abs=1e-12) and got.to_dict()["preset"] == "platonic-rep"
    if metric == "mutual_knn":
        # the fixture is one where the shared clamp matters: neither no clamp nor per-layer clamps give it
        assert not np.allclose(layer_search(xs, ys, k=6, metric=metric).scores, ref)
        assert not np.allclose(layer_search(xs, ys, k=6, metric=metric, q=0.95).scores, ref)


def test_preset_errors_and_precomputed_sides():
    xs, ys = layers(6)
    with pytest.raises(VlgapError, match="preset='platonic'"):
        layer_search(xs, ys, preset="platonic")
    px = precompute_layers(xs, k=5, preset="platonic-rep")
    assert px.preset == "platonic-rep" and px.q == 0.95
    with pytest.raises(VlgapError, match="preset"):
        layer_search(px, ys, k=5)
    a = layer_search(px, ys, k=5, preset="platonic-rep").scores
    np.testing.assert_allclose(a, layer_search(xs, ys, k=5, preset="platonic-rep").scores, rtol=0, atol=1e-12)


def test_old_keyword_spellings_name_the_new_ones():
    xs, ys = layers(7)
    with pytest.raises(VlgapError, match="'bootstrap' is now n_bootstrap"):
        layer_search(xs, ys, bootstrap=10)
    with pytest.raises(VlgapError, match="'permutations' is now n_permutations"):
        align(xs[0], ys[0], permutations=10)
