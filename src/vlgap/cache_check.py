"""`vlgap cache --check / --prune`: verify everything vlgap reuses from its cache, name what is not.

Under the cache root (`--cache-dir`, else $VLGAP_CACHE, else ~/.cache/vlgap):

- feature entries (`features/.../features.safetensors`): the seal is re-derived from the entry's key
  (a seal made under another key or an older store format is *stale*) and the bytes are checked
  against its sha256 and size (*corrupt* otherwise); an entry written before seals is *legacy* when
  its COMPLETE checksum matches (sealed at its next use), else corrupt, and a vision (n_f) one of
  that age is stale (decoded by an earlier video reader, vlgap.data.frame_convert.DECODING);
- feature chunks (`chunks/*.npz`) of unfinished entries: sealed and intact ones are *resumable*;
  others are corrupt or stale (a key that differs from today's in any setting); chunks beside a finished entry, unsealed chunks and features files
  (interrupted writes), and seals without their file are *orphaned*;
- temporary files of killed writes (`.<name>.<12 hex>.tmp`) anywhere under the root: orphaned;
- converted models (`models/gguf-*`): a folder without its finished-conversion marker, and
  temporary conversion folders, are orphaned (the weights carry no checksum of their own);
- any other sealed artefact under the root (vlgap.reuse seals): the seal itself intact (a seal whose
  key_sha256 does not match its key is *corrupt*, "its seal is damaged"), then the checksum;
- run folders given with `runs` (`vlgap cache --run DIR`: a sweep's or an experiment's --out), and any
  under the root: their cells (`cells/*.json`, area *cell*), score matrices (*matrix*) and tables are
  verified the same way; a cell file without its seal is an interrupted write, *orphaned*.

`prune=True` removes what is stale, corrupt or orphaned (only vlgap's own file names, in vlgap's own
folders); ok, legacy and resumable files stay. Run it while no extraction writes to the same cache:
temporaries of a run in progress look like those of a killed one.
"""
from __future__ import annotations

import json
import os
import shutil
from dataclasses import asdict, dataclass, field
from pathlib import Path

from vlgap import reuse
from vlgap.features.store import (CHUNK_RE, FEATURES_FILE, LEGACY_DECODED, LEGACY_MARKER, LOCK_FILE, FeatureKey,
                                  entry_dir_name)
from vlgap.errors import VlgapError
from vlgap.io_utils import cache_root, sha256_of_file

#: statuses that are fine to keep
KEEP = ("ok", "legacy", "resumable")
#: statuses that --prune removes
PROBLEMS = ("stale", "corrupt", "orphaned")
#: files an entry folder may hold besides features, chunks and seals (removed with a bad entry)
ENTRY_FILES = ("record.json", "bad_items.jsonl", LEGACY_MARKER, LOCK_FILE)
MODEL_MARKER = "vlgap_gguf.json"  # vlgap.encoders.gguf_cache.MARKER (not imported: that module pulls torch helpers)


@dataclass
class Finding:
    path: str
    area: str        # features | chunk | model | cell | matrix | artefact | temporary
    status: str      # ok | legacy | resumable | stale | corrupt | orphaned
    reason: str = ""
    size: int = 0
    removed: bool = False


