"""A sweep's cells in worker threads, its laws in worker processes, and the resample memo: the same
numbers as one thread computing everything afresh, bit for bit; every cell draws the same resamples."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from toy_encoders import ToyText, ToyVision
from vlgap.metrics.knn import ResampleMemo, active_memo, resample_memo
from vlgap.metrics.layer_search import layer_search, precompute_layers
from vlgap.probe.sweep import SweepConfig, run_sweep


@pytest.fixture
def toy_manifest(tmp_path):
    from conftest import write_toy_manifest

    return write_toy_manifest(tmp_path, 26, seed=1, length_mod=5, n_captions=4)


def _rows(res):
    return sorted(json.dumps(r, sort_keys=True) for r in res.rows)


def test_threaded_cells_and_process_fits_equal_one_worker(toy_manifest, tmp_path, monkeypatch):
    cfg = SweepConfig(str(toy_manifest), ["tv"], ["tt"], [2, 3, 4], [1, 2, 3], k=3, n_bootstrap=30, n_permutations=30,
                      cache_dir=str(tmp_path / "cache"))
    encs = {"tv": ToyVision(), "tt": ToyText()}
    monkeypatch.setenv("VLGAP_WORKERS", "1")
    one = run_sweep(cfg, tmp_path / "one", progress=False, encoders=encs)
    monkeypatch.setenv("VLGAP_WORKERS", "3")
    threads_before = torch.get_num_threads()
    many = run_sweep(cfg, tmp_path / "many", progress=False, encoders=encs)
    assert torch.get_num_threads() == threads_before  # restored after the worker threads
    assert _rows(one) == _rows(many)
    assert json.dumps(one.fits, sort_keys=True) == json.dumps(many.fits, sort_keys=True)
    assert len(one.fits) == 1 and "error" not in next(iter(one.fits.values()))
    assert active_memo() is None  # the sweep's memo ends with it


def test_every_cell_draws_the_same_resamples(toy_manifest, tmp_path, monkeypatch):
    """Common random numbers: a cell equals a layer search on its features with the sweep's own seed."""
    from vlgap.features.extract import load_features

    monkeypatch.setenv("VLGAP_WORKERS", "2")
    cfg = SweepConfig(str(toy_manifest), ["tv"], ["tt"], [2, 4], [1, 3], k=3, n_bootstrap=25, n_permutations=25,
                      seed=7, cache_dir=str(tmp_path / "cache"))
    res = run_sweep(cfg, tmp_path / "run", progress=False, encoders={"tv": ToyVision(), "tt": ToyText()})
    for row in res.rows:
        xs = load_features(toy_manifest, "tv", "n_f", row["n_f"], cache_dir=tmp_path / "cache").layers
        ys = load_features(toy_manifest, "tt", "n_c", row["n_c"], cache_dir=tmp_path / "cache").layers
        direct = layer_search(xs, ys, k=3, n_bootstrap=25, n_permutations=25, seed=7)
        assert row["score"] == direct.best_score
        assert (row["ci_lo"], row["ci_hi"]) == tuple(direct.ci)
        assert row["p_value"] == direct.p_value


def _layers(seed, n=40, dims=(6, 9, 5)):
    g = torch.Generator().manual_seed(seed)
    base = torch.randn(n, 4, generator=g)
    return [torch.cat([base, 0.7 * torch.randn(n, d, generator=g)], dim=1) for d in dims]


def test_memo_hits_return_what_a_fresh_bootstrap_computes():
    x, y = _layers(0), _layers(1)
    plain = layer_search(x, y, k=4, n_bootstrap=60, n_permutations=0, seed=3)
    sx = precompute_layers(x, k=4, for_bootstrap=True)
    sy = precompute_layers(y, k=4, for_bootstrap=True)
    with resample_memo() as memo:
        first = layer_search(sx, sy, k=4, n_bootstrap=60, n_permutations=0, seed=3)
        misses = memo.misses
        second = layer_search(sx, sy, k=4, n_bootstrap=60, n_permutations=0, seed=3)
        assert memo.misses == misses and memo.hits >= misses > 0  # the second search is all hits
        other = layer_search(sx, sy, k=4, n_bootstrap=60, n_permutations=0, seed=4)  # other resamples: misses
        assert memo.misses > misses
    for res in (first, second):
        assert np.array_equal(res.bootstrap.samples, plain.bootstrap.samples)
        assert res.ci == plain.ci
    assert not np.array_equal(other.bootstrap.samples, plain.bootstrap.samples)


