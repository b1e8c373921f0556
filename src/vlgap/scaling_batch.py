"""Many bounded least-squares fits of the saturating law at once (the bootstrap's refits).

`fit_batch` runs scipy.optimize.least_squares(method="trf", x_scale="jac", exact trust-region
solver, bounds) on a stack of problems in lockstep: the same algorithm step by step (Coleman-Li
scaling, the SVD trust-region solve with its Levenberg-Marquardt parameter, reflective step
selection, radius update, termination tests, the evaluation budget), written over a leading batch
axis in numpy instead of one Python call per problem. A refit scipy converges gives the same
parameters up to rounding. One that spends `max_nfev` crawling along a flat, unidentified valley,
or stops there by ftol/xtol (rounding alone may move such a path), goes on by `polish`: variable
projection (S_inf, C_f, C_c solved exactly for the exponents) and a projected Newton search over the
two exponents, which ends at the minimum scipy reaches with many more evaluations, an RSS at least as
low as scipy's at `max_nfev` (tests/test_scaling_batch.py checks these against scipy). Problems are rows of (B, m) arrays: n_f,
n_c, score and sqrt weights per cell.

The law: prediction = S_inf - C_f n_f^-alpha - C_c n_c^-beta, parameters (S_inf, C_f, C_c, alpha, beta).
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

EPS = np.finfo(float).eps
#: the polish replaces a refit only where it lowers the RSS by more than this (relative): not rounding
POLISH_GAIN = 1e-10


class BatchFit(NamedTuple):
    x: np.ndarray        # (B, 5) fitted parameters
    rss: np.ndarray      # (B,) weighted residual sum of squares
    ok: np.ndarray       # (B,) False where least_squares would have raised
    nfev: np.ndarray     # (B,) evaluations of the residuals
    status: np.ndarray   # (B,) least_squares' status: 0 budget spent, 1 gtol, 2 ftol, 3 xtol, 4 ftol and xtol
    polished: np.ndarray  # (B,) `polish` lowered the RSS further (the refit had stopped on a flat valley)


def _residuals_and_jacobian(x, lnf, lnc, y, sw, want_jac=True):
    """Weighted residuals (B, m) and their Jacobian (B, m, 5) of the additive law."""
    tf = np.exp(-x[:, 3:4] * lnf)   # n_f^-alpha
    tc = np.exp(-x[:, 4:5] * lnc)   # n_c^-beta
    f = (x[:, 0:1] - tf * x[:, 1:2] - tc * x[:, 2:3] - y) * sw
    if not want_jac:
        return f, None
    jac = np.stack([np.ones_like(tf), -tf, -tc, x[:, 1:2] * tf * lnf, x[:, 2:3] * tc * lnc], axis=-1)
    return f, jac * sw[:, :, None]


def _norm(a):
    return np.sqrt(np.einsum("...i,...i->...", a, a))


def _strictly_feasible(x, lb, ub, rstep):
    """scipy's make_strictly_feasible, row by row (rstep=0: np.nextafter off the bound)."""
    x_new = x.copy()
    if rstep == 0:
        lower, upper = x <= lb, x >= ub
    else:
        lower_dist, upper_dist = x - lb, ub - x
        lower = np.isfinite(lb) & (lower_dist <= np.minimum(upper_dist, rstep * np.maximum(1, np.abs(lb))))
        upper = np.isfinite(ub) & (upper_dist <= np.minimum(lower_dist, rstep * np.maximum(1, np.abs(ub))))
        lower &= ~upper
    lbb, ubb = np.broadcast_to(lb, x.shape), np.broadcast_to(ub, x.shape)
    if rstep == 0:
        x_new[lower] = np.nextafter(lbb[lower], ubb[lower])
        x_new[upper] = np.nextafter(ubb[upper], lbb[upper])
    else:
        x_new[lower] = lbb[lower] + rstep * np.maximum(1, np.abs(lbb[lower]))
        x_new[upper] = ubb[upper] - rstep * np.maximum(1, np.abs(ubb[upper]))
    tight = (x_new < lbb) | (x_new > ubb)
    x_new[tight] = 0.5 * (lbb[tight] + ubb[tight])
    return x_new


