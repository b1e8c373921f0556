"""Extraction: dataset items -> per-layer features in the cache, for several n_f (or n_c) at once.

Vision: decode -> sample n_f frames -> encoder.preprocess -> every layer.
Image encoders ("image on video") encode each distinct sampled frame once and pool the per-frame
vectors for each n_f (the mean by default; `temporal_pooling` modes keep time, see
features/temporal_pooling), so a sweep over n_f costs the union of frames, not the sum. Video encoders
run clips of n0 frames (n_f / n0 sub-clips, averaged).
Text: the first n_c captions (or a random draw of n_c, `caption_draw`) joined into one string -> every
layer, mask-aware pooling. Frames are sampled uniformly (the paper) or by another `frame_sampling`.

Work is done in chunks of items; each finished chunk is written atomically and sealed under the
entry's key (vlgap.reuse), so a killed run resumes from the last finished chunk and produces exactly
the same features as an uninterrupted one; a chunk or entry whose key or checksum does not match is
reported in one line and recomputed, never read.

Degenerate items are named, never silently used: an undecodable item stops the run (--skip-bad: skipped
and listed), and so does a video with fewer frames than n_f (--allow-repeated-frames: kept, warned per
item, counted in the summary and listed in the record; --skip-bad: skipped and listed). Entries hold
the same content whatever the flags, and `apply_item_policy` applies them on every use, cached or not,
so a cached result answers exactly as a fresh run would.

One implementation of the per-chunk steps serves both executors: `VisionSteps` / `TextSteps`
in `features/chunk_steps` (`decode_one` per item, `collect` per chunk, `encode_chunk` with a loaded
encoder) and `Job.write_chunk`.
This process runs them with decoding in background threads (`_run_local`); `vlgap.distributed.extract`
runs the same steps as Ray tasks (decoding) and actors (encoding) and writes the same chunk files.
"""
from __future__ import annotations

import contextlib

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
from vlgap.data.sampling import parse_frame_sampling
from vlgap.errors import VlgapError
from vlgap.features.chunk_steps import (FRAME_ORDERS, Decoded, TextSteps, VisionSteps, encoder_info,  # noqa: F401
                                        make_steps, requested_values)
from vlgap.features.item_policy import (MAX_WARNING_LINES, _check_items, _count, _repeated_by_item,  # noqa: F401
                                        _warn_repeated, apply_item_policy, item_problems, repeated_items)
from vlgap.features.key_notes import _note_alias_entries, _note_changed_weights, _weights_identity
from vlgap.features.store import Chunk, Entry, FeatureKey, FeatureSet, cache_root, load_entry
from vlgap.features.temporal_pooling import check_frames
from vlgap.features.temporal_pooling import parse_mode as parse_temporal_pooling
from vlgap.io_utils import atomic_write_text
from vlgap.memory import reuse_freed_memory
from vlgap.progress import progress_bar, stderr_console, step
from vlgap.stage_times import stage


@dataclass
class ExtractResult:
    features: dict[int, FeatureSet]  # value of n_f or n_c -> features
    param: str
    n_requested: int
    bad_items: list[dict] = field(default_factory=list)
    computed: list[int] = field(default_factory=list)  # values computed in this run (others came from cache)
    seconds: float = 0.0
    chunks_computed: int = 0  # chunks encoded in this run (a resumed run skips the finished ones)
    chunks_total: int = 0
    #: kept videos with fewer frames than n_f (--allow-repeated-frames): [{"id", "frames", "n_f"}]
    repeated_frames: list[dict] = field(default_factory=list)

    @property
    def n(self) -> int:
        return min((fs.n for fs in self.features.values()), default=0)

    @property
    def label(self) -> str:
        """The encoder's name as shown, "(random weights)" appended when they are."""
        for fs in self.features.values():
            if fs.record.get("encoder_label"):
                return fs.record["encoder_label"]
        return ""

    def summary(self) -> str:
        lines = []
        for v, fs in sorted(self.features.items()):
            widths = sorted({layer.shape[1] for layer in fs.layers})
            src = "computed" if v in self.computed else "cached"
            note = f" [{fs.record['weights_note']}]" if fs.record.get("weights_note") else ""
            lines.append(f"{self.param}={v}{note}: N={fs.n} items x {len(fs.layers)} layers (widths {widths}) [{src}] {fs.path}")
        if self.bad_items:
            lines.append(f"skipped {len(self.bad_items)} bad items: " + "; ".join(f"{b['id']}: {b['reason']}" for b in self.bad_items[:5]))
        if self.repeated_frames:
            items = _repeated_by_item(self.repeated_frames)
            lines.append(f"repeated frames in {_count(len(items), 'item')} (fewer frames than n_f, kept by "
                         "--allow-repeated-frames; listed in record.json as repeated_frames): "
                         + "; ".join(f"{i}: {_count(f, 'frame')} < n_f {','.join(map(str, vs))}"
                                     for i, (f, vs) in list(items.items())[:5]))
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


