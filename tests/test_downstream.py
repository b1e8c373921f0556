"""Downstream analysis: Holm against hand-worked examples and the textbook definition, leave-one-out
prediction against a hand computation and the hat-matrix identity, correlations and intervals against
scipy, and the CSV -> report path."""
from __future__ import annotations

import json
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats
from typer.testing import CliRunner

from vlgap.cli import app
from vlgap.errors import VlgapError
from vlgap.probe.downstream import (downstream, holm, loo_linear, pearson_fisher, read_alignment_scores,
                                    spearman_bootstrap, write_downstream_section)

runner = CliRunner()


# ---------------------------------------------------------------------------------------------- Holm
def test_holm_equals_hand_worked_examples():
    # sorted 0.005, 0.01, 0.03, 0.04 -> 4*0.005, 3*0.01, 2*0.03, max(0.06, 1*0.04), back in input order
    assert holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02], abs=1e-15)
    # R: p.adjust(c(.01, .02, .03, .04, .05), "holm") = 0.05 0.08 0.09 0.09 0.09
    assert holm([0.01, 0.02, 0.03, 0.04, 0.05]) == pytest.approx([0.05, 0.08, 0.09, 0.09, 0.09], abs=1e-15)
    # capped at 1, NaN neither adjusted nor counted in m
    assert holm([0.5, 0.6]) == pytest.approx([1.0, 1.0])
    out = holm([0.02, float("nan"), 0.04])
    assert out[0] == pytest.approx(0.04) and np.isnan(out[1]) and out[2] == pytest.approx(0.04)
    with pytest.raises(VlgapError):
        holm([0.2, 1.5])


def _holm_definition(p):
    """Closed-testing form: adj_i = max over p_j <= p_i of min(1, (m - rank_j + 1) p_j), literal loops."""
    m = len(p)
    order = sorted(range(m), key=lambda i: (p[i], i))
    rank = {i: r + 1 for r, i in enumerate(order)}
    return [max(min(1.0, (m - rank[j] + 1) * p[j]) for j in range(m) if rank[j] <= rank[i]) for i in range(m)]


def test_holm_equals_definition_on_random_p_values_with_ties():
    rng = np.random.default_rng(3)
    for m in (1, 2, 6, 17):
        p = np.round(rng.uniform(0, 0.3, m), 2).tolist()  # rounding makes ties
        assert holm(p) == pytest.approx(_holm_definition(p), abs=1e-12)


# ---------------------------------------------------------------------------------------------- LOO
def test_leave_one_out_equals_hand_computation():
    x, y = [1, 2, 3, 4], [1, 3, 2, 5]
    res = loo_linear(x, y)
    # worked by hand: line through the other three points, evaluated at the held-out x
    pred = [Fraction(4, 3), Fraction(13, 7), Fraction(27, 7), Fraction(3)]
    err = [Fraction(yi) - p for yi, p in zip(y, pred)]
    assert res["predictions"] == pytest.approx([float(p) for p in pred], abs=1e-12)
    assert res["errors"] == pytest.approx([float(e) for e in err], abs=1e-12)
    base_err = [Fraction(1) - Fraction(10, 3), Fraction(3) - Fraction(8, 3), Fraction(2) - 3, Fraction(5) - 2]
    press, press0 = sum(e * e for e in err), sum(e * e for e in base_err)
    assert res["rmse"] == pytest.approx(float((press / 4)) ** 0.5, abs=1e-12)
    assert res["mae"] == pytest.approx(float(sum(abs(e) for e in err) / 4), abs=1e-12)
    assert res["baseline_rmse"] == pytest.approx(float(press0 / 4) ** 0.5, abs=1e-12)
    assert res["q2"] == pytest.approx(float(1 - press / press0), abs=1e-12)


def test_leave_one_out_matches_hat_matrix_identity():
    rng = np.random.default_rng(0)
    x = rng.normal(size=9)
    y = 0.8 * x + rng.normal(scale=0.5, size=9)
    design = np.column_stack([np.ones(9), x])
    hat = design @ np.linalg.solve(design.T @ design, design.T)
    resid = y - hat @ y
    assert loo_linear(x, y)["errors"] == pytest.approx(resid / (1 - np.diag(hat)), abs=1e-10)


def test_leave_one_group_out_equals_hand_computation():
    res = loo_linear([1, 2, 3, 4], [1, 3, 2, 5], groups=["a", "a", "b", "b"])
    # group b fit: (3,2),(4,5) -> y = 3x - 7; group a fit: (1,1),(2,3) -> y = 2x - 1
    assert res["predictions"] == pytest.approx([-4, -1, 5, 7])
    assert res["errors"] == pytest.approx([5, 4, -3, -2])
    assert res["scheme"] == "leave-one-group-out"


# ---------------------------------------------------------------------------------------------- correlations
def test_pearson_fisher_interval_matches_scipy_and_formula():
    rng = np.random.default_rng(1)
    x = rng.normal(size=12)
    y = x + rng.normal(size=12)
    res = pearson_fisher(x, y, 0.9)
    ref = stats.pearsonr(x, y)
    ci = ref.confidence_interval(0.9)  # scipy: Fisher transformation
    assert res["r"] == pytest.approx(ref.statistic) and res["p"] == pytest.approx(ref.pvalue)
    assert res["ci"] == pytest.approx([ci.low, ci.high], abs=1e-12)
    z = np.arctanh(res["r"])
    assert res["ci"][1] == pytest.approx(np.tanh(z + stats.norm.ppf(0.95) / 3.0))  # sqrt(12 - 3) = 3


