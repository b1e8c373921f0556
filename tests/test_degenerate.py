"""The degenerate-input rule (issue 44): where a statistic's answer is trivial, undefined or unstable for
its input it is refused with the reason, or returned with one warning line saying why it means little
(vlgap.caveats), in the result (JSON) and on the console. One test per case the hostile sweep found
printed without a word, and the mechanism itself.
"""
from __future__ import annotations

import json
import math
import threading
import warnings
from itertools import combinations

import numpy as np
import pytest
from in_process_cli import run_cli

import vlgap
from vlgap.caveats import DegenerateWarning, caveat, collecting, reports_caveats
from vlgap.errors import VlgapError

RNG = np.random.default_rng(44)
X = RNG.normal(size=(60, 16))
Y = X @ RNG.normal(size=(16, 12)) + RNG.normal(size=(60, 12))


# ---- the mechanism --------------------------------------------------------------------------------

def test_caveats_reach_the_result_once_each_and_nest():
    @reports_caveats
    def inner():
        caveat("inner says")
        caveat("inner says")  # every resample says it again: kept once
        return {"value": 1}

    @reports_caveats
    def outer():
        caveat("outer says")
        return {"inner": inner()}

    res = outer()
    assert res["inner"]["warnings"] == ["inner says"]
    assert res["warnings"] == ["outer says", "inner says"]


def test_a_caveat_outside_a_result_is_a_python_warning_and_a_prefix_names_its_place():
    with pytest.warns(DegenerateWarning, match="alone"):
        caveat("alone")
    with collecting() as outer:
        with collecting(prefix="layer 3: "):
            caveat("few points")
    assert outer == ["layer 3: few points"]


def test_a_worker_thread_reports_to_the_commands_collection():
    with collecting(process_wide=True) as found:
        t = threading.Thread(target=caveat, args=("from a worker",))
        t.start()
        t.join()
    assert found == ["from a worker"]


def test_the_cli_prints_each_caveat_once_on_stderr_and_the_json_carries_it(monkeypatch, capsys, tmp_path):
    x = tmp_path / "x.npy"
    y = tmp_path / "y.npy"
    np.save(x, X[:24])
    np.save(y, Y[:24])
    code, out, err = run_cli(monkeypatch, capsys, "align", x, y, "--k", "20", "--json")
    assert code == 0
    said = "mutual_knn: k=20 of N=24 items: chance level is k/(N-1) = 0.870"
    assert json.loads(out)["warnings"][0].startswith(said)
    assert " ".join(err.split()).count("warning: " + said) == 1


# ---- alignment ------------------------------------------------------------------------------------

def test_k_of_n_minus_1_is_refused_for_mutual_and_cycle_knn_and_high_chance_warned():
    for metric in ("mutual_knn", "cycle_knn"):
        with pytest.raises(VlgapError, match=f"k=59 with N=60 items: every item's k nearest neighbours are all the "
                                             f"other items, so {metric} is 1 whatever the features"):
            vlgap.align(X, Y, k=59, metric=metric)
    res = vlgap.align(X, Y, k=40)
    assert res.chance == pytest.approx(40 / 59) and len(res.warnings) == 1 and "little room" in res.warnings[0]
    assert vlgap.align(X, Y, k=10).warnings == []


@pytest.mark.parametrize("metric", ["mutual_knn", "cknna", "cka", "svcca"])
def test_scores_do_not_depend_on_a_global_scale(metric):
    """X * 1e-20 scored 0.65 instead of 0.70 and X * 1e-310 0.175 (rows below the norm clamp were not
    normalised); X * 1e300 was 'zero variance'. Every representable scale now scores as X does."""
    base = vlgap.align(X, Y, k=10, metric=metric, cca_dim=4).score
    for dtype, scales in ((np.float64, [1e-300, 1e-150, 1e-20, 1e-5, 1e5, 1e20, 1e150, 1e300]),
                          (np.float32, [1e-30, 1e-20, 1e-5, 1e5, 1e20, 1e30])):
        for s in scales:
            xs = (X * s).astype(dtype)
            assert np.isfinite(xs).all() and (xs != 0).any(axis=1).all()
            res = vlgap.align(xs, Y, k=10, metric=metric, cca_dim=4)
            assert res.score == pytest.approx(base, abs=1e-5 if dtype is np.float32 else 1e-9), (dtype, s)
            assert res.warnings == []


def test_subnormal_features_and_zero_rows_score_with_a_warning_and_non_finite_rows_are_refused():
    res = vlgap.align(X * 1e-310, Y, k=10)
    assert res.score == pytest.approx(vlgap.align(X, Y, k=10).score, abs=0.02)
    assert len(res.warnings) == 1 and "subnormal" in res.warnings[0]
    zero = X.copy()
    zero[[3, 7]] = 0
    res = vlgap.align(zero, Y)  # a few zero rows (a black frame through ReLU blocks): scored, named once
    assert len(res.warnings) == 1 and "X[0]: item rows [3, 7] (2 of" in res.warnings[0] and "all zero" in res.warnings[0]
    bad = X.copy()
    bad[5, 2] = np.inf
    with pytest.raises(VlgapError, match=r"X\[0\]: NaN or Inf in item rows \[5\]"):
        vlgap.align(bad, Y)


