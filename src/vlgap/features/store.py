"""The feature cache: per-layer features for (encoder, dataset, n_f or n_c, shard), resumable and verified.

Layout under the cache root (default ~/.cache/vlgap, `VLGAP_CACHE` overrides):

    features/<encoder-slug>/<dataset-fingerprint>/<param>-<value>[.shard-i-of-n]-<key>/
        record.json                      how to reproduce (a copy for people; the sealed one is inside
                                         features.safetensors): model, weights hash, dtype, sampling,
                                         frame indices, bad and repeated-frame items, versions
        chunks/0000000-0000032.npz       one finished chunk of items, while a run is in progress
        chunks/.0000000-0000032.npz.seal.json   its seal (key, sha256, size), written after it
        features.safetensors             all chunks joined: layer_000 ... [N, D_l], ids and record in
                                         its metadata
        .features.safetensors.seal.json  the entry's seal, written last: only then is the entry valid

Every file a later run reuses follows the reuse rule of `vlgap.reuse`: it is written with
`write_artefact` under a key of everything that determines it (`Entry.key`: the encoder spec with
every option that changes the numbers, the dataset's content fingerprint, n_f or n_c, the shard,
the store's format version; a chunk adds its item range), and `check_artefact` decides before every
reuse. A different key is recomputed; bytes that no longer match their checksum are reported in one
line and recomputed. A process killed at any moment leaves at worst temporary files and unsealed
chunks, removed by the next run (`Entry.remove_leftovers`); finished chunks are reused.

Entries written before seals (a `COMPLETE` file holding the features' sha256) are adopted when that
checksum matches: sealed with today's key at their first use; otherwise recomputed. Vision entries
(n_f) of that age are never adopted: their frames were decoded before `decoding` joined the key
(vlgap.data.frame_convert.DECODING), so they are stale.

What an entry holds does not depend on --skip-bad or --allow-repeated-frames: undecodable items are
left out and listed (`bad_items`), videos with fewer frames than n_f are kept and listed
(`repeated_frames`); `vlgap.features.extract.apply_item_policy` applies the flags on every use.
"""
from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np

from vlgap import reuse
from vlgap.data.frame_convert import DECODING
from vlgap.errors import VlgapError
from vlgap.io_utils import atomic_write_json, cache_root, make_folder, sha256_of_file  # noqa: F401

#: bump when the extraction code changes the numbers or the files' layout: every entry is then stale
FEATURE_FORMAT = 1
CHUNK_RE = re.compile(r"^(\d{7})-(\d{7})\.npz$")
LEGACY_MARKER = "COMPLETE"
FEATURES_FILE = "features.safetensors"
LOCK_FILE = ".lock"  # held (flock) by the process computing the entry
#: why a vision entry written before seals is not adopted: its frames were decoded by an earlier reader
LEGACY_DECODED = f"written before seals, from frames decoded by an earlier video reader (decoding < {DECODING})"


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("_")[:60] or "encoder"


def _hash(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:12]


def entry_dir_name(encoder: dict, dataset: str, param: str, value: int, shard: tuple[int, int] | list[int]) -> str:
    name = f"{param}-{value}"
    if tuple(shard) != (0, 1):
        name += f".shard-{shard[0]}-of-{shard[1]}"
    return f"{name}-{_hash([encoder, dataset, param, value, list(shard)])}"


@dataclass(frozen=True)
class FeatureKey:
    """Identity of one cache entry. `encoder` is the spec the user gave (name plus options that change
    the numbers: dtype, pooling, image size, frame order, temporal pooling); the full model record
    lives in the entry's record."""

    encoder: dict[str, Any]
    dataset: str  # manifest fingerprint (ids, captions and media bytes)
    param: str  # "n_f" or "n_c"
    value: int
    shard: tuple[int, int] = (0, 1)

    def entry_dir(self, root: Path) -> Path:
        name = entry_dir_name(self.encoder, self.dataset, self.param, self.value, self.shard)
        return root / "features" / _slug(str(self.encoder.get("name", "encoder"))) / self.dataset / name

    def seal_key(self) -> dict[str, Any]:
        """The reuse key of the entry's features file (see vlgap.reuse). Vision entries (n_f) add how
        the media were decoded (`vlgap.data.frame_convert.DECODING`): features of frames decoded by an
        earlier reader (phone videos sideways, other colours at odd sizes) are recomputed, not reused;
        the folder stays the same, so the entry is recomputed in place."""
        key = {"artefact": "features", "format": FEATURE_FORMAT, "encoder": self.encoder, "dataset": self.dataset,
               "param": self.param, "value": self.value, "shard": list(self.shard)}
        if self.param == "n_f":
            key["decoding"] = DECODING
        return key


