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
