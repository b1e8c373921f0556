"""Where a one-worker `vlgap extract --ray` spends its time on this machine, against the single process.

Alternates, in one run, the single process (1 torch thread, 1 decoding thread) and `--ray` with one
encoder actor (1 torch thread; decoding as Ray tasks) on the same MobileNetV2 extraction (V shapes
videos, n_f frames), each a fresh process timed from before its imports to the end of `extract()`, as a
user's `vlgap extract` is. Besides the wall clock (which a shared machine makes noisy) it accounts for
the CPU seconds of every process involved, sampled from /proc while the run goes: the run's own process
(the driver; exact, from wait4), each of Ray's daemons (GCS, raylet, dashboard, agents, log monitor,
autoscaler monitor), the encoder actor (and its main thread, which encodes), the decoding workers, the
context switches of each, and the load average. Those CPU seconds are what a quiet machine will spend
too; the wall ratio only holds on a quiet one.

    python benchmarks/ray_overhead.py                         # 256 videos x 8 frames, 5 pairs, cluster started once
    python benchmarks/ray_overhead.py --cluster per-run       # each --ray run starts its own local cluster
    python benchmarks/ray_overhead.py --pairs 9 --json out.json

`--cluster started` (default): one local cluster, started before the timings with the settings
`vlgap.distributed.cluster` uses for a local one, and joined by each --ray run by its address (as
`ray start --head` then `vlgap extract --ray auto`); `per-run`: every --ray run starts and stops its own
(`vlgap extract --ray auto` with no cluster running), so Ray's start-up is inside its time.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path


TICK = os.sysconf("SC_CLK_TCK")
EXTRACT = dict(batch_size=64, progress=False)
RUNS = {"single": dict(threads=1, workers=1), "ray": dict(threads=1, ray_workers=1)}


def load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def commit() -> str:
    """The commit of the vlgap that is imported (the code measured), "+ changes" when its tree differs."""
    import vlgap

    where = Path(vlgap.__file__).resolve().parent
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=where)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "."], capture_output=True,
                               text=True, cwd=where).stdout.strip()
    except OSError:
        return "unknown"
    return (head.stdout.strip() or "unknown") + (" + uncommitted changes" if dirty else "")


# -- one timed run, in its own process ------------------------------------------------------------------

def child_run(args) -> None:
    # the timed child starts with nothing of numpy, torch, Ray or vlgap imported: it pays what a user's does
    assert not {"numpy", "torch", "ray", "vlgap"} & set(sys.modules), "the timed child must start without them"
    t0 = time.perf_counter()
    from vlgap.features.extract import extract

    kw = dict(RUNS[args.child_run])
    spans: list[tuple[float, float, float]] = []  # (start, end, CPU seconds) of each chunk's encode + write
    if args.child_run == "ray":
        kw["ray"] = args.ray_address or "local"
    else:
        _time_chunks(spans, t0)
    res = extract(args.manifest, "mobilenet_v2", cache_dir=args.cache, n_frames=[args.n_frames], **EXTRACT, **kw)
    dt = time.perf_counter() - t0
    rec = res.features[args.n_frames].record.get("ray")
    timeline = None
    if args.child_run == "ray" and args.timeline:
        import ray

        time.sleep(2.5)  # workers report their task events to the GCS every second: let the last ones arrive
        timeline = summarise_timeline(ray.timeline(), t0)
    elif spans:
        timeline = {"first_encode_start": round(spans[0][0], 3), "last_encode_end": round(spans[-1][1], 3),
                    "encode_busy_s": round(sum(e - s for s, e, _ in spans), 3),
                    "encode_cpu_s": round(sum(c for *_, c in spans), 3),
                    "cpu_to_first_encode_s": round(_FIRST_ENCODE_CPU[0], 2)}
    import resource

    ru = resource.getrusage(resource.RUSAGE_SELF)  # every thread of this process, exactly
    own = {"cpu_s": round(ru.ru_utime + ru.ru_stime, 2), "main_thread_cpu_s": round(time.thread_time(), 2),
           "voluntary_cs": ru.ru_nvcsw, "involuntary_cs": ru.ru_nivcsw}
    print("RESULT " + json.dumps({"seconds": dt, "ray": rec, "timeline": timeline, "own": own, "t0": t0}),
          flush=True)


_FIRST_ENCODE_CPU: list[float] = []


def _time_chunks(spans: list, t0: float) -> None:
    """Time each chunk's encode and write in the single process as the actor times its calls (the main
    thread's CPU: with 1 torch thread it does all the encoding)."""
    from vlgap.features import chunk_steps
    from vlgap.features.extract import Job

    encode, write = chunk_steps.VisionSteps.encode_chunk, Job.write_chunk
    started: list[tuple[float, float]] = []
    first = _FIRST_ENCODE_CPU

    def timed_encode(self, *a, **k):
        started.append((time.perf_counter(), time.thread_time()))
        if not spans and not first:
            first.append(time.process_time())  # every thread's CPU until the first encode (imports, model, decoding)
        return encode(self, *a, **k)

    def timed_write(self, *a, **k):
        out = write(self, *a, **k)
        s, c = started.pop()
        spans.append((s - t0, time.perf_counter() - t0, time.thread_time() - c))
        return out

    chunk_steps.VisionSteps.encode_chunk, Job.write_chunk = timed_encode, timed_write


