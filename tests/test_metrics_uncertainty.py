"""Bootstrap (best pair re-selected per resample) and permutation null of the layer search."""
import numpy as np
import pytest
import torch

from vlgap.metrics import alignment as al
from vlgap.metrics.layer_search import align, layer_search, precompute_layers
from vlgap.metrics.base import Neighbours
from vlgap.metrics.uncertainty import bootstrap_weight_batches, permutation_batches
from ties import assert_no_near_ties

N = 150


def layers(seed=0, n=N, coupling=1.0):
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(n, 4))
    xs = [coupling * z @ rng.normal(size=(4, w)) + s * rng.normal(size=(n, w))
          for w, s in ((20, 0.6), (30, 1.5), (12, 3.0))]
    ys = [coupling * z @ rng.normal(size=(4, w)) + s * rng.normal(size=(n, w)) for w, s in ((16, 1.0), (24, 2.5))]
    return xs, ys


def naive_resample_score(x, y, w, k, distinct=True):
    """Mutual k-NN recomputed on a resample given by multiplicities w (numpy, from scratch).

    distinct: neighbours are the k nearest distinct drawn items; else every copy is a candidate
    (ties between copies go to the earlier draw). Never the item's own copies. Each draw counts."""
    idx = np.repeat(np.arange(len(w)), w)
    if distinct:
        pool = np.flatnonzero(w)                      # distinct drawn items, ascending

        def knn(f):
            f = f / np.linalg.norm(f, axis=1, keepdims=True)
            s = f[pool] @ f[pool].T
            np.fill_diagonal(s, -np.inf)
            return {o: set(pool[np.argsort(-s[r], kind="stable")[:k]]) for r, o in enumerate(pool)}

        ka, kb = knn(x), knn(y)
        return sum(w[o] * len(ka[o] & kb[o]) for o in pool) / (len(w) * k)

    def knn_draws(f):
        f = f / np.linalg.norm(f, axis=1, keepdims=True)
        s = f[idx] @ f[idx].T
        s[idx[:, None] == idx[None, :]] = -np.inf
        return np.argsort(-s, axis=1, kind="stable")[:, :k]

    ka, kb = knn_draws(x), knn_draws(y)
    return np.mean([len(set(ka[i]) & set(kb[i])) for i in range(len(idx))]) / k


@pytest.fixture(params=["bits", "lookup"])
def overlap_path(request, monkeypatch):
    """Run a test through both ways MutualKnn counts resampled overlaps (vlgap.metrics.knn_bits
    bitsets, or look-up tables), whatever `bits_pay` would pick for its N and k."""
    monkeypatch.setattr(al.MutualKnn, "_use_bits", lambda self, states, n: request.param == "bits")
    return request.param


@pytest.mark.parametrize("neighbours", ["distinct", "copies"])
def test_fast_bootstrap_equals_recomputed_resamples(neighbours, overlap_path):
    xs, ys = layers()
    assert_no_near_ties(xs + ys)   # resamples rank deep into each row: no rounding-close pair anywhere
    k = 5
    px, py = precompute_layers(xs, k=k), precompute_layers(ys, k=k)
    px.engine.bootstrap_neighbours = neighbours
    weights = next(bootstrap_weight_batches(N, 6, seed=3))
    fast = px.engine.bootstrap_scores(px.feats, py.feats, px.states, py.states, weights)
    for b in (0, 5):
        for a, c in ((1, 0), (2, 1)):
            ref = naive_resample_score(xs[a], ys[c], weights[b], k, distinct=neighbours == "distinct")
            assert fast[b, a, c] == pytest.approx(ref, abs=1e-12)
    if neighbours == "copies":   # the literal rerun, as the generic path of every metric does it
        generic = al.AlignmentMetric.bootstrap_scores(px.engine, px.feats, py.feats, px.states, py.states,
                                                      weights)
        np.testing.assert_allclose(fast, generic, rtol=0, atol=1e-12)


@pytest.mark.parametrize("neighbours", ["distinct", "copies"])
def test_shallow_rankings_fall_back_exactly(neighbours, overlap_path):
    # force rows whose stored ranking is too short, so the full-ranking fallback runs
    xs, ys = layers(1)
    assert_no_near_ties(xs + ys)   # the fallback ranks one row at a time (another matmul shape)
    k = 6
    px, py = precompute_layers(xs, k=k), precompute_layers(ys, k=k)
    px.engine.bootstrap_neighbours = neighbours
    weights = next(bootstrap_weight_batches(N, 3, seed=0))
    expected = px.engine.bootstrap_scores(px.feats, py.feats, px.states, py.states, weights)
    for side in (px, py):
        side.states = [Neighbours(s.ids[:, :k]) for s in side.states]
    got = px.engine.bootstrap_scores(px.feats, py.feats, px.states, py.states, weights)
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-12)


def test_fast_permutations_equal_generic(overlap_path):
    xs, ys = layers(2)
    assert_no_near_ties(xs + ys, depth=8)
    px, py = precompute_layers(xs, k=8), precompute_layers(ys, k=8)
    perms = next(permutation_batches(N, 5, seed=1))
    fast = px.engine.permutation_scores(px.feats, py.feats, px.states, py.states, perms)
    direct = np.array([[[al.mutual_knn(x, y[p], 8) for y in ys] for x in xs] for p in perms])
    np.testing.assert_allclose(fast, direct, rtol=0, atol=1e-12)


