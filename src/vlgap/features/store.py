"""The feature cache: per-layer features for (encoder, dataset, n_f or n_c, shard), resumable and atomic.

Layout under the cache root (default ~/.cache/vlgap, `VLGAP_CACHE` overrides):

    features/<encoder-slug>/<dataset-fingerprint>/<param>-<value>[.shard-i-of-n]-<key>/
        record.json            how to reproduce: model, weights hash, dtype, sampling, frame indices, versions
        chunks/000000-000032.npz   one completed chunk of items (written atomically, then renamed)
        features.safetensors   all chunks joined: layer_000 ... [N, D_l] (written atomically)
        COMPLETE               sha256 of features.safetensors; written last: only then is the entry valid

A process killed at any moment leaves at worst a stray temporary file (ignored) and some finished
chunks (reused on the next run). A features file without a matching COMPLETE is never read.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from vlgap.errors import VlgapError
from vlgap.io_utils import atomic_write_bytes, atomic_write_json, atomic_write_text, cache_root, sha256_of_file  # noqa: F401

_CHUNK_RE = re.compile(r"^(\d{7})-(\d{7})\.npz$")


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("_")[:60] or "encoder"


def _hash(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:12]


@dataclass(frozen=True)
class FeatureKey:
    """Identity of one cache entry. `encoder` is the spec the user gave (name plus options that change
    the numbers: dtype, pooling, image size); the full model record lives in record.json."""

    encoder: dict[str, Any]
    dataset: str  # manifest fingerprint
    param: str  # "n_f" or "n_c"
    value: int
    shard: tuple[int, int] = (0, 1)

    def entry_dir(self, root: Path) -> Path:
        name = f"{self.param}-{self.value}"
        if self.shard != (0, 1):
            name += f".shard-{self.shard[0]}-of-{self.shard[1]}"
        key = _hash([self.encoder, self.dataset, self.param, self.value, list(self.shard)])
        return root / "features" / _slug(str(self.encoder.get("name", "encoder"))) / self.dataset / f"{name}-{key}"


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


class Entry:
    """One cache entry on disk (see module docstring)."""

    def __init__(self, key: FeatureKey, root: Path):
        self.key = key
        self.dir = key.entry_dir(root)
        self.chunks_dir = self.dir / "chunks"
        self.features_path = self.dir / "features.safetensors"
        self.complete_path = self.dir / "COMPLETE"
        self.record_path = self.dir / "record.json"

    # -- completed state -------------------------------------------------
    def is_complete(self) -> bool:
        if not (self.complete_path.is_file() and self.features_path.is_file()):
            return False
        try:
            expected = json.loads(self.complete_path.read_text())["sha256"]
        except (ValueError, KeyError):
            return False
        return sha256_of_file(self.features_path) == expected

    def load(self) -> FeatureSet:
        if not self.is_complete():
            raise VlgapError(f"cache entry {self.dir} is not complete (run `vlgap extract` again to finish it)")
        from safetensors.numpy import load_file
        from safetensors import safe_open

        arrays = load_file(str(self.features_path))
        with safe_open(str(self.features_path), "np") as f:
            meta = f.metadata() or {}
        ids = json.loads(meta["ids"])
        layers = [arrays[f"layer_{i:03d}"] for i in range(len(arrays))]
        record = json.loads(self.record_path.read_text()) if self.record_path.is_file() else {}
        return FeatureSet(layers, ids, record, self.dir)

    # -- chunks ----------------------------------------------------------
    def done_chunks(self) -> set[tuple[int, int]]:
        if not self.chunks_dir.is_dir():
            return set()
        out = set()
        for p in self.chunks_dir.iterdir():
            m = _CHUNK_RE.match(p.name)
            if m:
                out.add((int(m.group(1)), int(m.group(2))))
        return out

    def chunk_path(self, start: int, end: int) -> Path:
        return self.chunks_dir / f"{start:07d}-{end:07d}.npz"

    def write_chunk(self, start: int, end: int, layers: list[np.ndarray], ids: list[str], bad: list[dict],
                    meta: dict | None = None) -> None:
        """meta: JSON-able facts about these items that the record needs (e.g. their frame indices)."""
        import io

        buf = io.BytesIO()
        arrays = {f"layer_{i:03d}": a for i, a in enumerate(layers)}
        np.savez(buf, ids=np.array(json.dumps(ids)), bad=np.array(json.dumps(bad)),
                 meta=np.array(json.dumps(meta or {})), **arrays)
        atomic_write_bytes(self.chunk_path(start, end), buf.getvalue())

    def read_chunk(self, start: int, end: int) -> tuple[list[np.ndarray], list[str], list[dict]]:
        with np.load(self.chunk_path(start, end)) as z:
            n_layers = sum(1 for k in z.files if k.startswith("layer_"))
            layers = [z[f"layer_{i:03d}"] for i in range(n_layers)]
            return layers, json.loads(str(z["ids"])), json.loads(str(z["bad"]))

    def chunk_meta(self, start: int, end: int) -> dict:
        with np.load(self.chunk_path(start, end)) as z:
            return json.loads(str(z["meta"])) if "meta" in z.files else {}

    def finalize(self, ranges: list[tuple[int, int]], record: dict[str, Any]) -> FeatureSet:
        """Join the chunks covering `ranges` (in order) into features.safetensors, then mark COMPLETE."""
        from safetensors.numpy import save

        done = self.done_chunks()
        missing = [f"{s}-{e}" for s, e in ranges if (s, e) not in done]
        if missing:
            # e.g. Ray workers on other nodes wrote them to their own local disks
            raise VlgapError(
                f"cache entry {self.dir} lacks chunks {missing[:8]} ({len(missing)} of {len(ranges)}; items "
                f"start-end) under {self.chunks_dir}: the workers that computed them wrote elsewhere. Put the "
                "cache on a filesystem every worker shares (--cache-dir / VLGAP_CACHE), then run again")
        parts = [self.read_chunk(s, e) for s, e in ranges]
        ids = [i for p in parts for i in p[1]]
        bad = [b for p in parts for b in p[2]]
        n_layers = max((len(p[0]) for p in parts), default=0)
        layers = []
        for li in range(n_layers):
            blocks = [p[0][li] for p in parts if len(p[1])]
            layers.append(np.ascontiguousarray(np.concatenate(blocks)) if blocks else np.zeros((0, 0), np.float32))
        record = dict(record, n_items=len(ids), bad_items=bad)
        atomic_write_json(self.record_path, record)
        data = save({f"layer_{i:03d}": a for i, a in enumerate(layers)}, metadata={"ids": json.dumps(ids)})
        atomic_write_bytes(self.features_path, data)
        atomic_write_text(self.complete_path, json.dumps({"sha256": hashlib.sha256(data).hexdigest()}) + "\n")
        shutil.rmtree(self.chunks_dir, ignore_errors=True)
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
                           bad_items=[b for s in sets for b in s.record.get("bad_items", [])])
                return FeatureSet(layers, ids, rec, base)
            missing = [f"{i}/{n}" for i, ok in enumerate(done) if not ok]
            raise VlgapError(
                f"features for {key.encoder.get('name')} {key.param}={key.value} are split in {n} shards and "
                f"shards {missing} are not finished; run `vlgap extract ... --shard i/{n}` for each"
            )
    if whole.features_path.exists() or whole.chunks_dir.exists():
        raise VlgapError(
            f"cache entry {whole.dir} is not complete (interrupted, or its checksum does not match); "
            "run `vlgap extract` again to finish or redo it"
        )
    raise VlgapError(
        f"no cached features for {key.encoder.get('name')} {key.param}={key.value} on dataset {key.dataset} "
        f"under {root}; run `vlgap extract` first"
    )