def summarise_timeline(events: list[dict], t0: float) -> dict:
    """Ray's task events of this job (chrome-trace dicts, microseconds): when the driver first submitted,
    when the actor's __init__, its answer and its first call ran, when decoding started, in seconds from
    the start of the timed child. (The last calls' events are lost when the actor is killed at the end.)"""
    # Ray's timestamps are wall-clock microseconds; map the child's perf_counter t0 to the wall clock
    wall0 = time.time() - (time.perf_counter() - t0)
    out: dict = {"encode": [], "decode": []}
    for e in events:
        if e.get("ph") != "X":
            continue
        name = str(e.get("name", ""))
        start = e["ts"] / 1e6 - wall0
        span = (round(start, 3), round(start + e.get("dur", 0) / 1e6, 3))
        if span[0] < -1.0:  # an earlier job's (Ray keeps the events of every job of the cluster)
            continue
        if name == "encode":
            out["encode"].append(span)
        elif name == "__init__":
            out["actor_init"] = span
        elif name == "info":
            out["info"] = span
        elif name.endswith("._decode"):
            out["decode"].append(span)
        elif name.endswith("_warm_decoding_worker"):
            out["warm_decoding_worker"] = span
        elif name == "submit_task":
            out["first_submit"] = min(span[0], out.get("first_submit", span[0]))
    for key in ("encode", "decode"):
        out[key].sort()
    if out["encode"]:
        out["first_encode_start"] = out["encode"][0][0]
    if out["decode"]:
        out["first_decode_start"] = out["decode"][0][0]
    del out["encode"], out["decode"]
    return out


# -- CPU accounting of every process of a run -----------------------------------------------------------

def _stat(pid: int, tid: int | None = None) -> tuple[float, int] | None:
    """(CPU seconds, start time in ticks) of a process (all its threads) or of one of its threads."""
    path = f"/proc/{pid}/stat" if tid is None else f"/proc/{pid}/task/{tid}/stat"
    try:
        with open(path) as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / TICK, int(fields[19])


def _ctx(pid: int) -> tuple[int, int]:
    """(voluntary, involuntary) context switches summed over the process's threads."""
    vol = inv = 0
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/status") as f:
                for line in f:
                    if line.startswith("voluntary_ctxt_switches"):
                        vol += int(line.split()[1])
                    elif line.startswith("nonvoluntary_ctxt_switches"):
                        inv += int(line.split()[1])
    except OSError:
        pass
    return vol, inv


