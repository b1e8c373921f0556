"""The run folder: one configuration per folder, resumed when equal, refused when changed.

`open_run_folder(out, kind, config)` records the run's whole configuration in out/run_config.json
(`vlgap.reuse.claim_run_folder`). The same configuration resumes (True); another one is refused with the
readable list of differences (`force=True` / `--force` takes the folder over); a non-empty folder of the
user's own is never written into uninvited. A folder of an older vlgap (its `legacy` files present, no
run record) is taken over with a note: its results are unsealed, hence recomputed. Leftovers of killed
runs (temporaries of `atomic_write_*`) are removed, and a folder that is new or taken over loses the
outputs named by `clear`, so nothing of another configuration is resumed into this one.

A run's number formats (`formats`: `vlgap.runtime.DtypeChoice` by name) are recorded under "formats"
(what each resolved to, whether it was asked as auto, and why). A folder whose run used another format
where this one's `auto` resolved differently (a run resumed on another machine) is refused in words that
say so and how to resume it (`VLGAP_NATIVE_BF16` or the option that sets the format), not as a bare
difference of configurations.
"""
from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import Any, Callable, Mapping

from vlgap.errors import VlgapError
from vlgap.reuse import RUN_RECORD, claim_run_folder, remove_stale_temporaries

#: the run record's key of the run's number formats (not compared: what they resolved to is)
FORMATS_KEY = "formats"


def _stderr(line: str) -> None:
    print(f"vlgap: {line}", file=sys.stderr, flush=True)


def is_legacy_folder(out: str | os.PathLike, legacy: tuple[str, ...]) -> bool:
    """`out` holds every path of `legacy` (what an older vlgap wrote) but no run record."""
    out = Path(out)
    return bool(legacy) and all((out / p).exists() for p in legacy) and not (out / RUN_RECORD).exists()


def open_run_folder(out: str | os.PathLike, kind: str, config: dict[str, Any], *, force: bool = False,
                    ignore: tuple[str, ...] = (), legacy: tuple[str, ...] = (),
                    log: Callable[[str], None] | None = None, clear: tuple[str, ...] = (),
                    temporaries_older_than: float | None = None, formats: Mapping[str, Any] | None = None) -> bool:
    """Make `out` the folder of one `kind` run of `config` (True: it already was, the caller resumes).

    ignore: config keys that change no result (where files live, throughput). legacy: paths whose
    presence without a run record marks a folder of an older vlgap, taken over with a note through
    `log`. clear: the run's own outputs, removed when the folder is new or taken over.
    temporaries_older_than: a time before which temporaries are leftovers (default: this process's
    start; give an earlier one when other live workers may be writing in `out`). formats: the run's
    number formats (`vlgap.runtime.DtypeChoice` by the config key that holds each, or a name of its own),
    recorded and checked as the module says."""
    out = Path(out)
    if formats:
        if not force:
            refuse_changed_formats(out, kind, config, formats)
        config = {**config, FORMATS_KEY: {k: c.record() for k, c in formats.items()}}
        ignore = (*ignore, FORMATS_KEY)
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


def refuse_changed_formats(out: str | os.PathLike, kind: str, config: dict[str, Any],
                           formats: Mapping[str, Any]) -> None:
    """Refuse `out` in words where its `kind` run used another number format than one this run asked as
    `auto` resolved to here: the recorded format (under "formats", or for a folder written before formats
    were recorded, the config key of that name)."""
    import json

    path = Path(out) / RUN_RECORD
    try:
        old = json.loads(path.read_text()) if path.is_file() else None
    except ValueError:
        return  # an unreadable record is claim_run_folder's to refuse
    if not isinstance(old, dict) or old.get("kind") != kind:
        return
    old_cfg = old.get("config") or {}
    recorded = old_cfg.get(FORMATS_KEY) or {}
    for key, choice in formats.items():
        was = (recorded.get(key) or {}).get("dtype", old_cfg.get(key))
        if choice.auto and isinstance(was, str) and was != choice.dtype:
            raise VlgapError(choice.changed(out, kind, was))