def encoder_key(name: str, dtype: str = "float32", pooling: str | None = None, image_size: int | None = None,
                frame_order: str = "ordered", temporal_pooling: str | None = None,
                random_weights: bool = False, frame_sampling: str = "uniform",
                caption_draw: tuple[int, int] | None = None, weights: str | None | object = ...) -> dict:
    """The part of an encoder spec that changes the numbers (device does not, within float tolerance).
    The weights' identity (`vlgap.encoders.identity.weights_id`: a folder's or file's sha256, a hub
    snapshot's commit) is keyed as "weights_id", so replaced weights are never served from the cache;
    bundled names, config: specs and random weights have none (their keys are as before). `weights`:
    the identity when the caller knows it already (default: told from the spec).
    Options at their defaults are left out, so adding an option never invalidates existing caches.
    Weights: random weights (asked for) are keyed "random"; tv:/timm: specs without a file are keyed
    "pretrained", because before they loaded pretrained weights those specs built random ones under the
    bare name, and such cached features must not be read as pretrained. The dtype is keyed by its canonical
    name (vlgap.runtime.parse_dtype): bf16 and bfloat16 are one entry."""
    from vlgap.runtime import parse_dtype

    key: dict[str, Any] = {"name": name, "dtype": parse_dtype(dtype)}
    if random_weights:
        key["weights"] = "random"
    elif name.startswith(("tv:", "timm:")) and "@" not in name:
        key["weights"] = "pretrained"
    if frame_order != "ordered":
        key["frame_order"] = frame_order
    frame_sampling = parse_frame_sampling(frame_sampling)
    if frame_sampling != "uniform":  # the paper's uniform sampling keeps the keys it always had
        key["frame_sampling"] = frame_sampling
    if caption_draw is not None:  # a random draw of captions; None (the first n_c) keeps older keys
        key["caption_draw"] = {"seed": int(caption_draw[0]), "draw": int(caption_draw[1])}
    temporal_pooling = parse_temporal_pooling(temporal_pooling)
    if temporal_pooling != "mean":
        key["temporal_pooling"] = temporal_pooling
    if pooling and pooling != "auto":  # "auto" is the default rule: the same numbers as no option
        key["pooling"] = pooling
    elif name.startswith("hf-video:"):
        # hf-video: CLS-token models (TimeSformer, ViViT) were mean-pooled before the paper's rule became
        # the default: their earlier cache entries must not be read as the new numbers
        key["pooling"] = "auto"
    if image_size:
        key["image_size"] = image_size
    if weights is ...:
        from vlgap.encoders.identity import weights_id

        weights = weights_id(name, random_weights=random_weights)
    if weights is not None:
        key["weights_id"] = weights
    return key


