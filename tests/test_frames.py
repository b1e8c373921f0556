"""to_frame() on the result objects (issue 23, item 3): long format, typed columns, values equal to
the result's own numbers; pandas optional (a VlgapError naming the way out when it is missing)."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

pd = pytest.importorskip("pandas")

import vlgap
from vlgap.errors import VlgapError


def test_layer_search_frame_is_one_row_per_pair_and_pivots_back_to_the_matrix():
    rng = np.random.default_rng(0)
    shared = rng.normal(size=(40, 6))
    xs = [shared + rng.normal(scale=s, size=shared.shape) for s in (0.1, 1.0, 3.0)]
    ys = [shared @ rng.normal(size=(6, 6)) + rng.normal(scale=s, size=shared.shape) for s in (0.5, 2.0)]
    res = vlgap.layer_search(xs, ys, k=5)
    df = res.to_frame()
    assert len(df) == 6 and list(df.columns[:4]) == ["x_layer", "y_layer", "score", "is_best"]
    assert str(df["x_layer"].dtype) == "Int64" and str(df["score"].dtype) == "float64"
    assert str(df["is_best"].dtype) == "boolean" and str(df["metric"].dtype) == "string"
    matrix = df.pivot(index="x_layer", columns="y_layer", values="score").to_numpy()
    np.testing.assert_array_equal(matrix, res.scores)
    best = df[df["is_best"]]
    assert len(best) == 1 and (best["x_layer"].iloc[0], best["y_layer"].iloc[0]) == (res.x_layer, res.y_layer)
    assert (df["n"] == 40).all() and (df["k"] == 5).all()


def test_sweep_frame_is_one_row_per_cell_with_the_csv_columns():
    from vlgap.probe.sweep import ROW_FIELDS, SweepResult

    rows = [{"vision": "mobilenet_v2", "text": "minilm", "n_f": f, "n_c": c, "score": 0.1 * f + 0.01 * c,
             "ci_lo": 0.0, "ci_hi": 1.0, "p_value": 0.01, "null_mean": 0.02, "x_layer": 1, "y_layer": 2,
             "x_layer_name": "features.1", "y_layer_name": "layer.2", "n": 64, "k": 10, "chance": 0.15,
             "metric": "mutual_knn", "matrix": np.zeros((2, 3))} for f in (1, 2) for c in (1, 4)]
    df = SweepResult(Path("."), rows).to_frame()
    assert list(df.columns) == ROW_FIELDS and len(df) == 4
    assert str(df["n_f"].dtype) == "Int64" and str(df["vision"].dtype) == "string"
    assert df.loc[(df["n_f"] == 2) & (df["n_c"] == 4), "score"].item() == pytest.approx(0.24)


def test_scaling_fit_frame_is_one_row_per_parameter():
    f, c = (a.ravel().astype(float) for a in np.meshgrid([1, 2, 4, 8, 16], [1, 2, 4, 8], indexing="ij"))
    y = 0.41 - (0.15 * f ** -0.75 + 0.13 * c ** -1.3)
    fit = vlgap.fit_scaling({"n_f": f, "n_c": c, "score": y}, n_bootstrap=20, seed=0)
    df = fit.to_frame()
    assert list(df["parameter"]) == list(fit.params)
    for _, row in df.iterrows():
        assert row["estimate"] == fit.params[row["parameter"]]
        assert [row["ci_low"], row["ci_high"]] == fit.param_ci[row["parameter"]]
    assert (df["n_cells"] == 20).all()


def test_gap_frame_holds_each_statistic_with_its_interval():
    rng = np.random.default_rng(1)
    res = vlgap.gap(rng.normal(size=(30, 4)), rng.normal(0.5, 1, size=(30, 4)), n_permutations=50,
                    n_bootstrap=50, seed=0)
    df = res.to_frame().set_index("statistic")
    assert df.loc["mmd2", "estimate"] == res.mmd2_unbiased
    assert [df.loc["mmd2", "ci_low"], df.loc["mmd2", "ci_high"]] == res.ci
    assert df.loc["mmd2", "p_value"] == res.p_value and df.loc["mmd2", "n_a"] == 30
    assert np.isnan(df.loc["mmd2_biased", "ci_low"])


def test_compare_frames_paired_and_factorial():
    a = np.array([0.1, 0.4, 0.35, 0.8, 0.5, 0.6])
    b = a - np.array([0.05, 0.1, 0.0, 0.2, 0.1, 0.05])
    res = vlgap.compare(a, b, n_bootstrap=100, n_permutations=100, system_a="new", system_b="old")
    assert isinstance(res, dict) and res["analysis"] == "paired"
    df = res.to_frame().set_index("quantity")
    assert list(df.index) == ["mean new", "mean old", "difference"]
    assert df.loc["difference", "estimate"] == res["difference"] and df.loc["difference", "p_value"] == res["p_value"]
    assert np.isnan(df.loc["mean new", "p_value"])
    rows = [{"item": i, "a": x, "b": y, "score": i + x + 0.5 * y} for i in range(5) for x in (0, 1) for y in (0, 1)]
    fact = vlgap.compare(rows, factorial=True, n_bootstrap=50, n_permutations=50)
    df = fact.to_frame().set_index("quantity")
    assert df.loc["main_a", "estimate"] == pytest.approx(1.0) and df.loc["main_b", "estimate"] == pytest.approx(0.5)
    assert df.loc["a=1, b=1", "estimate"] == pytest.approx(fact["cells"]["11"]["mean"])
    assert len(df) == 7


def test_caption_frames_per_metric_and_per_item():
    # 12 items: intervals need at least vlgap.stats.MIN_ITEMS_FOR_INTERVAL (10)
    preds = [f"{p} {i}" for i in range(4) for p in ["a man rides a horse", "a cat on a mat", "two dogs in the snow"]]
    refs = [r for _ in range(4) for r in [["a man is riding a horse"], ["a cat sits on a mat"], ["dogs playing in snow"]]]
    res = vlgap.caption_eval(preds, refs, metrics="bleu,cider", n_bootstrap=30, per_item=True)
    df = res.to_frame().set_index("metric")
    assert list(df.index) == ["BLEU-1", "BLEU-2", "BLEU-3", "BLEU-4", "CIDEr"]
    assert df.loc["BLEU-4", "coco_name"] == "Bleu_4" and df.loc["CIDEr", "score"] == res["CIDEr"]["score"]
    assert [df.loc["CIDEr", "ci_low"], df.loc["CIDEr", "ci_high"]] == res["CIDEr"]["ci"]
    items = res.to_frame(per_item=True)
    assert len(items) == 12 * 5 and list(items.columns) == ["id", "metric", "score"]
    cider = items[items["metric"] == "CIDEr"]["score"]
    assert cider.mean() == pytest.approx(res["CIDEr"]["score"])
    cmp = vlgap.compare_captions(preds, preds[::-1], refs, metrics="cider", n_bootstrap=30, n_permutations=30)
    row = cmp.to_frame().iloc[0]
    assert row["metric"] == "CIDEr" and row["difference"] == cmp["CIDEr"]["difference"]


def test_without_pandas_the_error_names_the_way_out(monkeypatch):
    from vlgap.stats.paired import ComparisonResult

    monkeypatch.setitem(sys.modules, "pandas", None)  # import pandas now raises ImportError
    res = ComparisonResult({"analysis": "paired"})
    with pytest.raises(VlgapError, match=r"ComparisonResult.to_frame\(\) needs pandas.*pip install pandas"):
        res.to_frame()
