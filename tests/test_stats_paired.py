"""Paired comparison and 2x2 factorial analysis: planted effects are recovered, bad tables are named."""
import numpy as np
import pytest

from vlgap.errors import VlgapError
from vlgap.stats.factorial import factorial_effects
from vlgap.stats.paired import compare


def test_paired_difference_from_arrays():
    rng = np.random.default_rng(0)
    item = rng.normal(scale=3.0, size=50)
    a = item + 0.5 + rng.normal(scale=0.2, size=50)
    b = item + rng.normal(scale=0.2, size=50)
    res = compare(a, b, n_permutations=2000)
    assert res["analysis"] == "paired" and res["n_items"] == 50
    assert res["difference"] == pytest.approx(np.mean(a - b))
    assert res["ci"][0] < 0.5 < res["ci"][1]
    assert res["p_value"] == pytest.approx(1 / 2001)
    assert res["wins_a"] + res["wins_b"] + res["ties"] == 50


def test_paired_null_is_not_significant_and_rows_work():
    rng = np.random.default_rng(1)
    rows = []
    for i in range(30):
        base = rng.normal()
        rows.append({"item": f"v{i}", "system": "old", "score": base + rng.normal(scale=0.1)})
        rows.append({"item": f"v{i}", "system": "new", "score": base + rng.normal(scale=0.1)})
    res = compare(rows[::-1])  # order of rows does not matter for the pairing
    assert {res["system_a"], res["system_b"]} == {"old", "new"}
    assert res["ci"][0] < 0 < res["ci"][1]
    assert res["p_value"] > 0.05


def _planted_rows(n=60, main_a=1.0, main_b=0.5, interaction=0.8, noise=0.3, seed=2):
    """y = item + main_a * (A - 1/2) + main_b * (B - 1/2) + interaction * (A - 1/2)(B - 1/2) + noise:
    with these codings the contrasts in vlgap.stats.factorial equal the planted coefficients."""
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        item = rng.normal(scale=2.0)
        for a in (0, 1):
            for b in (0, 1):
                ca, cb = a - 0.5, b - 0.5
                y = item + main_a * ca + main_b * cb + interaction * ca * cb + rng.normal(scale=noise)
                rows.append({"item": i, "a": a, "b": b, "score": y})
    return rows


def test_factorial_recovers_planted_main_effects_and_interaction():
    res = compare(_planted_rows(), factorial=True, n_permutations=2000)
    assert res["analysis"] == "factorial" and res["n_items"] == 60
    for name, truth in (("main_a", 1.0), ("main_b", 0.5), ("interaction", 0.8)):
        effect = res[name]
        assert effect["ci"][0] < truth < effect["ci"][1], name
        assert effect["estimate"] == pytest.approx(truth, abs=0.2), name
        assert effect["p_value"] < 0.01, name
    assert res["levels_a"] == ["0", "1"]


def test_factorial_null_interaction_is_not_significant():
    res = compare(_planted_rows(interaction=0.0, seed=3), factorial=True, n_permutations=2000)
    assert res["interaction"]["ci"][0] < 0 < res["interaction"]["ci"][1]
    assert res["interaction"]["p_value"] > 0.05
    assert res["main_a"]["p_value"] < 0.01


def test_factorial_contrasts_are_exact_on_noise_free_cells():
    ones = np.ones(5)
    res = factorial_effects(0 * ones, 1 * ones, 2 * ones, 10 * ones, n_bootstrap=50, n_permutations=64)
    assert res["main_a"]["estimate"] == pytest.approx(((2 + 10) - (0 + 1)) / 2)
    assert res["main_b"]["estimate"] == pytest.approx(((1 + 10) - (0 + 2)) / 2)
    assert res["interaction"]["estimate"] == pytest.approx((10 - 2) - (1 - 0))


def test_compare_reads_csv(tmp_path):
    path = tmp_path / "scores.csv"
    path.write_text("item,system,score\n1,x,0.5\n1,y,0.4\n2,x,0.7\n2,y,0.1\n3,x,0.2\n3,y,0.25\n")
    res = compare(path)
    assert res["n_items"] == 3 and res["system_a"] == "x"
    assert res["difference"] == pytest.approx(np.mean([0.1, 0.6, -0.05]))


def test_bad_tables_name_the_item():
    with pytest.raises(VlgapError, match="item '2' has no score for system 'y'"):
        compare([{"item": 1, "system": "x", "score": 1}, {"item": 1, "system": "y", "score": 1},
                 {"item": 2, "system": "x", "score": 1}])
    with pytest.raises(VlgapError, match="item '1' has two scores"):
        compare([{"item": 1, "system": "x", "score": 1}, {"item": 1, "system": "x", "score": 2}])
    with pytest.raises(VlgapError, match="3 systems"):
        compare([{"item": 1, "system": s, "score": 1} for s in "xyz"])
    rows = _planted_rows(n=3)[:-1]
    with pytest.raises(VlgapError, match="item '2' has no score for cell a=1, b=1"):
        compare(rows, factorial=True)
    with pytest.raises(VlgapError, match="not a number"):
        compare([{"item": 1, "system": "x", "score": "n/a"}])
    with pytest.raises(VlgapError, match="missing column"):
        compare([{"item": 1, "score": 1}])


def test_old_keyword_spellings_name_the_new_ones():
    rows = [{"item": i, "system": s, "score": i} for i in range(3) for s in "xy"]
    with pytest.raises(VlgapError, match="'n_resamples' is now n_bootstrap"):
        compare(rows, n_resamples=100)
    with pytest.raises(VlgapError, match="'permutations' is now n_permutations"):
        compare(rows, permutations=100)
    assert compare(rows, n_bootstrap=20, n_permutations=20)["n_bootstrap"] == 20
