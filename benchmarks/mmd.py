"""Benchmark: vectorised MMD^2 permutation test vs alibi-detect's per-permutation loop.

Both start from the same cached pooled kernel matrix and use the *same* permutations
(`vlgap.stats.permutation.permutation_indices`), so their null statistics must agree to rounding
and their p-values exactly. The baseline follows alibi-detect (`mmd2_from_kernel_matrix` with
permute=True): zero the diagonal once, then for each permutation gather K[idx][:, idx] and sum the
three blocks. vlgap instead evaluates a batch of permutations as quadratic forms s^T K s with one
[b, N] x [N, N] matrix product on the double-centred kernel.

    OMP_NUM_THREADS=2 python benchmarks/mmd.py                 # 5,000 vs 5,000, D=384, 1,000 perms
    python benchmarks/mmd.py --n 1000 --permutations 200       # quick

If the loop would take longer than --baseline-budget seconds, it runs on the first K permutations
only, checks those against vlgap's, and extrapolates its time to all permutations: the output then
says EXTRAPOLATED on the line that uses it.
"""
from __future__ import annotations

import argparse
import os
import platform
import threading
import time

import numpy as np
import psutil
import torch

from vlgap.stats.kernels import kernel_matrix, resolve_kernel
from vlgap.stats.mmd import mmd2_from_kernel
from vlgap.stats.permutation import double_center_, permutation_indices, permutation_null
from vlgap.stats.resampling import permutation_p_value


class PeakRSS:
    """Peak resident memory of this process above its level at entry (polled every 5 ms)."""

    def __init__(self):
        self.proc = psutil.Process()
        self.peak = 0

    def __enter__(self):
        self.start = self.proc.memory_info().rss
        self.peak = self.start
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)
        self._thread.start()
        return self

    def _poll(self):
        while not self._stop.is_set():
            self.peak = max(self.peak, self.proc.memory_info().rss)
            time.sleep(0.005)

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self.proc.memory_info().rss)

    @property
    def extra_mib(self) -> float:
        return (self.peak - self.start) / 2**20