@dataclass
class FeatureSet:
    """Per-layer features for N items: `layers[l]` is [N, D_l] float32; `ids[i]` names row i."""

    layers: list[np.ndarray]
    ids: list[str]
    record: dict[str, Any]
    path: Path | None = None

    @property
    def n(self) -> int:
        return len(self.ids)

    def subset(self, ids: list[str]) -> "FeatureSet":
        pos = {x: i for i, x in enumerate(self.ids)}
        missing = [x for x in ids if x not in pos]
        if missing:
            raise VlgapError(f"features at {self.path} lack items {missing[:5]} ({len(missing)} in all)")
        rows = np.array([pos[x] for x in ids], dtype=np.int64)
        return FeatureSet([layer[rows] for layer in self.layers], list(ids), self.record, self.path)


@dataclass
class Chunk:
    """A finished chunk read back from disk (checksum verified)."""

    layers: list[np.ndarray]
    ids: list[str]
    bad: list[dict]
    meta: dict


def _parse_chunk(data: bytes) -> Chunk:
    with np.load(io.BytesIO(data), allow_pickle=False) as z:
        n_layers = sum(1 for k in z.files if k.startswith("layer_"))
        return Chunk([z[f"layer_{i:03d}"] for i in range(n_layers)], json.loads(str(z["ids"])),
                     json.loads(str(z["bad"])), json.loads(str(z["meta"])) if "meta" in z.files else {})


def safetensors_metadata(data: bytes) -> dict[str, str]:
    """The `__metadata__` of a safetensors file held in memory (8-byte little-endian header length,
    then the JSON header)."""
    n = int.from_bytes(data[:8], "little")
    header = json.loads(data[8:8 + n])
    return header.get("__metadata__") or {}


def _say(line: str) -> None:
    reuse._stderr(line)


