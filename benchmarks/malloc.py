"""vlgap.memory in numbers: the same work in two fresh processes, glibc's default malloc thresholds
(VLGAP_MALLOC=default) against vlgap's (1 GiB), interleaved and repeated.

Work: MobileNetV2 (ImageNet weights, 224 px, every layer), forward of a batch of 64 random images,
1 torch thread, 4 timed batches after one warm-up; exact k-NN (k = 10) at N = 10^4, D = 384,
2 threads, 3 timed runs. Reported: seconds per batch / per k-NN (median), kernel (sys) time, peak RSS.

    python benchmarks/malloc.py [--repeats 2]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

import numpy as np

CHILD = r"""
import json, resource, sys, time
import numpy as np, torch
from vlgap.memory import reuse_freed_memory

tuned = reuse_freed_memory()
out = {"tuned": tuned}
r0 = resource.getrusage(resource.RUSAGE_SELF)
if sys.argv[1] == "forward":
    from vlgap.encoders.registry import get_encoder

    torch.set_num_threads(1)
    enc = get_encoder("mobilenet_v2")
    x = torch.from_numpy(np.random.default_rng(0).normal(size=(64, 3, 224, 224)).astype(np.float32))
    with torch.inference_mode():
        enc.forward_layers(x)
        r0 = resource.getrusage(resource.RUSAGE_SELF)
        ts = []
        for _ in range(4):
            t = time.perf_counter(); enc.forward_layers(x); ts.append(time.perf_counter() - t)
else:
    from vlgap.metrics.knn import topk_neighbours
    from vlgap.metrics.prepare import prepare

    torch.set_num_threads(2)
    x = prepare(torch.from_numpy(np.random.default_rng(1).normal(size=(10_000, 384)).astype(np.float32)), None)
    topk_neighbours(x, 10)
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    ts = []
    for _ in range(3):
        t = time.perf_counter(); topk_neighbours(x, 10); ts.append(time.perf_counter() - t)
r1 = resource.getrusage(resource.RUSAGE_SELF)
out.update(seconds=ts, sys_s=r1.ru_stime - r0.ru_stime, user_s=r1.ru_utime - r0.ru_utime,
           peak_rss_mb=r1.ru_maxrss / 1024)
print("RESULT " + json.dumps(out))
"""


def run(work: str, malloc: str) -> dict:
    env = dict(os.environ, VLGAP_MALLOC=malloc)
    proc = subprocess.run([sys.executable, "-c", CHILD, work], capture_output=True, text=True, env=env)
    line = [x for x in proc.stdout.splitlines() if x.startswith("RESULT ")]
    if proc.returncode or not line:
        raise SystemExit(f"{work} ({malloc}) failed:\n{proc.stderr[-2000:]}")
    return json.loads(line[0][len("RESULT "):])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args()
    report = {}
    for work, unit in (("forward", "batch of 64"), ("knn", "k-NN at N = 10^4")):
        res = {"default": [], "vlgap": []}
        for _ in range(args.repeats):
            for malloc in ("default", "vlgap"):
                res[malloc].append(run(work, malloc))
        row = {}
        for malloc, runs in res.items():
            secs = [s for r in runs for s in r["seconds"]]
            row[malloc] = {"median_s": float(np.median(secs)), "each_s": [round(s, 3) for s in secs],
                           "sys_s": [round(r["sys_s"], 2) for r in runs], "user_s": [round(r["user_s"], 2) for r in runs],
                           "peak_rss_mb": [round(r["peak_rss_mb"]) for r in runs],
                           "thresholds_raised": [r["tuned"] for r in runs]}
        row["speedup"] = row["default"]["median_s"] / row["vlgap"]["median_s"]
        report[work] = row
        print(f"{work}: {row['default']['median_s']:.3f} s -> {row['vlgap']['median_s']:.3f} s per {unit} "
              f"({row['speedup']:.2f}x); kernel time {row['default']['sys_s']} -> {row['vlgap']['sys_s']} s; "
              f"peak RSS {row['default']['peak_rss_mb']} -> {row['vlgap']['peak_rss_mb']} MB", flush=True)
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
