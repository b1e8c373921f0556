"""The reuse rule: whatever a later run may reuse is keyed by all that determines it and verified first.

Every reusable artefact (a feature chunk or entry, a sweep cell, a fit, WSV latents, a checkpoint, a
CAPE rewrite cache or adapter) is a file written with `write_artefact(path, data, key)`: the bytes go
to `path` atomically, then a small seal `.<name>.seal.json` beside it records the key (a JSON object
of the inputs' fingerprints, every setting and the format version), the key's digest and the sha256
and size of the bytes. The seal is written last, so a file without a seal is an interrupted write.

`check_artefact(path, key)` is the one place that decides whether a file may be reused:

- `ok`        seal present, key equal, bytes match the checksum;
- `missing`   no file;
- `unsealed`  a file without a seal (killed mid-write, or written by an older vlgap);
- `stale`     sealed under another key: `differences` names each setting that differs;
- `corrupt`   the bytes no longer match the checksum, or the seal is unreadable or damaged (its
              `key_sha256` is not the digest of the key it holds: `seal_damage`).

A file a user hands a command by its path (`fit-scaling sweep.csv`, `align features.safetensors`, the
report's tables) is read through `verified_input`: a sealed one must hold, an unsealed one is the
user's own and is read as it is.

Callers recompute on anything but `ok` (`read_verified` returns None then and says why on stderr)
or, where recomputing would overwrite a user's folder, refuse with the differences
(`claim_run_folder`). Leftovers of killed runs (temporary files of `atomic_write_*`) are removed by
`remove_stale_temporaries` at the start of the next run.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from vlgap.errors import VlgapError
from vlgap.io_utils import atomic_write_bytes, atomic_write_json, make_folder, sha256_of_file

SEAL_FORMAT = 1
# the start of this process: temporaries older than it belong to runs that are over
PROCESS_START = time.time()
# names made by io_utils._open_temp_beside: .<name>.<12 hex>.tmp
TEMP_RE = re.compile(r"^\..+\.[0-9a-f]{12}\.tmp$")


def canonical(key: Any) -> str:
    """The key as canonical JSON (sorted keys, no spaces): equal keys give equal text. The key is taken
    through JSON first (tuples become lists, numeric dict keys strings), so the key a seal stores gives
    the same text, hence the same digest, as the key it was made from (`seal_damage` relies on it)."""
    plain = json.loads(json.dumps(key, default=str, allow_nan=True))
    return json.dumps(plain, sort_keys=True, separators=(",", ":"), allow_nan=True)


def key_digest(key: Any) -> str:
    return hashlib.sha256(canonical(key).encode()).hexdigest()


def seal_path(path: str | os.PathLike) -> Path:
    path = Path(path)
    return path.with_name(f".{path.name}.seal.json")


def key_differences(old: Any, new: Any, prefix: str = "") -> list[str]:
    """Human-readable differences between two keys: ['k: 5 -> 20', 'metric: mutual_knn -> cka']."""
    old = json.loads(canonical(old))
    new = json.loads(canonical(new))
    if isinstance(old, dict) and isinstance(new, dict):
        out: list[str] = []
        for k in sorted(set(old) | set(new)):
            name = f"{prefix}{k}"
            if k not in old:
                out.append(f"{name}: (absent) -> {_short(new[k])}")
            elif k not in new:
                out.append(f"{name}: {_short(old[k])} -> (absent)")
            elif old[k] != new[k]:
                out.extend(key_differences(old[k], new[k], prefix=name + "."))
        return out
    return [] if old == new else [f"{prefix.rstrip('.') or 'value'}: {_short(old)} -> {_short(new)}"]


def _short(v: Any, limit: int = 60) -> str:
    text = canonical(v)
    return text if len(text) <= limit else text[: limit - 3] + "..."


@dataclass
class Verdict:
    status: str  # ok | missing | unsealed | stale | corrupt
    path: Path
    reason: str = ""
    differences: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def message(self) -> str:
        return f"{self.path}: {self.status}" + (f" ({self.reason})" if self.reason else "")


def write_artefact(path: str | os.PathLike, data: bytes, key: Any, *, extra: dict | None = None) -> None:
    """Write `data` to `path` atomically, then its seal (key, key digest, sha256, size). `extra`:
    JSON-able facts kept in the seal for people (how to reproduce), not compared."""
    path = Path(path)
    atomic_write_bytes(path, data)
    seal_file(path, key, sha256=hashlib.sha256(data).hexdigest(), size=len(data), extra=extra)


def seal_file(path: str | os.PathLike, key: Any, *, sha256: str | None = None, size: int | None = None,
              extra: dict | None = None) -> None:
    """Seal a file that is already complete on disk (written by a library's own saver)."""
    path = Path(path)
    if sha256 is None:
        sha256 = sha256_of_file(path)
    if size is None:
        size = path.stat().st_size
    seal = {"format": SEAL_FORMAT, "file": path.name, "sha256": sha256, "size": size,
            "key_sha256": key_digest(key), "key": json.loads(canonical(key))}
    if extra:
        seal["about"] = extra
    atomic_write_json(seal_path(path), seal)


def read_seal(path: str | os.PathLike) -> dict | None:
    try:
        seal = json.loads(seal_path(path).read_text())
    except (FileNotFoundError, ValueError, UnicodeDecodeError):
        return None
    return seal if isinstance(seal, dict) and "sha256" in seal and "key_sha256" in seal else None


def seal_damage(seal: dict) -> str:
    """Why a seal read by `read_seal` cannot be trusted ("" when it can): its `key_sha256` must be the
    digest of the key it holds, so a seal whose key or digest was edited (a flipped byte) is not taken
    for a seal of another key (recomputed with an empty list of differences) nor for this key's."""
    if "key" not in seal:
        return "its seal is damaged: it holds no key"
    try:
        digest = key_digest(seal["key"])
    except (TypeError, ValueError) as err:
        return f"its seal is damaged: its key cannot be read ({err})"
    if digest != seal["key_sha256"]:
        return "its seal is damaged: key_sha256 does not match its key"
    if not isinstance(seal.get("size", 0), (int, type(None))) or not isinstance(seal["sha256"], str):
        return "its seal is damaged: its size or sha256 is not a number or a digest"
    return ""


def check_artefact(path: str | os.PathLike, key: Any = None, *, verify_bytes: bool = True) -> Verdict:
    """Decide whether `path` may be reused for `key` (None: any key, checksum only). A damaged seal
    (`seal_damage`) is corrupt, whatever the key."""
    path = Path(path)
    if not path.is_file():
        return Verdict("missing", path)
    sp = seal_path(path)
    if not sp.exists():
        return Verdict("unsealed", path, "no seal: an interrupted write or an older format")
    seal = read_seal(path)
    if seal is None:
        return Verdict("corrupt", path, f"its seal {sp.name} is unreadable")
    damage = seal_damage(seal)
    if damage:
        return Verdict("corrupt", path, damage)
    if key is not None and seal["key_sha256"] != key_digest(key):
        diffs = key_differences(seal.get("key", {}), key) or [
            "the key's digest differs though no setting does (a value that prints alike)"]
        return Verdict("stale", path, "made with other settings: " + "; ".join(diffs[:6]), diffs)
    if seal.get("size") is not None and path.stat().st_size != seal["size"]:
        return Verdict("corrupt", path, f"size {path.stat().st_size} bytes, sealed as {seal['size']}")
    if verify_bytes and sha256_of_file(path) != seal["sha256"]:
        return Verdict("corrupt", path, "checksum mismatch: the bytes changed after they were written")
    return Verdict("ok", path)


def verified_input(path: str | os.PathLike, what: str, *, fix: str = "") -> None:
    """Refuse (VlgapError, one line) a file handed to a command by its path when vlgap sealed it and it
    no longer holds: bytes changed after they were written (a hand-edited table), a damaged seal. An
    unsealed file (the user's own, or a copy without its seal) is accepted as it is. `fix`: what to do."""
    verdict = check_artefact(path, None)
    if verdict.status in ("ok", "unsealed", "missing"):
        return
    raise VlgapError(f"{what} {verdict.path}: {verdict.reason or verdict.status}; vlgap sealed it when it wrote it "
                     "and it no longer matches its seal" + (f"; {fix}" if fix else ""))


def read_verified(path: str | os.PathLike, key: Any, *, what: str = "cached file",
                  report: Callable[[str], None] | None = None) -> bytes | None:
    """The file's bytes if it may be reused for `key`, else None (the caller recomputes). A stale or
    corrupt file is reported in one line and removed together with its seal; a missing one is silent."""
    path = Path(path)
    verdict = check_artefact(path, key, verify_bytes=False)
    if verdict.status == "missing":
        return None
    if verdict.ok:
        data = path.read_bytes()  # check the bytes we return, not a second read
        seal = read_seal(path) or {}
        if hashlib.sha256(data).hexdigest() == seal.get("sha256"):
            return data
        verdict = Verdict("corrupt", path, "checksum mismatch: the bytes changed after they were written")
    (report or _stderr)(f"{what} {verdict.message()}; recomputing")
    discard(path)
    return None


def discard(path: str | os.PathLike) -> None:
    """Remove a file and its seal (missing is fine)."""
    for p in (Path(path), seal_path(path)):
        try:
            p.unlink()
        except FileNotFoundError:
            pass


def _stderr(line: str) -> None:
    print(f"vlgap: {line}", file=sys.stderr, flush=True)


# -- run folders ------------------------------------------------------------------------------------

RUN_RECORD = "run_config.json"


def claim_run_folder(out: str | os.PathLike, kind: str, config: dict[str, Any], *, force: bool = False,
                     ignore: tuple[str, ...] = ()) -> bool:
    """Make `out` the folder of one run of `kind` with `config`, or find it already is.

    Returns True when the folder already holds this configuration (the caller resumes), False when it
    was new (or emptied of vlgap's own record by `force`). A folder holding another configuration is
    refused with the list of differences; `force=True` takes it over (the caller then recomputes every
    artefact, which the keys would demand anyway). `ignore`: config keys that do not change results
    (progress, worker counts)."""
    out = Path(out)
    record_path = out / RUN_RECORD
    want = {k: v for k, v in config.items() if k not in ignore}
    if record_path.is_file():
        try:
            old = json.loads(record_path.read_text())
        except ValueError:
            old = None
        if not isinstance(old, dict) or old.get("kind") != kind:
            if not force:
                raise VlgapError(f"{out} holds something other than a vlgap {kind} run ({record_path.name} "
                                 "unreadable or of another kind); choose a new --out, or --force to overwrite")
        else:
            old_cfg = {k: v for k, v in old.get("config", {}).items() if k not in ignore}
            diffs = key_differences(old_cfg, want)
            if not diffs:
                return True
            if not force:
                shown = "; ".join(diffs[:8]) + (f"; ... ({len(diffs)} in all)" if len(diffs) > 8 else "")
                raise VlgapError(f"{out} holds a {kind} run with another configuration ({shown}); "
                                 "choose a new --out, or --force to overwrite it")
    elif out.is_dir() and any(out.iterdir()) and not force:
        # a folder of the user's own: never write into it uninvited
        known = {p.name for p in out.iterdir()}
        if not known <= {".DS_Store"}:
            raise VlgapError(f"{out} is not empty and holds no vlgap {kind} run; choose a new or empty --out, "
                             "or --force to write into it")
    make_folder(out)
    atomic_write_json(record_path, {"kind": kind, "format": SEAL_FORMAT, "config": json.loads(canonical(config)),
                                    "key_sha256": key_digest(want)})
    return False


# -- leftovers of killed runs -------------------------------------------------------------------------

def remove_stale_temporaries(folder: str | os.PathLike, *, older_than: float | None = None,
                             recursive: bool = True) -> list[Path]:
    """Remove vlgap's own temporary files (`.<name>.<12 hex>.tmp`, made by `atomic_write_*`) under
    `folder` whose modification time is before `older_than` (default: this process's start): they
    belong to runs that were killed. Returns what was removed."""
    folder = Path(folder)
    cutoff = PROCESS_START if older_than is None else older_than
    removed: list[Path] = []
    if not folder.is_dir():
        return removed
    paths = folder.rglob(".*.tmp") if recursive else folder.glob(".*.tmp")
    for p in paths:
        if not TEMP_RE.match(p.name):
            continue
        try:
            if p.is_file() and p.stat().st_mtime < cutoff:
                p.unlink()
                removed.append(p)
        except FileNotFoundError:
            continue
    return removed
