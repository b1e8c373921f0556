"""vlgap.scaling_batch (the bootstrap's refits, all at once) against scipy.optimize.least_squares, the
reference it replaces: one call per refit, as scaling._bootstrap made them before."""
import csv
import math
from pathlib import Path

import numpy as np
import pytest
from scipy import optimize

from vlgap import scaling as S
from vlgap.scaling_batch import fit_batch

LO, HI = S._bounds(S.SATURATING)
OLD_MAX_NFEV = 200   # the budget of each refit in the one-call-per-refit bootstrap
FIXTURE = Path(__file__).parent / "fixtures" / "scaling_demo_grids.csv"   # sweep.csv scores of a `vlgap demo` run


def scipy_refit(nf, nc, y, sw, x0, max_nfev=OLD_MAX_NFEV):
    """The reference: least_squares exactly as scaling._fit_model calls it for one bootstrap refit."""
    model = S.SATURATING

    def jac(p):
        lin, ex = model.split(p)
        return np.column_stack([model.basis(ex, nf, nc), model.exponent_jac(lin, ex, nf, nc)]) * sw[:, None]

    return optimize.least_squares(lambda p: (model.predict(p, nf, nc) - y) * sw, np.clip(x0, LO, HI), jac=jac,
                                  bounds=(LO, HI), method="trf", x_scale="jac", xtol=1e-12, ftol=1e-12, gtol=1e-12,
                                  max_nfev=max_nfev)


def residual_draws(nf, nc, y, sw, n_draws, seed=0):
    params, _ = S._fit_model(S.SATURATING, nf, nc, y, sw)
    rng = np.random.default_rng(seed)
    fitted = S.SATURATING.predict(params, nf, nc)
    res = (y - fitted) * sw
    res = (res - res.mean()) * math.sqrt(y.size / (y.size - 5))
    return params, np.array([fitted + rng.choice(res, size=y.size) / sw for _ in range(n_draws)])


def compare(nf, nc, y, sw, n_draws=30, variants=({},)):
    """(draws, scipy results, a batch result per dict of fit_batch options in variants) for
    residual-bootstrap draws of one grid, warm-started at its estimate as the bootstrap does."""
    params, ys = residual_draws(nf, nc, y, sw, n_draws)
    ref = [scipy_refit(nf, nc, yb, sw, params) for yb in ys]
    tile = lambda a: np.tile(a, (n_draws, 1))
    return (params, ys), ref, *(fit_batch(tile(nf), tile(nc), ys, tile(sw), params, LO, HI, **kw) for kw in variants)


def rel_diff(a, b):
    return np.max(np.abs(a - b) / np.maximum(1.0, np.abs(b)), axis=-1)


def grid_4x4():
    return (a.ravel().astype(float) for a in np.meshgrid([1, 2, 4, 8], [1, 2, 4, 8], indexing="ij"))


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("weighted", [False, True])
def test_well_posed_refits_equal_scipy(seed, weighted):
    rng = np.random.default_rng(100 + seed)
    f, c = grid_4x4()
    c_f, c_c, alpha, beta = *rng.uniform(0.1, 0.3, 2), *rng.uniform(0.3, 1.5, 2)
    y = 0.5 - c_f * f ** -alpha - c_c * c ** -beta + rng.normal(0, 0.003, f.size)
    sw = rng.uniform(0.5, 2.0, f.size) if weighted else np.ones_like(y)
    _, ref, new = compare(f, c, y, sw)
    assert all(r.status > 0 for r in ref) and np.all(new.status > 0) and new.ok.all() and not new.polished.any()
    assert np.max(rel_diff(new.x, np.array([r.x for r in ref]))) < 1e-6
    np.testing.assert_allclose(new.rss, [np.sum(r.fun ** 2) for r in ref], rtol=1e-9)
    # the same path: mostly the same number of evaluations (the last, rounding-level steps may differ)
    assert np.mean(new.nfev == [r.nfev for r in ref]) >= 0.5


def unidentified_grids():
    rng = np.random.default_rng(7)
    f, c = grid_4x4()
    yield "beta_at_upper_bound", f, c, 0.5 - 0.2 * f ** -0.6 - 0.1 * (c == 1) + rng.normal(0, 0.002, f.size)
    yield "C_c_at_0_beta_free", f, c, 0.5 - 0.2 * f ** -0.6 + rng.normal(0, 0.002, f.size)
    yield "beta_at_lower_bound", f, c, 0.5 - 0.2 * f ** -0.6 + 0.05 * np.log(c) + rng.normal(0, 0.002, f.size)


