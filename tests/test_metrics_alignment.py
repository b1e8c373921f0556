"""Alignment metrics on one pair of feature matrices, against naive numpy references."""
import numpy as np
import pytest
import torch
from scipy.stats import ortho_group
from sklearn.cross_decomposition import CCA

from vlgap.errors import VlgapError
from vlgap.metrics import alignment as al
from vlgap.metrics.knn import NeighbourLookup, topk_neighbours
from vlgap.metrics.layer_search import align
from vlgap.metrics.prepare import clamp_threshold, prepare_features, remove_outliers
from ties import assert_no_near_ties, sign_rows
from sequences import naive_lcs, naive_levenshtein

N = 240


def related(n=N, dx=48, dy=32, noise=(0.7, 1.2), seed=0):
    """Two views of one latent structure (float64, so no near-ties decide a neighbour)."""
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(n, 6))
    x = z @ rng.normal(size=(6, dx)) + noise[0] * rng.normal(size=(n, dx))
    y = z @ rng.normal(size=(6, dy)) + noise[1] * rng.normal(size=(n, dy))
    return x, y


# ---------------------------------------------------------------- naive references (numpy)

def unit(a):
    return a / np.linalg.norm(a, axis=1, keepdims=True)


def naive_knn(a, k):
    sims = unit(a) @ unit(a).T
    np.fill_diagonal(sims, -np.inf)
    return np.argsort(-sims, axis=1, kind="stable")[:, :k]  # ties -> smaller index


def naive_mask(a, k):
    n = a.shape[0]
    m = np.zeros((n, n))
    m[np.arange(n)[:, None], naive_knn(a, k)] = 1.0
    return m


def naive_mutual_knn(a, b, k):
    return (naive_mask(a, k) * naive_mask(b, k)).sum() / (a.shape[0] * k)


def naive_cycle_knn(a, b, k):
    ka, kb = naive_knn(a, k), naive_knn(b, k)
    n = a.shape[0]
    return float(np.mean([(ka[kb[i]] == i).any() for i in range(n)]))


def hsic_biased(K, L):
    n = K.shape[0]
    H = np.eye(n) - 1.0 / n
    return np.trace(K @ H @ L @ H)


def hsic_unbiased(K, L):
    m = K.shape[0]
    Kt, Lt = K.copy(), L.copy()
    np.fill_diagonal(Kt, 0)
    np.fill_diagonal(Lt, 0)
    return ((Kt * Lt.T).sum() + Kt.sum() * Lt.sum() / ((m - 1) * (m - 2))
            - 2 * (Kt @ Lt).sum() / (m - 2)) / (m * (m - 3))


def naive_cka(a, b, unbiased=False):
    K, L = unit(a) @ unit(a).T, unit(b) @ unit(b).T
    h = hsic_unbiased if unbiased else hsic_biased
    return h(K, L) / np.sqrt(h(K, K) * h(L, L))


def naive_cknna(a, b, k):
    K, L = unit(a) @ unit(a).T, unit(b) @ unit(b).T
    mk, ml = naive_mask(a, k), naive_mask(b, k)

    def sim(K, L, mk, ml):
        mask = mk * ml
        return hsic_unbiased(mask * K, mask * L)

    return sim(K, L, mk, ml) / np.sqrt(sim(K, K, mk, mk) * sim(L, L, ml, ml))


def naive_svcca(a, b, d=10):
    def basis(x):
        x = unit(x)
        x = x - x.mean(0)
        x = x / (x.std(0, ddof=1) + 1e-8)
        return np.linalg.svd(x, full_matrices=False)[0][:, :d]

    u1, u2 = basis(a), basis(b)
    cca = CCA(n_components=d, max_iter=5000, tol=1e-12).fit(u1, u2)
    c1, c2 = cca.transform(u1, u2)
    return float(np.mean([np.corrcoef(c1[:, i], c2[:, i])[0, 1] for i in range(d)]))


# ---------------------------------------------------------------- values vs references

def test_mutual_knn_equals_naive():
    x, y = related()
    assert_no_near_ties([x, y], depth=10)  # so both paths rank alike on any BLAS
    for k in (1, 5, 10):
        assert al.mutual_knn(x, y, k) == pytest.approx(naive_mutual_knn(x, y, k), abs=1e-12)


def test_cycle_knn_equals_naive():
    x, y = related()
    assert_no_near_ties([x, y], depth=10)
    assert al.cycle_knn(x, y, 10) == pytest.approx(naive_cycle_knn(x, y, 10), abs=1e-12)


# platonic-rep's order-aware metrics, as its formulas read (naive loops over items)


def naive_lcs_knn(a, b, k):
    ka, kb = naive_knn(a, k), naive_knn(b, k)
    return float(np.mean([naive_lcs(list(ka[i]), list(kb[i])) for i in range(len(ka))]))