def alibi_loop_null(k: torch.Tensor, m: int, perms) -> np.ndarray:
    """alibi-detect's approach: one gather of the whole kernel matrix per permutation."""
    k = k - torch.diag(k.diag())  # zero_diag, once (alibi does it once before its loop too)
    n = k.shape[0] - m
    out = []
    for idx in perms:
        idx_t = torch.from_numpy(idx)
        kp = k[idx_t][:, idx_t]
        k_xx, k_yy, k_xy = kp[:m, :m], kp[m:, m:], kp[:m, m:]
        out.append(float(k_xx.sum() / (m * (m - 1)) + k_yy.sum() / (n * (n - 1)) - 2.0 * k_xy.mean()))
    return np.array(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=5000, help="items per side")
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--permutations", type=int, default=1000)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--shift", type=float, default=0.004, help="mean shift of B per coordinate")
    parser.add_argument("--baseline-budget", type=float, default=180.0,
                        help="seconds the loop may run before it is cut to a subset and extrapolated")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    torch.set_num_threads(args.threads)
    dtype = torch.float64
    rng = np.random.default_rng(args.seed)
    a = torch.from_numpy(rng.standard_normal((args.n, args.dim)))
    b = torch.from_numpy(rng.standard_normal((args.n, args.dim)) + args.shift)
    z = torch.cat([a, b]).to(dtype)
    m = args.n
    n_total = z.shape[0]
    n_perm = args.permutations
    print(f"machine: {platform.processor() or platform.machine()}, {psutil.cpu_count(logical=True)} logical CPUs, "
          f"torch {torch.__version__}, {args.threads} threads, dtype {str(dtype).replace('torch.', '')}")
    print(f"data: {args.n} vs {args.n} items, D={args.dim}, {n_perm} permutations, seed {args.seed}")

    t0 = time.perf_counter()
    kern = resolve_kernel("rbf", z, seed=args.seed)
    k = kernel_matrix(z, z, kern)
    observed = mmd2_from_kernel(k, m)
    t_kernel = time.perf_counter() - t0
    print(f"shared: kernel matrix {n_total}x{n_total} ({k.numel() * k.element_size() / 2**20:.0f} MiB) "
          f"+ observed MMD^2 in {t_kernel:.2f} s; MMD^2_u = {observed:.6g}, sigma = {kern.bandwidth:.4g}")

    # vlgap: vectorised batches of quadratic forms
    with PeakRSS() as mem_vec:
        t0 = time.perf_counter()
        kc = double_center_(k.clone())
        null_vec = permutation_null(kc, m, n_perm, seed=args.seed).numpy()
        t_vec = time.perf_counter() - t0
        del kc
    p_vec = permutation_p_value(observed, null_vec)
    print(f"vlgap vectorised : {t_vec:8.2f} s for {n_perm} permutations (incl. centring), "
          f"peak +{mem_vec.extra_mib:.0f} MiB RSS, p = {p_vec:.6g}")

    # baseline: time a few permutations to project, then run all of them or a subset
    with PeakRSS() as mem_loop:
        t0 = time.perf_counter()
        probe = min(5, n_perm)
        null_loop = list(alibi_loop_null(k, m, _take(permutation_indices(n_total, n_perm, args.seed), probe)))
        per_perm = (time.perf_counter() - t0) / probe
        n_loop = n_perm if per_perm * n_perm <= args.baseline_budget else max(probe, int(args.baseline_budget / per_perm))
        if n_loop > probe:
            rest = _take(_skip(permutation_indices(n_total, n_perm, args.seed), probe), n_loop - probe)
            null_loop += list(alibi_loop_null(k, m, rest))
        t_loop = time.perf_counter() - t0
    null_loop = np.array(null_loop)
    complete = n_loop == n_perm
    t_loop_all = t_loop if complete else t_loop / n_loop * n_perm

    max_diff = float(np.max(np.abs(null_loop - null_vec[:n_loop])))
    assert max_diff < 1e-9, f"null statistics differ by {max_diff}"
    p_loop_sub = permutation_p_value(observed, null_loop)
    p_vec_sub = permutation_p_value(observed, null_vec[:n_loop])
    assert p_loop_sub == p_vec_sub, (p_loop_sub, p_vec_sub)
    if complete:
        print(f"alibi-style loop : {t_loop:8.2f} s for {n_perm} permutations, peak +{mem_loop.extra_mib:.0f} MiB RSS, "
              f"p = {p_loop_sub:.6g}")
        print(f"same permutations: max |null difference| = {max_diff:.2e}; p-values equal: {p_loop_sub == p_vec}")
        assert p_loop_sub == p_vec
    else:
        print(f"alibi-style loop : {t_loop:8.2f} s for the first {n_loop} permutations "
              f"({per_perm:.3f} s each), peak +{mem_loop.extra_mib:.0f} MiB RSS")
        print(f"                   EXTRAPOLATED to {n_perm} permutations: {t_loop_all:.1f} s "
              f"(the loop was cut at --baseline-budget {args.baseline_budget:g} s)")
        print(f"same permutations: first {n_loop} null statistics agree (max |difference| = {max_diff:.2e}); "
              f"p-values over those {n_loop} equal: {p_loop_sub:.6g} == {p_vec_sub:.6g}")
    label = "" if complete else " (loop time EXTRAPOLATED)"
    print(f"speed-up: {t_loop_all / t_vec:.1f}x{label}")

    # extra: vlgap in float32 (same permutations; p-value may differ only through rounding near ties)
    k32 = k.to(torch.float32)
    del k
    t0 = time.perf_counter()
    null32 = permutation_null(double_center_(k32), m, n_perm, seed=args.seed).numpy()
    t32 = time.perf_counter() - t0
    print(f"vlgap float32    : {t32:8.2f} s, max |null - float64 null| = {np.max(np.abs(null32 - null_vec)):.2e}, "
          f"p = {permutation_p_value(observed, null32):.6g}; speed-up vs loop {t_loop_all / t32:.1f}x{label}")


def _take(it, k):
    for _ in range(k):
        yield next(it)


def _skip(it, k):
    for _ in range(k):
        next(it)
    return it


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "2")
    main()
