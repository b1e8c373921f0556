"""Wall and CPU time of each demo from an empty cache (cold) and again with that cache filled (warm), the
`vlgap demo` cold run beside its floor, written as the Markdown table the README and docs quote
(results/demo-timings/table.md), one row per command, cache kind and machine.

    python benchmarks/demos.py                     # `vlgap demo`: cold (traced, then its floor) and warm
    python benchmarks/demos.py --demos main,cape,wsv --warm 0
    python benchmarks/demos.py --models-cache ~/.cache/vlgap-models   # the one-time GGUF conversion kept
    python benchmarks/demos.py --cold 3 --warm 0   # three cold runs, each from its own empty cache
    VLGAP_NATIVE_BF16=0 python benchmarks/demos.py # the float32 path on a CPU that has native bfloat16
    python benchmarks/demos.py --demo-config f32.toml   # `vlgap demo --config f32.toml`

Each run is a fresh process (`vlgap ...` through this Python) with VLGAP_CACHE pointing at a new empty
folder and --out at a new folder; the warm run reuses the cold run's cache (features, data, converted
models) with another new --out, so every cell is computed again. By default the converted language
models live in the cold cache too (a cold run includes the one-time GGUF conversion); --models-cache
puts them in VLGAP_MODELS instead, kept between runs, and the table says which. The machine's load
average is read before and after each run: the machine is shared, so a time means little without it.
Rows of demos not run this time stay in the table as they were, and so do rows of other machines.

The floor of `vlgap demo` (cold): the bare forward passes of its four encoders (MobileNetV2,
EfficientNet-Lite0, MiniLM, SmolLM2) on the demo's inputs, timed in this benchmark's process. The first
cold run executes with $VLGAP_FORWARD_TRACE set (`vlgap.encoders.forward_trace`): every forward call of an
encoder appends the input's shape and dtype (for text, each row's real token count), the run's torch
thread count and the call's own time. Afterwards this process loads each encoder once (loading is not
part of the floor) and replays every traced call in order, on an input of the same shape and dtype
(normal noise for pixels; token ids with the same lengths and right padding for text), under
torch.inference_mode with the same thread count, and sums the wall seconds. It includes every
extraction the demo does (the sweep's features and the temporal sections'); it excludes rendering,
decoding, preprocessing, tokenising, model loading, the alignment cells, the law fits, the temporal
sections' statistics and the report. "wall / floor" is the cold run's wall time over that sum (1.0 would
be a demo that does nothing but its forward passes). The floor is replayed right after the traced cold
run; --floor-repeats N replays N times and keeps the fastest pass (the least disturbed by other work on
the machine). On a shared machine both sides swing with the load: quote ratios of quiet runs only.

`vlgap cape demo` and `vlgap wsv demo` are timed cold and warm without a floor: CAPE's LM work is LoRA
training steps and label-forced decoding with a key-value cache inside worker processes, whose inputs
(the sampled batches, each prompt's decoded length) are not replayable from shapes alone without
rerunning the stages themselves; the WSV demo trains its models from scratch, so its forward and
backward passes are the run (a bare step, without data loading, is `benchmarks/wsv_polish_once.py`).

Every printed line and every table row names the machine (CPU model, cores and vector extensions, or
GPU: `vlgap.platform_info.machine_summary`), the date and the commit.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

DEMOS = {"main": ["demo"], "cape": ["cape", "demo"], "wsv": ["wsv", "demo"]}
HEADER = ("| command | cache | machine | wall s | CPU s (user+sys) | floor s | wall / floor | date (UTC) "
          "| load average before → after | formats (how set) | converted models | commit | exit |")
COLUMNS = [c.strip() for c in HEADER.strip("|").split("|")]
RULE = "|" + "---|" * len(COLUMNS)
#: the floor cell of demos without one (the docstring says why)
NO_FLOOR = {"cape": "n/a (LoRA steps, cached decoding)", "wsv": "n/a (its training is the run)"}
#: environment settings that change what a demo computes or how, named in the table when set
SETTINGS_ENV = ("VLGAP_NATIVE_BF16", "VLGAP_WORKERS", "OMP_NUM_THREADS")
#: the columns of the table's two older layouts, to carry their rows over
OLD_LAYOUTS = {
    9: ["command", "cache", "wall s", "CPU s (user+sys)", "date (UTC)", "machine", "load average before → after",
        "converted models", "exit"],
    10: ["command", "cache", "wall s", "CPU s (user+sys)", "date (UTC)", "machine", "load average before → after",
         "converted models", "commit", "exit"],
}


def machine() -> str:
    """The machine a time was measured on, in one line: CPU model, cores, vector extensions (and GPUs)."""
    from vlgap.platform_info import machine_summary

    return machine_summary()["summary"]


def children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def load() -> str:
    try:
        return "/".join(f"{x:.1f}" for x in os.getloadavg())
    except OSError:
        return "n/a (no load average here)"


def run_one(args: list[str], env: dict[str, str], log: Path, timeout: float) -> tuple[float, float, str, str, int]:
    before, cpu0, t0 = load(), children_cpu(), time.perf_counter()
    cmd = [sys.executable, "-c", "from vlgap.cli import main; main()", *args]
    with open(log, "w") as fh:
        try:
            rc = subprocess.run(cmd, env=env, stdout=fh, stderr=subprocess.STDOUT, timeout=timeout, cwd=ROOT).returncode
        except subprocess.TimeoutExpired:
            rc = 124
    return time.perf_counter() - t0, children_cpu() - cpu0, before, load(), rc


def git_commit() -> str:
    """The checkout's commit (with "+changes" when the work tree differs from it), or "n/a"."""
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                              check=True).stdout.strip()
        # the table this script writes does not count as a change (a second --demos run follows a first)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", ".",
                                ":(exclude)results/demo-timings"], cwd=ROOT,
                               capture_output=True, text=True, check=True).stdout.strip()
        return head + ("+changes" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "n/a"


def row_key(cells: dict[str, str]) -> tuple[str, str, str, str]:
    """A row's identity: command, cache kind, machine and number formats (how set): a float32 run forced
    on a CPU with native bfloat16 keeps its own row beside the default run's."""
    return (cells.get("command", ""), cells.get("cache", ""), cells.get("machine", ""),
            cells.get("formats (how set)", ""))


def row_line(cells: dict[str, str]) -> str:
    return "| " + " | ".join(str(cells.get(c, "n/a")) for c in COLUMNS) + " |"


def read_rows(path: Path) -> dict[tuple[str, str, str], str]:
    """The table's rows by `row_key`; rows of the older layouts (no machine column of
    this form, no floor, no commit) are carried over with "n/a" in the columns they lack."""
    rows = {}
    if not path.is_file():
        return rows
    for line in path.read_text().splitlines():
        if not line.startswith("| `vlgap"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        names = COLUMNS if len(cells) == len(COLUMNS) else OLD_LAYOUTS.get(len(cells))
        if names is None:
            continue
        by_name = dict(zip(names, cells))
        if names is not COLUMNS:
            by_name.setdefault("floor s", "n/a (not measured)")
            by_name.setdefault("wall / floor", "n/a")
            by_name.setdefault("formats (how set)", "n/a (not recorded)")
        rows[row_key(by_name)] = row_line(by_name)
    return rows


def formats_of(out: Path) -> str:
    """The number formats a run recorded (its run folder's configuration, or that of a run folder inside
    it, as `vlgap wsv demo` keeps), e.g. "vision float32, text float32"; "n/a (not recorded)" when it
    records none."""
    folders = [out, *sorted(p.parent for p in out.glob("*/run_config.json")),
               *sorted(p.parent for p in out.glob("*/*/run_config.json"))]
    for folder in folders:
        for name in ("run_config.json", "config.json"):
            found = _formats_in(folder / name)
            if found:
                return found
    return "n/a (not recorded)"


def _formats_in(p: Path) -> str | None:
    if not p.is_file():
        return None
    try:
        doc = json.loads(p.read_text())
    except ValueError:
        return None
    cfg = doc.get("config", doc) if isinstance(doc, dict) else {}
    if not isinstance(cfg, dict):
        return None
    recorded = cfg.get("formats")  # vlgap.runs.folder's record of the resolved formats, by config key
    if isinstance(recorded, dict) and recorded:
        found = {k: v.get("dtype") for k, v in recorded.items() if isinstance(v, dict) and isinstance(v.get("dtype"), str)}
    else:
        found = {k: cfg[k] for k in ("dtype", "text_dtype", "lm_dtype") if isinstance(cfg.get(k), str)}
    if not found:
        return None
    if set(found) == {"dtype", "text_dtype"}:
        return f"vision {found['dtype']}, text {found['text_dtype']}"
    return ", ".join(f"{k.replace('_dtype', '')} {v}" if k != "dtype" else v for k, v in found.items())


def settings(demo_config: str | None, name: str) -> str:
    """How the formats were set: the environment settings in force and the demo's --config, or defaults."""
    parts = [f"{k}={os.environ[k]}" for k in SETTINGS_ENV if os.environ.get(k)]
    if demo_config and name == "main":
        parts.append(f"--config {Path(demo_config).name}")
    return "; ".join(parts) if parts else "defaults"


def print_stages(times: dict, wall: float) -> None:
    """The run's stages (its stage_timings.json), one a line on the run's clock; the rest of the wall time
    is the process's start (imports, the command line) and end."""
    for st in times["stages"]:
        print(f"  {st['start_s']:7.1f} -> {st['end_s']:7.1f} s  {st['wall_s']:6.1f} s wall {st['cpu_s']:6.1f} s CPU  "
              f"{st['stage']}", flush=True)
    print(f"  start-up and exit (outside the stages' clock): {wall - times['wall_s']:.1f} s", flush=True)


def measure_floor(trace: Path, env: dict[str, str], repeats: int, stamp: str) -> dict:
    """The floor of a traced run, replayed here (the fastest of `repeats` passes)."""
    from vlgap.encoders.floor import replay
    from vlgap.encoders.forward_trace import read_trace

    for k in ("VLGAP_CACHE", "VLGAP_MODELS"):  # the encoders load as the run loaded them (converted models)
        if env.get(k):
            os.environ[k] = env[k]
        else:
            os.environ.pop(k, None)
    records = read_trace(trace)
    best = None
    for i in range(repeats):
        floor = replay(records, log=lambda line: print(f"  {line}", flush=True) if i == 0 else None)
        print(f"  floor pass {i + 1}/{repeats}: {floor.wall_s:.1f} s wall, {floor.cpu_s:.1f} s CPU "
              f"({len(records)} forward calls; {stamp})", flush=True)
        if best is None or floor.wall_s < best.wall_s:
            best = floor
    return best.to_dict()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--demos", default="main", help="comma list of main (vlgap demo), cape (vlgap cape demo), "
                                                     "wsv (vlgap wsv demo); default main")
    ap.add_argument("--cold", type=int, default=1, help="cold runs of each demo, each from a new empty cache "
                                                     "(default 1)")
    ap.add_argument("--warm", type=int, default=1, help="warm runs after the (last) cold one (default 1)")
    ap.add_argument("--models-cache", default=None,
                    help="folder for converted models (VLGAP_MODELS), kept between runs; default: inside the "
                         "cold cache, so the cold run includes the one-time conversion")
    ap.add_argument("--demo-config", default=None, help="TOML file given to `vlgap demo --config` (e.g. "
                                                         "text_dtype = \"float32\")")
    ap.add_argument("--floor-repeats", type=int, default=1, help="replays of the traced forward passes; the "
                                                                 "fastest counts (default 1; 0: no floor)")
    ap.add_argument("--table", default=str(ROOT / "results" / "demo-timings" / "table.md"), help="Markdown file to write")
    ap.add_argument("--json", default=None, help="also write every measurement (stages, floor per encoder) here")
    ap.add_argument("--timeout", type=float, default=3600.0, help="seconds before a run is stopped (exit 124)")
    ap.add_argument("--keep", action="store_true", help="keep the temporary caches and run folders")
    args = ap.parse_args()
    names = [d.strip() for d in args.demos.split(",") if d.strip()]
    unknown = [d for d in names if d not in DEMOS]
    if unknown or not names:
        sys.exit(f"benchmarks/demos.py: --demos {args.demos!r}: valid names are {', '.join(DEMOS)}")
    if args.warm < 0:
        sys.exit(f"benchmarks/demos.py: --warm {args.warm}: give 0 or more")
    if args.cold < 1:
        sys.exit(f"benchmarks/demos.py: --cold {args.cold}: give 1 or more")
    if args.floor_repeats < 0:
        sys.exit(f"benchmarks/demos.py: --floor-repeats {args.floor_repeats}: give 0 or more")
    if args.demo_config and not Path(args.demo_config).is_file():
        sys.exit(f"benchmarks/demos.py: --demo-config {args.demo_config}: no such file")

    here = machine()
    table = Path(args.table)
    rows = read_rows(table)
    work = Path(tempfile.mkdtemp(prefix="vlgap-demos-"))
    commit = git_commit()
    print(f"machine: {here}; commit {commit}", flush=True)
    measured: list[dict] = []
    for name in names:
        pending: list[dict] = []  # this demo's rows, completed with the floor once it is known
        floor, floor_env, trace = None, None, None
        for i in range(args.cold + args.warm):
            if i < args.cold:  # each cold run from its own new, empty cache
                kind = "cold" if i == 0 else f"cold {i + 1}"
                cache = work / name / f"cache-{i}"
            else:  # warm runs reuse the last cold run's cache
                kind = "warm" if args.warm == 1 else f"warm {i - args.cold + 1}"
            env = {**os.environ, "VLGAP_CACHE": str(cache), "PYTHONPATH": str(ROOT / "src")}
            env.pop("VLGAP_FORWARD_TRACE", None)
            models = "in the cold cache (converted in the cold run)"
            if args.models_cache:
                env["VLGAP_MODELS"] = str(Path(args.models_cache).expanduser())
                models = "kept apart (VLGAP_MODELS): not converted again"
            else:
                env.pop("VLGAP_MODELS", None)
            if name == "main" and i == 0 and args.floor_repeats:
                trace = work / "main-forward-trace.jsonl"
                env["VLGAP_FORWARD_TRACE"] = str(trace)
                floor_env = dict(env)
            out = work / name / f"out-{i}"
            command = "vlgap " + " ".join(DEMOS[name])
            extra = ["--config", str(Path(args.demo_config).resolve())] if name == "main" and args.demo_config else []
            wall, cpu, before, after, rc = run_one([*DEMOS[name], "--out", str(out), *extra], env,
                                                   work / f"{name}-{i}.log", args.timeout)
            when = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M")
            stamp = f"{here}, {when} UTC, commit {commit}"
            print(f"{command} ({kind}): {wall:.0f} s wall, {cpu:.0f} s CPU, load {before} -> {after}, exit {rc} "
                  f"({stamp})", flush=True)
            stages = out / "stage_timings.json"
            record = {"command": command, "cache": kind, "machine": here, "wall s": f"{wall:.0f}",
                      "CPU s (user+sys)": f"{cpu:.0f}", "date (UTC)": when, "load average before → after":
                      f"{before} → {after}", "formats (how set)": f"{formats_of(out)} ({settings(args.demo_config, name)})",
                      "converted models": models, "commit": f"`{commit}`", "exit": rc,
                      "floor s": NO_FLOOR.get(name, "n/a (warm: the floor is the cold run's)" if kind.startswith("warm")
                                              else "n/a (not measured)"),
                      "wall / floor": "n/a", "_wall": wall, "_cpu": cpu,
                      "_stages": json.loads(stages.read_text()) if stages.is_file() else None}
            if record["_stages"]:
                print_stages(record["_stages"], wall)
            pending.append(record)
            if i == 0 and trace is not None and trace.is_file() and rc == 0:
                # right after the traced run, so that the run and its floor see the machine alike
                stamp = f"{here}, {dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC, commit {commit}"
                print(f"vlgap demo floor: replaying the cold run's forward passes ({stamp})", flush=True)
                floor = measure_floor(trace, floor_env, args.floor_repeats, stamp)
                for enc in floor["encoders"]:
                    print(f"  {enc['encoder']} ({enc['dtype']}): {enc['calls']} calls, {enc['items']} inputs, "
                          f"{enc['wall_s']:.1f} s (in the run: {enc['traced_wall_s']:.1f} s)", flush=True)
        for record in pending:
            if floor is not None and record["cache"].startswith("cold"):
                # the same forward calls as timed inside the run: a replay slower than the run's own calls
                # (other memory, caches) would flatter the ratio, so both are given
                own = sum(enc["traced_wall_s"] for enc in floor["encoders"])
                record["floor s"] = f"{floor['wall_s']:.0f} (in the run: {own:.0f})"
                record["wall / floor"] = f"{record['_wall'] / floor['wall_s']:.2f} ({record['_wall'] / own:.2f})"
                record["_floor"] = floor
                print(f"{record['command']} ({record['cache']}): {record['_wall']:.0f} s wall against a floor of "
                      f"{floor['wall_s']:.0f} s: ratio {record['_wall'] / floor['wall_s']:.2f}; against the same "
                      f"forward passes timed inside the run ({own:.0f} s): {record['_wall'] / own:.2f} ({here}, "
                      f"{record['date (UTC)']} UTC, commit {commit})", flush=True)
            cells = {**record, "command": f"`{record['command']}`"}
            rows[row_key(cells)] = row_line(cells)
            measured.append({k.lstrip("_"): v for k, v in record.items()})
    text = ["# Demo timings", "",
            "Written by `python benchmarks/demos.py` (see its docstring): each demo from an empty cache (cold),",
            "then again with that cache filled (warm; a new run folder, so every cell is recomputed). One row per",
            "command, cache kind, machine (CPU model, cores and vector extensions, or GPU) and number formats. Wall seconds",
            "depend on what else runs on the machine: the load average (1/5/15 min) is read before and after",
            "each run; CPU seconds are the run's own (user + system, all its threads and processes). The floor",
            "of `vlgap demo` is the bare forward passes of its four encoders on the demo's own inputs, replayed",
            "in the benchmark's process (docs/benchmarks.md#demo-timings); wall / floor is the cold run's ratio",
            "to it (in brackets: the same forward passes as timed inside the run, and the ratio to them). Rows measured before the table had these columns say n/a where they lack one; the machine",
            "of those rows is the project's Intel Xeon with AVX-512 and AMX-BF16 (docs/benchmarks.md).", "",
            HEADER, RULE, *[rows[k] for k in sorted(rows, key=lambda k: (k[2], k[0], k[1]))], ""]
    table.parent.mkdir(parents=True, exist_ok=True)
    table.write_text("\n".join(text))
    print(f"wrote {table} ({here}, commit {commit})")
    if args.json:
        Path(args.json).write_text(json.dumps(measured, indent=1, default=str) + "\n")
        print(f"wrote {args.json}")
    if not args.keep:
        import shutil

        shutil.rmtree(work, ignore_errors=True)
    else:
        print(f"kept {work}")


if __name__ == "__main__":
    main()
