"""One progress-bar style for every long job: items done, items/s and ETA, on stderr."""
from __future__ import annotations

import contextlib
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

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
    if not stderr_console.is_terminal:  # logs and CI: plain lines, every 10 % or 30 s
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
    with prog:
        yield prog


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
            stderr_console.print(f"{t['desc']}: {done}/{total or '?'} ({rate:.1f} {t['unit']}/s, "
                                 f"{elapsed:.0f} s elapsed, ETA {eta:.0f} s)", highlight=False)
            t["last"], t["last_t"] = frac, now