def _step_to_bound(x, s, lb, ub):
    """scipy's step_size_to_bound per row: (min step, hits)."""
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        steps = np.where(s != 0, np.maximum((lb - x) / s, (ub - x) / s), np.inf)
    min_step = steps.min(axis=1)
    return min_step, (steps == min_step[:, None]) * np.sign(s)


def _quadratic(jh, gh, s, diag):
    """scipy's evaluate_quadratic per row."""
    js = np.einsum("bmn,bn->bm", jh, s)
    return 0.5 * (np.einsum("bm,bm->b", js, js) + np.einsum("bn,bn->b", s * diag, s)) + np.einsum("bn,bn->b", s, gh)


def _min_quadratic_1d(a, b, lo, hi, c):
    """scipy's minimize_quadratic_1d per row: candidates lo, hi, then the extremum if inside."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        ext = -0.5 * b / a
        inside = (a != 0) & (lo < ext) & (ext < hi)
        t = np.stack([lo, hi, np.where(inside, ext, lo)], axis=1)
        val = t * (a[:, None] * t + b[:, None]) + c[:, None]
        val[:, 2] = np.where(inside, val[:, 2], np.inf)
    k = np.argmin(val, axis=1)
    rows = np.arange(len(a))
    return t[rows, k], val[rows, k]


def _solve_trust_region(m, uf, s, V, Delta, alpha0, rtol=0.01, max_iter=10):
    """scipy's solve_lsq_trust_region per row; returns (p_h, alpha)."""
    n = s.shape[1]
    suf = s * uf
    full_rank = (s[:, -1] > EPS * m * s[:, 0]) if m >= n else np.zeros(len(s), bool)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        p_gn = -np.einsum("bij,bj->bi", V, uf / s)
        gn = full_rank & (_norm(p_gn) <= Delta)
        if gn.all():   # every row takes the Gauss-Newton step
            return p_gn, np.zeros(len(s))

        def phi_and_derivative(alpha):
            denom = s ** 2 + alpha[:, None]
            p_norm = _norm(suf / denom)
            return p_norm - Delta, -np.sum(suf ** 2 / denom ** 3, axis=1) / p_norm

        alpha_upper = _norm(suf) / Delta
        phi0, dphi0 = phi_and_derivative(np.zeros(len(s)))
        alpha_lower = np.where(full_rank, -phi0 / dphi0, 0.0)
        restart = lambda: np.maximum(0.001 * alpha_upper, np.sqrt(alpha_lower * alpha_upper))
        alpha = np.where(~full_rank & (alpha0 == 0), restart(), alpha0)
        active = ~gn
        for _ in range(max_iter):
            if not active.any():
                break
            alpha = np.where(active & ((alpha < alpha_lower) | (alpha > alpha_upper)), restart(), alpha)
            phi, dphi = phi_and_derivative(alpha)
            alpha_upper = np.where(active & (phi < 0), alpha, alpha_upper)
            ratio = phi / dphi
            alpha_lower = np.where(active, np.maximum(alpha_lower, alpha - ratio), alpha_lower)
            alpha = np.where(active, alpha - (phi + Delta) * ratio / Delta, alpha)
            active &= ~(np.abs(phi) < rtol * Delta)
        p = -np.einsum("bij,bj->bi", V, suf / (s ** 2 + alpha[:, None]))
        p *= (Delta / _norm(p))[:, None]
    return np.where(gn[:, None], p_gn, p), np.where(gn, 0.0, alpha)


