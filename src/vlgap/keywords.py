"""One vocabulary for the API: counts of resamples are `n_bootstrap` / `n_permutations` everywhere
(the CLI spells them `--bootstrap` / `--permutations`). A keyword that used to be public under
another name is refused with a message naming the new one, instead of Python's bare TypeError.

`reject_renamed_keywords` holds the one rule and message; `renamed_keywords` is its decorator form,
for functions with an explicit signature rather than **kwargs.
"""
from __future__ import annotations

import functools
from collections.abc import Callable

from vlgap.errors import VlgapError


def reject_renamed_keywords(where: str, kwargs: dict, renamed: dict[str, str]) -> None:
    """Raise VlgapError for keyword arguments that were renamed or moved (`renamed`: old name -> how to say
    it now), and TypeError for any other unexpected keyword; `kwargs` is the function's **kwargs."""
    for name in kwargs:
        if name in renamed:
            raise VlgapError(f"{where}: the keyword {name!r} is now {renamed[name]}")
    if kwargs:
        raise TypeError(f"{where}() got unexpected keyword arguments {sorted(kwargs)}")


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