class Entry:
    """One cache entry on disk (see module docstring)."""

    def __init__(self, key: FeatureKey, root: Path):
        self.key = key
        self.dir = key.entry_dir(root)
        self.chunks_dir = self.dir / "chunks"
        self.features_path = self.dir / FEATURES_FILE
        self.record_path = self.dir / "record.json"
        self.legacy_marker = self.dir / LEGACY_MARKER

    # -- keys ------------------------------------------------------------
    def seal_key(self) -> dict[str, Any]:
        return self.key.seal_key()

    def chunk_key(self, start: int, end: int) -> dict[str, Any]:
        return dict(self.key.seal_key(), artefact="features-chunk", items=[start, end])

    # -- the finished entry ----------------------------------------------
    def verdict(self, *, verify_bytes: bool = True, adopt_legacy: bool = True) -> reuse.Verdict:
        """Whether the features file may be reused (vlgap.reuse.check_artefact), adopting an entry
        written before seals whose COMPLETE checksum matches."""
        v = reuse.check_artefact(self.features_path, self.seal_key(), verify_bytes=verify_bytes)
        if v.status == "unsealed" and self.legacy_marker.is_file() and "decoding" in self.seal_key():
            return reuse.Verdict("stale", self.features_path, LEGACY_DECODED)
        if v.status == "unsealed" and self.legacy_marker.is_file():
            try:
                expected = json.loads(self.legacy_marker.read_text())["sha256"]
            except (ValueError, KeyError, TypeError, UnicodeDecodeError):
                return reuse.Verdict("corrupt", self.features_path, f"its {LEGACY_MARKER} marker is unreadable")
            digest = sha256_of_file(self.features_path)
            if digest != expected:
                return reuse.Verdict("corrupt", self.features_path,
                                     f"checksum mismatch with its {LEGACY_MARKER} marker (written before seals)")
            if not adopt_legacy:
                return reuse.Verdict("ok", self.features_path, f"written before seals; its {LEGACY_MARKER} checksum "
                                     "matches (sealed at its next use)")
            reuse.seal_file(self.features_path, self.seal_key(), sha256=digest)
            self.legacy_marker.unlink(missing_ok=True)
            return reuse.Verdict("ok", self.features_path)
        return v

    def is_complete(self) -> bool:
        return self.verdict().ok

    def reuse(self, report: Callable[[str], None] | None = None) -> FeatureSet | None:
        """The finished entry, verified, or None (the caller computes it). A stale, corrupt or
        unsealed features file is reported in one line and removed; leftovers of a killed run beside
        a finished entry (temporaries, chunks) are removed."""
        say = report or _say
        v = self.verdict(verify_bytes=False)
        if v.status == "missing":
            return None
        fs = None
        if v.ok:
            try:
                fs = self._load_verified()
            except VlgapError as err:
                v = reuse.Verdict("corrupt", self.features_path, str(err).split(": ", 1)[-1])
        if fs is None:
            say(f"cached features {v.message()}; recomputing")
            self.discard()
            return None
        self.remove_chunks()
        return fs

    def discard(self) -> None:
        """Remove the features file, its seal and markers (chunks are kept: they carry their own seals)."""
        reuse.discard(self.features_path)
        self.legacy_marker.unlink(missing_ok=True)

    def load(self) -> FeatureSet:
        """The finished entry; a VlgapError naming the reason when it is not finished or not intact."""
        v = self.verdict(verify_bytes=False)
        if not v.ok:
            why = v.status + (f": {v.reason}" if v.reason else "")
            raise VlgapError(f"cache entry {self.dir} is not complete ({why}); run `vlgap extract` again to finish "
                             "or redo it")
        try:
            return self._load_verified()
        except VlgapError as err:
            raise VlgapError(f"cache entry {self.dir} is not complete (corrupt: {err}); "
                             "run `vlgap extract` again to redo it") from None

    def _load_verified(self) -> FeatureSet:
        from safetensors.numpy import load as st_load

        data = self.features_path.read_bytes()  # the bytes we check are the bytes we parse
        seal = reuse.read_seal(self.features_path) or {}
        if hashlib.sha256(data).hexdigest() != seal.get("sha256"):
            raise VlgapError(f"{self.features_path}: checksum mismatch: the bytes changed after they were written")
        try:
            arrays = st_load(data)
            meta = safetensors_metadata(data)
            ids = json.loads(meta["ids"])
        except Exception as err:  # sealed but unparsable: written by a broken writer
            raise VlgapError(f"{self.features_path}: unreadable ({type(err).__name__}: {err})") from None
        layers = [arrays[f"layer_{i:03d}"] for i in range(len(arrays))]
        if "record" in meta:
            record = json.loads(meta["record"])
        else:  # adopted entries written before seals keep their record beside
            record = json.loads(self.record_path.read_text()) if self.record_path.is_file() else {}
        return FeatureSet(layers, ids, record, self.dir)

    # -- chunks ----------------------------------------------------------
    def chunk_path(self, start: int, end: int) -> Path:
        return self.chunks_dir / f"{start:07d}-{end:07d}.npz"

    def verified_chunks(self, ranges: list[tuple[int, int]],
                        report: Callable[[str], None] | None = None) -> dict[tuple[int, int], Chunk]:
        """The finished chunks among `ranges` whose seal holds for this entry's key and whose bytes
        match it, read back. Any other chunk file (stale, corrupt, unsealed) is reported in one line
        and removed, so it is recomputed."""
        out: dict[tuple[int, int], Chunk] = {}
        if not self.chunks_dir.is_dir():
            return out
        for r in ranges:
            path = self.chunk_path(*r)
            data = reuse.read_verified(path, self.chunk_key(*r), what="feature chunk", report=report or _say)
            if data is None:
                continue
            try:
                out[r] = _parse_chunk(data)
            except Exception as err:  # sealed but unparsable: never trusted, never a traceback
                (report or _say)(f"feature chunk {path}: unreadable ({type(err).__name__}); recomputing")
                reuse.discard(path)
        return out

    def has_chunk(self, start: int, end: int) -> bool:
        """Whether this chunk is on disk sealed under this entry's key (bytes not re-read)."""
        return reuse.check_artefact(self.chunk_path(start, end), self.chunk_key(start, end), verify_bytes=False).ok

    def write_chunk(self, start: int, end: int, layers: list[np.ndarray], ids: list[str], bad: list[dict],
                    meta: dict | None = None) -> None:
        """Write one finished chunk and its seal (vlgap.reuse.write_artefact). meta: JSON-able facts
        about these items that the record needs (their frame indices, repeated-frame items)."""
        buf = io.BytesIO()
        arrays = {f"layer_{i:03d}": a for i, a in enumerate(layers)}
        np.savez(buf, ids=np.array(json.dumps(ids)), bad=np.array(json.dumps(bad)),
                 meta=np.array(json.dumps(meta or {})), **arrays)
        reuse.write_artefact(self.chunk_path(start, end), buf.getvalue(), self.chunk_key(start, end))

    def remove_chunks(self) -> list[Path]:
        """Remove this entry's chunk files, their seals and temporaries (vlgap's own names only), and
        the chunks folder when that leaves it empty."""
        removed: list[Path] = []
        if not self.chunks_dir.is_dir():
            return removed
        for p in self.chunks_dir.iterdir():
            name = p.name
            ours = (CHUNK_RE.match(name) or reuse.TEMP_RE.match(name)
                    or (name.startswith(".") and name.endswith(".npz.seal.json") and CHUNK_RE.match(name[1:-10])))
            if ours and p.is_file():
                p.unlink(missing_ok=True)
                removed.append(p)
        try:
            self.chunks_dir.rmdir()
        except OSError:
            pass  # something of the user's own: left alone
        return removed

    @contextlib.contextmanager
    def exclusive(self, report: Callable[[str], None] | None = None):
        """Hold this entry alone while computing it: a second process extracting the same entry waits
        (said in one line), then finds it finished, instead of both writing chunks and one of them
        removing the chunks the other still needs. An advisory lock (flock) on `.lock` in the entry's
        folder, released by the kernel if the process dies; Ray actors write chunks under the driver's lock."""
        import fcntl

        make_folder(self.dir)
        with open(self.dir / LOCK_FILE, "a") as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                (report or _say)(f"waiting for another vlgap process that is extracting {self.dir} ...")
                fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield self
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def remove_leftovers(self) -> list[Path]:
        """At a run's start: temporary files of killed runs (older than this process) in the entry."""
        return reuse.remove_stale_temporaries(self.dir)

    # -- joining ---------------------------------------------------------
    def finalize(self, ranges: list[tuple[int, int]], record: dict[str, Any],
                 chunks: dict[tuple[int, int], Chunk] | None = None) -> FeatureSet:
        """Join the chunks covering `ranges` (in order) into features.safetensors (ids and record in its
        metadata), sealed with the entry's key; then remove the chunks. `chunks`: those already read."""
        from safetensors.numpy import save

        chunks = dict(chunks or {})
        need = [r for r in ranges if r not in chunks]
        chunks.update(self.verified_chunks(need))
        missing = [f"{s}-{e}" for s, e in ranges if (s, e) not in chunks]
        if missing:
            # e.g. Ray workers on other nodes wrote them to their own local disks
            raise VlgapError(
                f"cache entry {self.dir} lacks chunks {missing[:8]} ({len(missing)} of {len(ranges)}; items "
                f"start-end) under {self.chunks_dir}: the workers that computed them wrote elsewhere. Put the "
                "cache on a filesystem every worker shares (--cache-dir / VLGAP_CACHE), then run again")
        parts = [chunks[r] for r in ranges]
        ids = [i for p in parts for i in p.ids]
        bad = [b for p in parts for b in p.bad]
        repeated = [x for p in parts for x in p.meta.get("repeated_frames", [])]
        n_layers = max((len(p.layers) for p in parts), default=0)
        layers = []
        for li in range(n_layers):
            blocks = [p.layers[li] for p in parts if len(p.ids)]
            layers.append(np.ascontiguousarray(np.concatenate(blocks)) if blocks else np.zeros((0, 0), np.float32))
        record = dict(record, n_items=len(ids), bad_items=bad, repeated_frames=repeated)
        atomic_write_json(self.record_path, record)
        data = save({f"layer_{i:03d}": a for i, a in enumerate(layers)},
                    metadata={"ids": json.dumps(ids), "record": json.dumps(record, default=str)})
        reuse.write_artefact(self.features_path, data, self.seal_key())
        self.legacy_marker.unlink(missing_ok=True)
        self.remove_chunks()
        return FeatureSet(layers, ids, record, self.dir)


