"""Where a result came from: vlgap's version, the date, the command line or API call, and the machine.

Run records (sweep.json, the demo's report) carry `record()` next to their configuration, never inside
the key that decides reuse: the same configuration computed on another day or machine is the same run.
The command is the one the CLI received (`vlgap.cli.main` sets it once per process); a run started from
Python names the API function instead.
"""
from __future__ import annotations

import datetime as dt
import os
import shlex
import sys
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any, Iterator

#: the command line of the CLI invocation running now (None: called from Python)
_COMMAND: ContextVar[str | None] = ContextVar("vlgap_command", default=None)
#: the outermost API function running now (`calling`), e.g. "vlgap.demo" around the sweep it runs
_API_CALL: ContextVar[str | None] = ContextVar("vlgap_api_call", default=None)


def set_command(argv: list[str] | None = None) -> None:
    """Remember this process's command line as `vlgap ARGS` (the CLI's entry point calls it)."""
    args = list(sys.argv[1:] if argv is None else argv)
    _COMMAND.set("vlgap " + shlex.join(args) if args else "vlgap")


def command() -> str | None:
    return _COMMAND.get()


@contextmanager
def calling(name: str) -> Iterator[None]:
    """Name the API function that starts a run (the outermost one wins: the demo's sweep is the demo's)."""
    token = _API_CALL.set(name) if _API_CALL.get() is None else None
    try:
        yield
    finally:
        if token is not None:
            _API_CALL.reset(token)


def api_call(name: str):
    """Decorator: the function starts runs that name it as their API call (see `calling`)."""
    import functools

    def wrap(fn):
        @functools.wraps(fn)
        def inner(*args, **kwargs):
            with calling(name):
                return fn(*args, **kwargs)
        return inner
    return wrap


def utc_now() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def record(api_call: str | None = None) -> dict[str, Any]:
    """{vlgap, date, command | api, python, machine}: what a report states about the run it shows.
    api_call: the Python function that started the run (used when no CLI command is running)."""
    from vlgap import __version__
    from vlgap.platform_info import machine_summary

    out: dict[str, Any] = {"vlgap": __version__, "date": utc_now()}
    cmd = command()
    if cmd is not None:
        out["command"] = cmd
    else:
        out["api"] = _API_CALL.get() or api_call or "the Python API"
    out["python"] = sys.version.split()[0]
    out["machine"] = machine_summary()
    return out


def display_path(path: str | Path, base: str | Path, cache_dir: str | Path | None = None) -> str:
    """A path as a report shows it: under "<vlgap cache>/" when it lies in vlgap's cache (`cache_dir`, else
    $VLGAP_CACHE, else ~/.cache/vlgap), else relative to `base` (the report's folder) when at most three
    ".." lead there, else under "~/" in the home folder; otherwise its name alone after ".../", so that no
    report shows the machine's absolute layout."""
    p = Path(os.path.abspath(os.path.expanduser(str(path))))
    b = Path(os.path.abspath(os.path.expanduser(str(base))))
    from vlgap.io_utils import cache_root

    try:
        cache = Path(os.path.abspath(cache_root(cache_dir)))
    except Exception:  # noqa: BLE001 - a cache setting that does not resolve only changes how a path reads
        cache = None
    if cache is not None and (p == cache or cache in p.parents):
        return "<vlgap cache>/" + p.relative_to(cache).as_posix()
    rel = Path(os.path.relpath(p, b))
    if rel.parts.count("..") <= 3 and os.path.commonpath([p, b]) != os.sep:
        return rel.as_posix()
    home = Path.home()
    if home in p.parents:
        return "~/" + p.relative_to(home).as_posix()
    return ".../" + p.name


def describe(rec: dict[str, Any] | None) -> list[tuple[str, str]]:
    """(label, text) lines of a provenance record for a report header; [] for None."""
    if not rec:
        return []
    lines = [("vlgap", str(rec.get("vlgap", "n/a"))), ("date", str(rec.get("date", "n/a")))]
    if rec.get("command"):
        lines.append(("command", str(rec["command"])))
    elif rec.get("api"):
        lines.append(("Python API", str(rec["api"])))
    m = rec.get("machine") or {}
    if m:
        lines.append(("machine", m.get("summary") or str(m)))
    return lines