def demo_grids():
    rows = list(csv.DictReader(FIXTURE.open()))
    for pair in dict.fromkeys((r["vision"], r["text"]) for r in rows):
        sub = [r for r in rows if (r["vision"], r["text"]) == pair]
        yield "|".join(pair), *(np.array([float(r[k]) for r in sub]) for k in ("n_f", "n_c", "score"))


@pytest.mark.parametrize("n_draws", [8, pytest.param(60, marks=pytest.mark.slow)])
@pytest.mark.parametrize("name,f,c,y", [pytest.param(*g, id=g[0]) for g in [*unidentified_grids(), *demo_grids()]])
def test_ill_posed_refits_match_scipy_or_reach_a_lower_rss(name, f, c, y, n_draws):
    """Where scipy converges within its 200 evaluations the refits agree; where it spends them crawling
    along a flat valley, the polish (variable projection) goes on to a lower RSS: the minimum scipy
    reaches with 100 times the evaluations."""
    sw = np.ones_like(y)
    (params, ys), ref, same, new = compare(f, c, y, sw, n_draws, ({"polish_flat": False}, {}))
    x_ref, rss_ref = np.array([r.x for r in ref]), np.array([np.sum(r.fun ** 2) for r in ref])
    conv = np.array([r.status > 0 for r in ref])
    assert same.ok.all() and new.ok.all() and not same.polished.any()
    if conv.any():
        np.testing.assert_allclose(same.rss[conv], rss_ref[conv], rtol=1e-7)
        assert np.max(rel_diff(same.x[conv], x_ref[conv])) < 1e-4, name
    np.testing.assert_array_equal(new.x[~new.polished], same.x[~new.polished])   # the rest stay as they were
    assert np.all(new.rss[new.polished] < same.rss[new.polished] * (1 - 1e-10))
    assert np.all(new.rss[~conv] <= rss_ref[~conv] * (1 + 1e-9)), name
    for j in np.flatnonzero(new.polished)[:3 if n_draws <= 8 else None]:
        long = scipy_refit(f, c, ys[j], sw, params, max_nfev=100 * OLD_MAX_NFEV)
        assert new.rss[j] <= np.sum(long.fun ** 2) * (1 + 1e-9), (name, j)


def old_bootstrap(nf, nc, y, sw, params, method, n_resamples, seed):
    """scaling._bootstrap before the batch solver: one least_squares per refit (the same draws).
    Returns (samples, n_failed, [(draw, scipy result)] of the samples)."""
    rng = np.random.default_rng([0x5CA1E, seed])
    n = y.size
    fitted = S.SATURATING.predict(params, nf, nc)
    std_res = (y - fitted) * sw
    std_res = (std_res - std_res.mean()) * math.sqrt(n / max(1, n - 5))
    samples, failed, refits = [], 0, []
    for _ in range(n_resamples):
        if method == "residual":
            nfb, ncb, yb, swb = nf, nc, fitted + rng.choice(std_res, size=n, replace=True) / sw, sw
        else:
            idx = rng.integers(0, n, size=n)
            nfb, ncb, yb, swb = nf[idx], nc[idx], y[idx], sw[idx]
            if len(np.unique(nfb)) < S.MIN_DISTINCT or len(np.unique(ncb)) < S.MIN_DISTINCT:
                failed += 1
                continue
        refits.append(((nfb, ncb, yb, swb), scipy_refit(nfb, ncb, yb, swb, params)))
        samples.append(refits[-1][1].x)
    return np.array(samples), failed, refits


def assert_same_samples(new, old, refits):
    """Sample i of both is the refit of draw i: equal where scipy converged, an RSS as low where it
    stopped at its 200 evaluations (lower where the polish went on)."""
    assert new.shape == old.shape
    conv = np.array([r.status > 0 for _, r in refits])
    assert conv.sum() >= len(conv) // 2
    assert np.max(rel_diff(new[conv], old[conv])) < 1e-6
    for p, ((nf, nc, y, sw), r) in zip(new[~conv], [refits[i] for i in np.flatnonzero(~conv)]):
        assert np.sum(((S.SATURATING.predict(p, nf, nc) - y) * sw) ** 2) <= np.sum(r.fun ** 2) * (1 + 1e-9)


