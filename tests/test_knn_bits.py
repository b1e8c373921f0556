"""Neighbour bitsets and the overlap totals built on them, against sets and plain loops."""
import numpy as np
import pytest
import torch

from vlgap.metrics import knn_bits as kb
from vlgap.metrics.knn import resample_memo
from vlgap.metrics.layer_search import layer_search


def random_lists(rng, b, n, k):
    """[b, n, k] distinct ids per list, never the item itself, and a validity mask with padding."""
    ids = np.empty((b, n, k), dtype=np.int64)
    for r in range(b):
        for i in range(n):
            others = np.delete(np.arange(n), i)
            ids[r, i] = rng.choice(others, size=k, replace=False)
    valid = rng.random((b, n, k)) < 0.8
    return torch.from_numpy(ids), torch.from_numpy(valid)


@pytest.mark.parametrize("n", [2, 63, 64, 65, 130, 192])
def test_bits_hold_exactly_the_valid_ids(n):
    rng = np.random.default_rng(n)
    k = min(5, n - 1)
    ids, valid = random_lists(rng, 3, n, k)
    bits = kb.neighbour_bits(ids, n, valid)
    assert bits.shape == (kb.n_words(n), 3, n) and bits.dtype == np.uint64
    for r in range(3):
        for i in range(n):
            got = {64 * w + j for w in range(bits.shape[0]) for j in range(64) if (int(bits[w, r, i]) >> j) & 1}
            assert got == {int(x) for x, ok in zip(ids[r, i], valid[r, i]) if ok}


@pytest.mark.parametrize("n, k, weighted", [(65, 7, True), (192, 10, True), (192, 10, False), (300, 260, True)])
def test_overlap_totals_equal_set_intersections(n, k, weighted):
    rng = np.random.default_rng(k)
    b, lx, ly = 4, 3, 2
    xs = [random_lists(rng, b, n, k) for _ in range(lx)]
    ys = [random_lists(rng, b, n, k) for _ in range(ly)]
    w = rng.integers(0, 4, size=(b, n)) if weighted else None
    got = kb.overlap_totals([kb.neighbour_bits(i, n, v) for i, v in xs],
                            kb.stack_layers([kb.neighbour_bits(i, n, v) for i, v in ys]), w, max_count=k)
    def sets(lists):  # each list's valid ids as a Python set, [resample][item]
        ids, ok = lists[0].tolist(), lists[1].tolist()
        return [[{x for x, good in zip(ids[r][i], ok[r][i]) if good} for i in range(n)] for r in range(b)]

    x_sets, y_sets = [sets(x) for x in xs], [sets(y) for y in ys]
    for r in range(b):
        for a in range(lx):
            for c in range(ly):
                ref = sum((1 if w is None else int(w[r, i])) * len(x_sets[a][r][i] & y_sets[c][r][i])
                          for i in range(n))
                assert got[r, a, c] == ref


def test_shared_x_lists_broadcast_over_resamples():
    rng = np.random.default_rng(0)
    n, k = 100, 6
    x_ids, x_ok = random_lists(rng, 1, n, k)
    ys = [random_lists(rng, 5, n, k) for _ in range(2)]
    y_stack = kb.stack_layers([kb.neighbour_bits(i, n, v) for i, v in ys])
    shared = kb.overlap_totals([kb.neighbour_bits(x_ids, n, x_ok)], y_stack)
    tiled = kb.overlap_totals([kb.neighbour_bits(x_ids.expand(5, n, k), n, x_ok.expand(5, n, k))], y_stack)
    assert np.array_equal(shared, tiled)


def test_small_chunks_give_the_same_totals(monkeypatch):
    rng = np.random.default_rng(1)
    n, k = 80, 5
    bits = lambda lists: kb.neighbour_bits(lists[0], n, lists[1])
    xs = [bits(random_lists(rng, 6, n, k)) for _ in range(2)]
    y = kb.stack_layers([bits(random_lists(rng, 6, n, k)) for _ in range(3)])
    w = rng.integers(0, 3, size=(6, n))
    whole = kb.overlap_totals(xs, y, w)
    monkeypatch.setattr(kb, "CHUNK_WORDS", 1)   # one resample per chunk
    assert np.array_equal(kb.overlap_totals(xs, y, w), whole)


def test_bits_pay_only_for_few_words_per_list():
    assert kb.bits_pay(192, 10) and kb.bits_pay(64, 1) and kb.bits_pay(1000, 10)
    assert not kb.bits_pay(2000, 10) and not kb.bits_pay(200, 1)


def test_memo_serves_bitsets_and_lists_apart(monkeypatch):
    # the memo keys each kind of stored value apart: a layer search with bitsets, then one with
    # look-up tables inside the same memo, both equal a memo-less search
    from vlgap.metrics import alignment as al
    rng = np.random.default_rng(2)
    z = rng.normal(size=(120, 3))
    xs = [z @ rng.normal(size=(3, 8)) + rng.normal(size=(120, 8)) for _ in range(2)]
    ys = [z @ rng.normal(size=(3, 6)) + rng.normal(size=(120, 6)) for _ in range(2)]
    kw = dict(k=8, n_bootstrap=30, n_permutations=30, seed=4)
    plain = layer_search(xs, ys, **kw)
    with resample_memo() as memo:
        first = layer_search(xs, ys, **kw)
        monkeypatch.setattr(al.MutualKnn, "_use_bits", lambda self, states, n: False)
        second = layer_search(xs, ys, **kw)
    assert memo.misses > 0
    for res in (first, second):
        assert np.array_equal(res.bootstrap.samples, plain.bootstrap.samples)
        assert np.array_equal(res.permutation.samples, plain.permutation.samples)
