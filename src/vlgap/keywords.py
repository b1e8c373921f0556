"""One vocabulary for the API: counts of resamples are `n_bootstrap` / `n_permutations` everywhere
(the CLI spells them `--bootstrap` / `--permutations`). A keyword that used to be public under
another name is refused with a message naming the new one, instead of Python's bare TypeError.

This module is the one mechanism for that: `refused_keywords(explain)` is the decorator every
refusal uses (`explain(kwargs)` says what is wrong with a call's keywords), `renamed_notes` the one
wording of a rename; `renamed_keywords(old="new")` is the common case, and
`features.source.feature_options_moved` adds the keywords that moved into FeatureOptions.
`reject_renamed_keywords` is the same rule for a function that takes **kwargs itself.
"""
from __future__ import annotations

import functools
from collections.abc import Callable, Mapping

from vlgap.errors import VlgapError


def renamed_notes(renames: Mapping[str, str], kwargs: Mapping) -> list[str]:
    """One note per old keyword used: "the keyword 'old' is now new"."""
    return [f"the keyword {old!r} is now {new}" for old, new in renames.items() if old in kwargs]


def _refuse(where: str, notes: list[str]) -> None:
    if notes:
        raise VlgapError(f"{where}(): " + "; ".join(notes))


def refused_keywords(explain: Callable[[Mapping], list[str]]) -> Callable:
    """Decorator: before each call, `explain(kwargs)` lists what is wrong with the keywords given (empty:
    nothing); any note raises one VlgapError "f(): note; note". The wrapped function keeps its
    signature (functools.wraps), so help() and inspection show the current names only."""
    def decorate(func: Callable) -> Callable:
        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            _refuse(func.__name__, explain(kwargs))
            return func(*args, **kwargs)
        return wrapper
    return decorate


def renamed_keywords(**renames: str) -> Callable:
    """Decorator: `f(old=...)` raises VlgapError "f(): the keyword 'old' is now new" for each
    `old="new"` given (every old keyword used is named); any other keyword goes to `f` as usual."""
    return refused_keywords(lambda kwargs: renamed_notes(renames, kwargs))


def reject_renamed_keywords(where: str, kwargs: dict, renamed: dict[str, str]) -> None:
    """The same rule inside a function that takes **kwargs: VlgapError for renamed keywords (`renamed`:
    old name -> how to say it now), TypeError for any other unexpected keyword."""
    _refuse(where, renamed_notes(renamed, kwargs))
    if kwargs:
        raise TypeError(f"{where}() got unexpected keyword arguments {sorted(kwargs)}")


def renamed_fields(**renames: str) -> Callable[[type], type]:
    """Class decorator for a config dataclass: `Cls(old=...)` raises VlgapError
    "Cls(): the keyword 'old' is now new" (same rule and wording as `renamed_keywords`)."""
    def decorate(cls: type) -> type:
        init = cls.__init__

        def __init__(self, *args, **kwargs):
            _refuse(cls.__name__, renamed_notes(renames, kwargs))
            init(self, *args, **kwargs)

        functools.update_wrapper(__init__, init)
        cls.__init__ = __init__
        return cls
    return decorate
