"""MMD^2: exact references, calibrated permutation test, bootstrap, block estimator, CMMD preset, errors."""
import numpy as np
import pytest
import torch
from scipy import stats

from vlgap.errors import VlgapError
from vlgap.stats.kernels import kernel_matrix, median_heuristic, resolve_kernel
from vlgap.stats.mmd import mmd2, mmd2_from_kernel, mmd_test
from vlgap.stats.permutation import (
    bootstrap_mmd,
    double_center_,
    jackknife_mmd,
    permutation_indices,
    permutation_null,
)

RNG = np.random.default_rng(0)
A_SMALL = RNG.normal(size=(9, 4))
B_SMALL = RNG.normal(size=(7, 4)) + 0.4


def loop_mmd2(x, y, k, unbiased=True):
    """Direct double loops over item pairs (Gretton et al. 2012, eqs. 2 and 3)."""
    m, n = len(x), len(y)
    if unbiased:
        sxx = sum(k(x[i], x[j]) for i in range(m) for j in range(m) if i != j) / (m * (m - 1))
        syy = sum(k(y[i], y[j]) for i in range(n) for j in range(n) if i != j) / (n * (n - 1))
    else:
        sxx = sum(k(x[i], x[j]) for i in range(m) for j in range(m)) / m**2
        syy = sum(k(y[i], y[j]) for i in range(n) for j in range(n)) / n**2
    sxy = sum(k(x[i], y[j]) for i in range(m) for j in range(n)) / (m * n)
    return sxx + syy - 2 * sxy


KERNELS = {
    "rbf": (dict(kernel="rbf", bandwidth=1.7), lambda u, v: np.exp(-np.sum((u - v) ** 2) / (2 * 1.7**2))),
    "linear": (dict(kernel="linear"), lambda u, v: u @ v),
    "poly": (dict(kernel="poly"), lambda u, v: (u @ v / 4 + 1) ** 3),
}


@pytest.mark.parametrize("name", sorted(KERNELS))
@pytest.mark.parametrize("unbiased", [True, False])
def test_mmd2_equals_double_loop_reference(name, unbiased):
    kwargs, k = KERNELS[name]
    ours = mmd2(A_SMALL, B_SMALL, unbiased=unbiased, **kwargs)
    assert ours == pytest.approx(loop_mmd2(A_SMALL, B_SMALL, k, unbiased), abs=1e-10)


def test_median_heuristic_is_the_pooled_median_distance():
    z = np.vstack([A_SMALL, B_SMALL])
    d2 = [np.sum((z[i] - z[j]) ** 2) for i in range(len(z)) for j in range(i + 1, len(z))]
    assert median_heuristic(torch.from_numpy(z)) == pytest.approx(np.sqrt(np.median(d2)), rel=1e-12)
    # the default kernel uses it
    sigma = np.sqrt(np.median(d2))
    ref = loop_mmd2(A_SMALL, B_SMALL, lambda u, v: np.exp(-np.sum((u - v) ** 2) / (2 * sigma**2)))
    assert mmd2(A_SMALL, B_SMALL) == pytest.approx(ref, abs=1e-10)


def test_cmmd_preset_reproduces_the_cmmd_formula():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(30, 16)) * 3
    y = rng.normal(size=(25, 16)) * 3 + 0.5

    def cmmd(x, y):  # google-research/cmmd distance.py, transcribed to numpy
        gamma = 1 / (2 * 10**2)
        xx, yy, xy = x @ x.T, y @ y.T, x @ y.T
        xn, yn = np.diag(xx), np.diag(yy)
        k_xx = np.mean(np.exp(-gamma * (-2 * xx + xn[:, None] + xn[None, :])))
        k_yy = np.mean(np.exp(-gamma * (-2 * yy + yn[:, None] + yn[None, :])))
        k_xy = np.mean(np.exp(-gamma * (-2 * xy + xn[:, None] + yn[None, :])))
        return 1000 * (k_xx + k_yy - 2 * k_xy)

    assert mmd2(x, y, kernel="cmmd", unbiased=False) == pytest.approx(cmmd(x, y), rel=1e-10)
    res = mmd_test(x, y, kernel="cmmd", n_permutations=0, n_bootstrap=0)
    assert res.mmd2_biased == pytest.approx(cmmd(x, y), rel=1e-10)
    assert res.bandwidth == 10.0 and res.kernel_params["scale"] == 1000.0


def test_vectorised_permutations_equal_recomputation_per_permutation():
    z = torch.from_numpy(np.vstack([A_SMALL, B_SMALL]))
    k = kernel_matrix(z, z, resolve_kernel("rbf", z))
    perms = list(permutation_indices(len(z), 50, seed=7))
    expected = [mmd2_from_kernel(k[p][:, p], 9) for p in perms]
    for dtype, tol in ((torch.float64, 1e-12), (torch.float32, 1e-6)):
        null = permutation_null(double_center_(k.clone().to(dtype)), 9, 50, seed=7, batch_size=8)
        np.testing.assert_allclose(null.numpy(), expected, atol=tol)


def test_bootstrap_and_jackknife_equal_direct_computation():
    z = torch.from_numpy(np.vstack([A_SMALL, B_SMALL]))
    k = kernel_matrix(z, z, resolve_kernel("rbf", z))
    rng = np.random.default_rng(11)
    ia, ib = rng.integers(0, 9, 9), rng.integers(0, 7, 7) + 9

    def u_distinct(idx):  # U-statistic over position pairs of distinct original items
        vals = [k[p, q].item() for p in idx for q in idx if p != q]
        return np.mean(vals)

    ref = u_distinct(ia) + u_distinct(ib) - 2 * np.mean([k[i, j].item() for i in ia for j in ib])
    assert bootstrap_mmd(k, 9, 1, seed=11)[0].item() == pytest.approx(ref, abs=1e-12)
    loo_a, loo_b = jackknife_mmd(k, 9)
    keep = [i for i in range(16) if i != 3]
    assert loo_a[3] == pytest.approx(mmd2_from_kernel(k[keep][:, keep], 8), abs=1e-12)
    keep = [i for i in range(16) if i != 9 + 2]
    assert loo_b[2] == pytest.approx(mmd2_from_kernel(k[keep][:, keep], 9), abs=1e-12)