def naive_edit_distance_knn(a, b, k):
    ka, kb = naive_knn(a, k), naive_knn(b, k)
    return 1.0 - float(np.mean([naive_levenshtein(list(ka[i]), list(kb[i])) for i in range(len(ka))])) / k


def test_lcs_and_edit_distance_knn_equal_naive_formulas():
    x, y = related()
    assert_no_near_ties([x, y], depth=10)
    for k in (1, 4, 10):
        assert al.lcs_knn(x, y, k) == pytest.approx(naive_lcs_knn(x, y, k), abs=1e-12)
        assert al.edit_distance_knn(x, y, k) == pytest.approx(naive_edit_distance_knn(x, y, k), abs=1e-12)
    # the scores are not trivial here, and identical rankings give the maxima (k and 1)
    assert 0.5 < al.lcs_knn(x, y, 10) < 9 and 0.05 < al.edit_distance_knn(x, y, 10) < 0.95
    assert al.lcs_knn(x, x, 10) == 10 and al.edit_distance_knn(x, x, 10) == 1.0


def test_ordinal_metrics_on_exact_ties():
    # sign rows: every cosine is exact, rankings full of exact ties broken by the smaller index
    rng = np.random.default_rng(11)
    z = rng.normal(size=(90, 3))
    x, y = sign_rows(rng, z, 16, 1.0), sign_rows(rng, z, 64, 2.0)
    for k in (3, 8):
        assert al.lcs_knn(x, y, k) == pytest.approx(naive_lcs_knn(x, y, k), abs=1e-12)
        assert al.edit_distance_knn(x, y, k) == pytest.approx(naive_edit_distance_knn(x, y, k), abs=1e-12)
        assert al.mutual_knn(x, y, k) == pytest.approx(naive_mutual_knn(x, y, k), abs=1e-12)


@pytest.mark.parametrize("unbiased", [False, True])
def test_cka_matches_formula_both_strategies(unbiased, monkeypatch):
    x, y = related()
    ref = naive_cka(x, y, unbiased)
    assert al.cka(x, y, unbiased=unbiased) == pytest.approx(ref, rel=1e-10)
    monkeypatch.setattr(al, "GRAM_BYTES", 0)  # force the feature-product strategy
    assert al.cka(x, y, unbiased=unbiased) == pytest.approx(ref, rel=1e-10)


def test_cknna_matches_dense_reference():
    x, y = related()
    assert al.cknna(x, y, 10) == pytest.approx(naive_cknna(x, y, 10), rel=1e-9)


def test_svcca_matches_sklearn_cca():
    x, y = related()
    assert al.svcca(x, y, 10) == pytest.approx(naive_svcca(x, y, 10), abs=1e-6)


def test_outlier_clamp_matches_platonic_rep():
    rng = np.random.default_rng(3)
    f = torch.from_numpy(rng.standard_t(2, size=(50, 40)))
    thr = torch.quantile(f.abs(), 0.95, dim=1).mean()
    assert torch.allclose(remove_outliers(f, 0.95), f.clamp(-thr, thr))
    assert remove_outliers(f, None) is f


@pytest.mark.parametrize("exact", [False, True])
def test_prepare_features_one_threshold_over_all_layers(exact):
    # platonic-rep `remove_outliers(feats [N, L, D], q)`: one threshold for the whole model
    rng = np.random.default_rng(4)
    feats = torch.from_numpy(rng.standard_t(2, size=(60, 3, 20)) * np.array([1.0, 5.0, 0.2])[None, :, None])
    if exact:
        thr = feats.reshape(-1).abs().sort().values[int(0.95 * feats.numel())]
    else:
        thr = torch.quantile(feats.abs().flatten(start_dim=1), 0.95, dim=1).mean()
    layers = [feats[:, i, :] for i in range(3)]
    assert float(clamp_threshold(layers, 0.95, exact=exact)) == pytest.approx(float(thr), rel=1e-12)
    got = prepare_features(layers, 0.95, exact=exact)
    for i in range(3):
        np.testing.assert_allclose(got[i].numpy(), feats[:, i, :].clamp(-thr, thr).numpy(), rtol=1e-12)
    # not the per-layer thresholds: the wide layer is clamped far more than on its own
    assert not torch.allclose(got[1], remove_outliers(layers[1], 0.95))


# ---------------------------------------------------------------- properties from the issue

ALL = ["mutual_knn", "cycle_knn", "cknna", "cka", "unbiased_cka", "svcca", "edit_distance_knn"]


@pytest.mark.parametrize("metric", [m for m in ALL if m != "cycle_knn"])
def test_identical_spaces_score_one(metric):
    x, _ = related()
    assert align(x, x, k=10, metric=metric).score == pytest.approx(1.0, abs=1e-9)


def test_cycle_knn_identical_spaces():
    # below 1 by design: an item need not be a neighbour of any of its own neighbours
    x, _ = related()
    assert align(x, x, metric="cycle_knn").score == pytest.approx(naive_cycle_knn(x, x, 10), abs=1e-12)
    assert naive_cycle_knn(x, x, 10) > 0.95


