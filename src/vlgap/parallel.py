"""Independent CPU tasks spread over the cores: `threaded_map` (threads, one torch thread each) for
torch work that releases the GIL (a sweep's alignment cells), `process_map` (worker processes) for
pure-Python work that does not (the scaling law's bootstrap refits).

Results never depend on how many workers ran: every task is a pure function of its inputs, and the
callers key what they write by task, not by completion order."""
from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

T = TypeVar("T")
R = TypeVar("R")

#: most worker threads or processes used (more cores bring little at these task sizes)
MAX_WORKERS = 4


def workers_setting(env: str = "VLGAP_WORKERS") -> int | None:
    """The worker count the user set in $VLGAP_WORKERS (1: everything in this thread / process), None
    when unset; anything but a whole number >= 1 is refused in one line. The one reader of the setting
    (the sweep's cells and laws, CAPE's LM lanes)."""
    raw = os.environ.get(env, "").strip()
    if not raw:
        return None
    try:
        n = int(raw)
    except ValueError:
        n = 0
    if n < 1:
        from vlgap.errors import VlgapError

        raise VlgapError(f"{env}={raw!r}: give a whole number >= 1 (1 runs everything one after another, "
                         "in one thread and one process)")
    return n


def workers_for(n_tasks: int, device: str = "cpu") -> int:
    """Workers for `n_tasks` CPU tasks: $VLGAP_WORKERS when set (`workers_setting`), else one per core
    up to MAX_WORKERS; always 1 on a GPU (its kernels are queued on one stream)."""
    given = workers_setting()
    if not str(device).startswith("cpu") or n_tasks <= 1:
        return 1
    if given is not None:
        return max(1, min(given, n_tasks))
    from vlgap.runs.claims import available_cores

    return max(1, min(available_cores(), MAX_WORKERS, n_tasks))


@contextmanager
def torch_threads(n: int):
    """torch's intra-op thread count set to `n` inside the block, restored after it."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def threaded_map(fn: Callable[[T], R], items: Iterable[T], workers: int) -> Iterator[R]:
    """fn over items; with workers > 1 in that many threads, each torch op on one thread (the cores are
    shared by tasks, not by one task's ops), results yielded as they complete. workers == 1: in order,
    in this thread, torch's threads untouched."""
    items = list(items)
    if workers <= 1:
        for item in items:
            yield fn(item)
        return
    from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait

    with torch_threads(1), ThreadPoolExecutor(workers) as pool:
        pending = {pool.submit(fn, item) for item in items[:2 * workers]}
        queue = iter(items[2 * workers:])
        try:
            while pending:
                done, pending = wait(pending, return_when=FIRST_COMPLETED)
                for fut in done:
                    nxt = next(queue, None)
                    if nxt is not None:
                        pending.add(pool.submit(fn, nxt))
                    yield fut.result()
        finally:
            for fut in pending:
                fut.cancel()


def process_map(fn: Callable[..., R], arg_lists: list[tuple[Any, ...]], workers: int) -> Iterator[R]:
    """fn(*args) for each of arg_lists, yielded in input order as they finish, from `workers` worker
    processes (joblib's loky backend: fresh interpreters, reused between calls). `fn` must be
    importable by name. workers == 1: in this process."""
    if workers <= 1 or len(arg_lists) <= 1:
        for args in arg_lists:
            yield fn(*args)
        return
    from joblib import Parallel, delayed

    yield from Parallel(n_jobs=min(workers, len(arg_lists)), backend="loky", return_as="generator")(
        delayed(fn)(*args) for args in arg_lists)
