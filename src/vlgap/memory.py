"""Keep freed model-sized blocks in the process instead of handing them back to the kernel.

glibc's malloc serves every block above its mmap threshold (adaptive, at most 32 MiB) with a fresh
`mmap` and returns it with `munmap` when freed. A CNN's activations at batch 64 are tens to hundreds
of MiB per layer, so every layer of every batch page-faults and zeroes its output afresh: measured
here (MobileNetV2, 224 px, batch 64, 1 torch thread) 2.5 s per batch with 6.0 s of kernel time per
4 batches, against 0.9 s and 0.4 s once both thresholds are 1 GiB (peak RSS 1.5 -> 1.9 GB); exact
k-NN at N = 10^4 gains about 20 %. The arithmetic is untouched, so results are bit-identical.

`reuse_freed_memory()` is called where long CPU work starts (feature extraction, Ray's encoder
actors and decoding / k-NN tasks, the CLI). A process then keeps up to 1 GiB of freed memory for
reuse. `VLGAP_MALLOC=default` leaves the C library's behaviour alone; other allocators (jemalloc,
tcmalloc via LD_PRELOAD) are left alone too, since `mallopt` is glibc's.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import gc
import os
import platform
from contextlib import contextmanager
from typing import Iterator

#: blocks below this come from the heap and are reused; the heap's top is trimmed only above it
THRESHOLD_BYTES = 1 << 30
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # <malloc.h>
_done: bool | None = None


def reuse_freed_memory() -> bool:
    """Raise glibc's mmap and trim thresholds to THRESHOLD_BYTES once per process. Returns whether
    they are raised (False off Linux/glibc, or with VLGAP_MALLOC=default)."""
    global _done
    if _done is not None:
        return _done
    _done = False
    if os.environ.get("VLGAP_MALLOC", "").strip().lower() == "default":
        return _done
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return _done
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        _done = bool(libc.mallopt(_M_MMAP_THRESHOLD, THRESHOLD_BYTES)) and bool(
            libc.mallopt(_M_TRIM_THRESHOLD, THRESHOLD_BYTES))
    except (OSError, AttributeError):
        _done = False
    return _done


@contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector paused for a block of bulk work that builds many small
    containers and keeps most of them (memos, per-caption lists): each automatic collection there
    walks every tracked object of the process (the caller's data included) and finds nothing to
    free, e.g. 30 to 100 ms of a 0.7 s caption evaluation. Nothing is freed later than it would be
    by reference counting; cycles made inside are collected after the block. Nested blocks and a
    collector the caller disabled are left as they are."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
