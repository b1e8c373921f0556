"""One vocabulary for the API: counts of resamples are `n_bootstrap` / `n_permutations` everywhere
(the CLI spells them `--bootstrap` / `--permutations`). A keyword that used to be public under
another name is refused with a message naming the new one, instead of Python's bare TypeError.
"""
from __future__ import annotations

import functools
from collections.abc import Callable

from vlgap.errors import VlgapError


def renamed_keywords(**renames: str) -> Callable:
    """Decorator: `f(old=...)` raises VlgapError "f(): the keyword old= is now new=" (every old
    keyword used is named) for each `old="new"` given.

    The wrapped function keeps its signature (functools.wraps), so help() and inspection show the
    current names only."""
    def decorate(func: Callable) -> Callable:
        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            used = [f"{old}= is now {new}=" for old, new in renames.items() if old in kwargs]
            if used:
                raise VlgapError(f"{func.__name__}(): the keyword {'; '.join(used)} (resample counts are "
                                 "n_bootstrap / n_permutations in every API function)")
            return func(*args, **kwargs)
        return wrapper
    return decorate
