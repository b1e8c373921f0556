"""How long jobs speak, on stderr: one progress-bar style (items done, items/s, ETA) and, for steps
without countable items, a line saying what is being done and how long it took.

On a terminal these are Rich displays (bar, spinner); in logs and CI plain lines. Only one Rich live
display is shown at a time: a step or bar started inside another one, or in a side pool's thread
(vlgap.side_work: tasks side by side), prints plain lines instead.
"""
from __future__ import annotations

import contextlib
import math
import time
from typing import Callable, Iterator
from rich.console import Console
from rich.progress import (BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn,
                           TimeRemainingColumn)

from vlgap.side_work import in_side_lane

stderr_console = Console(stderr=True)


class _Rate(TextColumn):
    def __init__(self, unit: str = "items"):
        super().__init__("")
        self.unit = unit

    def render(self, task):  # type: ignore[override]
        from rich.text import Text

        speed = task.finished_speed or task.speed
        return Text(f"{speed:.1f} {task.fields.get('unit', self.unit)}/s" if speed else "")


@contextlib.contextmanager
def progress_bar(enabled: bool = True):
    """Yields a rich Progress, or a no-op stand-in when disabled."""
    if not enabled:
        yield _NullProgress()
        return
    if not stderr_console.is_terminal or _live_depth or in_side_lane():
        # logs, CI, nested, or in a side pool (vlgap.side_work): plain lines, every 10 % or 30 s
        yield _LineProgress()
        return
    prog = Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        _Rate(),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
        console=stderr_console,
        transient=False,
    )
    with _live(prog):
        yield prog


_live_depth = 0  # our Rich live displays now on screen (Rich < 14 refuses a second one)


@contextlib.contextmanager
def _live(display):
    global _live_depth
    with display:
        _live_depth += 1
        try:
            yield display
        finally:
            _live_depth -= 1


def say(message: str) -> None:
    """One plain line on stderr (no Rich markup or highlighting)."""
    stderr_console.print(message, highlight=False, markup=False, soft_wrap=True)  # a log line stays one line


@contextlib.contextmanager
def step(what: str, enabled: bool = True) -> Iterator[None]:
    """Say what a step without countable items is doing (a spinner on a terminal, "what ..." in logs)
    and, when it ends, how long it took. For steps that can take more than a few seconds."""
    if not enabled:
        yield
        return
    t0 = time.perf_counter()
    if stderr_console.is_terminal and not _live_depth and not in_side_lane():
        spinner = Progress(SpinnerColumn(), TextColumn("{task.description}", markup=False), TimeElapsedColumn(),
                           console=stderr_console, transient=True)
        with _live(spinner):
            spinner.add_task(f"{what} ...", total=None)
            yield
    else:
        say(f"{what} ...")
        yield
    say(f"{what}: done in {time.perf_counter() - t0:.1f} s")


@contextlib.contextmanager
def counter(what: str, total: int | None, unit: str = "items", enabled: bool = True) -> Iterator[Callable[[int], None]]:
    """A progress bar driven by a callback: yields `report(done)` (done = items finished so far)."""
    with progress_bar(enabled) as prog:
        task = prog.add_task(what, total=total, unit=unit)
        last = [0]

        def report(done: int) -> None:
            if done > last[0]:
                prog.update(task, advance=done - last[0])
                last[0] = done

        yield report


class Stages:
    """A progress callback for work done in stages by code that cannot print itself (a converter, a
    loader): `stages(name)` starts a stage without countable items (closing the one before), and
    `stages(name, done, total)` starts or advances a stage with a bar. Use as a context manager."""

    def __init__(self, enabled: bool = True, unit: str = "items"):
        self.enabled, self.unit = enabled, unit
        self.current: str | None = None
        self._stack = contextlib.ExitStack()
        self._report: Callable[[int], None] | None = None

    def __call__(self, stage: str, done: int | None = None, total: int | None = None) -> None:
        if stage != self.current:
            self.close()
            self.current = stage
            if total is None:
                self._stack.enter_context(step(stage, self.enabled))
            else:
                self._report = self._stack.enter_context(counter(stage, total, self.unit, self.enabled))
        if done is not None and self._report is not None:
            self._report(done)

    def close(self) -> None:
        self._stack.close()
        self._stack = contextlib.ExitStack()
        self.current, self._report = None, None

    def __enter__(self) -> "Stages":
        return self

    def __exit__(self, *exc) -> None:
        # with an exception the stage's display closes without its "done in" line
        stack, self._stack = self._stack, contextlib.ExitStack()
        self.current, self._report = None, None
        stack.__exit__(*exc)


class _NullProgress:
    def add_task(self, *a, **k):
        return 0

    def update(self, *a, **k):
        pass

    def advance(self, *a, **k):
        pass


class _LineProgress:
    """Progress for non-terminals: one line per 10 % (or 30 s) with rate and ETA."""

    def __init__(self):
        import time

        self._time = time.perf_counter
        self.tasks: dict[int, dict] = {}

    def add_task(self, description, total=None, unit="items", **_):
        tid = len(self.tasks)
        self.tasks[tid] = {"desc": description, "total": total, "done": 0, "t0": self._time(), "last": -1.0,
                           "last_t": 0.0, "unit": unit}
        return tid

    def update(self, tid, completed=None, advance=0, total=None, **_):
        t = self.tasks[tid]
        if total is not None:
            t["total"] = total
        if completed is not None:
            t["done"] = completed
            t["t0"] = self._time() if completed == 0 else t["t0"]
            t["base"] = completed  # rate counts only this run's work
        t["done"] += advance
        self._maybe_print(t)

    def advance(self, tid, n=1):
        self.update(tid, advance=n)

    def _maybe_print(self, t):
        total, done = t["total"], t["done"]
        now = self._time()
        frac = done / total if total else 0.0
        if done and (frac - t["last"] >= 0.1 or now - t["last_t"] >= 30 or (total and done >= total)):
            if total and t["last"] >= 1.0:
                return
            elapsed = now - t["t0"]
            fresh = done - t.get("base", 0)
            rate = fresh / elapsed if elapsed > 0 and fresh > 0 else 0.0
            eta = (total - done) / rate if rate and total else float("nan")
            say(f"{t['desc']}: {done}/{total or '?'} ({rate:.1f} {t['unit']}/s, {elapsed:.0f} s elapsed, "
                + (f"ETA {eta:.0f} s)" if math.isfinite(eta) else "ETA unknown)"))
            t["last"], t["last_t"] = frac, now
