"""Extraction: dataset items -> per-layer features in the cache, for several n_f (or n_c) at once.

Vision: decode (background threads) -> sample n_f frames -> encoder.preprocess -> every layer.
Image encoders ("image on video") encode each distinct sampled frame once and pool the per-frame
vectors for each n_f (the mean by default; `temporal_pooling` modes keep time, see
features/temporal_pooling), so a sweep over n_f costs the union of frames, not the sum. Video encoders
run clips of n0 frames (n_f / n0 sub-clips, averaged).
Text: the first n_c captions joined into one string -> every layer, mask-aware pooling.

Work is done in chunks of items; each finished chunk is written atomically, so a killed run resumes
from the last finished chunk and produces exactly the same features as an uninterrupted one.
"""
from __future__ import annotations

import hashlib
import json
import platform
import sys
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

import numpy as np

from vlgap.data.manifest import Item, Manifest, read_manifest
from vlgap.data.sampling import check_n_f, frame_indices, join_captions, subclips
from vlgap.data.video import count_frames, read_frames
from vlgap.errors import BadItemError, VlgapError
from vlgap.features.store import Entry, FeatureKey, FeatureSet, cache_root, load_entry
from vlgap.features.temporal_pooling import describe as describe_pooling
from vlgap.features.temporal_pooling import parse_mode as parse_temporal_pooling
from vlgap.features.temporal_pooling import pool_frames
from vlgap.io_utils import atomic_write_text
from vlgap.progress import progress_bar, stderr_console, step

#: frames held in memory per chunk (vision) and texts per chunk: also the resume granularity
CHUNK_FRAMES = 256
CHUNK_TEXTS = 64


@dataclass
class ExtractResult:
    features: dict[int, FeatureSet]  # value of n_f or n_c -> features
    param: str
    n_requested: int
    bad_items: list[dict] = field(default_factory=list)
    computed: list[int] = field(default_factory=list)  # values computed in this run (others came from cache)
    seconds: float = 0.0

    @property
    def n(self) -> int:
        return min((fs.n for fs in self.features.values()), default=0)

    def summary(self) -> str:
        lines = []
        for v, fs in sorted(self.features.items()):
            widths = sorted({layer.shape[1] for layer in fs.layers})
            src = "computed" if v in self.computed else "cached"
            lines.append(f"{self.param}={v}: N={fs.n} items x {len(fs.layers)} layers (widths {widths}) [{src}] {fs.path}")
        if self.bad_items:
            lines.append(f"skipped {len(self.bad_items)} bad items: " + "; ".join(f"{b['id']}: {b['reason']}" for b in self.bad_items[:5]))
        return "\n".join(lines)


def parse_shard(text: str | tuple[int, int] | None) -> tuple[int, int]:
    if text is None:
        return (0, 1)
    if isinstance(text, tuple):
        i, n = text
    else:
        try:
            i, n = (int(x) for x in str(text).split("/"))
        except ValueError:
            raise VlgapError(f"--shard must look like i/n (e.g. 0/4), got {text!r}") from None
    if n < 1 or not 0 <= i < n:
        raise VlgapError(f"--shard {i}/{n}: need n >= 1 and 0 <= i < n")
    return (i, n)


FRAME_ORDERS = ("ordered", "reversed", "shuffled")


def encoder_key(name: str, dtype: str = "float32", pooling: str | None = None, image_size: int | None = None,
                frame_order: str = "ordered", temporal_pooling: str | None = None) -> dict:
    """The part of an encoder spec that changes the numbers (device does not, within float tolerance).
    Options at their defaults are left out, so adding an option never invalidates existing caches."""
    key: dict[str, Any] = {"name": name, "dtype": dtype}
    if frame_order != "ordered":
        key["frame_order"] = frame_order
    temporal_pooling = parse_temporal_pooling(temporal_pooling)
    if temporal_pooling != "mean":
        key["temporal_pooling"] = temporal_pooling
    if pooling:
        key["pooling"] = pooling
    if image_size:
        key["image_size"] = image_size
    return key