@dataclass
class CacheCheck:
    """What `check_cache` found; `problems` are stale, corrupt or orphaned, `remaining` those still on disk."""

    root: str
    findings: list[Finding] = field(default_factory=list)
    pruned: bool = False
    #: run folders (--run) in which nothing was found to verify (a run that computed nothing yet)
    empty_runs: list[str] = field(default_factory=list)

    @property
    def problems(self) -> list[Finding]:
        return [f for f in self.findings if f.status in PROBLEMS]

    @property
    def remaining(self) -> list[Finding]:
        return [f for f in self.problems if not f.removed]

    @property
    def ok(self) -> bool:
        return not self.remaining

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for f in self.findings:
            out[f.status] = out.get(f.status, 0) + 1
        return out

    def to_dict(self) -> dict:
        return {"root": self.root, "pruned": self.pruned, "counts": self.counts(),
                "problems": len(self.problems), "remaining": len(self.remaining),
                "bytes_removed": sum(f.size for f in self.findings if f.removed),
                "findings": [asdict(f) for f in self.findings]}

    def summary(self) -> str:
        counts = self.counts()
        head = f"cache {self.root}: " + (", ".join(f"{n} {s}" for s, n in sorted(counts.items())) or "empty")
        lines = [head]
        for f in self.problems:
            verb = "removed" if f.removed else f.status
            lines.append(f"  {verb}: {f.area} {f.path}" + (f" ({f.reason})" if f.reason else "")
                         + (f" [{f.status}]" if f.removed else ""))
        lines += [f"  run folder {r}: nothing to verify yet (no cells, matrices or tables)" for r in self.empty_runs]
        if self.remaining and self.pruned:
            lines.append(f"{len(self.remaining)} stale, corrupt or orphaned could not be removed (why: above)")
        elif self.remaining:
            lines.append(f"{len(self.remaining)} stale, corrupt or orphaned; `vlgap cache --prune` removes them "
                         "(each is recomputed when next needed)")
        elif self.pruned and self.problems:
            lines.append(f"removed {len(self.problems)} ({sum(f.size for f in self.problems if f.removed)} bytes)")
        elif not self.findings:
            lines.append("nothing to verify: no features, converted models, cells or sealed files")
        else:
            lines.append("everything verified")
        return "\n".join(lines)


def _size(p: Path) -> int:
    try:
        if p.is_dir():
            return sum(q.stat().st_size for q in p.rglob("*") if q.is_file())
        return p.stat().st_size
    except OSError:
        return 0


def _remove(p: Path, finding: Finding | None = None) -> bool:
    """Remove file or folder `p` (gone already: fine); one that cannot be removed (permission, a read-only
    or immutable file system) stays, and `finding` says why."""
    try:
        if p.is_dir() and not p.is_symlink():
            shutil.rmtree(p)
        else:
            p.unlink()
        return True
    except FileNotFoundError:
        return True
    except OSError as err:
        if finding is not None:
            from vlgap.errors import os_reason

            where = "" if err.filename in (None, str(p)) else f" ({err.filename})"
            finding.reason = "; ".join(x for x in (finding.reason, f"could not remove it: {os_reason(err)}{where}") if x)
        return False


def _discard(p: Path, finding: Finding) -> bool:
    """A file and its seal removed (`reuse.discard`, each through `_remove`): True when both are gone."""
    return all([_remove(p, finding), _remove(reuse.seal_path(p), finding)])


def _expected_key(seal: dict, entry_dir: Path) -> tuple[dict | None, str]:
    """The key today's code gives the entry this seal sits in, or (None, why the seal is stale)."""
    key = seal.get("key")
    try:
        fk = FeatureKey(key["encoder"], key["dataset"], key["param"], int(key["value"]), tuple(key["shard"]))
    except (TypeError, KeyError, ValueError):
        return None, "sealed under a key of another kind"
    if entry_dir_name(fk.encoder, fk.dataset, fk.param, fk.value, fk.shard) != entry_dir.name:
        return None, "sealed under the key of another entry"
    return fk.seal_key(), ""