def _select_step(x, jh, diag_h, g_h, p, p_h, d, Delta, lb, ub, theta):
    """scipy's select_step per row (trust-region reflective): (step, step_h, predicted reduction, ok)."""
    inside = np.all((x + p >= lb) & (x + p <= ub), axis=1)
    if inside.all():   # no row's step leaves the bounds: no reflection to consider
        return p, p_h, -_quadratic(jh, g_h, p_h, diag_h), inside
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        p_stride, hits = _step_to_bound(x, p, lb, ub)
        r_h = np.where(hits != 0, -p_h, p_h)
        r = d * r_h
        pc, pc_h = p * p_stride[:, None], p_h * p_stride[:, None]
        x_on_bound = x + pc
        # the reflected direction's exit from the trust region (larger root of |pc_h + t r_h| = Delta)
        a = np.einsum("bi,bi->b", r_h, r_h)
        b = np.einsum("bi,bi->b", pc_h, r_h)
        c = np.einsum("bi,bi->b", pc_h, pc_h) - Delta ** 2
        ok = inside | ((a != 0) & (c <= 0))
        dd = np.sqrt(b * b - a * c)
        q = -(b + np.copysign(dd, b))
        to_tr = np.maximum(q / a, c / q)
        to_bound, _ = _step_to_bound(x_on_bound, r, lb, ub)
        r_stride = np.minimum(to_bound, to_tr)
        pos = r_stride > 0
        r_lo = np.where(pos, (1 - theta) * p_stride / r_stride, 0.0)
        r_hi = np.where(pos, np.where(r_stride == to_bound, theta * to_bound, to_tr), -1.0)
        reflect = r_lo <= r_hi
        v = np.einsum("bmn,bn->bm", jh, r_h)
        u = np.einsum("bmn,bn->bm", jh, pc_h)
        qa = 0.5 * (np.einsum("bm,bm->b", v, v) + np.einsum("bn,bn->b", r_h * diag_h, r_h))
        qb = (np.einsum("bn,bn->b", g_h, r_h) + np.einsum("bm,bm->b", u, v)
              + np.einsum("bn,bn->b", pc_h * diag_h, r_h))
        qc = (0.5 * np.einsum("bm,bm->b", u, u) + np.einsum("bn,bn->b", g_h, pc_h)
              + 0.5 * np.einsum("bn,bn->b", pc_h * diag_h, pc_h))
        t, r_value = _min_quadratic_1d(qa, qb, r_lo, r_hi, qc)
        r_value = np.where(reflect, r_value, np.inf)
        r_h = r_h * t[:, None] + pc_h
        r = r_h * d
        pc, pc_h = pc * theta[:, None], pc_h * theta[:, None]
        p_value = _quadratic(jh, g_h, pc_h, diag_h)
        ag_h = -g_h
        ag = d * ag_h
        to_tr = Delta / _norm(ag_h)
        to_bound, _ = _step_to_bound(x, ag, lb, ub)
        ag_stride = np.where(to_bound < to_tr, theta * to_bound, to_tr)
        w = np.einsum("bmn,bn->bm", jh, ag_h)
        ga = 0.5 * (np.einsum("bm,bm->b", w, w) + np.einsum("bn,bn->b", ag_h * diag_h, ag_h))
        gb = np.einsum("bn,bn->b", g_h, ag_h)
        ag_stride, ag_value = _min_quadratic_1d(ga, gb, np.zeros_like(ga), ag_stride, np.zeros_like(ga))
        ag_h, ag = ag_h * ag_stride[:, None], ag * ag_stride[:, None]
        pick_p = (p_value < r_value) & (p_value < ag_value)
        pick_r = ~pick_p & (r_value < p_value) & (r_value < ag_value)
        step = np.where(pick_p[:, None], pc, np.where(pick_r[:, None], r, ag))
        step_h = np.where(pick_p[:, None], pc_h, np.where(pick_r[:, None], r_h, ag_h))
        value = np.where(pick_p, p_value, np.where(pick_r, r_value, ag_value))
        inside_value = _quadratic(jh, g_h, p_h, diag_h)
    step = np.where(inside[:, None], p, step)
    step_h = np.where(inside[:, None], p_h, step_h)
    return step, step_h, -np.where(inside, inside_value, value), ok


