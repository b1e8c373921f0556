"""Test-only fault injection: SIGKILL a worker process (or the driver) once, at a chosen step.

`VLGAP_RAY_FAULT="stage:index:marker[;...]"` is read by the driver and handed to its tasks and
actors as an argument (a worker's environment is fixed when Ray starts it). When a task or actor
reaches (stage, index) it creates `marker` exclusively, and only if that succeeded kills its own
process with SIGKILL (stage "driver": the driver's first, then its own). The marker makes the fault
fire once, so Ray's retry of the same work succeeds. Stages: "decode" (chunk number), "encode"
(chunk number), "knn" (row-block number), "generate" (WSV caption index, after its latent is made and
before it is returned), "driver" (after this encoder actor wrote `index` chunks, or this WSV generator
actor made `index` latents).
"""
from __future__ import annotations

import os
import signal

ENV = "VLGAP_RAY_FAULT"


def plan() -> str | None:
    return os.environ.get(ENV) or None


def maybe_kill(fault: str | None, stage: str, index: int, driver_pid: int | None = None) -> None:
    if not fault:
        return
    for spec in fault.split(";"):
        st, idx, marker = spec.split(":", 2)
        if st != stage or int(idx) != index:
            continue
        try:
            fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            continue  # fired before: this is Ray's retry, let it succeed
        import ray

        ctx = ray.get_runtime_context()
        os.write(fd, f"{stage} {index} pid={os.getpid()} worker={ctx.get_worker_id()}\n".encode())
        os.close(fd)
        if stage == "driver" and driver_pid:
            os.kill(driver_pid, signal.SIGKILL)
        os.kill(os.getpid(), signal.SIGKILL)
