"""The run folder: one configuration per folder, resumed when equal, refused when changed.

`open_run_folder(out, kind, config)` records the run's whole configuration in out/run_config.json
(`vlgap.reuse.claim_run_folder`). The same configuration resumes (True); another one is refused with the
readable list of differences (`force=True` / `--force` takes the folder over); a non-empty folder of the
user's own is never written into uninvited. A folder of an older vlgap (its `legacy` files present, no
run record) is taken over with a note: its results are unsealed, hence recomputed. Leftovers of killed
runs (temporaries of `atomic_write_*`) are removed, and a folder that is new or taken over loses the
outputs named by `clear`, so nothing of another configuration is resumed into this one.
"""
from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import Any, Callable

from vlgap.reuse import RUN_RECORD, claim_run_folder, remove_stale_temporaries


def _stderr(line: str) -> None:
    print(f"vlgap: {line}", file=sys.stderr, flush=True)


def is_legacy_folder(out: str | os.PathLike, legacy: tuple[str, ...]) -> bool:
    """`out` holds every path of `legacy` (what an older vlgap wrote) but no run record."""
    out = Path(out)
    return bool(legacy) and all((out / p).exists() for p in legacy) and not (out / RUN_RECORD).exists()


def open_run_folder(out: str | os.PathLike, kind: str, config: dict[str, Any], *, force: bool = False,
                    ignore: tuple[str, ...] = (), legacy: tuple[str, ...] = (),
                    log: Callable[[str], None] | None = None, clear: tuple[str, ...] = (),
                    temporaries_older_than: float | None = None) -> bool:
    """Make `out` the folder of one `kind` run of `config` (True: it already was, the caller resumes).

    ignore: config keys that change no result (where files live, throughput). legacy: paths whose
    presence without a run record marks a folder of an older vlgap, taken over with a note through
    `log`. clear: the run's own outputs, removed when the folder is new or taken over.
    temporaries_older_than: a time before which temporaries are leftovers (default: this process's
    start; give an earlier one when other live workers may be writing in `out`)."""
    out = Path(out)
    if is_legacy_folder(out, legacy) and not force:
        (log or _stderr)(f"{out}: a run folder of an older vlgap (no {RUN_RECORD}): its results are unsealed "
                         "and are recomputed")
        force = True
    resumed = claim_run_folder(out, kind, config, force=force, ignore=ignore)
    remove_stale_temporaries(out, older_than=temporaries_older_than)
    if not resumed:
        for name in clear:
            p = out / name
            if p.is_dir():
                shutil.rmtree(p)
            elif p.exists():
                p.unlink()
    return resumed