def _title(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


def _descendants(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(name))
    out, todo = [], [root]
    while todo:
        for c in children.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


def classify(title: str) -> str:
    if "gcs_server" in title:
        return "gcs_server"
    if "/raylet" in title:
        return "raylet"
    if "dashboard.py" in title:
        return "dashboard"
    if "log_monitor.py" in title:
        return "log_monitor"
    if "autoscaler" in title and "monitor.py" in title:
        return "autoscaler_monitor"
    if "DashboardAgent" in title or "dashboard/agent.py" in title:
        return "dashboard_agent"
    if "RuntimeEnvAgent" in title or "runtime_env/agent" in title:
        return "runtime_env_agent"
    if "EncoderActor" in title:
        return "encoder_actor"
    if "_decode" in title or "_warm_decoding_worker" in title:
        return "decode_workers"
    if title.startswith("ray::") or "default_worker.py" in title:
        return "idle_workers"
    return "other:" + title[:60]


class Sampler:
    """Samples the CPU time of every descendant of this process (and of `extra` pids) every `period`
    seconds; a process's figure is its last sample minus its first (0 for one started meanwhile)."""

    def __init__(self, root: int, period: float = 0.2):
        self.root, self.period = root, period
        self.procs: dict[tuple[int, int], dict] = {}  # (pid, start ticks) -> info
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.child_pid: int | None = None

    def _sample(self, first: bool) -> None:
        for pid in _descendants(self.root):
            st = _stat(pid)
            if st is None:
                continue
            cpu, start = st
            key = (pid, start)
            info = self.procs.get(key)
            if info is None:
                info = self.procs[key] = {"pid": pid, "first": cpu if first else 0.0, "titles": set(),
                                          "ctx0": _ctx(pid) if first else (0, 0), "main0": None,
                                          "existed": first, "series": []}
                main = _stat(pid, pid)
                info["main0"] = main[0] if (first and main) else 0.0
            info["last"] = cpu
            info["series"].append((time.perf_counter(), cpu))
            info["ctx"] = _ctx(pid)
            main = _stat(pid, pid)
            if main:
                info["main"] = main[0]
            t = _title(pid)
            if t:
                info["titles"].add(t[:200])

    def start(self) -> None:
        self._sample(first=True)
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(self.period):
            self._sample(first=False)

    def stop(self) -> None:
        self._stop.set()
        if self._thread:
            self._thread.join()
        self._sample(first=False)

    def cpu_at(self, pid: int, when: float) -> float | None:
        """A process's CPU seconds at `when` (perf_counter, the same clock in every process), linearly
        between the samples around it; counted from its first sample for one that existed before."""
        for info in self.procs.values():
            if info["pid"] != pid or not info["series"]:
                continue
            series = info["series"]
            before = [x for x in series if x[0] <= when]
            after = [x for x in series if x[0] > when]
            if not before:
                return 0.0
            if not after:
                return series[-1][1] - info["first"]
            (t0, c0), (t1, c1) = before[-1], after[0]
            return c0 + (c1 - c0) * (when - t0) / (t1 - t0) - info["first"]
        return None

    def pids_of(self, kind: str) -> list[int]:
        return [i["pid"] for i in self.procs.values() if kind in {classify(t) for t in i["titles"]}]

    def by_kind(self, exclude: set[int]) -> dict[str, dict]:
        out: dict[str, dict] = {}
        for info in self.procs.values():
            if info["pid"] in exclude:
                continue
            kinds = {classify(t) for t in info["titles"]} or {"other:?"}
            kind = next((k for k in ("encoder_actor", "decode_workers") if k in kinds), sorted(kinds)[0])
            agg = out.setdefault(kind, {"cpu_s": 0.0, "processes": 0, "voluntary_cs": 0, "involuntary_cs": 0,
                                        "main_thread_cpu_s": 0.0})
            agg["cpu_s"] += info["last"] - info["first"]
            agg["processes"] += 1
            agg["voluntary_cs"] += info["ctx"][0] - info["ctx0"][0]
            agg["involuntary_cs"] += info["ctx"][1] - info["ctx0"][1]
            agg["main_thread_cpu_s"] += info.get("main", 0.0) - (info["main0"] or 0.0)
        for agg in out.values():
            agg["cpu_s"] = round(agg["cpu_s"], 2)
            agg["main_thread_cpu_s"] = round(agg["main_thread_cpu_s"], 2)
        return out


def timed_child(args, name: str, manifest: Path, cache: Path, address: str | None, settle: float) -> dict:
    cmd = [sys.executable, __file__, "--child-run", name, "--manifest", str(manifest), "--cache", str(cache),
           "--n-frames", str(args.n_frames)]
    if address:
        cmd += ["--ray-address", address]
    if not args.timeline:
        cmd += ["--no-timeline"]
    sampler = Sampler(os.getpid())
    load_before = load()
    sampler.start()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # the child's main thread is the encoder in the single process: sampled like any descendant
    stdout, stderr = proc.communicate()
    time.sleep(settle)  # the job's workers are killed when its driver exits: count their last seconds
    sampler.stop()
    line = [x for x in stdout.splitlines() if x.startswith("RESULT ")]
    if proc.returncode or not line:
        raise SystemExit(f"{name} run failed (exit {proc.returncode}):\n{stderr[-3000:]}")
    out = json.loads(line[0][len("RESULT "):])
    kinds = sampler.by_kind(exclude={proc.pid})
    # the run's own process: its getrusage and its main thread's CPU at the end of the timing (exact)
    driver = out.pop("own")
    out.update(name=name, load_before=load_before, load_after=load(), driver=driver, processes=kinds,
               cpu_total_s=round(driver["cpu_s"] + sum(k["cpu_s"] for k in kinds.values()), 2))
    tl = out.get("timeline") or {}
    if name == "ray" and tl.get("first_encode_start") is not None and tl.get("first_submit") is not None:
        # the CPU seconds on the way to the first encode: the driver's until it asked for the actor, then
        # the actor's process (a worker started for this job: Python, Ray, imports, model) until it encodes
        t0 = out["t0"]
        actor = sampler.pids_of("encoder_actor")
        drv = sampler.cpu_at(proc.pid, t0 + tl["first_submit"])
        act = sampler.cpu_at(actor[0], t0 + tl["first_encode_start"]) if actor else None
        if drv is not None and act is not None:
            tl["cpu_to_first_encode_s"] = round(drv + act, 2)
            tl["driver_cpu_to_actor_request_s"] = round(drv, 2)
            tl["actor_cpu_to_first_encode_s"] = round(act, 2)
            tl["actor_process_existed_before"] = any(i["existed"] for i in sampler.procs.values()
                                                     if i["pid"] == actor[0])
    return out


# -- the benchmark --------------------------------------------------------------------------------------

def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--videos", type=int, default=256)
    ap.add_argument("--n-frames", type=int, default=8)
    ap.add_argument("--pairs", type=int, default=5, help="single/--ray pairs, alternated (order flips each pair)")
    ap.add_argument("--cluster", choices=("started", "per-run"), default="started")
    ap.add_argument("--settle", type=float, default=2.0, help="seconds to keep sampling after a run ends")
    ap.add_argument("--no-timeline", dest="timeline", action="store_false",
                    help="skip the summary of Ray's timeline of each --ray run (when the encoder starts)")
    ap.add_argument("--json", default=None)
    for hidden in ("--child-run", "--manifest", "--cache", "--ray-address"):
        ap.add_argument(hidden, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child_run:
        child_run(args)
        return
    from vlgap.features.chunk_steps import CHUNK_FRAMES

    if args.videos * args.n_frames < 2 * CHUNK_FRAMES:
        # the actor's last call loses its timeline events when the actor is killed at the end: with one
        # chunk there is no first encode to time
        ap.error(f"--videos x --n-frames must make 2 chunks at least ({2 * CHUNK_FRAMES} frames)")
    from vlgap.data.shapes import generate_shapes
    from vlgap.platform_info import machine_summary

    machine = machine_summary()
    started = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    head = {"machine": machine["summary"], "date": started, "commit": commit(), "torch": machine["torch"],
            "videos": args.videos, "n_f": args.n_frames, "cluster": args.cluster, "load_start": load()}
    print(f"{head['machine']}; {head['date']}; commit {head['commit']}; load {head['load_start']}", flush=True)
    tmp = Path(tempfile.mkdtemp(prefix="vlgap-rayoh-"))
    manifest = generate_shapes(tmp / "data", args.videos, seed=0, n_frames=32, size=128)
    address = None
    rt = None
    if args.cluster == "started":
        from vlgap.distributed.cluster import connect

        t = time.perf_counter()
        rt = connect("local")
        head["ray_start_s"] = round(time.perf_counter() - t, 2)
        address = rt.get_runtime_context().gcs_address
    # warm the page cache and the model files once, outside the timings (and Ray's pooled workers)
    warm = [timed_child(args, "single", manifest, tmp / "warm-single", address, args.settle)]
    warm.append(timed_child(args, "ray", manifest, tmp / "warm-ray", address, args.settle))
    runs: list[dict] = []
    for i in range(args.pairs):
        order = ("single", "ray") if i % 2 == 0 else ("ray", "single")
        for name in order:
            r = timed_child(args, name, manifest, tmp / f"{name}-{i}", address, args.settle)
            r["pair"] = i
            runs.append(r)
            print(f"pair {i} {name:6s} {r['seconds']:6.1f} s  CPU {r['cpu_total_s']:6.1f} s  "
                  f"load {r['load_before'][0]:.1f}  "
                  + "  ".join(f"{k} {v['cpu_s']:.1f}" for k, v in sorted(r['processes'].items())), flush=True)
    report = dict(head, load_end=load(), runs=runs, warmups=warm, summary=summarise(runs))
    print(json.dumps(report["summary"], indent=1))
    s = report["summary"]
    print(f"--ray (1 encoder actor) / single process on {head['machine']}, {head['date']}, commit "
          f"{head['commit']}, {args.videos} videos x {args.n_frames} frames, cluster {args.cluster}: wall "
          f"{s['wall_ratio_median_pair']:+.1%} (median of {args.pairs} pairs; loads {s['load_range']}), "
          f"CPU seconds {s['cpu_ratio_median_pair']:+.1%}; first encode at {s['first_encode_start_s']['single']:.2f} / "
          f"{s['first_encode_start_s']['ray']:.2f} s, encoding CPU {s['encode_cpu_s']['single']:.1f} / "
          f"{s['encode_cpu_s']['ray']:.1f} s (single / ray)")
    print(f"CPU on the way to the first encode {s['cpu_to_first_encode_s']['single']:.2f} / "
          f"{s['cpu_to_first_encode_s']['ray']:.2f} s (Ray: driver {s['cpu_to_first_encode_s']['ray_driver']:.2f} + "
          f"actor {s['cpu_to_first_encode_s']['ray_actor']:.2f}); quiet-machine estimate from CPU seconds "
          f"{s['quiet_estimate_s']['single']:.1f} / {s['quiet_estimate_s']['ray']:.1f} s: "
          f"{s['quiet_estimate_ratio']:+.1%}")
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1, default=list))
    if rt is not None:
        rt.shutdown()


