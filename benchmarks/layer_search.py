"""Layer search speed: vlgap's search vs a naive per-pair search in the style of platonic-rep.

Part 1, N = 1024, 31 x 19 layers of random features (widths 576 and 1280, i.e. a ViT-S-like
vision tower against a 1280-wide text model), mutual k-NN with k = 10, 2 CPU threads:
  ours  = `vlgap.layer_search` (each layer's neighbour lists once, O(N k) look-ups per pair;
          median of 3 runs after a warm-up);
  naive = for every pair, normalise both layers, sort the full N x N similarity matrices and
          intersect full N x N neighbour masks (platonic-rep `compute_score` + `mutual_knn`; the
          sort is stable so that ties resolve like ours and the scores can be compared exactly).
Scores must be identical. Wall-clock and CPU time (process_time, all threads) are both reported:
on a shared machine the CPU-time ratio is the steadier one. Part 2 (a fresh process, for a clean peak-memory figure): N = 16,384,
ours alone: time and peak resident memory.

Usage: python benchmarks/layer_search.py [--pairs P] [--skip-large]
  --pairs P  time the naive search on the first P pairs only and extrapolate (default: all 589)
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time

os.environ.setdefault("OMP_NUM_THREADS", "2")

import numpy as np  # noqa: E402
import torch  # noqa: E402

from vlgap.metrics.layer_search import layer_search  # noqa: E402

THREADS = 2
K = 10
L_X, D_X = 31, 576
L_Y, D_Y = 19, 1280


def make_layers(n: int, seed: int = 0) -> tuple[list[np.ndarray], list[np.ndarray]]:
    rng = np.random.default_rng(seed)
    xs = [rng.standard_normal((n, D_X), dtype=np.float32) for _ in range(L_X)]
    ys = [rng.standard_normal((n, D_Y), dtype=np.float32) for _ in range(L_Y)]
    return xs, ys


def naive_pair(x: torch.Tensor, y: torch.Tensor, k: int) -> float:
    """platonic-rep: normalise, full similarity, sort every row, full N x N masks, per pair."""
    x = torch.nn.functional.normalize(x, p=2, dim=-1)
    y = torch.nn.functional.normalize(y, p=2, dim=-1)

    def knn(f):
        s = (f @ f.T).fill_diagonal_(float("-inf"))
        return torch.sort(s, dim=1, descending=True, stable=True).indices[:, :k]

    knn_a, knn_b = knn(x), knn(y)
    n = knn_a.shape[0]
    r = torch.arange(n).unsqueeze(1)
    mask_a = torch.zeros(n, n)
    mask_b = torch.zeros(n, n)
    mask_a[r, knn_a] = 1.0
    mask_b[r, knn_b] = 1.0
    overlap = (mask_a * mask_b).sum(dim=1)          # per item, exact small integers in float32
    return overlap.sum().item() / (n * k)           # platonic-rep: (overlap / k).mean()


def part1(pairs_limit: int | None) -> dict:
    n = 1024
    xs, ys = make_layers(n)
    tx = [torch.from_numpy(a) for a in xs]
    ty = [torch.from_numpy(a) for a in ys]
    # warm-up (thread pools, allocator) for both, outside the timings
    layer_search(xs[:2], ys[:2], k=K)
    naive_pair(tx[0], ty[0], K)
    runs, cpu_runs = [], []
    for _ in range(3):  # ours is short: median of 3 runs; the naive search runs once
        t0, c0 = time.perf_counter(), time.process_time()
        ours = layer_search(xs, ys, k=K)
        runs.append(time.perf_counter() - t0)
        cpu_runs.append(time.process_time() - c0)
    t_ours, cpu_ours = float(np.median(runs)), float(np.median(cpu_runs))

    pairs = [(i, j) for i in range(L_X) for j in range(L_Y)]
    timed = pairs if pairs_limit is None else pairs[:pairs_limit]
    naive = np.full((L_X, L_Y), np.nan)
    t0, c0 = time.perf_counter(), time.process_time()
    for i, j in timed:
        naive[i, j] = naive_pair(tx[i], ty[j], K)
    t_naive = (time.perf_counter() - t0) * len(pairs) / len(timed)
    cpu_naive = (time.process_time() - c0) * len(pairs) / len(timed)
    done = ~np.isnan(naive)
    identical = bool(np.array_equal(ours.scores[done], naive[done]))
    assert identical, "scores differ from the naive search"
    return {
        "N": n, "k": K, "layers": [L_X, L_Y], "widths": [D_X, D_Y], "threads": THREADS,
        "ours_s": t_ours, "ours_runs_s": runs, "naive_s": t_naive, "naive_pairs_timed": len(timed),
        "naive_extrapolated": len(timed) < len(pairs), "speedup": t_naive / t_ours,
        "ours_cpu_s": cpu_ours, "naive_cpu_s": cpu_naive, "speedup_cpu": cpu_naive / cpu_ours,
        "identical_scores": identical, "pairs_compared": int(done.sum()),
        "best": ours.best,
    }


def part2() -> dict:
    n = 16384
    xs, ys = make_layers(n, seed=1)
    input_gib = sum(a.nbytes for a in xs + ys) / 2**30
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # KiB -> GiB
    t0, c0 = time.perf_counter(), time.process_time()
    res = layer_search(xs, ys, k=K)
    t, cpu = time.perf_counter() - t0, time.process_time() - c0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    return {"N": n, "k": K, "layers": [L_X, L_Y], "threads": THREADS, "ours_s": t, "ours_cpu_s": cpu,
            "input_GiB": input_gib, "peak_rss_GiB": peak, "peak_rss_before_search_GiB": rss_before,
            "best": res.best, "chance": res.chance}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pairs", type=int, default=None, help="naive: time only the first P pairs")
    ap.add_argument("--skip-large", action="store_true", help="skip the N=16,384 part")
    ap.add_argument("--large-only", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    torch.set_num_threads(THREADS)
    if args.large_only:
        print(json.dumps(part2()))
        return

    print(f"torch {torch.__version__}, {THREADS} threads, CPU: {os.cpu_count()} visible cores")
    r = part1(args.pairs)
    how = (f"timed {r['naive_pairs_timed']} of {L_X * L_Y} pairs and extrapolated" if r["naive_extrapolated"]
           else f"all {L_X * L_Y} pairs timed")
    print(f"N={r['N']}, {L_X} x {L_Y} layers (widths {D_X}, {D_Y}), k={K}:")
    print(f"  ours   {r['ours_s']:8.2f} s wall, {r['ours_cpu_s']:8.2f} s CPU   "
          f"(median of {', '.join(f'{t:.2f}' for t in r['ours_runs_s'])} s wall)")
    print(f"  naive  {r['naive_s']:8.2f} s wall, {r['naive_cpu_s']:8.2f} s CPU   ({how})")
    print(f"  speed-up {r['speedup']:.0f}x wall-clock, {r['speedup_cpu']:.0f}x CPU time; "
          f"scores identical on {r['pairs_compared']} pairs: {r['identical_scores']}")
    print(f"  best pair {r['best']}")
    if args.skip_large:
        return
    out = subprocess.run([sys.executable, __file__, "--large-only"], capture_output=True, text=True, check=True)
    big = json.loads(out.stdout.strip().splitlines()[-1])
    print(f"N={big['N']}, {L_X} x {L_Y} layers, ours alone: {big['ours_s']:.1f} s wall "
          f"({big['ours_cpu_s']:.1f} s CPU), peak RSS "
          f"{big['peak_rss_GiB']:.2f} GiB (inputs {big['input_GiB']:.2f} GiB; "
          f"{big['peak_rss_GiB'] - big['peak_rss_before_search_GiB']:.2f} GiB above the process before the search)")


if __name__ == "__main__":
    main()
