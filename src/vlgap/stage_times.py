"""Where a run's time goes: wall and CPU seconds of each named stage, kept only while a run asks for them.

`vlgap demo` records its stages (rendering, each encoder's extraction, the alignment cells, the law fits,
each temporal section, the report) and writes them to `stage_timings.json` in its run folder, which
`benchmarks/demos.py` prints beside the run's floor. Stages may overlap (the law fits run beside the
temporal sections): each has its start and end on the run's clock, and its CPU seconds are the process's
(every thread) over that window, so overlapping stages share theirs. Outside `recording()` a stage costs
nothing but a list lookup.
"""
from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

_recorders: list["StageTimes"] = []


@dataclass
class StageTimes:
    started: float = field(default_factory=time.perf_counter)
    cpu_started: float = field(default_factory=time.process_time)
    stages: list[dict[str, Any]] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, name: str, start: float, end: float, cpu: float) -> None:
        with self._lock:
            self.stages.append({"stage": name, "start_s": round(start - self.started, 2),
                                "end_s": round(end - self.started, 2), "wall_s": round(end - start, 2),
                                "cpu_s": round(cpu, 2)})

    def to_dict(self) -> dict[str, Any]:
        return {"wall_s": round(time.perf_counter() - self.started, 2),
                "cpu_s": round(time.process_time() - self.cpu_started, 2),
                "note": "cpu_s: this process, every thread, over the stage's window (worker processes not "
                        "included; overlapping stages share theirs)",
                "stages": sorted(self.stages, key=lambda s: s["start_s"])}

    def write(self, path: str | Path) -> Path:
        from vlgap.io_utils import atomic_write_text

        atomic_write_text(Path(path), json.dumps(self.to_dict(), indent=1) + "\n")
        return Path(path)


@contextmanager
def recording() -> Iterator[StageTimes]:
    """Stages timed inside the block are kept in the StageTimes it yields."""
    rec = StageTimes()
    _recorders.append(rec)
    try:
        yield rec
    finally:
        _recorders.remove(rec)


@contextmanager
def stage(name: str) -> Iterator[None]:
    """Times the block as stage `name` for the recording in force (none: nothing)."""
    if not _recorders:
        yield
        return
    rec = _recorders[-1]
    start, cpu = time.perf_counter(), time.process_time()
    try:
        yield
    finally:
        rec.add(name, start, time.perf_counter(), time.process_time() - cpu)
