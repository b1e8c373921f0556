"""CSV tables with a header, read through one reader (score tables, sweep grids, judgments).

`read_csv(path, what)` gives the header's columns and one dict per data row, every value a string with
its surrounding spaces stripped. The text is read as every text file is (`vlgap.paths.read_text_utf8`:
a folder, a missing file, bytes that are not UTF-8 are one line naming the file); a row with more fields
than the header (`csv.DictReader` would file the extra ones under the key None, a list that later breaks a
`.strip()`), a malformed quote or a NUL byte is a one-line VlgapError naming the file and the line. A row
with fewer fields has "" for the missing ones, as the readers' own checks then name ("'' is not a number").
"""
from __future__ import annotations

import csv
import io
import os
from pathlib import Path

from vlgap.errors import VlgapError


def read_csv(path: str | os.PathLike, what: str = "CSV file", *, lower: bool = False
             ) -> tuple[list[str], list[dict[str, str]]]:
    """(columns, rows) of the CSV file at `path` (`lower`: column names in lower case); blank lines are
    skipped. See the module docstring for what is refused."""
    from vlgap.paths import read_text_utf8

    p = Path(path).expanduser()
    reader = csv.reader(io.StringIO(read_text_utf8(p, what), newline=""))
    try:
        header = next(reader, None)
        columns = [(c.strip().lower() if lower else c.strip()) for c in (header or [])]
        rows: list[dict[str, str]] = []
        for fields in reader:
            if not fields:
                continue
            if len(fields) > len(columns):
                raise VlgapError(f"{p} line {reader.line_num}: {len(fields)} fields, but the header has "
                                 f"{len(columns)} ({', '.join(columns)}); quote a value that holds a comma")
            rows.append({c: (fields[i].strip() if i < len(fields) else "") for i, c in enumerate(columns)})
    except csv.Error as err:
        raise VlgapError(f"{p} line {reader.line_num}: not a readable CSV row ({err})") from None
    return columns, rows


__all__ = ["read_csv"]