def shard_slice(n_items: int, shard: tuple[int, int]) -> slice:
    i, n = shard
    return slice(i * n_items // n, (i + 1) * n_items // n)


def _versions() -> dict[str, str]:
    """Library versions for a record. torch and torchvision by their own `__version__` (it carries the
    build, e.g. "+cu130"); timm and transformers from the installed metadata, because importing them
    only to ask costs seconds (a Ray driver, whose encoders load elsewhere, has not imported them)."""
    from importlib import metadata

    out = {"python": platform.python_version()}
    for mod in ("vlgap", "numpy", "torch", "torchvision", "av"):
        try:
            # str(): torch's is a TorchVersion, and unpickling one (a Ray actor's record) imports torch
            out[mod] = str(__import__(mod).__version__)
        except Exception:
            pass
    for dist in ("timm", "transformers"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            pass
    return out


@dataclass
class Job:
    """One extraction request after validation: which values are missing and where they go."""

    man: Manifest
    items: list[Item]
    encoder: str
    param: str                 # "n_f" or "n_c"
    pending: list[int]         # values not yet complete in the cache
    entries: dict[int, Entry]
    ekey: dict
    shard: tuple[int, int]
    frame_order: str
    temporal_pooling: str
    skip_bad: bool
    batch_size: int
    device: str
    dtype: str
    encoder_options: dict      # pooling / image_size / random_weights for get_encoder
    allow_repeated_frames: bool = False
    frame_sampling: str = "uniform"
    caption_draw: tuple[int, int] | None = None

    @property
    def label(self) -> str:
        """The encoder's name for the console, with "(random weights)" when asked for (or a config: spec)."""
        from vlgap.encoders.registry import labelled

        return labelled(self.encoder, bool(self.encoder_options.get("random_weights"))
                        or self.encoder.startswith("config:"))

    @staticmethod
    def encoder_info(enc) -> dict:
        return encoder_info(enc)

    @staticmethod
    def versions() -> dict[str, str]:
        return _versions()

    def load_encoder(self, progress: bool = False):
        from vlgap.encoders.registry import get_encoder

        with step(f"loading encoder {self.label}", enabled=progress):
            return get_encoder(self.encoder, device=self.device, dtype=self.dtype, **self.encoder_options)

    def steps(self, info: dict) -> VisionSteps | TextSteps:
        """The per-chunk steps for an encoder described by `encoder_info` (no model needed)."""
        self.check_weights(info)
        return make_steps(self.encoder, self.param, self.pending, info, self.frame_order, self.temporal_pooling,
                          self.skip_bad, self.allow_repeated_frames, self.frame_sampling, self.caption_draw)

    def check_weights(self, info: dict) -> None:
        """A loaded encoder's weights must be what the cache key says (random or trained)."""
        record = info.get("record") or {}
        if not record:  # Ray's early start knows only the shape; the actors check the record
            return
        from vlgap.encoders.registry import weights_note

        asked = bool(self.encoder_options.get("random_weights"))
        is_random = weights_note(record) is not None
        if asked and not is_random:
            raise VlgapError(f"random weights were asked for {self.encoder!r} but the loaded encoder has trained "
                             "weights; load it with random_weights=True or drop random_weights")
        if is_random and not asked and not self.encoder.startswith("config:"):
            raise VlgapError(f"the loaded encoder {self.encoder!r} has random weights: say so with "
                             "random_weights=True (CLI --random-weights), or load trained weights")

    def ranges(self, steps) -> list[tuple[int, int]]:
        size = steps.chunk_items()
        return [(s, min(s + size, len(self.items))) for s in range(0, len(self.items), size)]

    def todo(self, ranges: list[tuple[int, int]], report=None) -> list[tuple[int, int]]:
        """The chunks to compute: those not finished for some pending value. Finished chunks are
        verified (key and checksum; others are reported and removed) and their items checked against
        this run's --skip-bad / --allow-repeated-frames, so reusing them fails exactly where a fresh
        run would, before any work."""
        done = {v: self.entries[v].verified_chunks(ranges, report) for v in self.pending}
        position = {it.id: i for i, it in enumerate(self.items)}
        problems = []
        for v, chunks in done.items():
            for chunk in chunks.values():
                problems += item_problems(chunk.bad, chunk.meta.get("repeated_frames", []), v, position,
                                          self.skip_bad, self.allow_repeated_frames)
        if problems:
            raise VlgapError(min(problems)[2])
        return [r for r in ranges if any(r not in done[v] for v in self.pending)]

    def write_chunk(self, r: tuple[int, int], out: dict[int, list[np.ndarray]], decoded: Decoded) -> None:
        """Write one finished chunk for every pending value that lacks it (atomic and sealed; a value
        whose chunk was finished earlier keeps it: `todo` verified its bytes)."""
        for v in self.pending:
            if self.entries[v].has_chunk(*r):
                continue
            meta = None
            if v in decoded.frame_log:
                meta = {"frame_indices": decoded.frame_log[v], "repeated_frames": decoded.repeated.get(v, [])}
            self.entries[v].write_chunk(r[0], r[1], out[v], decoded.ids[v], decoded.bad[v], meta)

    def base_record(self, info: dict, batch_size: int) -> dict:
        from vlgap.encoders.identity import identity_from_record
        from vlgap.encoders.registry import labelled, weights_note

        note = weights_note(info["record"])
        return {
            "vlgap_record_version": 1,
            "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "command": sys.argv,
            "encoder_key": self.ekey,
            # which weights: the key's identity, else the loaded encoder's own (bundled models), every kind
            "weights_id": self.ekey.get("weights_id") or identity_from_record(info["record"]),
            # the encoder's name as shown everywhere, with "(random weights)" when they are
            "encoder_label": labelled(self.encoder, note),
            **({"weights_note": note} if note else {}),
            "encoder": info["record"],
            "dataset": {"manifest": str(self.man.path) if self.man.path else None,
                        "fingerprint": self.man.fingerprint(), "n_items_in_manifest": len(self.man.items)},
            "param": self.param,
            "shard": list(self.shard),
            "device": str(self.device),
            "batch_size": batch_size,
            # the encoding process's libraries (a Ray actor reports its own in `info`)
            "versions": info.get("versions") or _versions(),
        }

    def finish(self, result: "ExtractResult", steps, ranges, record: dict, truncated: int) -> None:
        """Join the chunks of every pending value into its features file, sealed with the entry's key."""
        if truncated:
            stderr_console.print(f"[yellow]warning:[/] {truncated} texts were longer than {self.encoder}'s context "
                                 "and were truncated (recorded as texts_truncated)")
        for v in self.pending:
            chunks: dict[tuple[int, int], Chunk] = self.entries[v].verified_chunks(ranges)  # a missing one: finalize
            if hasattr(steps, "frame_log"):  # every item's frame indices, from the chunks (this run's or earlier)
                steps.frame_log[v] = {i: idx for r in ranges if r in chunks
                                      for i, idx in chunks[r].meta.get("frame_indices", {}).items()}
            rec = dict(record, value=v, **steps.policy(v), chunk_items=steps.chunk_items(), texts_truncated=truncated)
            fs = self.entries[v].finalize(ranges, rec, chunks)
            del chunks
            if fs.record.get("bad_items"):
                atomic_write_text(self.entries[v].dir / "bad_items.jsonl",
                                  "".join(json.dumps(b) + "\n" for b in fs.record["bad_items"]))
            result.features[v] = fs
            result.computed.append(v)


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
    allow_repeated_frames: bool = False,
    batch_size: int = 32,
    workers: int = 2,
    threads: int | None = None,
    progress: bool = True,
    loaded_encoder=None,
    ray: str | bool | None = None,
    ray_workers: int | None = None,
    trust_remote_code: bool = False,
    random_weights: bool = False,
    frame_sampling: str = "uniform",
    caption_draw: tuple[int, int] | None = None,
) -> ExtractResult:
    """Extract (or load from the cache) features of `encoder` for every n_f in `n_frames` (vision) or
    every n_c in `n_captions` (text). Returns an ExtractResult keyed by the value. The model's weights are
    part of the cache key (`encoder_key`, vlgap.encoders.identity): replaced weights are recomputed, with
    one line saying from which to which.

    frame_order: "ordered" (the paper), or a control: "reversed" or "shuffled" (a fixed random order per
    item, seeded by its id) applied to the sampled frames before sub-clips are formed.
    temporal_pooling: how an image encoder's per-frame embeddings become one vector
    (`vlgap.features.temporal_pooling`): "mean" (default), "segments:S" or "meandiff". Video and text
    encoders take "mean" only (a video encoder's sub-clips are always averaged).
    skip_bad: skip (and list) undecodable items, and videos with fewer frames than an n_f unless
    allow_repeated_frames; without it such an item stops the run with a one-line error.
    allow_repeated_frames: keep videos with fewer frames than n_f (frames repeat, nearest-neighbour
    sampling), each warned in one line, counted in the summary and listed in the record. Still images
    (manifest "image" items) are one frame by declaration and never count as repeated.
    ray: None (this process), "auto" (a running Ray cluster, else a local one) or a cluster address:
    decoding runs as Ray tasks and encoding on `ray_workers` actors (one per GPU with device="cuda";
    default: as many as fit), writing the same cache entries (see vlgap.distributed.extract).
    trust_remote_code: let an hf: model run code from its repository (VideoMAEv2); never implied.
    random_weights: the encoder's architecture with random weights (speed tests); cached apart from the
    trained model's features and labelled "random weights" in the record and every summary.
    frame_sampling: which frames make n_f (`vlgap.data.sampling.sample_frames`): "uniform" (the paper),
    "random", "stride:S" or "keyframes"; part of the cache key and recorded with the frame indices.
    caption_draw: None (the first n_c captions, the paper) or (seed, draw number): n_c captions drawn
    at random per item (`vlgap.data.sampling.caption_draw_indices`); part of the cache key."""
    t0 = time.perf_counter()
    from vlgap.counts import check_count

    batch_size = check_count("batch_size", batch_size, example=32)
    workers = check_count("workers", workers, example=2)
    threads = check_count("threads", threads, example=2, allow_none=True)
    ray_workers = check_count("ray_workers", ray_workers, example=2, allow_none=True)
    image_size = check_count("image_size", image_size, example=160, allow_none=True)
    from vlgap.runtime import parse_device, parse_dtype

    # a Ray driver may have no GPU of its own: its workers check the device where they run
    asked_dtype, dtype = dtype, parse_dtype(dtype, device=device)  # auto: resolved against the device
    device = parse_device(device, spread=True, check=not ray)
    reuse_freed_memory()  # encoders' activations: ~2.5x faster on CPU, see vlgap.memory
    temporal_pooling = parse_temporal_pooling(temporal_pooling)
    param, values = requested_values(n_frames, n_captions)
    man = manifest if isinstance(manifest, Manifest) else read_manifest(manifest)
    if frame_order not in FRAME_ORDERS:
        raise VlgapError(f"frame_order must be one of {FRAME_ORDERS}, got {frame_order!r}")
    if frame_order != "ordered" and param != "n_f":
        raise VlgapError("frame_order applies to vision encoders (n_frames) only")
    if temporal_pooling != "mean" and param != "n_f":
        raise VlgapError(f"temporal pooling {temporal_pooling!r} applies to vision encoders (n_frames) only")
    check_frames(temporal_pooling, values if param == "n_f" else (), "n_frames")
    frame_sampling = parse_frame_sampling(frame_sampling)
    if frame_sampling != "uniform" and param != "n_f":
        raise VlgapError(f"frame sampling {frame_sampling!r} applies to vision encoders (n_frames) only")
    caption_draw = _check_caption_draw(caption_draw)
    if caption_draw is not None and param != "n_c":
        raise VlgapError("caption_draw applies to text encoders (n_captions) only")
    shard_t = parse_shard(shard)
    items = man.items[shard_slice(len(man.items), shard_t)]
    if not items:
        raise VlgapError(f"shard {shard_t[0]}/{shard_t[1]} of {len(man.items)} items is empty")
    root = cache_root(cache_dir)
    if ray:
        root = root.resolve()  # workers may run in another directory
    opts: dict[str, Any] = {}
    if pooling:
        opts["pooling"] = pooling
    if image_size:
        opts["image_size"] = image_size
    if trust_remote_code:
        opts["trust_remote_code"] = True
    if random_weights:
        opts["random_weights"] = True
    ident, loaded_encoder = _weights_identity(encoder, random_weights, loaded_encoder, opts, device, dtype, ray,
                                              progress)
    ekey = encoder_key(encoder, dtype, pooling, image_size, frame_order, temporal_pooling, random_weights,
                       frame_sampling, caption_draw, weights=ident)
    fp = man.fingerprint()
    entries = {v: Entry(FeatureKey(ekey, fp, param, v, shard_t), root) for v in values}
    result = ExtractResult({}, param, len(items))
    with contextlib.ExitStack() as held:
        # one process at a time per entry (in a fixed order: no deadlock); a second one waits, then reuses
        for v in values:
            held.enter_context(entries[v].exclusive())
        pending = []
        for v, e in entries.items():
            e.remove_leftovers()  # temporaries of killed runs (older than this process)
            fs = e.reuse()  # verified, else reported and removed
            if fs is not None:
                result.features[v] = fs
            else:
                pending.append(v)
        # cached entries answer as a fresh run would under this run's flags: fail before any work
        kinds = {it.id: it.kind for it in items}
        _check_items(result.features, items, kinds, skip_bad, allow_repeated_frames)
        if pending:
            _note_alias_entries(asked_dtype, ekey, fp, param, pending, shard_t, root)
            _note_changed_weights(encoder, ekey, fp, param, pending, shard_t, root)
            job = Job(man, items, encoder, param, pending, entries, ekey, shard_t, frame_order, temporal_pooling,
                      skip_bad, batch_size, device, dtype, opts, allow_repeated_frames, frame_sampling, caption_draw)
            if ray:
                if loaded_encoder is not None:
                    raise VlgapError("ray= builds the encoder on every worker from its name; loaded_encoder "
                                     "cannot be combined with it")
                from vlgap.distributed.extract import run_ray

                run_ray(job, result, ray=ray, n_workers=ray_workers, threads=threads, progress=progress)
            else:
                with stage(f"extract {job.label} {job.param}={','.join(map(str, pending))} ({len(items)} items)"):
                    _run_local(job, result, loaded_encoder, workers=workers, threads=threads, progress=progress)
    _check_items(result.features, items, kinds, skip_bad, allow_repeated_frames)
    result.features = {v: apply_item_policy(fs, kinds, skip_bad, allow_repeated_frames)
                       for v, fs in sorted(result.features.items())}
    result.bad_items = _collect_bad(result.features)
    result.repeated_frames = [r for fs in result.features.values() for r in fs.record.get("repeated_frames", [])]
    _warn_repeated(result.repeated_frames)
    result.seconds = time.perf_counter() - t0
    return result


def _check_caption_draw(draw) -> tuple[int, int] | None:
    if draw is None:
        return None
    try:
        seed, number = (int(x) for x in draw)
    except (TypeError, ValueError):
        raise VlgapError(f"caption_draw must be None (the first n_c captions) or (seed, draw number), got {draw!r}") from None
    if number < 0:
        raise VlgapError(f"caption_draw's draw number must be >= 0, got {number}")
    return (seed, number)


def decoding_plan(param: str, device, torch_threads: int, cpus: int | None = None) -> dict[str, Any]:
    """How this process decodes while it encodes. Vision on the CPU: each decoding thread runs its codec
    and colour conversion on one thread (FFmpeg's choice is one per core, and the cores belong to the
    encoder). When the encoder's torch threads take every core, decoding runs in lock-step with it: a
    chunk is decoded (in the worker threads) while the encoder waits, and preprocessed by the encoder's
    own thread, so decoding never preempts the encoder's threads in mid-layer (on 2 cores that costs far
    more than decoding takes) and no second OpenMP team is started. Otherwise (a GPU, spare cores, text):
    decoding and preprocessing run in the worker threads, two chunks ahead of the encoder.
    The features are the same under every plan: the same pixels, the same batches."""
    from vlgap.runs.claims import available_cores

    on_cpu = param == "n_f" and str(device).split(":")[0] == "cpu"
    cpus = cpus if cpus is not None else available_cores()
    lockstep = on_cpu and cpus <= torch_threads
    return {"decode_threads": 1 if on_cpu else None, "ahead": 0 if lockstep else 2,
            "preprocess_in_workers": not lockstep}


def _run_local(job: Job, result: ExtractResult, enc, *, workers: int, threads: int | None, progress: bool) -> None:
    """This process: decode in background threads, ahead of the encoder or in lock-step with it
    (`decoding_plan`)."""
    import torch

    from vlgap.data.video import set_decode_threads

    if threads:
        torch.set_num_threads(threads)
    if enc is None:
        enc = job.load_encoder(progress)
    info = encoder_info(enc)
    steps = job.steps(info)
    ranges = job.ranges(steps)
    todo = job.todo(ranges)
    result.chunks_total = len(ranges)
    truncated = 0
    t0 = time.perf_counter()
    with progress_bar(progress) as prog:
        task = prog.add_task(f"{job.label} {job.param}={','.join(map(str, job.pending))}", total=len(job.items),
                             unit="items")
        prog.update(task, completed=sum(e - s for s, e in ranges if (s, e) not in todo))
        plan = decoding_plan(job.param, getattr(enc, "device", job.device), torch.get_num_threads())
        ahead = plan["ahead"]
        with ThreadPoolExecutor(max(1, workers), initializer=set_decode_threads,
                                initargs=(plan["decode_threads"],)) as pool:
            futures: dict[tuple[int, int], list[Future]] = {}
            # without: uint8 frames, preprocessed by encode_chunk in this thread
            preprocess = getattr(enc, "preprocess", None) if plan["preprocess_in_workers"] else None

            def submit(r):
                futures[r] = [pool.submit(steps.decode_one, job.items[i], preprocess) for i in range(*r)]

            for r in todo[:ahead]:
                submit(r)
            for ci, r in enumerate(todo):
                if ci + ahead < len(todo):
                    submit(todo[ci + ahead])  # keep `ahead` chunks decoding ahead of the encoder (0: this one)
                try:
                    decoded = steps.collect(job.items[r[0]:r[1]], [f.result() for f in futures.pop(r)])
                except VlgapError:
                    pool.shutdown(wait=False, cancel_futures=True)
                    raise
                out, cut = steps.encode_chunk(enc, decoded, job.batch_size)
                job.write_chunk(r, out, decoded)
                truncated += cut
                result.chunks_computed += 1
                prog.update(task, advance=r[1] - r[0])
    if todo and progress:
        n = sum(e - s for s, e in todo)
        dt = time.perf_counter() - t0
        stderr_console.print(f"{job.label}: {n} items in {dt:.1f} s ({n / dt:.2f} items/s, this process)",
                             highlight=False)
    job.finish(result, steps, ranges, job.base_record(info, job.batch_size), truncated)


def _collect_bad(features: dict[int, FeatureSet]) -> list[dict]:
    seen: dict[str, dict] = {}
    for fs in features.values():
        for b in fs.record.get("bad_items", []):
            seen.setdefault(b["id"], b)
    return list(seen.values())


def load_features(manifest: str | Path | Manifest, encoder: str, param: str, value: int, *,
                  cache_dir: str | Path | None = None, dtype: str = "float32", pooling: str | None = None,
                  image_size: int | None = None, frame_order: str = "ordered",
                  temporal_pooling: str | None = None, random_weights: bool = False, skip_bad: bool = False,
                  allow_repeated_frames: bool = False, frame_sampling: str = "uniform",
                  caption_draw: tuple[int, int] | None = None) -> FeatureSet:
    """Features from the cache without loading the model (assembling shards when needed), verified,
    with `skip_bad` / `allow_repeated_frames` applied as `extract` applies them."""
    man = manifest if isinstance(manifest, Manifest) else read_manifest(manifest)
    ekey = encoder_key(encoder, dtype, pooling, image_size, frame_order, temporal_pooling, random_weights,
                       frame_sampling, _check_caption_draw(caption_draw))
    from vlgap.encoders.identity import UNRESOLVED

    if ekey.get("weights_id") == UNRESOLVED:
        raise VlgapError(f"the weights of {encoder!r} are not in the local caches (or '@revision' names a folder), "
                         "so which cached features are theirs cannot be told (the weights are part of the key): "
                         "run `vlgap extract` with the model available")
    key = FeatureKey(ekey, man.fingerprint(), param, int(value))
    fs = load_entry(key, cache_dir)
    kinds = {it.id: it.kind for it in man.items}
    _check_items({int(value): fs}, man.items, kinds, skip_bad, allow_repeated_frames)
    return apply_item_policy(fs, kinds, skip_bad, allow_repeated_frames)
