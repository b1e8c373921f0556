"""The CAPE experiment's stage files: each a sealed cell of `vlgap.runs` keyed by the stage format and
its inputs, and the file that library output goes to. Shared by `experiment` and its worker `lanes`."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from vlgap.runs.cells import cell as sealed_cell

#: version of the stage files' keys: a change recomputes every older stage file
STAGE_FORMAT = 2
#: the run folder's file for what libraries print (vlgap.cape.runlog)
LIBRARY_LOG = "library.log"


def digest(obj: Any) -> str:
    from vlgap.reuse import key_digest

    return key_digest(obj)[:24]


def stage(path: Path, make: Callable[[], Any], key: dict[str, Any] | None = None,
          log: Callable[[str], None] | None = None) -> Any:
    """A stage's file as a cell of `vlgap.runs` (read verified, else `make()`d and sealed; a changed or
    foreign file is said in one line and recomputed), keyed by the stage format and `key`."""
    return sealed_cell(path, {"format": STAGE_FORMAT, **(key or {})}, make, what="CAPE stage file", report=log)