def _check_entry(d: Path, out: list[Finding]) -> None:
    features = d / FEATURES_FILE
    finished = False
    seal = reuse.read_seal(features)
    if features.is_file():
        if seal is None and reuse.seal_path(features).exists():
            out.append(Finding(str(features), "features", "corrupt", "its seal is unreadable", _size(features)))
        elif seal is None and (d / LEGACY_MARKER).is_file():
            try:
                expected = json.loads((d / LEGACY_MARKER).read_text())["sha256"]
            except (ValueError, KeyError, TypeError, UnicodeDecodeError):
                expected = None
            if d.name.startswith("n_f-"):  # a vision entry of that age: decoded by an earlier reader
                out.append(Finding(str(features), "features", "stale", LEGACY_DECODED, _size(features)))
            elif expected is not None and sha256_of_file(features) == expected:
                out.append(Finding(str(features), "features", "legacy",
                                   "written before seals; COMPLETE checksum matches (sealed at its next use)",
                                   _size(features)))
                finished = True
            else:
                out.append(Finding(str(features), "features", "corrupt",
                                   f"checksum mismatch with its {LEGACY_MARKER} marker", _size(features)))
        elif seal is None:
            out.append(Finding(str(features), "features", "orphaned",
                               "no seal: an interrupted write (recomputed from the chunks)", _size(features)))
        elif reuse.seal_damage(seal):
            out.append(Finding(str(features), "features", "corrupt", reuse.seal_damage(seal), _size(features)))
        else:
            key, why = _expected_key(seal, d)
            if key is None:
                out.append(Finding(str(features), "features", "stale", why, _size(features)))
            else:
                v = reuse.check_artefact(features, key)
                status = {"ok": "ok", "stale": "stale"}.get(v.status, "corrupt")
                out.append(Finding(str(features), "features", status, "" if v.ok else v.reason, _size(features)))
                finished = v.ok
    elif reuse.seal_path(features).exists():
        out.append(Finding(str(reuse.seal_path(features)), "features", "orphaned", "a seal without its file", 0))
    chunks = d / "chunks"
    if chunks.is_dir():
        for p in sorted(chunks.iterdir()):
            if CHUNK_RE.match(p.name):
                if finished:
                    out.append(Finding(str(p), "chunk", "orphaned", "left beside a finished entry", _size(p)))
                    continue
                cseal = reuse.read_seal(p)
                if cseal is None:
                    status = "corrupt" if reuse.seal_path(p).exists() else "orphaned"
                    out.append(Finding(str(p), "chunk", status, "its seal is unreadable" if status == "corrupt" else
                                       "no seal: an interrupted write or an older vlgap", _size(p)))
                    continue
                if reuse.seal_damage(cseal):
                    out.append(Finding(str(p), "chunk", "corrupt", reuse.seal_damage(cseal), _size(p)))
                    continue
                key, why = _expected_key(cseal, d)
                if key is not None:  # the chunk's key as today's code makes it (its own item range)
                    key = dict(key, artefact="features-chunk", items=cseal.get("key", {}).get("items"))
                    diffs = reuse.key_differences(cseal.get("key", {}), key)
                    why = "made with other settings: " + "; ".join(diffs[:6]) if diffs else ""
                if key is None or why:
                    out.append(Finding(str(p), "chunk", "stale", why, _size(p)))
                    continue
                v = reuse.check_artefact(p, None)
                out.append(Finding(str(p), "chunk", "resumable" if v.ok else "corrupt", "" if v.ok else v.reason,
                                   _size(p)))
            elif p.name.endswith(".npz.seal.json") and CHUNK_RE.match(p.name[1:-len(".seal.json")]):
                if not (chunks / p.name[1:-len(".seal.json")]).exists():
                    out.append(Finding(str(p), "chunk", "orphaned", "a seal without its chunk", _size(p)))


def _check_models(models: Path, out: list[Finding]) -> None:
    if not models.is_dir():
        return
    for p in sorted(models.iterdir()):
        if p.is_dir() and p.name.startswith("gguf-"):
            try:
                meta = json.loads((p / MODEL_MARKER).read_text())
                good = str(meta.get("gguf_sha256", "")).startswith(p.name[len("gguf-"):])
            except (OSError, ValueError):
                good = False
            out.append(Finding(str(p), "model", "ok" if good else "orphaned",
                               "" if good else "an unfinished conversion (no finished-conversion marker)", _size(p)))
        elif p.is_dir() and p.name.startswith(".") and p.name.endswith(".tmp"):
            out.append(Finding(str(p), "model", "orphaned", "a temporary conversion folder of a killed run", _size(p)))


def _artefact_area(target: Path) -> str:
    """What a sealed file is, for people: a cell of an experiment, a sweep's score matrix, or an artefact."""
    return {"cells": "cell", "matrices": "matrix"}.get(target.parent.name, "artefact")


def _check_run_cells(root: Path, out: list[Finding]) -> None:
    """Cell files of the run folders under `root` (a folder with a run record) that carry no seal: an
    interrupted write (sealed ones are checked with every other seal)."""
    for record in sorted(root.rglob(reuse.RUN_RECORD)):
        cells = record.parent / "cells"
        if not cells.is_dir():
            continue
        for p in sorted(cells.glob("*.json")):
            if (p.is_file() and not p.name.startswith(".") and not reuse.seal_path(p).exists()
                    and str(p) not in {f.path for f in out}):
                out.append(Finding(str(p), "cell", "orphaned", "no seal: an interrupted write (recomputed when "
                                   "the run resumes)", _size(p)))


