"""Intrinsic dimension: TwoNN and Levina-Bickel against hand computations and known manifolds, per-layer
files, the CLI, and alpha vs 2 / d_v."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest
from typer.testing import CliRunner

from vlgap.cli import app
from vlgap.errors import VlgapError
from vlgap.metrics.intrinsic_dim import exponent_from_dimension, intrinsic_dimension

runner = CliRunner()


def test_twonn_mle_and_levina_bickel_by_hand():
    # 1-D points 0, 1, 3: mu = 3/1, 2/1, 3/2 -> d = (N - 1) / sum log mu = 2 / log 9
    x = np.array([[0.0], [1.0], [3.0]])
    r = intrinsic_dimension(x, "twonn-mle", n_bootstrap=0)
    assert r["d"] == pytest.approx(2 / math.log(9)) and r["ci"] is None and r["n"] == 3
    # Levina-Bickel with k1 = k2 = 2 on 0, 1, 3, 7: per point 1/m = log(T2/T1):
    # 0: log(3/1); 1: log(2/1); 3: log(3/2); 7: log(6/4); d = 1 / mean(1/m)
    x = np.array([[0.0], [1.0], [3.0], [7.0]])
    r = intrinsic_dimension(x, "levina-bickel", k1=2, k2=2, n_bootstrap=0)
    assert r["d"] == pytest.approx(1 / np.mean(np.log([3, 2, 1.5, 1.5])))


def test_twonn_regression_by_hand():
    # log mu sorted l1 <= l2 <= l3 (N = 3, nothing discarded beyond the last point, F = i / N):
    x = np.array([[0.0], [1.0], [3.0]])
    lm = np.sort(np.log([3.0, 2.0, 1.5]))
    f = np.arange(1, 4) / 3
    xs, ys = lm[:2], -np.log(1 - f[:2])
    r = intrinsic_dimension(x, "twonn", discard_fraction=0.0, n_bootstrap=0)
    assert r["d"] == pytest.approx(float(xs @ ys / (xs @ xs)))


@pytest.mark.parametrize("d", [2, 5])
@pytest.mark.parametrize("method", ["twonn", "twonn-mle", "levina-bickel"])
def test_gaussian_embedded_linearly_in_high_dimension(d, method):
    rng = np.random.default_rng(d)
    x = rng.standard_normal((1500, d)) @ rng.standard_normal((d, 64))
    r = intrinsic_dimension(x, method, n_bootstrap=100, seed=1)
    assert abs(r["d"] - d) < 0.1 * d + 0.1, r
    assert r["ci"][0] - 0.1 * d <= d <= r["ci"][1] + 0.1 * d
    assert r["ci"][0] < r["d"] < r["ci"][1]


@pytest.mark.parametrize("method", ["twonn", "twonn-mle", "levina-bickel"])
def test_swiss_roll_is_two_dimensional(method):
    from sklearn.datasets import make_swiss_roll

    x, _ = make_swiss_roll(1500, random_state=0)
    r = intrinsic_dimension(x, method, n_bootstrap=100)
    assert 1.8 < r["d"] < 2.2, r


def test_duplicates_left_out_and_bad_input():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((200, 3))
    x = np.concatenate([x, x[:10]])
    r = intrinsic_dimension(x, "twonn-mle", n_bootstrap=0)
    # the repeated rows are left out, their first occurrences kept: the estimate is the distinct cloud's
    assert r["n_duplicates"] == 10 and r["n"] == 200
    assert r["d"] == intrinsic_dimension(x[:200], "twonn-mle", n_bootstrap=0)["d"]
    assert r["warnings"] == ["x: 10 of 210 rows repeat another row and were left out (distance ratios need "
                             "distinct points); d is estimated from the 200 distinct points"]
    with pytest.raises(VlgapError, match="unknown intrinsic-dimension method"):
        intrinsic_dimension(x, "pca")
    with pytest.raises(VlgapError, match="needs more than 20 distinct points"):
        intrinsic_dimension(x[:15], "levina-bickel")
    with pytest.raises(VlgapError, match="2-D array"):
        intrinsic_dimension(np.zeros(5))
    with pytest.raises(VlgapError, match="at least 3 distinct points, got 1"):
        intrinsic_dimension(np.zeros((10, 2)), "twonn")


def test_degenerate_clouds_warn_and_scale_does_not_matter():
    """Issue 44: duplicated rows gave d = 0.04 with CI [0.04, 0.04] and 3 points a bare d. Now: duplicates
    left out with a warning, few points warned, the interval withheld below 10 points, and d the same at any
    global scale (a power-of-two rescale first: exact)."""
    rng = np.random.default_rng(1)
    x = rng.standard_normal((60, 3))
    dup = np.repeat(x[:30], 3, axis=0)
    r = intrinsic_dimension(dup, n_bootstrap=50)
    assert r["n"] == 30 and r["n_duplicates"] == 60 and len(r["warnings"]) == 1
    assert 1.5 < r["d"] < 6 and r["ci"] is not None and r["ci"][0] < r["ci"][1]
    few = intrinsic_dimension(x[:3], n_bootstrap=50)
    assert few["ci"] is None and few["ci_reason"] == "n too small: n=3 < 10"
    assert any("from 3 distinct points" in w for w in few["warnings"])
    base = intrinsic_dimension(x, n_bootstrap=0)["d"]
    for scale in (1e-300, 1e-20, 1e20, 1e300):
        assert intrinsic_dimension(x * scale, n_bootstrap=0)["d"] == pytest.approx(base, rel=1e-12), scale


def test_exponent_interval_maps_through_two_over_d():
    e = exponent_from_dimension(2.0, [1.6, 2.5])
    assert e["value"] == 1.0 and e["ci"] == pytest.approx([0.8, 1.25])


def test_feature_file_cli(tmp_path):
    rng = np.random.default_rng(0)
    layers = np.stack([rng.standard_normal((400, 2)) @ rng.standard_normal((2, 20)),
                       rng.standard_normal((400, 6)) @ rng.standard_normal((6, 20))])
    np.save(tmp_path / "f.npy", layers)
    out = runner.invoke(app, ["intrinsic-dim", str(tmp_path / "f.npy"), "--method", "twonn-mle", "--bootstrap", "20",
                              "--json"])
    assert out.exit_code == 0, out.output
    rows = json.loads(out.stdout)["layers"]["f.npy"]
    direct = intrinsic_dimension(layers[1], "twonn-mle", n_bootstrap=20)
    assert rows[1]["d"] == direct["d"] and rows[1]["ci"] == direct["ci"]
    assert abs(rows[0]["d"] - 2) < 0.4 and abs(rows[1]["d"] - 6) < 1.2


def test_alpha_vs_two_over_d():
    from vlgap.probe.intrinsic import alpha_vs_dimension

    fits = {"v|t": {"params": {"alpha": 1.0}, "param_ci": {"alpha": [0.9, 1.2]}, "not_identified": []},
            "v|bad": {"error": "too few cells"}}
    rows = [{"vision": "v", "text": "t", "n_f": 2, "n_c": 4, "x_layer": 0},
            {"vision": "v", "text": "t", "n_f": 8, "n_c": 4, "x_layer": 1}]
    dims = {("v", 8): [{"d": 5.0, "ci": [4.0, 6.0], "layer_name": "a"}, {"d": 2.0, "ci": [1.8, 2.5], "layer_name": "b"}]}
    got = alpha_vs_dimension(fits, rows, dims)
    ok = got[0]
    assert ok["layer"] == 1 and ok["n_f"] == 8 and ok["d_v"] == 2.0 and ok["two_over_d"] == 1.0
    assert ok["two_over_d_ci"] == pytest.approx([0.8, 2 / 1.8]) and ok["intervals_overlap"] is True
    assert ok["implied_d_from_alpha"] == 2.0
    assert "no scaling fit" in got[1]["reason"]
