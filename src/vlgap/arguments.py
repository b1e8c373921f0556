"""Arguments of the Python API checked where they enter, with one-line errors that name the argument and
say what would be valid (the API's counterpart of the CLI's declarations).

`check_array_like` and `describe` serve the functions that take arrays; `checked_call` checks a call's
arguments against the function's type hints (int never from a bool or a str, a list never from a str,
a bool never from a string...) and is what `vlgap.<name>` runs before each public function.
"""
from __future__ import annotations

import collections.abc
import functools
import inspect
import os
import sys
import types
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np


def describe(x: Any) -> str:
    """What a refused argument was, for a message: "None", "a dict", "an int", "a generator"..."""
    if x is None:
        return "None"
    kind = type(x).__name__
    return f"an {kind}" if kind[:1].lower() in "aeiou" else f"a {kind}"


def check_array_like(x: Any, name: str, what: str = "a list of [N, D] arrays or one [L, N, D] array") -> None:
    """Refuse, naming `name`, what cannot hold numbers: None, a str, a dict, a set, a generator, a single
    number. A list, a tuple, a numpy array, a torch tensor or anything with __array__ passes."""
    from vlgap.errors import VlgapError

    if isinstance(x, (list, tuple)) or (hasattr(x, "__array__") and not isinstance(x, (str, bytes))
                                        and getattr(x, "ndim", 1) != 0):
        return
    raise VlgapError(f"{name}: expected {what} (numpy or torch), got {describe(x)}")


# ------------------------------------------------------------------------------------------------
# checking a call against the function's type hints
# ------------------------------------------------------------------------------------------------

_NOT_CHECKED = object()  # an annotation this module does not judge (a protocol, a type variable...)


def _annotation(func: Callable, name: str, raw: Any) -> Any:
    """The annotation object of one parameter (string annotations evaluated in the function's module),
    or _NOT_CHECKED when it cannot be evaluated (a name imported for type checking only)."""
    if raw is inspect.Parameter.empty:
        return _NOT_CHECKED
    if not isinstance(raw, str):
        return raw
    try:
        return eval(raw, vars(sys.modules[inspect.unwrap(func).__module__]), {})  # noqa: S307 (the module's own text)
    except Exception:
        return _NOT_CHECKED


@functools.lru_cache(maxsize=None)
def _plan(func: Callable) -> tuple[inspect.Signature, dict[str, Any]]:
    sig = inspect.signature(func)
    return sig, {name: _annotation(func, name, p.annotation) for name, p in sig.parameters.items()}


def _members(tp: Any) -> tuple[Any, ...]:
    if isinstance(tp, types.UnionType) or typing.get_origin(tp) is typing.Union:
        return tuple(m for part in typing.get_args(tp) for m in _members(part))
    return (tp,)


def _is_int(v: Any) -> bool:
    if isinstance(v, (bool, np.bool_)):
        return False
    if isinstance(v, (int, np.integer)):
        return True
    return isinstance(v, (float, np.floating)) and float(v).is_integer()


def _is_real(v: Any) -> bool:
    return not isinstance(v, (bool, np.bool_)) and isinstance(v, (int, float, np.integer, np.floating))


_SEQUENCES = (list, tuple, collections.abc.Sequence, collections.abc.Iterable, collections.abc.Collection,
              collections.abc.MutableSequence, collections.abc.Set, set, frozenset)


def _accepts(tp: Any, v: Any) -> bool | None:
    """Whether value v fits annotation member tp; None when tp is not judged here."""
    if tp is _NOT_CHECKED or tp is Any or tp is object or isinstance(tp, typing.TypeVar):
        return None
    if tp is None or tp is type(None):
        return v is None
    origin = typing.get_origin(tp)
    if origin is typing.Literal:
        return any(v == a and type(v) is type(a) for a in typing.get_args(tp))
    if tp is bool:
        return isinstance(v, (bool, np.bool_))
    if tp is int:
        return _is_int(v)
    if tp is float:
        return _is_real(v)
    if tp is str:
        return isinstance(v, str)
    if tp in (Path, os.PathLike) or origin is os.PathLike:
        return isinstance(v, (str, os.PathLike))
    if origin in (dict, collections.abc.Mapping, collections.abc.MutableMapping) or tp in (dict, collections.abc.Mapping):
        return isinstance(v, collections.abc.Mapping)
    if origin in (collections.abc.Callable,) or tp is collections.abc.Callable:
        return callable(v)
    if origin in _SEQUENCES or tp in _SEQUENCES:
        return _sequence_accepts(origin or tp, typing.get_args(tp), v)
    if isinstance(tp, type):
        try:
            return isinstance(v, tp)
        except TypeError:  # a protocol that cannot be checked at run time
            return None
    return None