def load_entry(key: FeatureKey, cache_dir: str | os.PathLike | None = None) -> FeatureSet:
    """Load a finished entry; an unsharded key also assembles finished shards i/n transparently and
    refuses an incomplete set with the list of missing shards."""
    root = cache_root(cache_dir)
    whole = Entry(key, root)
    if whole.is_complete():
        return whole.load()
    if key.shard == (0, 1):
        base = whole.dir.parent
        counts = sorted({int(m.group(1)) for p in base.glob(f"{key.param}-{key.value}.shard-*-of-*")
                         if (m := re.search(r"-of-(\d+)-", p.name))}) if base.is_dir() else []
        for n in counts:
            entries = [Entry(FeatureKey(key.encoder, key.dataset, key.param, key.value, (i, n)), root) for i in range(n)]
            done = [e.is_complete() for e in entries]
            if all(done):
                sets = [e.load() for e in entries]
                layers = [np.concatenate([s.layers[li] for s in sets]) for li in range(len(sets[0].layers))]
                ids = [x for s in sets for x in s.ids]
                rec = dict(sets[0].record, shard=None, assembled_from_shards=n,
                           bad_items=[b for s in sets for b in s.record.get("bad_items", [])],
                           repeated_frames=[b for s in sets for b in s.record.get("repeated_frames", [])])
                return FeatureSet(layers, ids, rec, base)
            missing = [f"{i}/{n}" for i, ok in enumerate(done) if not ok]
            raise VlgapError(
                f"features for {key.encoder.get('name')} {key.param}={key.value} are split in {n} shards and "
                f"shards {missing} are not finished; run `vlgap extract ... --shard i/{n}` for each"
            )
    if whole.features_path.exists() or whole.chunks_dir.exists():
        whole.load()  # raises, naming why (interrupted, stale or corrupt)
    raise VlgapError(
        f"no cached features for {key.encoder.get('name')} {key.param}={key.value} on dataset {key.dataset} "
        f"under {root}; run `vlgap extract` first"
    )
