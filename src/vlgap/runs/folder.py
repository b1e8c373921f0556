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

A folder whose run recorded a configuration but computed nothing (none of the caller's `results`
exists: the run was refused or stopped before its first result) holds nothing to protect: another
configuration takes it over without `force`, said in one line. A run still alive in it (the process
named by its holder file `.run.pid`, or one holding a lock file there) keeps it until it ends.
"""
from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any, Callable, Mapping

from vlgap.errors import VlgapError
from vlgap.io_utils import atomic_write_text
from vlgap.reuse import RUN_RECORD, TEMP_RE, claim_run_folder, key_differences, remove_stale_temporaries
from vlgap.runs.claims import live_holders, lock_holder

#: the pid of the process that last opened the folder for its run (`computed_nothing` asks whether it lives)
HOLDER = ".run.pid"

#: the run record's key of the run's number formats (not compared: what they resolved to is)
FORMATS_KEY = "formats"


def _stderr(line: str) -> None:
    print(f"vlgap: {line}", file=sys.stderr, flush=True)


def is_legacy_folder(out: str | os.PathLike, legacy: tuple[str, ...]) -> bool:
    """`out` holds every path of `legacy` (what an older vlgap wrote) but no run record."""
    out = Path(out)
    return bool(legacy) and all((out / p).exists() for p in legacy) and not (out / RUN_RECORD).exists()


def recorded_differences(out: str | os.PathLike, kind: str, config: dict[str, Any],
                         ignore: tuple[str, ...] = ()) -> list[str] | None:
    """How `config` differs from the configuration a `kind` run recorded in `out` ([] when equal); None
    when `out` holds no readable record of a `kind` run."""
    try:
        old = json.loads((Path(out) / RUN_RECORD).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(old, dict) or old.get("kind") != kind or not isinstance(old.get("config"), dict):
        return None
    return key_differences({k: v for k, v in old["config"].items() if k not in ignore},
                           {k: v for k, v in config.items() if k not in ignore})


def _bookkeeping(p: Path) -> bool:
    """A lock file or a temporary of `atomic_write_*`: no result."""
    return p.suffix == ".lock" or p.name == HOLDER or bool(TEMP_RE.match(p.name))


def computed_nothing(out: str | os.PathLike, results: tuple[str, ...]) -> bool:
    """`out` holds no result (no file matching a glob of `results`, nor in a folder matching one) and no
    other live process runs in it (its holder file, its lock files)."""
    out = Path(out)
    for pattern in results:
        for p in out.glob(pattern):
            files = [p] if p.is_file() else (f for f in p.rglob("*") if f.is_file())
            if any(not _bookkeeping(f) for f in files):
                return False
    me = os.getpid()
    if lock_holder(out / HOLDER) not in (None, me):
        return False
    return not (live_holders(out.rglob("*.lock")) - {me})


def open_run_folder(out: str | os.PathLike, kind: str, config: dict[str, Any], *, force: bool = False,
                    ignore: tuple[str, ...] = (), legacy: tuple[str, ...] = (),
                    log: Callable[[str], None] | None = None, clear: tuple[str, ...] = (),
                    temporaries_older_than: float | None = None, formats: Mapping[str, Any] | None = None,
                    results: tuple[str, ...] | None = None) -> bool:
    """Make `out` the folder of one `kind` run of `config` (True: it already was, the caller resumes).

    ignore: config keys that change no result (where files live, throughput). legacy: paths whose
    presence without a run record marks a folder of an older vlgap, taken over with a note through
    `log`. clear: the run's own outputs, removed when the folder is new or taken over.
    temporaries_older_than: a time before which temporaries are leftovers (default: this process's
    start; give an earlier one when other live workers may be writing in `out`). formats: the run's
    number formats (`vlgap.runtime.DtypeChoice` by the config key that holds each, or a name of its own),
    recorded and checked as the module says. results: globs (relative to `out`) of what the run computes;
    a folder holding none of them, whose run recorded another configuration and is over, is taken over
    without `force` (None: never)."""
    out = Path(out)
    if formats:
        if not force and not (results is not None and computed_nothing(out, results)):
            refuse_changed_formats(out, kind, config, formats)
        config = {**config, FORMATS_KEY: {k: c.record() for k, c in formats.items()}}
        ignore = (*ignore, FORMATS_KEY)
    if is_legacy_folder(out, legacy) and not force:
        (log or _stderr)(f"{out}: a run folder of an older vlgap (no {RUN_RECORD}): its results are unsealed "
                         "and are recomputed")
        force = True
    if not force and results is not None:
        diffs = recorded_differences(out, kind, config, ignore)
        if diffs and computed_nothing(out, results):
            (log or _stderr)(f"{out}: its run recorded another configuration ({'; '.join(diffs[:3])}"
                             f"{'; ...' if len(diffs) > 3 else ''}) but computed nothing: reused for this one")
            force = True
    resumed = claim_run_folder(out, kind, config, force=force, ignore=ignore)
    atomic_write_text(out / HOLDER, str(os.getpid()))
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