def _null_runs(repeats=300, n=15, dim=3, permutations=199):
    rng = np.random.default_rng(123)
    p, est = [], []
    for r in range(repeats):
        x = rng.normal(size=(n, dim))
        y = rng.normal(size=(n + 3, dim))
        res = mmd_test(x, y, n_permutations=permutations, n_bootstrap=0, seed=r, method="quadratic")
        p.append(res.p_value)
        est.append(res.mmd2_unbiased)
    return np.array(p), np.array(est)


def test_permutation_test_is_calibrated_under_the_null():
    p, est = _null_runs()
    # unbiased: the mean over null repeats is within 3 standard errors of 0
    assert abs(est.mean()) < 3 * est.std(ddof=1) / np.sqrt(est.size)
    # p-values uniform (they live on a grid of 1/200, well below KS resolution at 300 repeats)
    assert stats.kstest(p, "uniform").pvalue > 0.01
    # false-positive rate at 0.05 within 3 binomial standard deviations
    assert abs(np.sum(p <= 0.05) - 0.05 * p.size) <= 3 * np.sqrt(p.size * 0.05 * 0.95)
    assert p.min() >= 1 / 200  # p = (1 + #)/(1 + B) is never below 1/(1+B)


def test_power_is_one_for_a_clear_shift():
    rng = np.random.default_rng(3)
    ps = [mmd_test(rng.normal(size=(40, 5)), rng.normal(size=(40, 5)) + 1.0, n_permutations=199,
                   n_bootstrap=0, seed=s).p_value for s in range(20)]
    assert max(ps) == pytest.approx(1 / 200)


def test_interval_covers_the_estimate_and_separates_a_shift():
    rng = np.random.default_rng(4)
    x, y = rng.normal(size=(60, 5)), rng.normal(size=(60, 5)) + 0.8
    for ci_method in ("bca", "percentile"):
        res = mmd_test(x, y, n_permutations=99, n_bootstrap=500, ci_method=ci_method, seed=1)
        assert res.ci[0] < res.mmd2_unbiased < res.ci[1]
        assert res.ci[0] > 0
    null = mmd_test(x, rng.normal(size=(60, 5)), n_permutations=99, n_bootstrap=500)
    assert null.ci[0] < 0 < null.ci[1]


def test_results_are_seeded():
    rng = np.random.default_rng(5)
    x, y = rng.normal(size=(30, 3)), rng.normal(size=(30, 3)) + 0.3
    r1 = mmd_test(x, y, n_permutations=200, n_bootstrap=200, seed=9)
    r2 = mmd_test(x, y, n_permutations=200, n_bootstrap=200, seed=9)
    assert (r1.p_value, r1.ci) == (r2.p_value, r2.ci)


def test_torch_input_matches_numpy():
    x, y = torch.from_numpy(A_SMALL).float(), torch.from_numpy(B_SMALL).float()
    ours = mmd2(x, y, kernel="rbf", bandwidth=1.7)
    assert ours == pytest.approx(mmd2(A_SMALL, B_SMALL, kernel="rbf", bandwidth=1.7), abs=1e-6)
    res = mmd_test(x, y, dtype=torch.float32, n_permutations=50, n_bootstrap=50)
    assert np.isfinite(res.mmd2_unbiased)


def test_block_estimator_is_calibrated_and_powerful():
    rng = np.random.default_rng(6)
    p_null = [mmd_test(rng.normal(size=(150, 3)), rng.normal(size=(120, 3)), method="block", bandwidth=1.5, seed=s).p_value
              for s in range(200)]
    assert abs(np.mean(np.array(p_null) <= 0.05) - 0.05) <= 3 * np.sqrt(0.05 * 0.95 / 200)
    shifted = mmd_test(rng.normal(size=(400, 3)), rng.normal(size=(400, 3)) + 0.5, method="block")
    assert shifted.method == "block" and shifted.p_value < 1e-4
    assert shifted.ci[0] < shifted.mmd2_unbiased < shifted.ci[1]
    assert shifted.details["n_blocks"] == 20


def test_auto_method_chooses_block_when_the_kernel_does_not_fit():
    rng = np.random.default_rng(7)
    x, y = rng.normal(size=(50, 3)), rng.normal(size=(50, 3))
    assert mmd_test(x, y, memory_budget=1000, n_permutations=0).method == "block"
    assert mmd_test(x, y, memory_budget=10**10, n_permutations=10, n_bootstrap=0).method == "quadratic"


def test_bad_input_is_reported():
    with pytest.raises(VlgapError, match="width 4 but B has width 3"):
        mmd2(A_SMALL, np.zeros((5, 3)))
    bad = B_SMALL.copy()
    bad[2, 1] = np.nan
    bad[5, 0] = np.inf
    with pytest.raises(VlgapError, match="B has NaN or Inf in 2 row.*index 2, 5"):
        mmd_test(A_SMALL, bad)
    with pytest.raises(VlgapError, match="1 item"):
        mmd2(A_SMALL[:1], B_SMALL)
    with pytest.raises(VlgapError, match="kernel='gauss'"):
        mmd2(A_SMALL, B_SMALL, kernel="gauss")
    with pytest.raises(VlgapError, match="2-D"):
        mmd2(A_SMALL[0], B_SMALL)