def _sequence_accepts(origin: Any, args: tuple, v: Any) -> bool:
    if v is None or isinstance(v, (str, bytes, collections.abc.Mapping)) or not hasattr(v, "__iter__"):
        return False
    if isinstance(v, np.ndarray):
        kinds = {int: "iu", float: "iuf", str: "UO", bool: "b"}
        item = args[0] if args else None
        return v.ndim >= 1 and (item not in kinds or v.dtype.kind in kinds[item])
    if not isinstance(v, (list, tuple)) or not args:
        return True  # a generator, a Series, a set...: not consumed here
    if origin is tuple and not (len(args) == 2 and args[1] is Ellipsis):
        return len(v) == len(args) and all(_fits(a, x) is not False for a, x in zip(args, v))
    return all(_fits(args[0], x) is not False for x in v)


def _fits(tp: Any, v: Any) -> bool | None:
    """Whether v fits the annotation tp (a union fits when one member does); None: not judged."""
    verdicts = [_accepts(m, v) for m in _members(tp)]
    if any(verdict is True for verdict in verdicts) or any(verdict is None for verdict in verdicts):
        return True if any(verdict is True for verdict in verdicts) else None
    return False


def expected(tp: Any) -> str:
    """What an annotation asks for, in words ("an integer", "a list of strings", "one of 'a', 'b'")."""
    parts = []
    for m in _members(tp):
        origin, args = typing.get_origin(m), typing.get_args(m)
        if m is None or m is type(None):
            words = "None"
        elif origin is typing.Literal:
            words = "one of " + ", ".join(repr(a) for a in args)
        elif m is bool:
            words = "True or False"
        elif m is int:
            words = "an integer (not a bool or a string)"
        elif m is float:
            words = "a number (not a bool or a string)"
        elif m is str:
            words = "a string"
        elif m in (Path, os.PathLike) or origin is os.PathLike:
            words = "a path (str or pathlib.Path)"
        elif origin in (dict, collections.abc.Mapping) or m in (dict, collections.abc.Mapping):
            words = "a dict"
        elif origin is collections.abc.Callable or m is collections.abc.Callable:
            words = "a function"
        elif origin in _SEQUENCES or m in _SEQUENCES:
            inner = expected(args[0]).removeprefix("an ").removeprefix("a ") if args and args[0] is not Ellipsis else ""
            inner = inner.split(" (", 1)[0]  # "a list of integers", not "a list (integer (not a bool or a string))"
            words = "a list" + (f" of {inner}s" if inner and " " not in inner else f" ({inner})" if inner else "") \
                + " (not a string)"
        elif isinstance(m, type):
            words = f"an {m.__name__}" if m.__name__[:1].lower() in "aeiou" else f"a {m.__name__}"
        else:
            words = str(m)
        if words not in parts:
            parts.append(words)
    if "a path (str or pathlib.Path)" in parts and "a string" in parts:
        parts.remove("a string")
    return " or ".join(parts)


def check_call(func: Callable, args: tuple, kwargs: dict, where: str | None = None) -> None:
    """Check the arguments of a call against `func`'s type hints: a VlgapError names the first argument
    that does not fit and what would (`expected`). Arguments whose annotation is Any, missing or not
    judged here (arrays, protocols) are left to the function; a call that does not bind (an unknown
    keyword, a missing argument) is Python's TypeError."""
    from vlgap.errors import VlgapError

    sig, hints = _plan(func)
    try:
        bound = sig.bind(*args, **kwargs)
    except TypeError:
        return  # the function's own message (a renamed keyword's new name), or Python's
    for name, value in bound.arguments.items():
        kind = sig.parameters[name].kind
        if kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
            continue
        tp = hints.get(name, _NOT_CHECKED)
        if _fits(tp, value) is False:
            shown = repr(value)
            shown = shown if len(shown) <= 60 else shown[:57] + "..."
            kind = "" if value is None else f" ({describe(value)})"
            raise VlgapError(f"{where or func.__name__}(): {name}={shown}{kind}: expected {expected(tp)}")


