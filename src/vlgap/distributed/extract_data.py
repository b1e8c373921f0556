"""PROTOTYPE, not the default: `vlgap extract --ray` as a Ray Data pipeline, for the measurement that
decides whether it should replace `distributed/extract.py` (README, "Running on a cluster"). Selected
only by the environment variable VLGAP_RAY_EXECUTOR=data (so `benchmarks/scale.py` can time both
implementations with the same command); nothing else reaches it.

    from_items(missing chunks).map(decode).map_batches(ChunkEncoder, batch_size=1, concurrency=n)

One row per chunk, so Ray's batching cannot split a chunk: decoding (uint8 frames, no model) runs as
Ray Data map tasks, encoding on an actor pool that loads the model once per actor and encodes each
chunk with the steps of `features/chunk_steps.py` (preprocessing included), then writes the chunk's
sealed files with `Job.write_chunk`, as the hand-written actors do. The driver joins and seals the
entries with `Job.finish`, so the store is the same one (bit-identical arrays; resumable: a re-run
computes only missing chunks). Ray Data brings the in-flight window, backpressure and scheduling.

Limits of the prototype: the frames are sampled as the encoder's name says (`expected_shape`), so
video encoders (clip length known only once loaded) are refused; no fault-injection hooks; Ray Data
needs pyarrow (`ray[data]`).
"""
from __future__ import annotations

import os
import pickle
import socket
import time
from dataclasses import replace

from vlgap.distributed.cluster import ACTOR_OPTIONS, connect, unwrap
from vlgap.distributed.extract import _same_sampling, plan_resources
from vlgap.errors import VlgapError
from vlgap.features.chunk_steps import VisionSteps
from vlgap.progress import progress_bar, stderr_console

#: the variable (and its value) that selects this prototype
EXECUTOR_VARIABLE, EXECUTOR_VALUE = "VLGAP_RAY_EXECUTOR", "data"


def selected() -> bool:
    return os.environ.get(EXECUTOR_VARIABLE, "").strip().lower() == EXECUTOR_VALUE


def _decode_chunk(row: dict, steps) -> dict:
    """One chunk's items decoded (uint8 frames, or joined texts): the `collect`ed chunk, pickled."""
    from vlgap.memory import reuse_freed_memory

    reuse_freed_memory()
    items = pickle.loads(row["items"])
    decoded = steps.collect(items, [steps.decode_one(item, None) for item in items])
    return {"start": row["start"], "end": row["end"], "decoded": pickle.dumps(decoded, protocol=5)}


class ChunkEncoder:
    """Ray Data actor: loads the encoder once; each batch is one chunk, encoded and written (sealed)."""

    def __init__(self, job, guess, threads: int | None):
        import warnings

        if threads:
            import torch

            torch.set_num_threads(threads)
        warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
        from vlgap.memory import reuse_freed_memory

        reuse_freed_memory()
        self.job = job
        self.enc = job.load_encoder()
        self.info = dict(job.encoder_info(self.enc), versions=job.versions())
        self.steps = job.steps(self.info)
        if not _same_chunks(guess, self.steps):
            raise VlgapError(f"encoder {job.encoder!r}: its frames are not sampled as its name says; the Ray Data "
                             "prototype (VLGAP_RAY_EXECUTOR=data) cannot run it: unset that variable")

    def __call__(self, batch: dict) -> dict:
        out = {"start": [], "end": [], "truncated": [], "host": [], "busy_s": [], "info": []}
        for start, end, blob in zip(batch["start"], batch["end"], batch["decoded"]):
            t0 = time.perf_counter()
            decoded = pickle.loads(blob)
            arrays, truncated = self.steps.encode_chunk(self.enc, decoded, self.job.batch_size)
            self.job.write_chunk((int(start), int(end)), arrays, decoded)
            for key, value in (("start", int(start)), ("end", int(end)), ("truncated", truncated),
                               ("host", socket.gethostname()), ("busy_s", time.perf_counter() - t0),
                               ("info", pickle.dumps(self.info))):
                out[key].append(value)
        return out


def _same_chunks(guess, steps) -> bool:
    """Whether the chunks decoded with the guessed steps are the ones the loaded encoder's steps need."""
    if isinstance(steps, VisionSteps):
        return _same_sampling(guess, steps)
    return type(guess) is type(steps) and guess.values == steps.values