def test_few_distinct_pairings_are_said():
    res = vlgap.layer_search([X[:5]], [Y[:5]], k=1, n_permutations=200)
    assert any("only 120 distinct pairings of 5 items exist" in w for w in res.warnings)


# ---- distribution gap -----------------------------------------------------------------------------

def test_identical_sets_are_warned_and_reordered_copies_too():
    res = vlgap.gap(X, X[::-1].copy(), n_permutations=50, n_bootstrap=0)
    assert res.warnings == ["A and B hold the same 60 items (identical sets): the gap is 0 by construction, the "
                            "test cannot reject, and the witness items of both sides are the same items"]
    assert vlgap.gap(X, X + 1e-9, n_permutations=10, n_bootstrap=0).warnings == []


def test_duplicates_are_at_distance_zero_in_the_median_heuristic():
    """Most pooled pairs duplicates: the Gram expansion left ~1e-16 residues there, whose median became a
    bandwidth of ~1e-8; now they are 0, the median falls back to the mean distance, and that is said."""
    z = np.random.default_rng(1).normal(size=(5, 384))  # row 2: its Gram expansion leaves 2.3e-13, not 0
    a = np.vstack([np.repeat(z[2:3], 60, axis=0), np.random.default_rng(3).normal(size=(12, 384))])
    b = a.copy()
    b[-1] += 0.5  # not the same set, but most pooled pairs are copies of one row
    res = vlgap.mmd_test(a, b, n_permutations=0, n_bootstrap=0)
    assert any("at least half of the pooled pairs are identical items (14 distinct of 144)" in w for w in res.warnings)
    assert res.bandwidth > 10  # was 4.1e-07: the median of the rounding residues


def test_scales_beyond_the_safe_range_are_refused_with_the_fix():
    """x1e200 went through numpy overflow warnings to scikit-learn's 'Input X contains NaN'; x1e-200 was
    'all items are identical'."""
    for s, why in ((1e200, "overflow"), (1e-200, "underflow to 0")):
        with pytest.raises(VlgapError, match=f"largest |value| is .*outside the range .* they would {why}"):
            vlgap.gap(X * s, Y[:, :12].repeat(2, axis=1)[:, :16] * s, n_permutations=10, n_bootstrap=0)


def test_frechet_distance_below_the_dimension_is_warned():
    res = vlgap.frechet_distance(X[:2], Y[:2, :12].repeat(2, axis=1)[:, :16])
    assert len(res.warnings) == 1 and "from n_a=2 items in D=16 dimensions" in res.warnings[0]
    assert vlgap.frechet_distance(X, X + 1).warnings == []


def test_the_mmd_p_value_is_exact_over_all_splits_when_they_are_fewer_than_asked():
    a, b = X[:4, :3], X[4:8, :3] + 3.0
    res = vlgap.mmd_test(a, b, n_permutations=1000, n_bootstrap=0)
    assert res.exact and res.n_permutations == math.comb(8, 4) == 70
    # by hand: the unbiased MMD^2 of every split, with the test's own kernel
    from vlgap.stats.kernels import kernel_matrix, resolve_kernel
    from vlgap.stats.mmd import mmd2_from_kernel
    import torch

    z = torch.from_numpy(np.vstack([a, b]))
    k = kernel_matrix(z, z, resolve_kernel("rbf", z))
    stats = []
    for chosen in combinations(range(8), 4):
        order = list(chosen) + [i for i in range(8) if i not in chosen]
        stats.append(mmd2_from_kernel(k[order][:, order], 4))
    expected = np.mean(np.array(stats) >= stats[0] - 1e-12)
    assert res.p_value == pytest.approx(expected) and res.p_value == pytest.approx(2 / 70)
    tiny = vlgap.mmd_test(a[:3], b[:3], n_permutations=1000, n_bootstrap=0)
    assert tiny.n_permutations == 20 and any("cannot reject at 0.05" in w for w in tiny.warnings)


def test_compare_with_zero_permutations_means_no_test():
    res = vlgap.compare(V := RNG.normal(size=12), V + 0.5, n_permutations=0, n_bootstrap=50)
    assert res["p_value"] is None and res["ci"] is None and res["n_permutations"] == 0
    assert res["ci_reason"].startswith("no test: n_permutations=0")
    tiny = vlgap.compare([1.0, 2.0, 3.0, 4.0], [2.0, 3.0, 5.0, 4.5], n_permutations=1000, n_bootstrap=20)
    assert tiny["exact"] and tiny["n_permutations"] == 16
    assert any("smallest attainable p-value is 0.125" in w for w in tiny["warnings"])


# ---- downstream, intrinsic dimension, proxies -----------------------------------------------------

