"""Work that needs no encoder, run side by side on every core while no forward pass runs.

Why: `vlgap demo` is mostly its encoders' forward passes, which use every core through torch's thread
team; most of the rest (each probe's statistics and figures, loading a model, rendering videos) runs on
one core, so run one after another each of those leaves the other cores idle. `side_pool` runs such
tasks side by side, each on one torch thread (and one BLAS thread); a task that parallelises itself
(a sweep's cells in threads, the law fits in processes) still does. A side pool never runs beside a
forward pass: a forward pass would then share its cores (its thread team waits at every barrier for a
preempted thread), and changing its thread count instead is not an option, since for some batch
shapes a forward pass's result depends on its thread count.
"""
from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

_side_thread = threading.local()


def in_side_lane() -> bool:
    """Whether the calling thread is a side pool's worker (its progress lines stay plain: vlgap.progress)."""
    return bool(getattr(_side_thread, "on", False))


def _side_init(threads: int) -> None:
    import torch

    _side_thread.on = True
    torch.set_num_threads(threads)


@contextmanager
def side_pool(workers: int | None = None, torch_threads: int = 1) -> Iterator[ThreadPoolExecutor]:
    """A pool of `workers` threads (default: one per core) for tasks that run no encoder, each with
    `torch_threads` torch threads. Leaving the block waits for every task (an error in the block
    cancels those not started); the callers read their results, errors included, from the futures."""
    from threadpoolctl import threadpool_limits

    from vlgap.runs.claims import available_cores

    workers = max(1, int(workers if workers is not None else available_cores()))
    # numpy's BLAS keeps a pool of its own, one thread per core: one thread per task instead
    with threadpool_limits(1, user_api="blas"):
        pool = ThreadPoolExecutor(workers, thread_name_prefix="vlgap-side", initializer=_side_init,
                                  initargs=(int(torch_threads),))
        try:
            yield pool
        except BaseException:
            pool.shutdown(wait=True, cancel_futures=True)
            raise
        pool.shutdown(wait=True)