def _call_body(func: Callable, args: tuple, kwargs: dict) -> Any:
    """The function itself, once its arguments passed `check_call` (a test replaces this to stop there)."""
    return func(*args, **kwargs)


def checked(func: Callable, name: str | None = None) -> Callable:
    """`func` with its arguments checked against its type hints before it runs (`check_call`): what the
    Python API (`vlgap.<name>`) exposes."""
    @functools.wraps(func)
    def api_function(*args, **kwargs):
        check_call(func, args, kwargs, name)
        return _call_body(func, args, kwargs)
    api_function.__vlgap_checked__ = True
    return api_function


def as_numbers(x: Any, name: str, *, ndim: int | None = None, what: str | None = None,
               min_items: int = 1) -> np.ndarray:
    """`x` as a float64 numpy array, or one VlgapError naming `name` and what would be valid: None, a
    string, a dict, a set, a generator or a single number refused; values that are not real numbers
    (strings, objects, complex) refused; `ndim` dimensions and at least `min_items` rows asked for."""
    from vlgap.errors import VlgapError

    shape = {1: "a 1-D array of numbers (one per item)", 2: "a 2-D array of numbers [N items, D features]"}
    what = what or shape.get(ndim, "an array of numbers")
    check_array_like(x, name, what)
    if hasattr(x, "detach"):  # a torch tensor
        x = x.detach().cpu().numpy()
    try:
        arr = np.asarray(x)
    except ValueError as err:  # ragged nested lists
        raise VlgapError(f"{name}: expected {what}; numpy cannot read it as one ({err})") from None
    if arr.dtype.kind not in "biuf":
        raise VlgapError(f"{name}: expected {what}, got values of dtype {arr.dtype}")
    if ndim is not None and arr.ndim != ndim:
        raise VlgapError(f"{name}: expected {what}, got shape {arr.shape}")
    if arr.ndim == 0 or arr.shape[0] < min_items:
        raise VlgapError(f"{name}: expected {what} with at least {min_items} item{'s' if min_items != 1 else ''}, "
                         f"got shape {arr.shape}")
    arr = arr.astype(np.float64, copy=False)
    finite = arr[np.isfinite(arr)]
    check_scale(float(np.abs(finite).max()) if finite.size else 0.0, name)
    return arr


def safe_scale(dtype: Any = np.float64) -> tuple[float, float]:
    """The range of the largest |value| in which squares, sums of squares, Gram entries and covariances of
    such numbers stay finite and exact enough in `dtype` (numpy or torch): the cube roots of the smallest
    normal and the largest number (3e-103 .. 6e102 in float64, 2e-13 .. 7e12 in float32)."""
    info = np.finfo(_numpy_dtype(dtype))
    return float(info.tiny) ** (1 / 3), float(info.max) ** (1 / 3)


def _numpy_dtype(dtype: Any) -> np.dtype:
    name = str(dtype).removeprefix("torch.")
    return np.dtype(np.float32 if name == "bfloat16" else name if name.startswith("float") else dtype)


def check_scale(peak: float, name: str, dtype: Any = np.float64, what: str = "squares and sums") -> None:
    """Refuse numbers whose largest |value| `peak` lies outside `safe_scale(dtype)` (0 passes: no scale),
    in one line naming `name`, the range and the fix, instead of overflow warnings and then a number."""
    from vlgap.errors import VlgapError

    low, high = safe_scale(dtype)
    if peak == 0.0 or low <= peak <= high:
        return
    why = "overflow" if peak > high else "underflow to 0"
    kind = str(_numpy_dtype(dtype))
    raise VlgapError(f"{name}: the largest |value| is {peak:.3g}, outside the range where {what} stay exact in "
                     f"{kind} ({low:.1g} .. {high:.1g}): they would {why}; divide by one common factor (e.g. "
                     f"{peak:.3g}) first")


def checked_class(cls: type) -> type:
    """Class decorator: the constructor checks its arguments against the hints of `cls`'s signature
    first (`check_call`), as the API's functions do; the class stays the class (isinstance, subclassing)."""
    init = cls.__init__

    @functools.wraps(init)
    def __init__(self, *args, **kwargs):
        check_call(cls, args, kwargs, cls.__name__)
        init(self, *args, **kwargs)

    cls.__init__ = __init__
    return cls