def shard_slice(n_items: int, shard: tuple[int, int]) -> slice:
    i, n = shard
    return slice(i * n_items // n, (i + 1) * n_items // n)


def _versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for mod in ("vlgap", "numpy", "torch", "torchvision", "timm", "transformers", "av"):
        try:
            out[mod] = __import__(mod).__version__
        except Exception:
            pass
    return out


def extract(
    manifest: str | Path | Manifest,
    encoder: str,
    *,
    n_frames: Iterable[int] | None = None,
    n_captions: Iterable[int] | None = None,
    cache_dir: str | Path | None = None,
    device: str = "cpu",
    dtype: str = "float32",
    pooling: str | None = None,
    image_size: int | None = None,
    shard: str | tuple[int, int] | None = None,
    frame_order: str = "ordered",
    temporal_pooling: str | None = None,
    skip_bad: bool = False,
    batch_size: int = 32,
    workers: int = 2,
    threads: int | None = None,
    progress: bool = True,
    loaded_encoder=None,
) -> ExtractResult:
    """Extract (or load from the cache) features of `encoder` for every n_f in `n_frames` (vision) or
    every n_c in `n_captions` (text). Returns an ExtractResult keyed by the value.

    frame_order: "ordered" (the paper), or a control: "reversed" or "shuffled" (a fixed random order per
    item, seeded by its id) applied to the sampled frames before sub-clips are formed.
    temporal_pooling: how an image encoder's per-frame embeddings become one vector
    (`vlgap.features.temporal_pooling`): "mean" (default), "segments:S" or "meandiff". Video and text
    encoders take "mean" only (a video encoder's sub-clips are always averaged)."""
    t0 = time.perf_counter()
    temporal_pooling = parse_temporal_pooling(temporal_pooling)
    man = manifest if isinstance(manifest, Manifest) else read_manifest(manifest)
    if (n_frames is None) == (n_captions is None):
        raise VlgapError("give either n_frames (vision encoder) or n_captions (text encoder)")
    param = "n_f" if n_frames is not None else "n_c"
    values = sorted({int(v) for v in (n_frames if n_frames is not None else n_captions)})
    if not values or values[0] < 1:
        raise VlgapError(f"{param} values must be integers >= 1, got {values}")
    if frame_order not in FRAME_ORDERS:
        raise VlgapError(f"frame_order must be one of {FRAME_ORDERS}, got {frame_order!r}")
    if frame_order != "ordered" and param != "n_f":
        raise VlgapError("frame_order applies to vision encoders (n_frames) only")
    if temporal_pooling != "mean" and param != "n_f":
        raise VlgapError(f"temporal pooling {temporal_pooling!r} applies to vision encoders (n_frames) only")
    shard_t = parse_shard(shard)
    items = man.items[shard_slice(len(man.items), shard_t)]
    if not items:
        raise VlgapError(f"shard {shard_t[0]}/{shard_t[1]} of {len(man.items)} items is empty")
    root = cache_root(cache_dir)
    ekey = encoder_key(encoder, dtype, pooling, image_size, frame_order, temporal_pooling)
    fp = man.fingerprint()
    entries = {v: Entry(FeatureKey(ekey, fp, param, v, shard_t), root) for v in values}
    result = ExtractResult({}, param, len(items))
    pending = []
    for v, e in entries.items():
        if e.is_complete():
            result.features[v] = e.load()
        else:
            pending.append(v)
    if not pending:
        result.bad_items = _collect_bad(result.features)
        result.seconds = time.perf_counter() - t0
        return result

    if threads:
        import torch

        torch.set_num_threads(threads)
    enc = loaded_encoder
    if enc is None:
        from vlgap.encoders.registry import get_encoder

        opts: dict[str, Any] = {}
        if pooling:
            opts["pooling"] = pooling
        if image_size:
            opts["image_size"] = image_size
        with step(f"loading encoder {encoder}", enabled=progress):
            enc = get_encoder(encoder, device=device, dtype=dtype, **opts)
    if (param == "n_f") != (enc.modality == "vision"):
        raise VlgapError(
            f"encoder {encoder!r} is a {enc.modality} encoder: use "
            + ("--n-frames" if enc.modality == "vision" else "--n-captions")
        )
    if temporal_pooling != "mean" and getattr(enc, "kind", "image") == "video":
        raise VlgapError(f"temporal pooling {temporal_pooling!r} applies to image encoders; {encoder!r} is a video "
                         "encoder (its sub-clips are averaged): use 'mean'")
    base_record = {
        "vlgap_record_version": 1,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "command": sys.argv,
        "encoder_key": ekey,
        "encoder": enc.record(),
        "dataset": {"manifest": str(man.path) if man.path else None, "fingerprint": fp,
                    "n_items_in_manifest": len(man.items)},
        "param": param,
        "shard": list(shard_t),
        "device": str(device),
        "batch_size": batch_size,
        "versions": _versions(),
    }
    if param == "n_f":
        runner = _VisionRunner(enc, pending, batch_size, workers, skip_bad, frame_order, temporal_pooling)
    else:
        runner = _TextRunner(enc, pending, batch_size, skip_bad)
    chunk_items = runner.chunk_items()
    ranges = [(s, min(s + chunk_items, len(items))) for s in range(0, len(items), chunk_items)]
    todo = [r for r in ranges if any(r not in entries[v].done_chunks() for v in pending)]
    with progress_bar(progress) as prog:
        task = prog.add_task(f"{encoder} {param}={','.join(map(str, pending))}", total=len(items), unit="items")
        prog.update(task, completed=sum(e - s for s, e in ranges if (s, e) not in todo))
        for (s, e), per_value in runner.run(items, todo):
            for v, (layers, ids, bad) in per_value.items():
                if (s, e) not in entries[v].done_chunks():
                    entries[v].write_chunk(s, e, layers, ids, bad)
            prog.update(task, advance=e - s)
    truncated = int(getattr(enc, "n_truncated", 0) or 0)
    if truncated:
        stderr_console.print(f"[yellow]warning:[/] {truncated} texts were longer than {encoder}'s context and were "
                             "truncated (recorded as texts_truncated)")
    for v in pending:
        record = dict(base_record, value=v, **runner.policy(v), chunk_items=chunk_items, texts_truncated=truncated)
        fs = entries[v].finalize(ranges, record)
        if fs.record.get("bad_items"):
            atomic_write_text(entries[v].dir / "bad_items.jsonl",
                              "".join(json.dumps(b) + "\n" for b in fs.record["bad_items"]))
        result.features[v] = fs
        result.computed.append(v)
    result.bad_items = _collect_bad(result.features)
    result.seconds = time.perf_counter() - t0
    return result


def _collect_bad(features: dict[int, FeatureSet]) -> list[dict]:
    seen: dict[str, dict] = {}
    for fs in features.values():
        for b in fs.record.get("bad_items", []):
            seen.setdefault(b["id"], b)
    return list(seen.values())


def load_features(manifest: str | Path | Manifest, encoder: str, param: str, value: int, *,
                  cache_dir: str | Path | None = None, dtype: str = "float32", pooling: str | None = None,
                  image_size: int | None = None, frame_order: str = "ordered",
                  temporal_pooling: str | None = None) -> FeatureSet:
    """Features from the cache without loading the model (assembling shards when needed)."""
    man = manifest if isinstance(manifest, Manifest) else read_manifest(manifest)
    key = FeatureKey(encoder_key(encoder, dtype, pooling, image_size, frame_order, temporal_pooling),
                     man.fingerprint(), param, int(value))
    return load_entry(key, cache_dir)


# --------------------------------------------------------------------------------------------------
class _VisionRunner:
    def __init__(self, enc, values: list[int], batch_size: int, workers: int, skip_bad: bool,
                 frame_order: str = "ordered", temporal_pooling: str = "mean"):
        self.enc, self.values, self.batch_size, self.skip_bad = enc, values, batch_size, skip_bad
        self.frame_order, self.temporal_pooling = frame_order, temporal_pooling
        self.workers = max(1, workers)
        self.n0 = int(getattr(enc, "native_clip_len", 1) or 1)
        self.is_video = getattr(enc, "kind", "image") == "video"
        if self.is_video:
            for v in values:
                check_n_f(v, self.n0)
        self.frame_log: dict[int, dict[str, list[int]]] = {v: {} for v in values}

    def chunk_items(self) -> int:
        per_item = max(self.values) if not self.is_video else max(max(self.values), self.n0)
        return int(np.clip(CHUNK_FRAMES // per_item, 1, 64))

    def policy(self, v: int) -> dict:
        return {"sampling": {
            "policy": "uniform linear interpolation over the whole video, nearest frame (Dynamic Reflections 3.4)",
            "n_f": v, "n0": self.n0, "frame_order": self.frame_order,
            "aggregation": ("mean over n_f/n0 sub-clips" if self.is_video else describe_pooling(self.temporal_pooling)),
            "temporal_pooling": self.temporal_pooling,
            "frame_indices": self.frame_log[v],
        }}

    def _sample(self, item: Item, total: int) -> dict[int, np.ndarray]:
        out = {}
        for v in self.values:
            idx = frame_indices(total, v)
            if self.frame_order == "reversed":
                idx = idx[::-1].copy()
            elif self.frame_order == "shuffled":
                seed = int.from_bytes(hashlib.sha256(f"{item.id}|{v}".encode()).digest()[:8], "little")
                idx = idx[np.random.default_rng(seed).permutation(len(idx))]
            out[v] = idx
        return out

    def _prepare(self, item: Item):
        """Background: decode the union of the frames all n_f need, preprocess them once."""
        total = count_frames(item)
        if total < 1:
            raise BadItemError(item.id, f"{item.media} has no frames")
        per_value = self._sample(item, total)
        union = np.unique(np.concatenate(list(per_value.values())))
        try:
            frames, _ = read_frames(item, union)
        except BadItemError as err:
            if "beyond its end" not in err.reason:
                raise
            # the container's frame count overstated the stream: count by decoding, then sample again
            _, total = read_frames(item, None, max_side=16)
            per_value = self._sample(item, total)
            union = np.unique(np.concatenate(list(per_value.values())))
            frames, _ = read_frames(item, union)
        pixels = self.enc.preprocess(frames)
        pos = {v: np.searchsorted(union, idx) for v, idx in per_value.items()}
        return pixels, pos, per_value

    def run(self, items: list[Item], todo: list[tuple[int, int]]):
        import torch

        with ThreadPoolExecutor(self.workers) as pool:
            futures: dict[tuple[int, int], list[Future]] = {}

            def submit(r):
                futures[r] = [pool.submit(self._prepare, items[i]) for i in range(*r)]

            for r in todo[:2]:
                submit(r)
            for ci, r in enumerate(todo):
                if ci + 2 < len(todo):
                    submit(todo[ci + 2])  # keep two chunks decoding ahead of the encoder
                prepared, ids, bad = [], [], []
                for i, fut in zip(range(*r), futures.pop(r)):
                    try:
                        prepared.append(fut.result())
                        ids.append(items[i].id)
                    except BadItemError as err:
                        if not self.skip_bad:
                            pool.shutdown(wait=False, cancel_futures=True)
                            raise VlgapError(f"{err} (pass --skip-bad to skip and report such items)") from None
                        bad.append({"id": err.item_id, "reason": err.reason})
                for iid, (_, _, per_value) in zip(ids, prepared):
                    for v in self.values:
                        self.frame_log[v][iid] = per_value[v].tolist()
                with torch.inference_mode():
                    out = self._encode_video(prepared) if self.is_video else self._encode_frames(prepared)
                yield r, {v: (out[v], ids, bad) for v in self.values}

    def _forward(self, x):
        import torch

        outs = []
        for s in range(0, x.shape[0], self.batch_size):
            batch = x[s:s + self.batch_size].to(self.enc.device, self.enc.dtype)
            outs.append([t.float().cpu() for t in self.enc.forward_layers(batch)])
        return [torch.cat([o[li] for o in outs]) for li in range(len(outs[0]))] if outs else []

    def _encode_frames(self, prepared):
        import torch

        n_layers = self.enc.num_layers
        if not prepared:
            return {v: [np.zeros((0, 0), np.float32)] * n_layers for v in self.values}
        pixels = torch.cat([p[0] for p in prepared])
        feats = self._forward(pixels)
        offsets = np.cumsum([0] + [p[0].shape[0] for p in prepared])
        out = {}
        for v in self.values:
            layers = []
            for f in feats:
                # frames in sampled order (after any frame-order control); "mean" is f[...].mean(0)
                rows = [pool_frames(f[offsets[k] + torch.as_tensor(p[1][v])], self.temporal_pooling)
                        for k, p in enumerate(prepared)]
                layers.append(torch.stack(rows).numpy().astype(np.float32))
            out[v] = layers
        return out

    def _encode_video(self, prepared):
        import torch

        n_layers = self.enc.num_layers
        out = {}
        for v in self.values:
            if not prepared:
                out[v] = [np.zeros((0, 0), np.float32)] * n_layers
                continue
            clips, owner = [], []
            for k, (pixels, pos, _) in enumerate(prepared):
                for clip in subclips(pos[v], self.n0):
                    if len(clip) < self.n0:  # fewer frames than the model's fixed length: nearest repeat
                        clip = clip[np.floor(np.arange(self.n0) * len(clip) / self.n0).astype(int)]
                    clips.append(pixels[torch.as_tensor(clip)])
                    owner.append(k)
            feats = self._forward(torch.stack(clips))
            owner_t = torch.as_tensor(owner)
            layers = []
            for f in feats:
                sums = torch.zeros(len(prepared), f.shape[1]).index_add_(0, owner_t, f)
                counts = torch.bincount(owner_t, minlength=len(prepared)).unsqueeze(1)
                layers.append((sums / counts).numpy().astype(np.float32))
            out[v] = layers
        return out


class _TextRunner:
    def __init__(self, enc, values: list[int], batch_size: int, skip_bad: bool):
        self.enc, self.values, self.batch_size, self.skip_bad = enc, values, batch_size, skip_bad

    def chunk_items(self) -> int:
        return CHUNK_TEXTS

    def policy(self, v: int) -> dict:
        return {"captions": {"policy": "first n_c captions, each ended with a full stop, joined by a space",
                             "n_c": v, "pooling": self.enc.record().get("pooling")}}

    def run(self, items: list[Item], todo: list[tuple[int, int]]):
        import torch

        for r in todo:
            out = {}
            for v in self.values:
                texts, ids, bad = [], [], []
                for it in items[r[0]:r[1]]:
                    try:
                        if not it.captions:
                            raise BadItemError(it.id, "has no captions")
                        texts.append(join_captions(it.captions, v, it.id))
                        ids.append(it.id)
                    except VlgapError as err:
                        if not self.skip_bad:
                            raise VlgapError(f"{err} (pass --skip-bad to skip and report such items)") from None
                        bad.append({"id": it.id, "reason": str(err)})
                # length-sorted mini-batches waste less padding; pooling is mask-aware so order is free
                order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
                chunks = []
                with torch.inference_mode():
                    for s in range(0, len(order), self.batch_size):
                        idx = order[s:s + self.batch_size]
                        chunks.append((idx, [t.float().cpu().numpy() for t in self.enc.encode([texts[i] for i in idx])]))
                layers = []
                for li in range(self.enc.num_layers):
                    if not texts:
                        layers.append(np.zeros((0, 0), np.float32))
                        continue
                    width = chunks[0][1][li].shape[1]
                    arr = np.empty((len(texts), width), np.float32)
                    for idx, outs in chunks:
                        arr[idx] = outs[li]
                    layers.append(arr)
                out[v] = (layers, ids, bad)
            yield r, out
