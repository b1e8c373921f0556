"""The PTB tokenizer twin on two cores: a long list of captions split in halves, the second half
tokenised by a forked copy of this process while this one does the first.

A line's output is a function of the line and of the text after it up to a bound (`_following`),
so the first half is tokenised with just enough of the second half after it to give its last line
that context, and the halves' outputs are exactly the whole list's. The child inherits the memos
and compiled rules (its own new entries are lost with it) and hands its outputs back through a
pipe; anything going wrong there (no fork, an error in the child) falls back to this process
tokenising the second half itself. Used on Linux only (fork), for lists of at least
`PARALLEL_LINES` lines, from a process running no other Python thread, when
`vlgap.parallel.workers_for(2)` gives two workers (VLGAP_WORKERS=1 turns it off). Measured on the
5,000 x 5 adversarial benchmark corpus (2 cores, under load): the references' tokenisation on the
critical path 0.41 -> 0.33 CPU s, the helper's 0.13 CPU s on the other core.
"""
from __future__ import annotations

import os
import pickle
import sys
import threading
from typing import Callable, Sequence

#: fewer lines than this are tokenised in this process (a fork and a pipe cost a few milliseconds)
PARALLEL_LINES = 8000


def _context_lines(lines: Sequence[str], i: int, bound: Callable[[Sequence[str], int], str]) -> int:
    """How many lines after line i its trailing context (`bound(lines, i)`, i.e. `_following`) reads."""
    size = len(bound(lines, i))
    k, seen = 0, 0
    while seen < size:
        seen += 1 + len(lines[i + 1 + k])
        k += 1
    return k


def _read_all(fd: int) -> bytes:
    chunks = []
    while True:
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


def tokenize_halves(lines: Sequence[str], tokenize: Callable[[Sequence[str]], list[str]],
                    following: Callable[[Sequence[str], int], str]) -> list[str] | None:
    """`tokenize(lines)` with the second half in a forked child; None where that is not to be
    tried (too few lines, one worker, no fork) so the caller tokenises in this process."""
    n = len(lines)
    if n < PARALLEL_LINES or not sys.platform.startswith("linux") or not hasattr(os, "fork"):
        return None
    if threading.active_count() > 1:  # (a lock another thread holds would stay held in the child)
        return None
    from vlgap.parallel import workers_for

    if workers_for(2) < 2:
        return None
    mid = n // 2
    extra = _context_lines(lines, mid - 1, following)
    read_fd, write_fd = os.pipe()
    try:
        pid = os.fork()
    except OSError:
        os.close(read_fd)
        os.close(write_fd)
        return None
    if pid == 0:  # the child: tokenise the second half, hand it back, leave without cleanup
        code = 0
        try:
            os.close(read_fd)
            data = pickle.dumps(tokenize(lines[mid:]), protocol=pickle.HIGHEST_PROTOCOL)
            view = memoryview(data)
            while view:
                view = view[os.write(write_fd, view):]
        except BaseException:  # noqa: BLE001 (the parent redoes the half)
            code = 1
        finally:
            os._exit(code)
    os.close(write_fd)
    try:
        first = tokenize(lines[:mid + extra])[:mid]
        data = _read_all(read_fd)
    finally:
        os.close(read_fd)
        _, status = os.waitpid(pid, 0)
    second = pickle.loads(data) if status == 0 and data else None
    if not isinstance(second, list) or len(second) != n - mid:
        second = tokenize(lines[mid:])
    return first + second