def _linear_params(e, lnf, lnc, y, sw):
    """(S_inf, C_f, C_c) minimising the RSS at fixed exponents e (B, 2), C_f, C_c >= 0: the best feasible
    least-squares solution over the four faces of the constraint (a convex problem: that is its minimum)."""
    a = np.stack([np.ones_like(lnf), -np.exp(-e[:, :1] * lnf), -np.exp(-e[:, 1:] * lnc)], axis=-1) * sw[:, :, None]
    b = y * sw
    best, best_rss = np.zeros((len(e), 3)), np.full(len(e), np.inf)
    for cols in ([0, 1, 2], [0, 1], [0, 2], [0]):
        sub = a[:, :, cols]
        gram, rhs = np.einsum("bmk,bml->bkl", sub, sub), np.einsum("bmk,bm->bk", sub, b)
        try:   # normal equations: 3 x 3 at most; a singular stack (collinear columns) goes by the pseudo-inverse
            coef = np.linalg.solve(gram, rhs[:, :, None])[:, :, 0]
        except np.linalg.LinAlgError:
            coef = np.einsum("bkm,bm->bk", np.linalg.pinv(sub), b)
        rss = np.sum((np.einsum("bmk,bk->bm", sub, coef) - b) ** 2, axis=1)
        take = np.all(coef[:, 1:] >= 0, axis=1) & (rss < best_rss)
        best[np.ix_(take, cols)] = coef[take]
        best[np.ix_(take, [k for k in (1, 2) if k not in cols])] = 0.0
        best_rss = np.where(take, rss, best_rss)
    return best, best_rss


def polish(x, nf, nc, y, sw, lo=1e-3, hi=10.0, max_iter=100):
    """Carry on fits that stopped part-way along a flat valley: variable projection
    (the linear parameters solved exactly for the exponents) and a projected Newton search over the two
    exponents in log space, from x's exponents. Returns (x, rss): a row whose RSS would not drop keeps x."""
    lnf, lnc = np.log(nf), np.log(nc)
    f = lambda u: _linear_params(np.exp(u), lnf, lnc, y, sw)[1]
    u = np.log(np.clip(x[:, 3:], lo, hi))
    ulo, uhi = np.log(lo), np.log(hi)
    F = f(u)
    live = np.isfinite(F)
    h, eye = 1e-4, np.eye(2)
    for _ in range(max_iter):
        if not live.any():
            break
        plus = np.stack([f(u + h * eye[k]) for k in range(2)], axis=1)
        minus = np.stack([f(u - h * eye[k]) for k in range(2)], axis=1)
        g = (plus - minus) / (2 * h)
        H = np.zeros((len(u), 2, 2))
        H[:, [0, 1], [0, 1]] = (plus - 2 * F[:, None] + minus) / h ** 2
        H[:, 0, 1] = H[:, 1, 0] = (f(u + h * (eye[0] + eye[1])) - f(u + h * (eye[0] - eye[1]))
                                   - f(u - h * (eye[0] - eye[1])) + f(u - h * (eye[0] + eye[1]))) / (4 * h ** 2)
        fixed = ((u <= ulo) & (g > 0)) | ((u >= uhi) & (g < 0))   # pushed against a bound: held there
        g = np.where(fixed, 0.0, g)
        H = np.where(fixed[:, :, None] | fixed[:, None, :], eye * np.maximum(1.0, np.abs(H)), H)
        lam = np.maximum(0.0, -np.linalg.eigvalsh(H)[:, 0]) * 1.01 + 1e-12 * np.maximum(1.0, np.abs(H).max(axis=(1, 2)))
        step = -np.linalg.solve(H + lam[:, None, None] * eye, g[:, :, None])[:, :, 0]
        moved, t, before = np.zeros(len(u), bool), np.ones(len(u)), F.copy()
        for _ in range(30):   # backtracking until the RSS drops
            try_u = np.clip(u + t[:, None] * step, ulo, uhi)
            Fn = f(try_u)
            ok = live & ~moved & (Fn < F)
            u[ok], F[ok] = try_u[ok], Fn[ok]
            moved |= ok
            t = np.where(moved, t, t / 4)
            if (moved | ~live).all():
                break
        live &= moved & (before - F > 1e-13 * before)
    e = np.clip(np.exp(u), lo, hi)   # exp(log(bound)) may round past the bound
    lin, rss = _linear_params(e, lnf, lnc, y, sw)
    return np.concatenate([lin, e], axis=1), rss


