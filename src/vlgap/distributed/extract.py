"""Feature extraction on a Ray cluster, into the same feature store as a single process.

Decoding (PyAV, frame sampling, and preprocessing when the encoder's `preprocessor` needs no model)
runs as Ray tasks on CPUs; encoding runs on actors that load the model once (one per GPU with
device="cuda"). The driver keeps a bounded window of chunks in flight (2 per actor + 2), each
decoded by several tasks of DECODE_ITEMS items; as soon as a chunk is decoded it goes to the least
busy actor, so the next chunks decode while the encoders work. The actors take seconds to start
(process, imports, weights), so meanwhile the first chunk of each actor is decoded, sampled as the
encoder's name says (`expected_shape`), and the decoding workers import what preprocessing needs
(torch, torchvision's transforms: seconds of CPU that would otherwise delay the first chunks decoded
after the actors are up); once the loaded encoder confirms the guess, each actor preprocesses its
early uint8 chunk itself (a preprocessing task would make it wait), and every later chunk arrives
preprocessed. An actor call
encodes one chunk with the shared steps of `vlgap.features.chunk_steps` and writes its chunk files
itself (atomic rename, then the chunk's seal: vlgap.reuse, keyed by the entry's key and the chunk's
items); the driver verifies every chunk (key and checksum) before it counts as done, finally joins
them and seals the entry exactly as a single process does. Chunk boundaries, batches and code being the same, the arrays are bit-identical to a
single-process run on the same device, dtype and torch thread count; records differ only in
provenance (a `ray` block with hosts and actors, times, command).

Faults: a decode task whose process dies is re-run (`max_retries`); an encoder actor that dies is
restarted, reloads the model and re-runs the calls it held (`max_restarts`, `max_task_retries`);
chunk writes are atomic, sealed and idempotent. A driver that dies loses nothing written: a re-run
computes only the chunks that are missing or fail their seal, and removes the temporary files of
killed writes first. The cache must be on a filesystem all workers share; chunks
written to node-local disks make the final join fail with the list of missing chunks.
"""
from __future__ import annotations

import functools
import os
import socket
import time
from collections import deque
from dataclasses import replace

import ray
from ray import cloudpickle

from vlgap.distributed import faults
from vlgap.distributed.cluster import ACTOR_OPTIONS, TASK_OPTIONS, cluster_cpus_gpus, connect, unwrap
from vlgap.errors import VlgapError
from vlgap.memory import reuse_freed_memory
from vlgap.progress import progress_bar, stderr_console

# Job and ExtractResult (vlgap.features.extract) arrive as arguments: that module calls this one, so
# importing it here would make an import circle


#: items per decoding task (a chunk is decoded by several tasks at once, then encoded as one)
DECODE_ITEMS = 8


@ray.remote
def _decode(steps, items, chunk_no: int, preprocessor_pickle: bytes | None, fault):
    """A chunk's items decoded and, when the encoder has a model-free `preprocessor` (given pickled,
    see `EncoderActor.info`), preprocessed (else the actor preprocesses the uint8 frames); texts joined."""
    from vlgap.data.video import decode_threads

    faults.maybe_kill(fault, "decode", chunk_no)
    reuse_freed_memory()
    preprocessor = _unpickled(preprocessor_pickle) if preprocessor_pickle is not None else None
    # one codec thread and one colour-conversion thread, as the single process's decoding threads: the
    # task holds one CPU (FFmpeg's own choice, a thread per core, would take the encoder actor's cores)
    with decode_threads(1):
        return _as_numpy(steps.collect(items, [steps.decode_one(item, preprocessor) for item in items]))


@functools.lru_cache(maxsize=4)
def _unpickled(data: bytes):
    """The preprocessor, unpickled once per decoding worker (every task of a run gets the same bytes)."""
    return cloudpickle.loads(data)