def _check_sealed(root: Path, feats: Path, res: CacheCheck) -> None:
    """Every other sealed file under `root` (sweep cells and matrices, tables, WSV and CAPE artefacts):
    its seal intact (a damaged one is named so) and its bytes the ones sealed."""
    seen = {f.path for f in res.findings}
    for sp in sorted(root.rglob(".*.seal.json")):
        target = sp.with_name(sp.name[1:-len(".seal.json")])
        if str(sp) in seen or str(target) in seen or feats in sp.parents:
            continue
        area = _artefact_area(target)
        if not target.exists():
            res.findings.append(Finding(str(sp), area, "orphaned", "a seal without its file", _size(sp)))
            continue
        v = reuse.check_artefact(target, None)
        res.findings.append(Finding(str(target), area, "ok" if v.ok else "corrupt", "" if v.ok else v.reason,
                                    _size(target)))
        seen.add(str(target))


def check_cache(cache_dir: str | os.PathLike | None = None, prune: bool = False,
                runs: list[str | os.PathLike] | tuple = ()) -> CacheCheck:
    """Verify every entry of the cache (see module docstring); `prune` removes what is stale, corrupt
    or orphaned. `runs`: run folders (a sweep's, an experiment's --out) whose sealed cells, matrices and
    tables are verified too. Returns a CacheCheck (`.to_dict()`, `.summary()`, `.remaining`)."""
    from vlgap.paths import input_folder

    root = cache_root(cache_dir)
    if cache_dir is not None:  # a folder named by the caller must exist: "everything verified" would be a lie
        input_folder(root, "--cache-dir")
    run_dirs = [input_folder(Path(r), "--run") for r in runs]
    res = CacheCheck(str(root), pruned=prune)
    for run in run_dirs:
        before = len(res.findings)
        _check_run_cells(run, res.findings)
        _check_sealed(run, run / "features", res)
        if len(res.findings) == before:
            if not (run / reuse.RUN_RECORD).is_file():
                raise VlgapError(f"--run {run}: holds no vlgap run (no {reuse.RUN_RECORD}, no sealed file), so there "
                                 "is nothing to verify; give a sweep's or an experiment's --out folder")
            res.empty_runs.append(str(run))
    if not root.is_dir():
        if prune:
            _prune(res)
        return res
    feats = root / "features"
    if feats.is_dir():
        for d in sorted(p for p in feats.glob("*/*/*") if p.is_dir()):
            _check_entry(d, res.findings)
    _check_models(root / "models", res.findings)
    for p in sorted(root.rglob(".*.tmp")):  # temporary files of killed writes, anywhere
        if p.is_file() and reuse.TEMP_RE.match(p.name):
            res.findings.append(Finding(str(p), "temporary", "orphaned", "left by a killed write", _size(p)))
    _check_run_cells(root, res.findings)
    _check_sealed(root, feats, res)  # other sealed artefacts (sweep cells, caches, ...)
    if prune:
        _prune(res)
    return res


def _prune(res: CacheCheck) -> None:
    """Remove every problem; one that cannot be removed stays in `remaining`, its finding saying why."""
    entries_touched: set[Path] = set()
    for f in res.problems:
        p = Path(f.path)
        if f.area in ("features", "chunk"):
            f.removed = _remove(p, f) if p.name.endswith(".seal.json") else _discard(p, f)
            entry = p.parent.parent if f.area == "chunk" else p.parent
            entries_touched.add(entry)
            if f.area == "features" and f.status in ("stale", "corrupt"):
                for name in ENTRY_FILES:  # the bad entry's record goes with it
                    _remove(entry / name, f)
        elif f.area in ("temporary", "model") or p.name.endswith(".seal.json"):
            f.removed = _remove(p, f)  # (artefacts, cells, matrices: a seal without its file)
        else:
            f.removed = _discard(p, f)
    for entry in entries_touched:  # folders left with nothing but vlgap's own records
        chunks = entry / "chunks"
        try:
            chunks.rmdir()
        except OSError:
            pass
        if entry.is_dir() and not (entry / FEATURES_FILE).exists() and not chunks.exists():
            for name in ENTRY_FILES:
                _remove(entry / name)
            try:
                entry.rmdir()
            except OSError:
                pass
