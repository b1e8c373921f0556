"""Wall and CPU time of each demo from an empty cache (cold) and again with that cache filled (warm),
written as the Markdown table the README and docs quote (results/demo-timings/table.md).

    python benchmarks/demos.py                     # `vlgap demo` only (minutes)
    python benchmarks/demos.py --demos main,cape,wsv --warm 0
    python benchmarks/demos.py --models-cache ~/.cache/vlgap-models   # the one-time GGUF conversion kept
    python benchmarks/demos.py --cold 3 --warm 0   # three cold runs, each from its own empty cache

Each run is a fresh process (`vlgap ...` through this Python) with VLGAP_CACHE pointing at a new empty
folder and --out at a new folder; the warm run reuses the cold run's cache (features, data, converted
models) with another new --out, so every cell is computed again. By default the converted language
models live in the cold cache too (a cold run includes the one-time GGUF conversion); --models-cache
puts them in VLGAP_MODELS instead, kept between runs, and the table says which. The machine's load
average is read before and after each run: the machine is shared, so a time means little without it.
Rows of demos not run this time stay in the table as they were.
"""
from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEMOS = {"main": ["demo"], "cape": ["cape", "demo"], "wsv": ["wsv", "demo"]}
HEADER = ("| command | cache | wall s | CPU s (user+sys) | date (UTC) | machine | load average before → after "
          "| converted models | commit | exit |")
RULE = "|" + "---|" * 10


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


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


def read_rows(path: Path) -> dict[tuple[str, str], str]:
    rows = {}
    if path.is_file():
        for line in path.read_text().splitlines():
            if line.startswith("| `vlgap"):
                cells = [c.strip() for c in line.strip("|").split("|")]
                if len(cells) == len(HEADER.strip("|").split("|")) - 1:  # an older row (no commit column)
                    cells.insert(8, "n/a")
                    line = "| " + " | ".join(cells) + " |"
                rows[(cells[0], cells[1])] = line
    return rows


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
    ap.add_argument("--table", default=str(ROOT / "results" / "demo-timings" / "table.md"), help="Markdown file to write")
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

    machine = f"{os.cpu_count()} cores, {cpu_model()}"
    table = Path(args.table)
    rows = read_rows(table)
    work = Path(tempfile.mkdtemp(prefix="vlgap-demos-"))
    commit = git_commit()
    for name in names:
        for i in range(args.cold + args.warm):
            if i < args.cold:  # each cold run from its own new, empty cache
                kind = "cold" if i == 0 else f"cold {i + 1}"
                cache = work / name / f"cache-{i}"
            else:  # warm runs reuse the last cold run's cache
                kind = "warm" if args.warm == 1 else f"warm {i - args.cold + 1}"
            env = {**os.environ, "VLGAP_CACHE": str(cache), "PYTHONPATH": str(ROOT / "src")}
            models = "in the cold cache (converted in the cold run)"
            if args.models_cache:
                env["VLGAP_MODELS"] = str(Path(args.models_cache).expanduser())
                models = "kept apart (VLGAP_MODELS): not converted again"
            else:
                env.pop("VLGAP_MODELS", None)
            out = work / name / f"out-{i}"
            command = "vlgap " + " ".join(DEMOS[name])
            wall, cpu, before, after, rc = run_one([*DEMOS[name], "--out", str(out)], env,
                                                   work / f"{name}-{i}.log", args.timeout)
            when = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M")
            print(f"{command} ({kind}): {wall:.0f} s wall, {cpu:.0f} s CPU, load {before} -> {after}, exit {rc}",
                  flush=True)
            rows[(f"`{command}`", kind)] = (f"| `{command}` | {kind} | {wall:.0f} | {cpu:.0f} | {when} | {machine} | "
                                            f"{before} → {after} | {models} | `{commit}` | {rc} |")
    text = ["# Demo timings", "",
            "Written by `python benchmarks/demos.py` (see its docstring): each demo from an empty cache (cold),",
            "then again with that cache filled (warm; a new run folder, so every cell is recomputed). Wall",
            "seconds depend on what else runs on the machine: the load average (1/5/15 min) is read before",
            "and after each run; CPU seconds are the run's own (user + system, all its threads).", "",
            HEADER, RULE, *[rows[k] for k in sorted(rows)], ""]
    table.parent.mkdir(parents=True, exist_ok=True)
    table.write_text("\n".join(text))
    print(f"wrote {table}")
    if not args.keep:
        import shutil

        shutil.rmtree(work, ignore_errors=True)
    else:
        print(f"kept {work}")


if __name__ == "__main__":
    main()