@ray.remote
def _warm_decoding_worker(*_early_parts) -> None:
    """Import what preprocessing in a decoding worker needs (torch; torchvision's transforms, which
    vlgap's own image models use through `FramePreprocess`) while the encoder actors load and the
    decoding CPUs are otherwise idle. Its arguments are the early parts' refs, only so that it runs
    after them: another remote function is queued apart by Ray, and this one, submitted last, ran
    between the first early part and the others, so the loaded actor waited for them (0.25 s traced)."""
    import torch  # noqa: F401

    try:
        from torchvision.transforms.v2 import functional  # noqa: F401
    except ImportError:  # encoders that preprocess without torchvision
        pass


def _as_numpy(part):
    """Preprocessed pixels as numpy arrays: Ray hands those to the actor as views of the object store,
    where torch tensors are pickled and copied on both sides (chunks are ~150 MB of float32 pixels)."""
    if isinstance(part.payload, list):  # vision; text payloads are strings
        part.payload = [(p.numpy() if hasattr(p, "numpy") else p, pos, per_value) for p, pos, per_value in part.payload]
    return part


@ray.remote
class EncoderActor:
    """Loads the encoder once; every call encodes one decoded chunk and writes its chunk files."""

    def __init__(self, job, threads: int | None, fault: str | None, driver_pid: int):
        if threads:
            import torch

            torch.set_num_threads(threads)
        import warnings

        # decoded frames arrive as read-only views of the object store; preprocessing never writes them
        warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
        self.job, self.fault, self.driver_pid = job, fault, driver_pid
        reuse_freed_memory()  # before the model's first activations, see vlgap.memory
        self.enc = job.load_encoder()
        self.written = 0

    def info(self) -> tuple[dict, bytes | None]:
        # versions from here, where the encoder's libraries are imported (the driver may never import them)
        info = dict(self.job.encoder_info(self.enc), versions=self.job.versions())
        # the preprocessor goes to the decoding tasks through the driver as bytes: unpickled there it
        # would import its module and with it torch (1-1.5 s of the driver's, between the loaded
        # actor's answer and its first chunk), which the driver never needs
        preprocessor = getattr(self.enc, "preprocessor", None)
        return info, (cloudpickle.dumps(preprocessor) if preprocessor is not None else None)

    def encode(self, r, chunk_no: int, steps, *parts) -> dict:
        t0, c0 = time.perf_counter(), time.process_time()
        decoded = parts[0].join(list(parts))
        out, truncated = steps.encode_chunk(self.enc, decoded, self.job.batch_size)
        faults.maybe_kill(self.fault, "encode", chunk_no)  # after the work, before the write: worst case
        self.job.write_chunk(tuple(r), out, decoded)
        self.written += 1
        faults.maybe_kill(self.fault, "driver", self.written, self.driver_pid)
        return {"truncated": truncated, "host": socket.gethostname(), "pid": os.getpid(),
                "busy_s": time.perf_counter() - t0, "cpu_s": time.process_time() - c0}