@pytest.mark.parametrize("metric", ["mutual_knn", "cycle_knn", "cknna", "cka", "unbiased_cka"])
def test_invariant_to_rotation_and_scaling(metric):
    x, y = related()
    q1 = ortho_group.rvs(x.shape[1], random_state=1)
    q2 = ortho_group.rvs(y.shape[1], random_state=2)
    base = align(x, y, metric=metric).score
    moved = align(3.7 * x @ q1, 0.01 * y @ q2, metric=metric).score
    assert moved == pytest.approx(base, abs=1e-10)


def test_svcca_invariant_to_scaling():
    x, y = related()
    assert align(5 * x, 0.2 * y, metric="svcca").score == pytest.approx(align(x, y, metric="svcca").score)


def test_random_pairing_scores_chance():
    # the same space with its rows shuffled: neighbour structure intact, pairing random
    n, k = 1500, 10
    x, _ = related(n=n)
    perm = np.random.default_rng(7).permutation(n)
    res = align(x, x[perm], k=k)
    assert res.chance == pytest.approx(k / (n - 1))
    # null SD of the score is about 0.0012 here (overlap hypergeometric, items weakly dependent)
    assert abs(res.score - res.chance) < 0.005


def test_chance_and_result_fields():
    x, y = related()
    res = align(x, y, k=7)
    d = res.to_dict()
    assert d["n"] == N and d["k"] == 7 and d["chance"] == pytest.approx(7 / (N - 1))
    assert set(d) == {"metric", "score", "chance", "n", "k", "q", "preset", "warnings"} and d["preset"] is None
    assert d["warnings"] == []
    assert align(x, y, metric="cka").chance is None


def test_torch_input_and_float32():
    x, y = related()
    s64 = align(x, y).score
    s32 = align(torch.from_numpy(x).float(), torch.from_numpy(y).float()).score
    assert abs(s32 - s64) < 0.01


# ---------------------------------------------------------------- neighbour search details

def test_topk_ties_break_by_index_and_chunks_agree():
    # small-integer rows, duplicated: every inner product is an exact integer in float64 on any
    # BLAS and for any block size, so the ties are exact and only the tie rule decides
    rng = np.random.default_rng(5)
    base = rng.integers(-3, 4, size=(40, 8)).astype(np.float64)
    x = np.vstack([base, base, base[:10]])
    sims = x @ x.T
    np.fill_diagonal(sims, -np.inf)
    ref = np.argsort(-sims, axis=1, kind="stable")[:, :6]   # ties -> smaller index
    xt = torch.from_numpy(x)
    ids, vals = topk_neighbours(xt, 6)
    assert np.array_equal(ids.numpy(), ref)
    ids_small, _ = topk_neighbours(xt, 6, chunk_bytes=1)  # one row per chunk
    assert np.array_equal(ids_small.numpy(), ref)
    assert torch.all(vals[:, :-1] >= vals[:, 1:])
    # exact float32 too (integers below 2^24)
    assert np.array_equal(topk_neighbours(xt.float(), 6, chunk_bytes=1)[0].numpy(), ref)


def test_groups_exclude_copies():
    x = torch.nn.functional.normalize(torch.randn(30, 5, dtype=torch.float64), dim=1)
    idx = torch.tensor(sorted(np.random.default_rng(0).integers(0, 30, 30)))
    ids, _ = topk_neighbours(x[idx], 3, groups=idx)
    assert not torch.any(idx[ids] == idx[:, None])


def test_lookup_sorted_keys_equal_dense():
    ids = torch.stack([torch.randperm(50)[:7] for _ in range(50)])
    vals = torch.randint(1, 9, (50, 7), dtype=torch.int32)
    dense, sparse = NeighbourLookup(ids, vals), NeighbourLookup(ids, vals, dense_bytes=0)
    assert dense.dense and not sparse.dense
    q = torch.randint(0, 50, (50, 20))
    rows = torch.arange(50)[:, None]
    assert torch.equal(dense.get(rows, q), sparse.get(rows, q))


# ---------------------------------------------------------------- errors

def test_bad_inputs_raise_vlgap_error():
    x, y = related()
    with pytest.raises(VlgapError, match="k="):
        align(x, y, k=N)
    with pytest.raises(VlgapError, match="items"):
        align(x, y[:-1])
    bad = x.copy()
    bad[3, 0] = np.nan
    with pytest.raises(VlgapError, match=r"rows \[3\]"):
        align(bad, y)
    with pytest.raises(VlgapError, match="metric="):
        align(x, y, metric="mknn")
    with pytest.raises(VlgapError, match="cknna"):
        align(x, y, k=1, metric="cknna")
    with pytest.raises(VlgapError, match="layer_search"):
        align(np.stack([x, x]), y)
    with pytest.raises(VlgapError, match="quantile"):
        align(x, y, q=1.5)