def summarise(runs: list[dict]) -> dict:
    """Medians over the pairs: the wall ratio, the CPU seconds of every process, and the three phases of
    a run (start-up until the first chunk's encoding starts, the encoding loop, the end)."""
    pairs = sorted({r["pair"] for r in runs})
    get = {(r["pair"], r["name"]): r for r in runs}
    import statistics

    med = lambda xs: float(statistics.median(xs)) if xs else float("nan")  # noqa: E731

    def phase(name: str, key: str) -> float:
        return med([get[p, name]["timeline"][key] for p in pairs if (get[p, name].get("timeline") or {}).get(key)
                    is not None])

    wall = [get[p, "ray"]["seconds"] / get[p, "single"]["seconds"] - 1 for p in pairs]
    # the single process's own CPU (the Ray daemons idling meanwhile are listed apart, not charged to it)
    cpu_single = [get[p, "single"]["driver"]["cpu_s"] for p in pairs]
    cpu_ray = [get[p, "ray"]["cpu_total_s"] for p in pairs]
    kinds: dict[str, list[float]] = {}
    for p in pairs:
        r = get[p, "ray"]
        kinds.setdefault("driver", []).append(r["driver"]["cpu_s"])
        for k, v in r["processes"].items():
            kinds.setdefault(k, []).append(v["cpu_s"])
    idle = [sum(v["cpu_s"] for v in get[p, "single"]["processes"].values()) for p in pairs]
    ray_enc_cpu = [get[p, "ray"]["ray"]["encoder_cpu_s"] for p in pairs
                   if "encoder_cpu_s" in (get[p, "ray"].get("ray") or {})]  # (code before 2026-12-06: absent)
    loads = [r["load_before"][0] for r in runs]
    out = {
        "wall_each_pair": [round(x, 3) for x in wall], "wall_ratio_median_pair": med(wall),
        "wall_single_s": [round(get[p, "single"]["seconds"], 2) for p in pairs],
        "wall_ray_s": [round(get[p, "ray"]["seconds"], 2) for p in pairs],
        "cpu_single_s_median": med(cpu_single), "cpu_ray_s_median": med(cpu_ray),
        "cpu_ratio_median_pair": med([r / s - 1 for s, r in zip(cpu_single, cpu_ray)]),
        "ray_cpu_s_median_by_process": {k: med(v) for k, v in sorted(kinds.items())},
        "ray_daemons_cpu_s_during_single_median": med(idle),
        "first_encode_start_s": {"single": phase("single", "first_encode_start"),
                                 "ray": phase("ray", "first_encode_start")},
        # the encoding loop: the single process's first encode to its last write; the actor's calls (its
        # busy fraction is 0.998-0.999: Ray's timeline misses the last call's events, lost when the actor
        # is killed at the end, so it cannot give the loop's end)
        "encode_loop_s": {"single": med([get[p, "single"]["timeline"]["last_encode_end"]
                                         - get[p, "single"]["timeline"]["first_encode_start"] for p in pairs
                                         if get[p, "single"].get("timeline")]),
                          "ray": med([get[p, "ray"]["ray"]["encoder_busy_s"] for p in pairs
                                      if "encoder_busy_s" in (get[p, "ray"].get("ray") or {})])},
        "encode_cpu_s": {"single": phase("single", "encode_cpu_s"), "ray": med(ray_enc_cpu)},
        "cpu_to_first_encode_s": {"single": phase("single", "cpu_to_first_encode_s"),
                                  "ray": phase("ray", "cpu_to_first_encode_s"),
                                  "ray_driver": phase("ray", "driver_cpu_to_actor_request_s"),
                                  "ray_actor": phase("ray", "actor_cpu_to_first_encode_s")},
        "load_range": f"{min(loads):.1f}-{max(loads):.1f}",
    }
    # what a quiet machine would take, from CPU seconds alone (each process on the way to the result has a
    # core whenever it runs): the CPU on the way to the first encode, then the encoding's CPU
    est = {"single": out["cpu_to_first_encode_s"]["single"] + out["encode_cpu_s"]["single"],
           "ray": out["cpu_to_first_encode_s"]["ray"] + out["encode_cpu_s"]["ray"]}
    out["quiet_estimate_s"] = {k: round(v, 2) for k, v in est.items()}
    out["quiet_estimate_ratio"] = est["ray"] / est["single"] - 1
    return out


if __name__ == "__main__":
    main()