@pytest.mark.parametrize("method", ["residual", "case"])
def test_bootstrap_samples_correspond_one_to_one(method):
    f, c = (a.ravel().astype(float) for a in np.meshgrid([1, 2, 4], [1, 2, 4], indexing="ij"))
    rng = np.random.default_rng(3)
    y = 0.45 - 0.2 * f ** -0.8 - 0.15 * c ** -0.5 + rng.normal(0, 0.003, f.size)
    sw = rng.uniform(0.7, 1.5, f.size)
    params, _ = S._fit_model(S.SATURATING, f, c, y, sw)
    new, failed_new = S._bootstrap(f, c, y, sw, params, method, 40, seed=2)
    old, failed_old, refits = old_bootstrap(f, c, y, sw, params, method, 40, seed=2)
    assert failed_new == failed_old and (method == "residual" or failed_old > 0)   # 3 x 3: some case draws miss a value
    assert_same_samples(new, old, refits)


def test_weighted_fit_intervals_equal_the_one_call_per_refit_path():
    f, c = grid_4x4()
    rng = np.random.default_rng(11)
    y = 0.5 - 0.25 * f ** -0.7 - 0.2 * c ** -0.9 + rng.normal(0, 0.003, f.size)
    half = rng.uniform(0.005, 0.02, f.size)
    fit = S.fit_scaling({"n_f": f, "n_c": c, "score": y, "score_lo": y - half, "score_hi": y + half},
                        n_bootstrap=60, seed=4)
    assert fit.weighted
    params = np.array([fit.params[k] for k in S.PARAM_NAMES])
    sigma = 2 * half / (2 * 1.959963984540054)
    old, _, refits = old_bootstrap(f, c, y, 1.0 / (sigma / sigma.mean()), params, "residual", 60, seed=4)
    assert all(r.status > 0 for _, r in refits)   # a 4 x 4 grid that identifies the law: every refit converges
    assert np.max(rel_diff(fit.param_samples, old)) < 1e-6
    for i, name in enumerate(S.PARAM_NAMES):
        np.testing.assert_allclose(fit.param_ci[name], np.quantile(old[:, i], [0.025, 0.975]), rtol=1e-6, atol=1e-9)


def test_where_scipy_raises_the_refit_fails():
    f, c = grid_4x4()
    y = 0.5 - 0.2 * f ** -0.6 - 0.1 * c ** -0.5
    ys = np.stack([y, np.where(f == 2, np.inf, y)])
    with pytest.raises(ValueError):
        scipy_refit(f, c, ys[1], np.ones_like(y), np.array([0.5, 0.2, 0.1, 0.6, 0.5]))
    out = fit_batch(np.tile(f, (2, 1)), np.tile(c, (2, 1)), ys, np.ones((2, f.size)), [0.5, 0.2, 0.1, 0.6, 0.5], LO, HI)
    assert out.ok.tolist() == [True, False] and np.isnan(out.x[1]).all() and np.isfinite(out.x[0]).all()


def test_linear_parameters_at_fixed_exponents_equal_bounded_least_squares():
    """polish's inner solve (four faces of C_f, C_c >= 0) against scipy's lsq_linear (bvls), as in the start grid."""
    from vlgap.scaling_batch import _linear_params

    rng = np.random.default_rng(5)
    f, c = grid_4x4()
    ys = 0.5 - rng.uniform(-0.2, 0.3, (60, 1)) * f ** -0.7 - rng.uniform(-0.2, 0.3, (60, 1)) * c ** -0.4 \
        + rng.normal(0, 0.01, (60, f.size))
    ex = np.exp(rng.uniform(np.log(1e-3), np.log(10), (60, 2)))
    sw = rng.uniform(0.5, 2.0, (60, f.size))
    lin, rss = _linear_params(ex, np.log(np.tile(f, (60, 1))), np.log(np.tile(c, (60, 1))), ys, sw)
    for i in range(60):
        _, ref_rss = S._linear_fit(S.SATURATING, ex[i], f, c, ys[i], sw[i])
        assert rss[i] == pytest.approx(ref_rss, rel=1e-8, abs=1e-15)
        assert np.all(lin[i, 1:] >= 0)
    assert np.sum(lin[:, 1:] == 0) > 5   # the draws put some coefficients on their bound


def test_polished_refits_stay_within_the_bounds():
    rng = np.random.default_rng(9)
    f, c = grid_4x4()
    y = 0.5 - 0.2 * f ** -0.6 + 0.05 * np.log(c) + rng.normal(0, 0.002, f.size)   # beta runs to its lower bound
    _, ys = residual_draws(f, c, y, np.ones_like(y), 30)
    out = fit_batch(np.tile(f, (30, 1)), np.tile(c, (30, 1)), ys, np.ones_like(ys), S._fit_model(
        S.SATURATING, f, c, y, np.ones_like(y))[0], LO, HI)
    assert out.polished.any()
    assert np.all(out.x >= LO) and np.all(out.x <= HI)
