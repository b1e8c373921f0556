"""Claims: one process takes a cell by a lock file holding its pid, so several workers share a folder.

`claim(lock)` creates the lock file exclusively and writes this process's pid into it. A lock whose
process is gone (a killed worker) is taken over; a lock of a live process, or one still empty (its
creator has not written its pid yet), is held, and `claim` returns False: the cell is that worker's.
`lock_holder(lock)` is the one liveness check, shared by `claim` and `oversubscription_warning`.
"""
from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path
from typing import Iterable, Iterator

from vlgap.io_utils import make_folder, process_alive


def lock_path(cell_path: str | os.PathLike) -> Path:
    """The lock file of a cell file: `cells/<name>.json` -> `cells/<name>.lock`."""
    return Path(cell_path).with_suffix(".lock")


def lock_holder(lock: str | os.PathLike) -> int | None:
    """The live process holding a lock file of `claim`: its pid; 0 while the file is still empty (its
    creator has not written its pid yet, so it counts as held); None when that process is gone, the file
    vanished or does not hold a pid."""
    try:
        pid = int(Path(lock).read_text() or "0")
    except (ValueError, FileNotFoundError):
        return None
    except PermissionError:  # another user's lock that we cannot read: held
        return 0
    return pid if pid == 0 or process_alive(pid) else None


def claim(lock: str | os.PathLike) -> bool:
    """Take a cell for this process: create `lock` exclusively with this pid in it (True). False when a
    live process (or one still writing its pid) holds it; a lock whose process is gone is taken over."""
    lock = Path(lock)
    make_folder(lock.parent)
    for _ in range(2):
        try:
            fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            if lock_holder(lock) is not None:
                return False  # alive: its cell
            lock.unlink(missing_ok=True)  # stale: the worker died; take over (the cell resumes)
            continue
        try:
            os.write(fd, str(os.getpid()).encode())
        finally:
            os.close(fd)
        return True
    return False


def release(lock: str | os.PathLike) -> None:
    """Give a claimed cell back (a missing lock is fine)."""
    Path(lock).unlink(missing_ok=True)


@contextmanager
def claimed(lock: str | os.PathLike) -> Iterator[bool]:
    """`with claimed(lock) as mine:` mine is `claim(lock)`; a lock taken here is released on leaving,
    also when the work raised."""
    mine = claim(lock)
    try:
        yield mine
    finally:
        if mine:
            release(lock)


def live_holders(locks: Iterable[str | os.PathLike]) -> set[int]:
    """The pids of the live processes holding any of `locks` (an empty lock, pid not written yet, is not
    counted: its process is not known)."""
    return {pid for lock in locks if (pid := lock_holder(lock))}


#: the lock files of an experiment's workers, relative to its folder
WORKER_LOCKS = ("cells/*.lock", "inversion/*.lock")


def oversubscription_warning(out: str | os.PathLike, threads: int, cores: int,
                             locks: tuple[str, ...] = WORKER_LOCKS) -> str | None:
    """A line when the workers now computing in `out` (this one and every live process holding a lock
    matched by `locks` there) ask for more torch threads than there are cores, else None. Measured on the
    WSV experiment: two workers of 2 threads on 2 cores ran a caption step 3.5x slower than two of 1."""
    pids = {os.getpid()} | live_holders(p for pattern in locks for p in Path(out).glob(pattern))
    if len(pids) * threads <= cores:
        return None
    return (f"{len(pids)} experiment workers train in {out} with {threads} torch threads each on {cores} cores: "
            f"oversubscribed, which made each step about 3.5x slower here; start each worker with --threads "
            f"{max(1, cores // len(pids))}")


def available_cores() -> int:
    """The cores this process may run on (its affinity where the platform says, else the CPU count)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