def test_downstream_constant_columns_and_too_few_models_are_na_with_one_warning_each():
    rows = ([{"model": m, "task": "flat", "score": 0.5} for m in "abcd"]
            + [{"model": m, "task": "two", "score": s} for m, s in zip("ab", (0.1, 0.2))]
            + [{"model": m, "task": "ok", "score": s} for m, s in zip("abcd", (0.1, 0.3, 0.2, 0.5))])
    res = vlgap.downstream(rows, {"a": 0.1, "b": 0.2, "c": 0.3, "d": 0.4}, n_bootstrap=50)
    by = {t["task"]: t for t in res.tasks}
    assert by["flat"]["pearson"]["reason"] == "constant score" and by["two"]["pearson"]["reason"] == "n=2 < 3"
    assert by["ok"]["pearson"].get("reason") is None and np.isfinite(by["ok"]["pearson"]["p_holm"])
    assert len(res.warnings) == 2 and all("are n/a" in w for w in res.warnings)
    # the n/a tasks do not count in Holm's m: the one defined task is adjusted alone
    assert by["ok"]["pearson"]["p_holm"] == pytest.approx(by["ok"]["pearson"]["p"])


def test_a_single_label_class_is_refused():
    with pytest.raises(VlgapError, match="every one of the 40 items has the same label 'a'.*1 = chance"):
        vlgap.knn_classify_cv(X[:40], ["a"] * 40)


# ---- captions -------------------------------------------------------------------------------------

REFS = {"1": ["a cat sits on a mat", "a cat on a mat"], "2": ["a dog runs in the park", "the dog runs"],
        "3": ["a bird sings", "a small bird sings on a branch"]}


def test_predictions_without_words_are_scored_as_coco_caption_and_named():
    res = vlgap.caption_eval({"1": "a cat sits", "2": "!!!", "3": "..."}, REFS, metrics=["bleu", "cider"])
    assert res["warnings"] == ["2 of 3 predictions have no words (punctuation or symbols only): items '2', '3'; "
                               "they are scored as pycocoevalcap scores them, which says nothing about a caption"]
    assert res["CIDEr"]["score"] >= 0  # scored, not dropped (coco-caption parity)


def test_a_bogus_cider_df_is_refused_and_one_items_df_too(tmp_path):
    pred = {"1": "a cat sits", "2": "a dog", "3": "a bird"}
    with pytest.raises(VlgapError, match="cider_df='coco-val': neither 'corpus'"):
        vlgap.caption_eval(pred, REFS, metrics=["cider"], cider_df="coco-val")
    one = tmp_path / "one.json"
    one.write_text(json.dumps({"x": ["zzz qqq"]}))
    with pytest.raises(VlgapError, match="document frequencies from 1 item would give every n-gram idf"):
        vlgap.caption_eval(pred, REFS, metrics=["cider"], cider_df=str(one))
    single = vlgap.caption_eval({"1": "a cat"}, {"1": ["a cat sits"]}, metrics=["cider"])
    assert single["CIDEr"]["score"] == 0 and "CIDEr is 0 whatever the captions" in single["warnings"][0]


# ---- temporal pooling -----------------------------------------------------------------------------

def test_segments_beyond_every_n_f_are_refused_and_repeats_said():
    from vlgap.features.temporal_pooling import check_frames

    with pytest.raises(VlgapError, match="segments:100 with n_frames \\[2\\]: no cell samples 100 frames"):
        check_frames("segments:100", [2])
    check_frames("segments:4", [2, 4, 8])  # the documented nearest repeat at n_f = 2 beside larger n_f
    with pytest.warns(DegenerateWarning, match="segments:4 from 2 frames: 2 of the 4 segments repeat a frame"):
        vlgap.pool_frames(np.ones((2, 3)), "segments:4")
    with warnings.catch_warnings():
        warnings.simplefilter("error", DegenerateWarning)
        vlgap.pool_frames(np.ones((8, 3)), "segments:4")


def test_a_sweep_cells_warnings_reach_its_json_and_report(tmp_path):
    """A degenerate cell's caveat (here k whose chance level is 0.5 or more) is stored with the cell's row
    in sweep.json and shown in the report beside the pair's cells, not only printed on the console."""
    import json

    from conftest import write_toy_manifest
    from vlgap.probe.report import write_report
    from vlgap.probe.sweep import SweepConfig, run_sweep
    from toy_encoders import ToyText, ToyVision

    man = write_toy_manifest(tmp_path, 8, n_captions=2)
    cfg = SweepConfig(manifest=str(man), vision=["tv"], text=["tt"], n_frames=[1, 2], n_captions=[1, 2], k=4,
                      n_bootstrap=0, n_permutations=0, cache_dir=str(tmp_path / "cache"))
    run_sweep(cfg, tmp_path / "run", progress=False, encoders={"tv": ToyVision(), "tt": ToyText()})
    rows = json.loads((tmp_path / "run" / "sweep.json").read_text())["rows"]
    assert rows and all(any("chance level" in w for w in r.get("warnings", [])) for r in rows), rows[0]
    page = write_report(tmp_path / "run", progress=False).read_text()
    assert "warning (4 of 4 cells: n_f=1, n_c=1;" in page and "chance level" in page
