"""Console tables that never cut a value.

Rich fits a table wider than the console by shrinking its columns and cutting cells with "…"
(`mobil…`, `[0.39…`): in an 80-column terminal, or in a log (Rich's width when output is piped is
80), the interval then cannot be read where it is shown. `print_table` prints the table as it is
when its natural width fits; otherwise it prints one block per row, "header value" fields laid out
on as many lines as the width needs, breaking only between fields, so every value stays whole (a
single value longer than the whole width is printed on a line of its own, never cut).
"""
from __future__ import annotations

from rich.console import Console
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

FIELD_GAP = "   "   # between two fields of one row
INDENT = "  "       # continuation lines of a row
UNBOUNDED = 100_000


def _plain(cell) -> str:
    if isinstance(cell, Text):
        return cell.plain
    if isinstance(cell, str):
        return Text.from_markup(cell).plain
    return str(cell)


def fits(table: Table, console: Console) -> bool:
    """Whether Rich can print `table` at the console's width without shrinking a column."""
    # measured without the console's limit: Rich clamps a measurement to the width it is given
    unbounded = console.options.update(width=UNBOUNDED, max_width=UNBOUNDED)
    return Measurement.get(console, unbounded, table).maximum <= console.width


def row_lines(table: Table, width: int) -> list[str]:
    """The table as text, one block per row: "header value" fields, wrapped between fields at `width`."""
    headers = [_plain(c.header) for c in table.columns]
    cells = [[_plain(c) for c in column._cells] for column in table.columns]
    n_rows = max((len(c) for c in cells), default=0)
    lines: list[str] = []
    if table.title:
        lines.append(_plain(table.title))
    for i in range(n_rows):
        fields = []
        for header, column in zip(headers, cells):
            value = column[i] if i < len(column) else ""
            if value == "":
                continue
            fields.append(f"{header} {value}" if header.strip() else value)
        line = ""
        for field in fields:
            if not line:
                line = field
            elif len(line) + len(FIELD_GAP) + len(field) <= width:
                line += FIELD_GAP + field
            else:
                lines.append(line)
                line = INDENT + field
        lines.append(line)
    if table.caption:
        lines.append(_plain(table.caption))
    return lines


def print_table(console: Console, table: Table) -> None:
    """Print `table` whole when it fits the console's width, else one block of whole fields per row."""
    if fits(table, console):
        console.print(table)
        return
    for line in row_lines(table, console.width):
        # soft_wrap: a value longer than the width runs on (the terminal wraps it) instead of being cut
        console.print(Text(line), soft_wrap=True, highlight=False)


def print_warnings(lines) -> None:
    """The caveats of a run (vlgap.caveats: why a value printed means little), one "warning: ..." line
    each, on stderr so that --json output stays parseable (the JSON carries them as "warnings")."""
    if not lines:
        return
    err = Console(stderr=True)
    for line in lines:
        err.print(f"[yellow]warning:[/] {line}", highlight=False, soft_wrap=True)
