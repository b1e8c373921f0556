"""What a file is, told by its first bytes before its extension is trusted, and loaders of arrays and
tensors whose refusals are vlgap's own one line.

numpy and torch word their refusals for their own users: `np.load` of a text or gzip file named .npy says
"Cannot load file containing pickled data when allow_pickle=False" (advice to load it unsafely, for a
file that may come from anywhere), and `torch.load(weights_only=True)` prints a many-line text that
suggests `weights_only=False` (which runs any code in the file). Here:

- `sniff(path)` names the content: "npy", "zip" (an .npz, or a torch checkpoint), "safetensors",
  "pickle", "gzip", "text", "empty" or "unknown"; `describe(kind)` says it in words;
- `load_npy(path, what)`: one array of a .npy file, read only when its bytes are a .npy array;
- `torch_load_plain(source, where)`: a torch file of plain tensors, dicts and lists (weights_only), and a
  file holding anything else is refused naming the first class it holds, never with torch's advice.
"""
from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from vlgap.errors import VlgapError

#: the content a feature file's suffix promises
EXPECTED = {".npy": "npy", ".npz": "zip", ".safetensors": "safetensors", ".pt": "torch", ".pth": "torch",
            ".bin": "torch"}

_WORDS = {"npy": "a .npy array", "zip": "a zip archive (an .npz file, or a torch checkpoint)",
          "safetensors": "a .safetensors file", "pickle": "a Python pickle",
          "gzip": "a gzip-compressed file", "text": "a text file", "empty": "an empty file",
          "unknown": "a file of an unknown kind"}


def sniff(path: str | os.PathLike) -> str:
    """The kind of file at `path` by its first bytes (see the module docstring)."""
    with open(path, "rb") as f:
        head = f.read(4096)
        size = os.fstat(f.fileno()).st_size
    if not head:
        return "empty"
    if head.startswith(b"\x93NUMPY"):
        return "npy"
    if head.startswith((b"PK\x03\x04", b"PK\x05\x06")):
        return "zip"
    if head.startswith(b"\x1f\x8b"):
        return "gzip"
    if len(head) >= 9 and head[8:9] == b"{" and 2 <= int.from_bytes(head[:8], "little") <= size - 8:
        return "safetensors"
    if head[:1] == b"\x80" and 2 <= head[1] <= 5:  # a pickle's PROTO opcode (torch's legacy format too)
        return "pickle"
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError as err:
        text = head[: err.start].decode("utf-8") if err.start > len(head) - 4 else None
    if text is not None and all(c.isprintable() or c in "\t\r\n\ufeff" for c in text):
        return "text"
    return "unknown"


def describe(kind: str) -> str:
    return _WORDS.get(kind, kind)


def check_kind(path: Path, accepted: str) -> str:
    """The content kind of `path`, when it is what its suffix promises (`EXPECTED`); else a one-line
    VlgapError saying what the bytes are. `accepted`: the accepted formats, for the message."""
    try:
        kind = sniff(path)
    except OSError as err:
        from vlgap.errors import os_reason

        raise VlgapError(f"{path}: cannot be read ({os_reason(err)})") from None
    want = EXPECTED.get(path.suffix.lower())
    if want is None:
        return kind
    fits = kind == want or (want == "torch" and kind in ("zip", "pickle"))
    if not fits:
        hint = {"npy": "; rename it .npy", "safetensors": "; rename it .safetensors"}.get(kind, "")
        if kind == "zip" and want != "torch":
            hint = "; rename it .npz (or .pt for a torch checkpoint)"
        raise VlgapError(f"{path}: named {path.suffix} but its bytes are {describe(kind)}, not "
                         f"{describe(want) if want != 'torch' else 'a torch checkpoint'}{hint}; accepted: {accepted}")
    return kind


def load_npy(path: str | os.PathLike, what: str = "array") -> Any:
    """The array of the .npy file at `path` (never a pickle), or a one-line VlgapError naming the file."""
    import numpy as np

    path = Path(path)
    check_kind(path, ".npy")
    try:
        return np.load(path, allow_pickle=False)
    except ValueError as err:
        if "pickle" in str(err):
            raise VlgapError(f"{path}: an array of Python objects (dtype object), which vlgap does not load as "
                             f"{what} (loading them could run code); save a numeric array") from None
        raise VlgapError(f"{path}: not a readable .npy {what} ({err})") from None
    except (OSError, EOFError) as err:
        raise VlgapError(f"{path}: not a readable .npy {what} ({err or 'truncated'})") from None


def _first_line(err: BaseException) -> str:
    return (str(err).strip().splitlines() or [type(err).__name__])[0][:200]


def torch_load_plain(source: str | os.PathLike | Any, where: str) -> Any:
    """`torch.load(source, weights_only=True)` on the CPU: only tensors, dicts, lists and numbers, no code
    run. A file holding anything else is refused naming the class it holds; any other failure is one line."""
    import pickle

    import torch

    try:
        return torch.load(source, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as err:
        m = re.search(r"(?:Unsupported global: GLOBAL |Unsupported operand )(\S+)", str(err))
        held = f" ({m.group(1)})" if m else ""
        raise VlgapError(f"{where}: holds Python objects other than tensors, dicts, lists and numbers{held}; vlgap "
                         "loads only plain tensors (loading other objects could run code in the file): save a "
                         "dict of tensors, or a .safetensors file") from None
    except Exception as err:  # noqa: BLE001 - torch raises many types for a damaged or foreign file
        raise VlgapError(f"{where}: not a readable torch file ({type(err).__name__}: {_first_line(err)})") from None


__all__ = ["EXPECTED", "check_kind", "describe", "load_npy", "sniff", "torch_load_plain"]
