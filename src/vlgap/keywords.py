"""One vocabulary for the API: counts of resamples are `n_bootstrap` / `n_permutations` everywhere
(the CLI spells them `--bootstrap` / `--permutations`). A keyword that used to be public under
another name is refused with a message naming the new one, instead of Python's bare TypeError.

`renamed_keywords` is the decorator form of `vlgap.errors.reject_renamed_keywords` (the one rule and
message), for functions with an explicit signature rather than **kwargs.
"""
from __future__ import annotations

import functools
from collections.abc import Callable

from vlgap.errors import reject_renamed_keywords


def renamed_keywords(**renames: str) -> Callable:
    """Decorator: `f(old=...)` raises VlgapError "f: the keyword 'old' is now new" for each
    `old="new"` given; any other keyword goes to `f` as usual.

    The wrapped function keeps its signature (functools.wraps), so help() and inspection show the
    current names only."""
    def decorate(func: Callable) -> Callable:
        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            old = {k: kwargs[k] for k in kwargs if k in renames}
            if old:
                reject_renamed_keywords(func.__name__, old, renames)
            return func(*args, **kwargs)
        return wrapper
    return decorate
