"""C2ST under the null and a shift, Frechet distance against closed forms, witness items."""
import numpy as np
import pytest
from scipy import linalg

from vlgap.errors import VlgapError
from vlgap.stats.c2st import c2st
from vlgap.stats.frechet import frechet_distance, frechet_distance_gaussian
from vlgap.stats.witness import witness


def test_c2st_is_at_chance_under_the_null():
    rng = np.random.default_rng(0)
    res = c2st(rng.normal(size=(200, 5)), rng.normal(size=(150, 5)), n_permutations=19, seed=1)
    assert abs(res.accuracy - 0.5) < 0.08
    assert abs(res.auc - 0.5) < 0.08
    assert res.p_value > 0.05
    assert (res.n_a, res.n_b, res.n_folds) == (200, 150, 5)


def test_c2st_detects_a_shift_with_an_exact_p_value():
    rng = np.random.default_rng(1)
    x, y = rng.normal(size=(100, 5)), rng.normal(size=(100, 5)) + 0.8
    res = c2st(x, y, n_permutations=19)
    assert res.accuracy > 0.75 and res.auc > 0.8
    assert res.p_value == pytest.approx(1 / 20)  # the smallest value a 19-permutation test can give
    hold = c2st(x, y, p_value_method="holdout")
    assert hold.p_value < 1e-6 and hold.accuracy > 0.7


def test_c2st_holdout_p_values_are_calibrated():
    rng = np.random.default_rng(2)
    ps = np.array([c2st(rng.normal(size=(40, 3)), rng.normal(size=(40, 3)), p_value_method="holdout", seed=s).p_value
                   for s in range(200)])
    # Fisher's exact test is conservative (discrete), never liberal
    assert np.mean(ps <= 0.05) <= 0.05 + 3 * np.sqrt(0.05 * 0.95 / 200)


def test_c2st_rejects_too_few_items():
    with pytest.raises(VlgapError, match="5-fold"):
        c2st(np.zeros((3, 2)), np.ones((10, 2)))


def test_frechet_distance_of_a_set_with_itself_is_zero():
    x = np.random.default_rng(3).normal(size=(300, 20))
    assert frechet_distance(x, x).fd == pytest.approx(0.0, abs=1e-8)
    # rank-deficient: fewer items than dimensions, and duplicated items
    small = np.random.default_rng(4).normal(size=(10, 50))
    assert frechet_distance(small, small).fd == pytest.approx(0.0, abs=1e-8)
    doubled = np.vstack([small, small])
    assert frechet_distance(doubled, doubled).fd == pytest.approx(0.0, abs=1e-8)
    # singular covariances with a known answer: sum (sqrt(a) - sqrt(b))^2 over the shared support
    a, b = np.diag([4.0, 0.0, 0.0]), np.diag([1.0, 0.0, 9.0])
    assert frechet_distance_gaussian(np.zeros(3), a, np.zeros(3), b) == pytest.approx(1.0 + 9.0, abs=1e-12)


def test_frechet_distance_closed_forms():
    # 1-D: (mu1 - mu2)^2 + (s1 - s2)^2
    assert frechet_distance_gaussian([1.0], [[4.0]], [3.0], [[9.0]]) == pytest.approx(4.0 + 1.0)
    # diagonal covariances: ||mu1 - mu2||^2 + sum (sqrt(a) - sqrt(b))^2
    a, b = np.array([1.0, 4.0, 0.0]), np.array([9.0, 1.0, 4.0])
    mu1, mu2 = np.array([0.0, 1.0, 2.0]), np.array([1.0, 1.0, 0.0])
    expected = np.sum((mu1 - mu2) ** 2) + np.sum((np.sqrt(a) - np.sqrt(b)) ** 2)
    assert frechet_distance_gaussian(mu1, np.diag(a), mu2, np.diag(b)) == pytest.approx(expected, abs=1e-12)
    # a general full-rank case agrees with the textbook sqrtm formula
    rng = np.random.default_rng(5)
    m1, m2 = rng.normal(size=(6, 6)), rng.normal(size=(6, 6))
    s1, s2 = m1 @ m1.T + np.eye(6), m2 @ m2.T + np.eye(6)
    ref = np.trace(s1) + np.trace(s2) - 2 * np.trace(linalg.sqrtm(s1 @ s2).real)
    assert frechet_distance_gaussian(np.zeros(6), s1, np.zeros(6), s2) == pytest.approx(ref, rel=1e-9)


def test_frechet_distance_grows_with_a_shift_and_has_an_interval():
    rng = np.random.default_rng(6)
    x, y = rng.normal(size=(200, 4)), rng.normal(size=(200, 4)) + 1.0
    res = frechet_distance(x, y, n_bootstrap=200)
    assert res.fd == pytest.approx(4.0, rel=0.25)
    assert res.ci[0] < res.fd < res.ci[1]


def test_witness_finds_the_items_that_differ():
    rng = np.random.default_rng(7)
    a = rng.normal(size=(60, 2))
    b = rng.normal(size=(60, 2))
    b[:5] += 6.0  # a small cluster only B has
    labels_b = [f"b{i}" for i in range(60)]
    w = witness(a, b, top_k=5, labels_b=labels_b)
    assert sorted(item["index"] for item in w["b"]) == [0, 1, 2, 3, 4]
    assert {item["label"] for item in w["b"]} == {"b0", "b1", "b2", "b3", "b4"}
    assert all(item["witness"] < 0 for item in w["b"])
    assert len(w["a"]) == 5 and all(item["side"] == "a" for item in w["a"])