def plan_resources(ray, device: str, n_workers: int | None) -> tuple[int, dict, dict, int]:
    """(actors, actor options, decode-task options, torch threads per actor) for this cluster.

    GPU: one actor per GPU (1 GPU + 1 CPU each), decoding on the remaining CPUs. CPU only: actors on
    three quarters of the CPUs (at least one), decoding on the rest; on a tiny cluster (fewer CPUs
    than actors + 1) actors and decoding tasks share the CPUs fractionally, so none waits forever."""
    cpus, gpus = cluster_cpus_gpus(ray)
    if str(device).startswith("cuda"):
        if gpus < 1:
            raise VlgapError(f"device={device!r} but the Ray cluster has no GPU (resources: {cpus:g} CPU)")
        n = int(n_workers or gpus)
        if n > gpus:
            raise VlgapError(f"--ray-workers {n}: the cluster has {gpus:g} GPUs (one encoder actor per GPU)")
        return n, {"num_gpus": 1, "num_cpus": 1}, {"num_cpus": 1}, 0
    n = int(n_workers or max(1, int(cpus) * 3 // 4))
    if n < 1:
        raise VlgapError(f"--ray-workers must be >= 1, got {n}")
    actor_cpus = min(1.0, cpus / (n + 1))
    decode_cpus = max(0.01, min(1.0, cpus - n * actor_cpus))
    return n, {"num_cpus": actor_cpus}, {"num_cpus": decode_cpus}, 1


def run_ray(job, result, *, ray: str | bool = "auto", n_workers: int | None = None,
            threads: int | None = None, progress: bool = True) -> None:
    """Compute the missing chunks of `job` on a Ray cluster, then finalize its entries."""
    rt = connect(ray)
    fault = faults.plan()
    n, actor_opts, decode_opts, default_threads = plan_resources(rt, job.device, n_workers)
    light = replace(job, man=None, items=[])  # actors need the encoder spec and the entries, not the items
    actors = [EncoderActor.options(**actor_opts, **ACTOR_OPTIONS).remote(light, threads or default_threads, fault,
                                                                         os.getpid()) for _ in range(n)]
    early: dict = {}
    try:
        # an actor takes seconds to start (process, imports, weights): decode each actor's first chunk
        # meanwhile, as the encoder's name says its frames will be sampled (checked against the loaded
        # encoder), and warm the decoding workers' imports for the preprocessing of the chunks after it
        guess, early = _decode_while_loading(job, n, decode_opts, fault)
        try:
            info, preprocessor_pickle = rt.get(actors[0].info.remote())
        except rt.exceptions.RayError as err:
            raise unwrap(err) from None
        steps = job.steps(info)
        ranges = job.ranges(steps)
        todo = job.todo(ranges)
        if guess is not None and not _same_sampling(guess, steps):
            for refs in early.values():  # the name misled us: nothing decoded early is used
                for ref in refs:
                    rt.cancel(ref, force=True)
            early = {}
        result.chunks_total = len(ranges)
        n_early = len(early)
        truncated, hosts, busy = _run_chunks(rt, job, steps, ranges, todo, actors, decode_opts,
                                             preprocessor_pickle, fault, progress, result, early)
    finally:
        for a in actors:
            rt.kill(a)
    record = job.base_record(info, job.batch_size)
    record["ray"] = {"encoder_actors": n, "actor_resources": actor_opts, "decode_resources": decode_opts,
                     "hosts": sorted(hosts), "chunks_computed": result.chunks_computed,
                     "chunks_decoded_while_encoder_loaded": n_early,
                     "encoder_busy_fraction": round(busy["fraction"], 3),
                     # seconds the actors spent in their calls, and the CPU seconds their processes used
                     # meanwhile: CPU below busy x torch threads means the encoders shared their cores
                     "encoder_busy_s": round(busy["busy_s"], 2), "encoder_cpu_s": round(busy["cpu_s"], 2)}
    job.finish(result, steps, ranges, record, truncated)


def _decode_while_loading(job, n_chunks: int, decode_opts, fault) -> tuple[object, dict]:
    """(steps guessed from the encoder's name, {chunk range: refs of its parts decoded without
    preprocessing}) for the first `n_chunks` missing chunks; (None, {}) when the name does not tell
    how frames are sampled (video models) or the values are texts (decoding them is instant)."""
    from vlgap.encoders.registry import expected_shape

    shape = expected_shape(job.encoder)
    if job.param != "n_f" or shape is None or shape.get("modality") != "vision":
        return None, {}
    try:
        steps = job.steps(dict(shape, record={}))
    except VlgapError:
        return None, {}  # the loaded encoder's info raises the real error
    ranges = job.ranges(steps)
    chunk_no = {r: i for i, r in enumerate(ranges)}
    early = {r: _decode_parts(job, steps, r, chunk_no[r], None, decode_opts, fault)
             for r in job.todo(ranges)[:n_chunks]}
    if early:  # after the early parts, on the CPUs they leave idle until the actors are up
        _warm_decoding_worker.options(**decode_opts, **TASK_OPTIONS).remote(
            *[ref for refs in early.values() for ref in refs])
    return steps, early


def _same_sampling(guess, steps) -> bool:
    """Whether frames decoded with the guessed steps are the frames the real steps sample."""
    return (type(guess) is type(steps)
            and (guess.values, guess.n0, guess.is_video, guess.frame_order, getattr(guess, "frame_sampling", None))
            == (steps.values, steps.n0, steps.is_video, steps.frame_order, getattr(steps, "frame_sampling", None))
            and guess.chunk_items() == steps.chunk_items())


def _decode_parts(job, steps, r, chunk_no: int, preprocessor_ref, decode_opts, fault) -> list:
    """Refs of one chunk's parts, DECODE_ITEMS items each, decoded by as many tasks."""
    return [_decode.options(**decode_opts, **TASK_OPTIONS).remote(
        steps, job.items[s:min(s + DECODE_ITEMS, r[1])], chunk_no if s == r[0] else -1, preprocessor_ref, fault)
        for s in range(r[0], r[1], DECODE_ITEMS)]


def _run_chunks(rt, job, steps, ranges, todo, actors, decode_opts, preprocessor_pickle, fault, progress, result,
                early: dict):
    chunk_no = {r: i for i, r in enumerate(ranges)}
    window = 2 * len(actors) + 2      # chunks decoding or queued on actors: bounds memory
    queue = deque(todo)
    decoding: dict = {}               # ref of a part -> chunk range
    parts: dict = {}                  # chunk range -> refs of its parts, in item order
    waiting: dict = {}                # chunk range -> parts not decoded yet
    encoding: dict = {}               # ref -> (chunk range, actor index)
    load = [0] * len(actors)
    truncated, hosts, busy, cpu = 0, set(), 0.0, 0.0
    t0 = time.perf_counter()
    preprocessor_ref = rt.put(preprocessor_pickle)
    with progress_bar(progress) as prog:
        task = prog.add_task(f"{job.encoder} {job.param}={','.join(map(str, job.pending))} (ray, "
                             f"{len(actors)} encoder actors)", total=len(job.items), unit="items")
        prog.update(task, completed=sum(e - s for s, e in ranges if (s, e) not in todo))
        while queue or decoding or encoding:
            while queue and len(parts) + len(encoding) < window:
                r = queue.popleft()
                if r in early:  # decoded while the encoder loaded: the actor preprocesses the uint8 frames
                    parts[r] = early.pop(r)
                else:
                    parts[r] = _decode_parts(job, steps, r, chunk_no[r], preprocessor_ref, decode_opts, fault)
                decoding.update((p, r) for p in parts[r])
                waiting[r] = len(parts[r])
            ready, _ = rt.wait(list(decoding) + list(encoding), num_returns=1)
            ref = ready[0]
            if ref in decoding:
                r = decoding.pop(ref)
                waiting[r] -= 1
                if waiting[r] == 0:  # the whole chunk is decoded: to the least busy actor
                    del waiting[r]
                    a = min(range(len(actors)), key=load.__getitem__)
                    encoding[actors[a].encode.remote(r, chunk_no[r], steps, *parts.pop(r))] = (r, a)
                    load[a] += 1
                continue
            r, a = encoding.pop(ref)
            load[a] -= 1
            try:
                rep = rt.get(ref)
            except rt.exceptions.RayError as err:  # a bad item (no --skip-bad), or retries exhausted
                raise unwrap(err) from None
            truncated += rep["truncated"]
            busy += rep["busy_s"]
            cpu += rep["cpu_s"]
            hosts.add(rep["host"])
            result.chunks_computed += 1
            prog.update(task, advance=r[1] - r[0])
    dt = time.perf_counter() - t0
    fraction = busy / (dt * len(actors)) if todo else 0.0  # below ~0.9: the encoders waited for decoding
    if todo and progress:
        n = sum(e - s for s, e in todo)
        stderr_console.print(f"{job.encoder}: {n} items in {dt:.1f} s ({n / dt:.2f} items/s, {len(actors)} "
                             f"encoder actors on {len(hosts)} host(s), busy {fraction:.0%} of the time)",
                             highlight=False)
    return truncated, hosts, {"fraction": fraction, "busy_s": busy, "cpu_s": cpu}
