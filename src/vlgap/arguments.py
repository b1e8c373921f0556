"""Arguments of the Python API checked where they enter, with one-line errors that name the argument and
say what would be valid (the API's counterpart of the CLI's declarations).

`check_array_like` and `describe` serve the functions that take arrays; `checked_call` checks a call's
arguments against the function's type hints (int never from a bool or a str, a list never from a str,
a bool never from a string...) and is what `vlgap.<name>` runs before each public function.
"""
from __future__ import annotations

from typing import Any


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