def test_memo_budget_evicts_oldest_and_never_serves_a_dead_owner():
    memo = ResampleMemo(budget_bytes=100)

    class Owner:
        pass

    a, b = Owner(), Owner()
    memo.put(a, b"k", (torch.zeros(15, dtype=torch.int32),))        # 60 bytes
    memo.put(b, b"k", (torch.zeros(10, dtype=torch.int32),))        # 40: both fit
    assert memo.get(a, b"k") is not None and memo.get(b, b"k") is not None
    memo.put(b, b"j", (torch.zeros(5, dtype=torch.int32),))         # 20 more: the oldest (a) goes
    assert memo.get(a, b"k") is None and memo.get(b, b"j") is not None and memo.used <= 100
    memo.put(a, b"big", (torch.zeros(50, dtype=torch.int32),))      # larger than the budget: not kept
    assert memo.get(a, b"big") is None
    c = Owner()
    memo.put(c, b"k", (torch.zeros(1, dtype=torch.int32),))
    del c  # a new object may reuse the id: the weak reference tells them apart
    d = Owner()
    assert memo.get(d, b"k") is None
    assert ResampleMemo.digest(torch.tensor([1, 2]), 3) != ResampleMemo.digest(torch.tensor([2, 1]), 3)
    assert ResampleMemo.digest(torch.tensor([1, 2]), 3) != ResampleMemo.digest(torch.tensor([1, 2]), 4)


def test_memo_builds_a_value_once_for_threads_that_ask_together():
    import threading
    import time

    memo = ResampleMemo(budget_bytes=10**6)

    class Owner:
        pass

    owner, calls, results = Owner(), [], []
    start = threading.Barrier(4)

    def build():
        calls.append(1)
        time.sleep(0.2)   # the other threads ask while this one computes
        return (np.arange(3),)

    def ask():
        start.wait()
        results.append(memo.get_or_build(owner, b"k", build)[0])

    threads = [threading.Thread(target=ask) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 1 and len(results) == 4
    assert all(np.array_equal(r, np.arange(3)) for r in results)
    # a value too large to keep is built again by the next thread that asks, never lost
    small = ResampleMemo(budget_bytes=1)
    assert np.array_equal(small.get_or_build(owner, b"k", build)[0], np.arange(3)) and len(calls) == 2
    assert assert_raises_then_recovers(small, owner)


def assert_raises_then_recovers(memo, owner):
    def fail():
        raise RuntimeError("boom")

    try:
        memo.get_or_build(owner, b"x", fail)
    except RuntimeError:
        pass
    else:
        return False
    return memo.get_or_build(owner, b"x", lambda: (np.zeros(0),))[0].size == 0


def test_workers_setting_is_checked(monkeypatch):
    from vlgap.errors import VlgapError
    from vlgap.parallel import workers_for

    monkeypatch.setenv("VLGAP_WORKERS", "two")
    with pytest.raises(VlgapError, match=r"VLGAP_WORKERS=.*whole number >= 1"):
        workers_for(8)
    monkeypatch.setenv("VLGAP_WORKERS", "3")
    assert workers_for(8) == 3 and workers_for(2) == 2 and workers_for(8, "cuda:0") == 1


def test_a_kill_among_worker_threads_loses_only_unfinished_cells(toy_manifest, tmp_path, monkeypatch):
    import vlgap.probe.sweep as sweep

    monkeypatch.setenv("VLGAP_WORKERS", "2")
    cfg = SweepConfig(str(toy_manifest), ["tv"], ["tt"], [2, 4], [1, 3], k=3, n_bootstrap=10, n_permutations=10,
                      cache_dir=str(tmp_path / "cache"))
    encs = {"tv": ToyVision(), "tt": ToyText()}
    real, calls = sweep.score_cell, []

    def killed_on_third(*args, **kw):
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt("killed")
        return real(*args, **kw)

    monkeypatch.setattr(sweep, "score_cell", killed_on_third)
    with pytest.raises(KeyboardInterrupt):
        run_sweep(cfg, tmp_path / "run", progress=False, encoders=encs)
    written = len(list((tmp_path / "run" / "cells").glob("[!.]*.json")))
    assert written < 4  # whatever finished before the kill is sealed; the rest is not
    calls.clear()
    monkeypatch.setattr(sweep, "score_cell", lambda *a, **kw: (calls.append(1), real(*a, **kw))[1])
    resumed = run_sweep(cfg, tmp_path / "run", progress=False, encoders=encs)
    assert len(calls) == 4 - written  # only the missing cells are computed
    fresh = run_sweep(cfg, tmp_path / "fresh", progress=False, encoders=encs)
    assert _rows(resumed) == _rows(fresh)
