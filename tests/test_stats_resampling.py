"""Bootstrap intervals (percentile, BCa), paired bootstrap and sign-flip test: known cases and references."""
import itertools

import numpy as np
import pytest
from scipy import special, stats

from vlgap.errors import VlgapError
from vlgap.stats.resampling import (
    bca_interval,
    bootstrap_ci,
    paired_bootstrap,
    percentile_interval,
    permutation_p_value,
    sign_flip_test,
)


def test_bca_reduces_to_percentile_without_bias_or_skew():
    # symmetric bootstrap distribution centred on the estimate, symmetric jackknife: z0 = 0, a = 0
    boot = special.ndtri((np.arange(1, 2000) - 0.5) / 1999)
    jack = np.array([-1.0, 1.0, -2.0, 2.0])
    assert bca_interval(0.0, boot, jack, 0.9) == pytest.approx(percentile_interval(boot, 0.9), abs=1e-12)


def test_bca_formula_on_a_constructed_case():
    boot = np.linspace(0.0, 10.0, 1001)  # estimate 3 sits at the 30% point
    jack = np.array([0.0, 0.0, 1.0, 3.0])
    u = 3 * (jack.mean() - jack)
    accel = (np.sum(u**3) / 64) / (6 * (np.sum(u**2) / 16) ** 1.5)
    z0 = special.ndtri((np.sum(boot < 3.0) + 0.5 * np.sum(boot == 3.0)) / boot.size)
    z = special.ndtri([0.025, 0.975])
    expected = np.quantile(boot, special.ndtr(z0 + (z0 + z) / (1 - accel * (z0 + z))))
    assert bca_interval(3.0, boot, jack, 0.95) == pytest.approx(tuple(expected), abs=1e-12)


def test_bca_matches_scipy_on_a_skewed_mean():
    x = np.random.default_rng(1).exponential(size=60)
    ours = bootstrap_ci(x, "mean", n_bootstrap=20000, ci_method="bca", seed=0)
    ref = stats.bootstrap((x,), np.mean, n_resamples=20000, method="BCa", random_state=0).confidence_interval
    assert ours.estimate == pytest.approx(x.mean())
    assert ours.low == pytest.approx(ref.low, rel=0.02)
    assert ours.high == pytest.approx(ref.high, rel=0.02)
    # BCa is asymmetric in the direction of the skew (exponential: longer right tail)
    assert ours.high - ours.estimate > ours.estimate - ours.low


def test_bootstrap_callable_vectorized_and_plain_agree():
    x = np.random.default_rng(2).normal(size=40)
    plain = bootstrap_ci(x, np.median, n_bootstrap=300, seed=3)
    vec = bootstrap_ci(x, lambda a: np.median(a, axis=-1), n_bootstrap=300, seed=3, vectorized=True)
    assert (plain.low, plain.high) == pytest.approx((vec.low, vec.high))


def test_paired_bootstrap_resamples_items_jointly():
    rng = np.random.default_rng(4)
    item = rng.normal(scale=5.0, size=80)  # large item effect that pairing must cancel
    a = item + 0.3 + rng.normal(scale=0.1, size=80)
    b = item + rng.normal(scale=0.1, size=80)
    iv = paired_bootstrap(a, b, n_bootstrap=2000, seed=0)
    assert iv.estimate == pytest.approx(np.mean(a - b))
    assert 0.25 < iv.low < 0.3 < iv.high < 0.35
    # a custom statistic of both arrays (ratio of sums, as corpus metrics do) also works
    ratio = paired_bootstrap(np.abs(a), np.abs(b), lambda x, y: x.sum() / y.sum(), n_bootstrap=200)
    assert ratio.low < ratio.estimate < ratio.high


def test_sign_flip_exact_enumeration_matches_brute_force():
    d = np.array([0.5, -0.2, 1.1, 0.3, -0.7, 0.9, 0.05, 0.4])
    res = sign_flip_test(d, n_permutations=10**6)
    assert res.exact and res.n_permutations == 256
    null = [np.mean(np.array(s) * d) for s in itertools.product([-1, 1], repeat=d.size)]
    expected = np.mean(np.abs(null) >= abs(d.mean()) - 1e-12)
    assert res.p_value == pytest.approx(expected)
    greater = sign_flip_test(d, n_permutations=10**6, alternative="greater")
    assert greater.p_value == pytest.approx(np.mean(np.array(null) >= d.mean() - 1e-12))


def test_sign_flip_monte_carlo_is_calibrated_under_the_null():
    rng = np.random.default_rng(5)
    ps = np.array([sign_flip_test(rng.normal(size=30), n_permutations=199, seed=s).p_value for s in range(300)])
    assert stats.kstest(ps, "uniform").pvalue > 0.01
    assert abs(np.sum(ps <= 0.05) - 15) <= 3 * np.sqrt(300 * 0.05 * 0.95)


def test_permutation_p_value_counts_the_observed():
    assert permutation_p_value(5.0, np.zeros(99)) == pytest.approx(0.01)
    assert permutation_p_value(0.0, np.zeros(99)) == 1.0


def test_bad_inputs_raise_vlgap_errors():
    with pytest.raises(VlgapError, match="at least 2 items"):
        bootstrap_ci([1.0])
    with pytest.raises(VlgapError, match=r"index \[2\]"):
        bootstrap_ci([1.0, 2.0, np.nan, 3.0])
    with pytest.raises(VlgapError, match="same items"):
        paired_bootstrap([1.0, 2.0, 3.0], [1.0, 2.0])
    with pytest.raises(VlgapError, match="confidence"):
        bootstrap_ci([1.0, 2.0, 3.0], confidence=95)
    with pytest.raises(VlgapError, match="share axis 0"):
        bootstrap_ci((np.zeros(3), np.zeros(4)), lambda a, b: 0.0)