@pytest.mark.parametrize("metric", ["cka", "cycle_knn"])
def test_generic_permutation_equals_direct(metric):
    xs, ys = layers(3)
    assert_no_near_ties(xs + ys, depth=8)
    px, py = precompute_layers(xs, k=8, metric=metric), precompute_layers(ys, k=8, metric=metric)
    perms = next(permutation_batches(N, 2, seed=1))
    got = px.engine.permutation_scores(px.feats, py.feats, px.states, py.states, perms)
    direct = np.array([[[align(x, y[p], k=8, metric=metric).score for y in ys] for x in xs] for p in perms])
    np.testing.assert_allclose(got, direct, rtol=1e-9)


def test_reproducible_by_seed():
    xs, ys = layers(4)
    a = layer_search(xs, ys, k=5, n_bootstrap=60, n_permutations=60, seed=11).to_dict()
    b = layer_search(xs, ys, k=5, n_bootstrap=60, n_permutations=60, seed=11).to_dict()
    c = layer_search(xs, ys, k=5, n_bootstrap=60, n_permutations=60, seed=12).to_dict()
    assert a == b
    assert a["ci"] != c["ci"]
    assert a["bootstrap"]["n_resamples"] == 60 and a["permutation"]["n_permutations"] == 60


def test_interval_and_pvalue_make_sense():
    xs, ys = layers(5)
    res = layer_search(xs, ys, k=5, n_bootstrap=200, n_permutations=200, seed=0)
    lo, hi = res.ci
    assert lo <= res.best_score <= hi
    assert res.p_value == pytest.approx(1 / 201)          # strongly aligned: nothing in the null reaches it
    assert res.permutation.null_pair_mean == pytest.approx(5 / (N - 1), rel=0.05)
    assert res.null_mean >= res.permutation.null_pair_mean  # the max over pairs exceeds one pair
    freq = res.bootstrap.best_pair_frequency
    assert sum(f["frequency"] for f in freq) <= 1.0 + 1e-12
    d = res.to_dict()
    assert {"ci", "p_value", "null_mean", "bootstrap", "permutation", "seed"} <= set(d)


def test_unrelated_spaces_not_significant():
    xs, ys = layers(6, coupling=0.0)
    res = layer_search(xs, ys, k=5, n_permutations=200, seed=0)
    assert res.p_value > 0.05  # fixed seed: deterministic


def test_null_p_values_roughly_uniform():
    # 40 independent null data sets, 1 x 1 layers: p-values should not pile up near 0
    rng = np.random.default_rng(0)
    ps = []
    for _ in range(40):
        x, y = rng.normal(size=(80, 6)), rng.normal(size=(80, 6))
        ps.append(layer_search([x], [y], k=5, n_permutations=99, seed=int(rng.integers(1 << 30))).p_value)
    ps = np.array(ps)
    assert 0.25 < ps.mean() < 0.75
    assert np.mean(ps <= 0.1) <= 0.25


def test_bootstrap_other_metric_runs_generic_path():
    xs, ys = layers(7)
    res = layer_search(xs, ys, metric="cka", n_bootstrap=20, seed=0)
    assert res.ci[0] <= res.best_score + 0.05 and res.ci[1] >= res.best_score - 0.05
    assert torch.is_tensor(precompute_layers(xs, metric="cka").feats[0])


def test_permutations_with_sorted_key_tables_equal_dense(monkeypatch):
    xs, ys = layers(8)
    px, py = precompute_layers(xs, k=6), precompute_layers(ys, k=6)
    perms = next(permutation_batches(N, 4, seed=2))
    dense = px.engine.permutation_scores(px.feats, py.feats, px.states, py.states, perms)
    monkeypatch.setattr(al, "TABLES_BYTES", 0)  # as for large N: no dense tables kept
    sparse = px.engine.permutation_scores(px.feats, py.feats, px.states, py.states, perms)
    assert np.array_equal(dense, sparse)  # same neighbour lists, integer look-ups: exact by construction


def test_interval_methods_on_noise_and_signal():
    # pure noise, 3 x 2 pairs: the best score is inflated by selection; the basic and simultaneous
    # intervals reach down to chance, the percentile one is the re-selected maxima themselves
    xs, ys = layers(9, coupling=0.0)
    basic = layer_search(xs, ys, k=5, n_bootstrap=200, seed=0)
    assert basic.bootstrap.method == "basic"
    pct = layer_search(xs, ys, k=5, n_bootstrap=200, seed=0, ci_method="percentile")
    sim = layer_search(xs, ys, k=5, n_bootstrap=200, seed=0, ci_method="simultaneous")
    lo_b, hi_b = basic.ci
    lo_p, hi_p = pct.ci
    T = basic.best_score
    assert (lo_b, hi_b) == pytest.approx((2 * T - hi_p, 2 * T - lo_p))   # same resamples, reflected
    assert lo_b <= basic.chance <= hi_b and sim.ci[0] <= basic.chance <= sim.ci[1]
    # aligned data: all three bracket the estimate and the simultaneous band is the widest
    xs, ys = layers(10)
    widths = {}
    for m in ("basic", "percentile", "simultaneous"):
        res = layer_search(xs, ys, k=5, n_bootstrap=150, seed=1, ci_method=m)
        assert res.ci[0] <= res.best_score <= res.ci[1]
        widths[m] = res.ci[1] - res.ci[0]
    assert widths["simultaneous"] >= widths["basic"] == pytest.approx(widths["percentile"])
