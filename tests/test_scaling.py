"""Scaling-law fit: known parameters, intervals, held-out check, alternatives, refusals."""
import json

import numpy as np
import pytest

from vlgap.errors import VlgapError
from vlgap.scaling import PARAM_NAMES, fit_scaling, read_grid_csv

TRUE = {"S_inf": 0.41, "C_f": 0.15, "C_c": 0.13, "alpha": 0.75, "beta": 1.3}  # the paper's VideoMAEv2-H
NF = [1, 2, 4, 8, 16, 32]
NC = [1, 2, 4, 8, 10]


def law(nf, nc, p=TRUE):
    return p["S_inf"] - (p["C_f"] * np.asarray(nf, float) ** -p["alpha"] + p["C_c"] * np.asarray(nc, float) ** -p["beta"])


def grid(nf=NF, nc=NC, noise=0.0, seed=0):
    f, c = (a.ravel().astype(float) for a in np.meshgrid(nf, nc, indexing="ij"))
    y = law(f, c) + np.random.default_rng(seed).normal(0, noise, f.size)
    return {"n_f": f, "n_c": c, "score": y}


def test_noise_free_recovers_parameters_within_1_percent():
    fit = fit_scaling(grid(), n_bootstrap=0)
    for name in PARAM_NAMES:
        assert fit.params[name] == pytest.approx(TRUE[name], rel=0.01)
    assert fit.r2 == pytest.approx(1.0, abs=1e-9)


def test_noisy_fit_true_parameters_inside_intervals():
    fit = fit_scaling(grid(noise=0.004, seed=1), n_bootstrap=300, seed=0)
    for name in PARAM_NAMES:
        lo, hi = fit.param_ci[name]
        assert lo <= TRUE[name] <= hi, (name, lo, hi)
        assert lo <= fit.params[name] <= hi
    assert 0.99 < fit.r2 < 1.0


def test_heldout_check_reported():
    fit = fit_scaling(grid(nf=[1, 2, 4, 8], nc=[1, 2, 4, 8], noise=0.002, seed=2), n_bootstrap=0)
    held = fit.heldout
    assert held["n_train"] == 9 and held["n_test"] == 7
    cells = {(c["n_f"], c["n_c"]) for c in held["cells"]}
    assert (8.0, 8.0) in cells and (1.0, 8.0) in cells and (8.0, 1.0) in cells and (4.0, 4.0) not in cells
    assert held["mean_abs_error"] == pytest.approx(np.mean([c["abs_error"] for c in held["cells"]]))
    assert held["mean_abs_error"] < 0.02   # the law extrapolates well when it is the truth
    # too few values for a held-out split: the fit still runs and says why the check is missing
    small = fit_scaling(grid(nf=[1, 2, 4], nc=[1, 2, 4]), n_bootstrap=0)
    assert "skipped" in small.heldout


def test_alternatives_compared_and_true_law_preferred():
    fit = fit_scaling(grid(noise=0.003, seed=3), n_bootstrap=0)
    alts = fit.alternatives
    assert set(alts) == {"saturating_additive", "log_linear", "multiplicative"}
    for a in alts.values():
        assert {"aic", "bic", "aicc", "r2", "heldout_mean_abs_error", "params", "n_params"} <= set(a)
    assert fit.best_by["bic"] == "saturating_additive"
    assert fit.best_by["heldout"] == "saturating_additive"


def test_log_linear_truth_is_found_by_comparison():
    f, c = (a.ravel().astype(float) for a in np.meshgrid(NF, NC, indexing="ij"))
    y = 0.1 + 0.03 * np.log(f) + 0.02 * np.log(c) + np.random.default_rng(4).normal(0, 0.002, f.size)
    fit = fit_scaling({"n_f": f, "n_c": c, "score": y}, n_bootstrap=0)
    assert fit.alternatives["log_linear"]["params"]["b"] == pytest.approx(0.03, rel=0.1)
    assert fit.best_by["bic"] == "log_linear"


def test_too_small_grids_refused_with_cells_needed():
    with pytest.raises(VlgapError, match=r"2 distinct n_f \(need >= 3\).*9 cells"):
        fit_scaling(grid(nf=[1, 2], nc=[1, 2, 4]))
    with pytest.raises(VlgapError, match=r"5 cells \(need >= 6\)"):
        fit_scaling({"n_f": [1, 2, 4, 1, 1], "n_c": [1, 1, 1, 2, 4], "score": [0.1, 0.2, 0.25, 0.2, 0.3]})


def test_bad_grid_values():
    g = grid()
    g["n_f"][0] = 0
    with pytest.raises(VlgapError, match="positive"):
        fit_scaling(g)
    with pytest.raises(VlgapError, match="missing column 'score'"):
        fit_scaling({"n_f": [1], "n_c": [1]})


def test_input_forms_and_predict():
    g = grid(noise=0.002, seed=5)
    rows = [dict(n_f=a, n_c=b, score=s) for a, b, s in zip(g["n_f"], g["n_c"], g["score"])]
    a = fit_scaling(g, n_bootstrap=20, seed=1)
    b = fit_scaling(rows, n_bootstrap=20, seed=1)
    assert a.to_dict() == b.to_dict()   # same seed, same numbers
    np.testing.assert_allclose(a.predict(g["n_f"], g["n_c"]), law(g["n_f"], g["n_c"], a.params))
    lo, hi = a.predict_interval([1, 64], [1, 64])
    assert np.all(lo <= hi)
    d = a.to_dict()
    assert {"params", "param_ci", "r2", "heldout", "alternatives", "n_cells"} <= set(d)
    json.dumps(d)


def test_case_bootstrap_and_weights():
    g = grid(noise=0.003, seed=6)
    g["score_lo"] = g["score"] - 0.006
    g["score_hi"] = g["score"] + 0.006
    fit = fit_scaling(g, n_bootstrap=50, bootstrap_method="case", seed=0)
    assert fit.weighted and fit.bootstrap["method"] == "case"
    assert all(lo <= hi for lo, hi in fit.param_ci.values())


def test_read_grid_csv(tmp_path):
    p = tmp_path / "grid.csv"
    g = grid()
    p.write_text("n_f,n_c,score,encoder\n" + "".join(
        f"{a:g},{b:g},{s},mobilenet\n" for a, b, s in zip(g["n_f"], g["n_c"], g["score"])))
    fit = fit_scaling(read_grid_csv(p), n_bootstrap=0)
    assert fit.params["alpha"] == pytest.approx(0.75, rel=0.01)
    with pytest.raises(VlgapError, match="missing.csv: does not exist"):
        read_grid_csv(tmp_path / "missing.csv")


def test_old_bootstrap_keyword_names_the_new_one():
    with pytest.raises(VlgapError, match="'bootstrap' is now bootstrap_method"):
        fit_scaling(grid(), n_bootstrap=0, bootstrap="case")