def fit_batch(nf, nc, y, sw, x0, lb, ub, *, ftol=1e-12, xtol=1e-12, gtol=1e-12, max_nfev=200, polish_flat=True):
    """Fit the law to each row of (B, m) arrays nf, nc, y, sw from x0 ((5,) or (B, 5)) within bounds
    lb, ub ((5,)), as least_squares(method="trf", x_scale="jac", bounds) would one by one.

    Returns a BatchFit: ok is False where scipy would raise (residuals not finite at the start, a
    degenerate trust-region step), and those rows' x and rss are NaN; status as least_squares'
    (0: stopped at max_nfev, 1-4: converged). polish_flat (default): every row goes on by `polish`
    (exponent bounds lb[3:], ub[3:]) and takes its result where that lowers the RSS by more than
    POLISH_GAIN (relative): a refit stopped at max_nfev, or by ftol/xtol part-way along a flat valley
    (`polished`); a refit at a minimum stays as it is."""
    nf, nc, y, sw = (np.atleast_2d(np.asarray(a, dtype=float)) for a in (nf, nc, y, sw))
    B, m = y.shape
    lb, ub = np.asarray(lb, dtype=float), np.asarray(ub, dtype=float)
    x = _strictly_feasible(np.broadcast_to(np.asarray(x0, dtype=float), (B, lb.size)).copy(), lb, ub, 1e-10)
    lnf, lnc = np.log(nf), np.log(nc)
    f, J = _residuals_and_jacobian(x, lnf, lnc, y, sw)
    ok = np.all(np.isfinite(f), axis=1)
    nfev = np.ones(B, int)
    cost = 0.5 * np.einsum("bm,bm->b", f, f)
    g = np.einsum("bmn,bm->bn", J, f)
    scale_inv = np.sqrt(np.sum(J ** 2, axis=1))
    scale_inv[scale_inv == 0] = 1
    scale = 1 / scale_inv

    def cl_scaling(x, g):
        v, dv = np.ones_like(x), np.zeros_like(x)
        up = (g < 0) & np.isfinite(ub)
        v, dv = np.where(up, ub - x, v), np.where(up, -1.0, dv)
        low = (g > 0) & np.isfinite(lb)
        return np.where(low, x - lb, v), np.where(low, 1.0, dv)

    v, dv = cl_scaling(x, g)
    v = np.where(dv != 0, v * scale_inv, v)
    with np.errstate(divide="ignore", invalid="ignore"):
        Delta = _norm(x * scale_inv / np.sqrt(v))
    Delta = np.where(Delta == 0, 1.0, Delta)
    alpha = np.zeros(B)
    status = np.full(B, -1)              # -1: still running (scipy's None)
    done = ~ok
    setup = np.ones(B, bool)             # at the top of scipy's outer loop
    shape_n = (B, lb.size)
    d, diag_h, g_h = np.zeros(shape_n), np.zeros(shape_n), np.zeros(shape_n)
    J_h = np.zeros((B, m, lb.size))
    uf, s_val, V = np.zeros(shape_n), np.ones(shape_n), np.zeros((B, lb.size, lb.size))
    theta, actual = np.zeros(B), np.zeros(B)
    x_new, f_new, cost_new = x.copy(), f.copy(), cost.copy()
    while True:
        top = setup & ~done
        if top.any():
            i = np.flatnonzero(top)
            v, dv = cl_scaling(x[i], g[i])
            g_norm = np.max(np.abs(g[i] * v), axis=1)
            status[i[g_norm < gtol]] = 1
            stop = (status[i] != -1) | (nfev[i] == max_nfev)
            done[i[stop]] = True
            i, v, dv, g_norm = i[~stop], v[~stop], dv[~stop], g_norm[~stop]
            v = np.where(dv != 0, v * scale_inv[i], v)
            d[i] = np.sqrt(v) * scale[i]
            diag_h[i] = g[i] * dv * scale[i]
            g_h[i] = d[i] * g[i]
            J_h[i] = J[i] * d[i][:, None, :]
            aug = np.concatenate([J_h[i], np.sqrt(diag_h[i])[:, :, None] * np.eye(lb.size)], axis=1)
            U, s_i, Vt = np.linalg.svd(aug, full_matrices=False)
            s_val[i], V[i] = s_i, np.swapaxes(Vt, 1, 2)
            uf[i] = np.einsum("bki,bk->bi", U[:, :m], f[i])   # the augmented right-hand side is (f, 0)
            theta[i] = np.maximum(0.995, 1 - g_norm)
            actual[i] = -1
            setup[i] = False
        run = ~done & ~setup
        if not run.any():
            break
        i = np.flatnonzero(run)
        p_h, alpha_i = _solve_trust_region(m, uf[i], s_val[i], V[i], Delta[i], alpha[i])
        alpha[i] = alpha_i
        p = d[i] * p_h
        step, step_h, predicted, good = _select_step(x[i], J_h[i], diag_h[i], g_h[i], p, p_h, d[i], Delta[i],
                                                     lb, ub, theta[i])
        bad = i[~good]
        ok[bad], done[bad] = False, True
        i, step, step_h, predicted = i[good], step[good], step_h[good], predicted[good]
        x_new[i] = _strictly_feasible(x[i] + step, lb, ub, 0)
        f_new[i], _ = _residuals_and_jacobian(x_new[i], lnf[i], lnc[i], y[i], sw[i], want_jac=False)
        nfev[i] += 1
        step_h_norm = _norm(step_h)
        finite = np.all(np.isfinite(f_new[i]), axis=1)
        Delta[i[~finite]] = 0.25 * step_h_norm[~finite]
        i, step, step_h_norm, predicted = i[finite], step[finite], step_h_norm[finite], predicted[finite]
        cost_new[i] = 0.5 * np.einsum("bm,bm->b", f_new[i], f_new[i])
        actual[i] = cost[i] - cost_new[i]
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.where(predicted > 0, actual[i] / predicted,
                             np.where((predicted == 0) & (actual[i] == 0), 1.0, 0.0))
        Delta_new = np.where(ratio < 0.25, 0.25 * step_h_norm,
                             np.where((ratio > 0.75) & (step_h_norm > 0.95 * Delta[i]), 2.0 * Delta[i], Delta[i]))
        ftol_ok = (actual[i] < ftol * cost[i]) & (ratio > 0.25)
        xtol_ok = _norm(step) < xtol * (xtol + _norm(x[i]))
        term = np.select([ftol_ok & xtol_ok, ftol_ok, xtol_ok], [4, 2, 3], -1)
        status[i] = term
        go_on = term == -1
        alpha[i[go_on]] *= Delta[i[go_on]] / Delta_new[go_on]
        Delta[i[go_on]] = Delta_new[go_on]
        # the inner loop ends on a reduction, a termination test or the evaluation budget
        leave = run & ((actual > 0) | (status != -1) | (nfev >= max_nfev))
        leave[np.flatnonzero(~ok)] = False
        acc = np.flatnonzero(leave & (actual > 0))
        if acc.size:
            x[acc], f[acc], cost[acc] = x_new[acc], f_new[acc], cost_new[acc]
            _, J[acc] = _residuals_and_jacobian(x[acc], lnf[acc], lnc[acc], y[acc], sw[acc])
            g[acc] = np.einsum("bmn,bm->bn", J[acc], f[acc])
            scale_inv[acc] = np.maximum(np.sqrt(np.sum(J[acc] ** 2, axis=1)), scale_inv[acc])
            scale[acc] = 1 / scale_inv[acc]
        setup |= leave
    status[status == -1] = 0
    rss = np.sum(f ** 2, axis=1)   # as _fit_model: the sum of the returned residuals squared
    polished = np.zeros(B, bool)
    rows = np.flatnonzero(ok)
    if polish_flat and rows.size:
        xp, _ = polish(x[rows], nf[rows], nc[rows], y[rows], sw[rows], lb[3:].min(), ub[3:].max())
        fp, _ = _residuals_and_jacobian(xp, lnf[rows], lnc[rows], y[rows], sw[rows], want_jac=False)
        rp = np.sum(fp ** 2, axis=1)
        better = np.isfinite(rp) & (rp < rss[rows] * (1 - POLISH_GAIN))
        x[rows[better]], rss[rows[better]], polished[rows[better]] = xp[better], rp[better], True
    return BatchFit(np.where(ok[:, None], x, np.nan), np.where(ok, rss, np.nan), ok, nfev, status, polished)
