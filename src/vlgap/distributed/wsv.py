"""WSV latent generation on a Ray cluster (`vlgap wsv train|experiment|gap --ray`).

Each actor loads the text-to-video pipeline and the latent encoder once (`job.load()`: rebuilt from the
driver's spec strings and checked against the driver's recorded fingerprints, so a worker whose files
differ is refused with the difference named), then turns one caption at a time into its latent
(`job.generate`). The seed of caption i is a function of the run's seed and i alone (see
vlgap.wsv.parts.DiffusersGenerator), so which actor makes a clip, and in which order, changes nothing:
the latents are bit-identical to a single process on the same device, dtype and torch thread count.

The actors return each latent (a few MB) and the driver writes it, sealed and atomically, as soon as it
arrives (`on_result`): the cache needs no filesystem shared with the workers, and the driver is its
only writer. Faults: an actor that dies is restarted, reloads the parts and re-runs the calls it held
(`max_restarts`, `max_task_retries`): its in-flight clip is made again, nothing else. A driver that
dies takes its actors along: the clips in flight are lost, every written one stays, and a re-run
generates only the missing captions. The job object arrives as an argument: this module imports
nothing of vlgap.wsv (that package calls this one).
"""
from __future__ import annotations

import os
import socket
import time
from typing import Any, Callable, Sequence

import ray

from vlgap.distributed import faults
from vlgap.distributed.cluster import ACTOR_OPTIONS, cluster_cpus_gpus, connect, unwrap
from vlgap.errors import VlgapError

#: CPUs per generator actor when the cluster has no GPU: each actor holds a whole pipeline in memory
CPUS_PER_CPU_ACTOR = 4


@ray.remote
class GeneratorActor:
    """Loads the generator and latent encoder once; every call makes one caption's latent."""

    def __init__(self, job, threads: int, fault: str | None, driver_pid: int):
        if threads:
            import torch

            torch.set_num_threads(threads)
        self.job, self.fault, self.driver_pid = job, fault, driver_pid
        self.where = f"Ray worker {socket.gethostname()} (pid {os.getpid()})"
        self.error = None
        self.made = 0
        try:
            self.loaded = job.load()
        except VlgapError as err:  # kept, not raised: Ray would restart an actor whose __init__ fails
            self.loaded, self.error = None, f"{self.where}: {err}"
        except Exception as err:  # noqa: BLE001 - out of memory, a broken install...: one line, no restarts
            line = (str(err).splitlines() or [""])[0][:200]
            self.loaded, self.error = None, (f"{self.where}: could not load the generator "
                                             f"({type(err).__name__}: {line})")

    def ready(self) -> str:
        if self.error:
            raise VlgapError(self.error)
        return self.where

    def generate(self, index: int, caption: str) -> tuple[Any, dict]:
        self.ready()
        t0 = time.perf_counter()
        z = self.job.generate(self.loaded, index, caption)
        faults.maybe_kill(self.fault, "generate", index)  # after the work, before it is returned: worst case
        self.made += 1
        faults.maybe_kill(self.fault, "driver", self.made, self.driver_pid)
        return z, {"host": socket.gethostname(), "pid": os.getpid(), "busy_s": time.perf_counter() - t0}


def plan_actors(ray_mod, device: str, n_workers: int | None) -> tuple[int, dict, int]:
    """(actors, actor options, torch threads per actor; 0 = leave torch's default).

    GPU: one actor per GPU (1 GPU + 1 CPU each). CPU only: one actor per CPUS_PER_CPU_ACTOR CPUs by
    default (each holds a whole pipeline), the CPUs shared evenly, that many torch threads each."""
    cpus, gpus = cluster_cpus_gpus(ray_mod)
    if str(device).startswith("cuda"):
        if gpus < 1:
            raise VlgapError(f"--device {device} but the Ray cluster has no GPU (resources: {cpus:g} CPU); use "
                             "--device cpu or a cluster with GPUs")
        n = int(n_workers or gpus)
        if n > gpus:
            raise VlgapError(f"--ray-workers {n}: the cluster has {gpus:g} GPUs (one generator actor per GPU)")
        return n, {"num_gpus": 1, "num_cpus": 1}, 0
    n = int(n_workers or max(1, int(cpus) // CPUS_PER_CPU_ACTOR))
    if n < 1:
        raise VlgapError(f"--ray-workers must be >= 1, got {n}")
    share = max(cpus / n, 0.01)
    return n, {"num_cpus": min(share, max(1.0, float(int(share))))}, max(1, int(share))


def generate_on_ray(job, todo: Sequence[tuple[int, str]], on_result: Callable[[int, Any], None], *,
                    ray: str | bool = "auto", n_workers: int | None = None,
                    progress: Callable[[int, float], None] | None = None) -> dict[str, Any]:
    """Make the latents of `todo` ((caption index, caption) pairs) on Ray actors; `on_result(index, z)`
    is called in the driver as each arrives (in completion order), `progress(n made, seconds)` after it.
    Returns what ran where: {"actors", "actor_resources", "hosts", "made", "seconds"}."""
    rt = connect(ray)
    fault = faults.plan()
    n, actor_opts, threads = plan_actors(rt, job.device, n_workers)
    n = min(n, max(1, len(todo)))  # no actor loads a pipeline for nothing
    actors = [GeneratorActor.options(**actor_opts, **ACTOR_OPTIONS).remote(job, threads, fault, os.getpid())
              for _ in range(n)]
    hosts: set[str] = set()
    made, t0 = 0, time.perf_counter()
    try:
        try:  # every actor's parts checked against the driver's before any clip is made
            rt.get([a.ready.remote() for a in actors])
        except rt.exceptions.RayError as err:
            raise unwrap(err) from None
        queue = list(reversed(todo))
        window = 2  # calls per actor: the next caption waits on the actor, no more (memory, restarts)
        pending: dict = {}  # ref -> (caption index, actor index)
        load = [0] * n
        while queue or pending:
            while queue and min(load) < window:
                a = min(range(n), key=load.__getitem__)
                i, c = queue.pop()
                pending[actors[a].generate.remote(i, c)] = (i, a)
                load[a] += 1
            ready, _ = rt.wait(list(pending), num_returns=1)
            i, a = pending.pop(ready[0])
            load[a] -= 1
            try:
                z, info = rt.get(ready[0])
            except rt.exceptions.RayError as err:  # our own error, or Ray's retries exhausted
                raise unwrap(err) from None
            on_result(i, z)
            made += 1
            hosts.add(info["host"])
            if progress is not None:
                progress(made, time.perf_counter() - t0)
    finally:
        for a in actors:
            rt.kill(a)
    return {"actors": n, "actor_resources": actor_opts, "hosts": sorted(hosts), "made": made,
            "seconds": time.perf_counter() - t0}