def run_ray_data(job, result, *, ray: str | bool = "auto", n_workers: int | None = None,
                 threads: int | None = None, progress: bool = True) -> None:
    """The prototype's counterpart of `distributed.extract.run_ray`: the missing chunks of `job`, then
    its entries finalized."""
    from vlgap.encoders.registry import expected_shape

    rt = connect(ray)
    try:
        import ray.data  # noqa: F401 - needs pyarrow
    except ImportError as err:
        raise VlgapError(f"{EXECUTOR_VARIABLE}={EXECUTOR_VALUE} needs Ray Data: pip install 'ray[data]' ({err})") from None
    shape = expected_shape(job.encoder)
    if shape is None or (shape["modality"] == "vision") != (job.param == "n_f"):
        raise VlgapError(f"encoder {job.encoder!r}: the Ray Data prototype ({EXECUTOR_VARIABLE}={EXECUTOR_VALUE}) runs "
                         "image and text encoders whose name tells their kind; unset the variable")
    guess = job.steps(dict({"kind": "image", "n0": 1}, **shape, record={}))
    n, actor_opts, decode_opts, default_threads = plan_resources(rt, job.device, n_workers)
    ranges = job.ranges(guess)
    todo = job.todo(ranges)
    result.chunks_total = len(ranges)
    light = replace(job, man=None, items=[])
    rows = [{"start": s, "end": e, "items": pickle.dumps(job.items[s:e])} for s, e in todo]
    truncated, hosts, busy, info = 0, set(), 0.0, None
    t0 = time.perf_counter()
    if rows:
        ds = rt.data.from_items(rows, override_num_blocks=len(rows))
        ds = ds.map(_decode_chunk, fn_kwargs={"steps": guess}, num_cpus=decode_opts["num_cpus"])
        ds = ds.map_batches(ChunkEncoder, fn_constructor_kwargs={"job": light, "guess": guess,
                                                                 "threads": threads or default_threads},
                            batch_size=1, compute=rt.data.ActorPoolStrategy(size=n), **actor_opts,
                            # the actors' own fault policy (restarts: they reload the model), as the hand-written
                            # pool's; remote arguments that differ from the decoding map's also keep Ray Data from
                            # fusing decoding into the encoder actors (Ray fuses a task map into the next actor
                            # map when their remote arguments match), so chunks decode beside the encoders
                            **ACTOR_OPTIONS)
        with progress_bar(progress) as prog:
            task = prog.add_task(f"{job.encoder} {job.param}={','.join(map(str, job.pending))} (ray data, "
                                 f"{n} encoder actors)", total=len(job.items), unit="items")
            prog.update(task, completed=sum(e - s for s, e in ranges if (s, e) not in todo))
            try:
                for rep in ds.iter_rows():
                    truncated += int(rep["truncated"])
                    busy += float(rep["busy_s"])
                    hosts.add(str(rep["host"]))
                    info = info or pickle.loads(rep["info"])
                    result.chunks_computed += 1
                    prog.update(task, advance=int(rep["end"]) - int(rep["start"]))
            except rt.exceptions.RayError as err:
                raise _our_error(err) from None
    if info is None:  # every chunk was there already: the encoder's own description, loaded here
        enc = job.load_encoder()
        info = dict(job.encoder_info(enc), versions=job.versions())
    dt = time.perf_counter() - t0
    busy = busy / (dt * n) if rows else 0.0
    if rows and progress:
        k = sum(e - s for s, e in todo)
        stderr_console.print(f"{job.encoder}: {k} items in {dt:.1f} s ({k / dt:.2f} items/s, Ray Data prototype, "
                             f"{n} encoder actors, busy {busy:.0%} of the time)", highlight=False)
    steps = job.steps(info)
    record = job.base_record(info, job.batch_size)
    record["ray"] = {"executor": "ray-data prototype", "encoder_actors": n, "actor_resources": actor_opts,
                     "decode_resources": decode_opts, "hosts": sorted(hosts),
                     "chunks_computed": result.chunks_computed, "encoder_busy_fraction": round(busy, 3)}
    job.finish(result, steps, ranges, record, truncated)


def _our_error(err: Exception) -> Exception:
    """Our one-line VlgapError from wherever Ray Data wrapped it (task error, user-code exception)."""
    seen = err
    while seen is not None:
        if isinstance(seen, VlgapError):
            return VlgapError(str(seen))
        found = unwrap(seen)
        if isinstance(found, VlgapError):
            return found
        seen = seen.__cause__ or getattr(seen, "cause", None)
    return err