def test_spearman_exact_permutation_p_and_bootstrap_interval():
    res = spearman_bootstrap([1, 2, 3, 4, 5], [2, 4, 5, 8, 9], n_bootstrap=500)
    assert res["rho"] == 1.0
    assert res["p"] == pytest.approx(2 / 120)  # only the identity and the reversal reach |rho| = 1
    assert res["p_method"].startswith("exact")
    assert res["ci"] is None and res["ci_reason"] == "n too small: n=5 < 10"  # vlgap.stats' small-n rule
    rng = np.random.default_rng(2)
    x, y = rng.normal(size=30), rng.normal(size=30)
    res = spearman_bootstrap(x, y + 2 * x, n_bootstrap=1000, seed=4)
    assert res["rho"] == pytest.approx(stats.spearmanr(x, y + 2 * x).statistic)
    assert res["ci"][0] < res["rho"] < res["ci"][1] and res["p"] < 0.01


# ---------------------------------------------------------------------------------------------- tables
def _write_inputs(tmp_path):
    rng = np.random.default_rng(5)
    models = [f"m{i}" for i in range(10)]
    align = rng.uniform(0.05, 0.3, 10)
    fams = ["A"] * 5 + ["B"] * 5
    lines = ["model,task,score,family"]
    for m, a, f in zip(models, align, fams):
        lines.append(f"{m},ssv2,{0.3 + 2 * a + rng.normal(scale=0.02):.5f},{f}")
        lines.append(f"{m},tracking,{rng.normal():.5f},{f}")
    lines.append("ghost,ssv2,0.5,A")  # no alignment score
    scores = tmp_path / "scores.csv"
    scores.write_text("\n".join(lines) + "\n")
    al = tmp_path / "align.csv"
    al.write_text("model,alignment\n" + "".join(f"{m},{a:.6f}\n" for m, a in zip(models, align)))
    return scores, al, dict(zip(models, align))


def test_downstream_tables_and_holm_across_tasks(tmp_path):
    scores, al, align = _write_inputs(tmp_path)
    res = downstream(scores, al, n_bootstrap=300, seed=1)
    assert [t["task"] for t in res.tasks] == ["ssv2", "tracking"] and res.missing_alignment == ["ghost"]
    ssv2, track = res.tasks
    assert ssv2["n"] == 10 and ssv2["pearson"]["r"] == pytest.approx(np.corrcoef(ssv2["alignment"], ssv2["score"])[0, 1])
    assert ssv2["pearson"]["ci"][0] > 0.8 and ssv2["loo"]["q2"] > 0.5 and ssv2["lofo"]["scheme"] == "leave-one-group-out"
    adj = holm([ssv2["pearson"]["p"], track["pearson"]["p"]])
    assert [ssv2["pearson"]["p_holm"], track["pearson"]["p_holm"]] == pytest.approx(adj)
    assert track["pearson"]["ci"][0] < 0 < track["pearson"]["ci"][1] or track["pearson"]["p_holm"] > 0.05
    path = write_downstream_section(res, tmp_path / "run")
    sec = json.loads(path.read_text())
    assert sec["title"] and "Holm" in sec["html"] and (tmp_path / "run" / sec["figures"][0]).is_file()


def test_alignment_from_sweep_csv_needs_one_row_per_model(tmp_path):
    p = tmp_path / "sweep.csv"
    p.write_text("vision,text,n_f,n_c,score\na,t1,8,1,0.2\na,t1,8,8,0.3\nb,t1,8,8,0.25\n")
    with pytest.raises(VlgapError, match="more than one"):
        read_alignment_scores(p)
    assert read_alignment_scores(p, n_c=8) == {"a": {"alignment": 0.3, "family": None},
                                               "b": {"alignment": 0.25, "family": None}}


def test_scores_as_a_dataframe_or_rows_are_checked_by_name():
    """A DataFrame of other columns raised AttributeError ('str' object has no attribute 'get': its column
    names were taken for rows); a row without a task a KeyError (issue 44's rerun)."""
    import pandas as pd

    align = {"a": 0.1, "b": 0.2, "c": 0.3, "d": 0.4}
    rows = [{"model": m, "task": "t", "score": s} for m, s in zip("abcd", (0.1, 0.3, 0.2, 0.5))]
    with pytest.raises(VlgapError, match=r"^scores: the DataFrame has columns \['a', 'b'\]; missing \['model', 'task', "
                                         r"'score'\] \(need model, task, score\)$"):
        downstream(pd.DataFrame({"a": [1.0], "b": [2.0]}), align, n_bootstrap=0)
    with pytest.raises(VlgapError, match=r"^scores: row 2 has no task \(its keys: model, score\)"):
        downstream([rows[0], {"model": "b", "score": 0.3}], align, n_bootstrap=0)
    from_frame = downstream(pd.DataFrame(rows), align, n_bootstrap=0).tasks[0]["pearson"]
    assert from_frame == downstream(rows, align, n_bootstrap=0).tasks[0]["pearson"] and from_frame["n"] == 4


def test_downstream_cli(tmp_path):
    scores, al, _ = _write_inputs(tmp_path)
    out = runner.invoke(app, ["downstream", str(scores), str(al), "--bootstrap", "200", "--json"])
    assert out.exit_code == 0, out.output
    d = json.loads(out.stdout)
    assert {t["task"] for t in d["tasks"]} == {"ssv2", "tracking"}
    bad = tmp_path / "bad.csv"
    bad.write_text("name,value\nx,1\n")
    out = runner.invoke(app, ["downstream", str(bad), str(al)])
    assert out.exit_code != 0 and isinstance(out.exception, VlgapError) and "model, task, score" in str(out.exception)
