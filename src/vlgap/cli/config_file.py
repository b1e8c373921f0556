"""A configuration file (the demo's TOML, `vlgap demo --config`), checked field by field with the
declarations of the command line's options (vlgap.cli.declarations): a key means what the option of the
same name means, and its value is refused with the same one-line message, naming the file and the key.

Each key has a shape besides its declaration, checked first, so that TOML's own types never slip through:
- `int`: a whole number (not a boolean, not 1.5, not "3");
- `bool`: true or false (a string "false" is refused, never taken for true);
- `str`: a string;
- `path`: a string naming a path (an empty one is refused, as on the command line);
- `ints`: a list of whole numbers, one whole number, or the comma text the option takes ("1,2,4");
- `strs`: a list of strings, or the comma text the option takes ("mobilenet_v2,minilm"): a string is
  never iterated character by character.
Keys sit at the top level or all under one `[demo]` table; a key beside the table, a `demo` that is not a
table and an unknown key are refused.
"""
from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any

from vlgap.cli.constraints import Constraint, Count
from vlgap.errors import VlgapError


def _demo_fields() -> dict[str, tuple[str, Constraint | None]]:
    """Each DemoConfig key: (shape, declaration of the option of the same meaning)."""
    from vlgap.cli.declarations import COMMANDS, SHARED

    return {
        "n_videos": ("int", COMMANDS["demo"]["n_videos"]), "seed": ("int", SHARED["seed"]),
        "n_frames_per_video": ("int", COMMANDS["make-data"]["n_frames"]), "video_size": ("int", Count(8, 4096)),
        "vision": ("strs", SHARED["vision"]), "text": ("strs", SHARED["text"]),
        "n_frames": ("ints", SHARED["n_frames"]), "n_captions": ("ints", SHARED["n_captions"]),
        "k": ("int", SHARED["k"]), "metric": ("str", SHARED["metric"]),
        "n_bootstrap": ("int", SHARED["bootstrap"]), "n_permutations": ("int", SHARED["permutations"]),
        "image_size": ("int", SHARED["image_size"]), "temporal_pooling": ("str", SHARED["temporal_pooling"]),
        "device": ("str", SHARED["device"]), "dtype": ("str", SHARED["dtype"]),
        "text_dtype": ("str", SHARED["text_dtype"]), "temporal": ("bool", None), "out": ("path", SHARED["out"]),
        "cache_dir": ("path", SHARED["cache_dir"]), "random_weights": ("bool", None),
        "preset": ("str", COMMANDS["demo"]["preset"]), "caption_draws": ("int", SHARED["caption_draws"]),
        "frame_sampling": ("strs", SHARED["frame_sampling"]),
    }


_SHAPE_WORDS = {"int": "a whole number", "bool": "true or false (a TOML boolean, without quotes)",
                "str": "a string", "path": "a path (a string)",
                "ints": "a list of whole numbers, one whole number, or its comma text such as \"1,2,4\"",
                "strs": "a list of strings, or its comma text such as \"a,b\""}


def _kind(value: Any) -> str:
    return {bool: "a boolean", int: "a whole number", float: "a number", str: "a string", list: "a list",
            dict: "a table"}.get(type(value), type(value).__name__)


def _shaped(key: str, value: Any, shape: str) -> Any:
    """`value` when it has `shape` (a list as its comma text); else a one-line VlgapError naming `key`."""
    ok = {"int": isinstance(value, int) and not isinstance(value, bool),
          "bool": isinstance(value, bool),
          "str": isinstance(value, str),
          "path": isinstance(value, str)}.get(shape)
    if shape in ("ints", "strs"):
        def whole(v):
            return isinstance(v, int) and not isinstance(v, bool)

        def name(v):
            return isinstance(v, str) and v.strip() and "," not in v

        if isinstance(value, str) or (shape == "ints" and whole(value)):
            return str(value)
        if isinstance(value, list) and value and all(whole(v) if shape == "ints" else name(v) for v in value):
            return ",".join(str(v) for v in value)
        ok = False
    if not ok:
        raise VlgapError(f"{key} = {value!r}: need {_SHAPE_WORDS[shape]}, got {_kind(value)}")
    if shape == "path" and not value.strip():
        raise VlgapError(f"{key} = {value!r}: an empty path; name a folder")
    return value


def _final(key: str, text: Any, shape: str) -> Any:
    """The checked value as DemoConfig holds it (a list option's comma text split into its values)."""
    if shape not in ("ints", "strs"):
        return text
    if key in ("n_frames", "n_captions"):
        from vlgap.cli.options import int_list

        return int_list(text, key)
    return [part.strip() for part in str(text).split(",") if part.strip()]


def check_fields(data: dict[str, Any], fields: dict[str, tuple[str, Constraint | None]], command: str) -> dict[str, Any]:
    """Every value of `data` checked by its shape and its declaration (unknown keys are the caller's);
    returns the values as the configuration holds them."""
    out: dict[str, Any] = {}
    helps = {"device": "spread"}  # the demo's --device offers spread (vlgap.cli.declarations._device)
    for key, value in data.items():
        if key not in fields:
            out[key] = value
            continue
        shape, decl = fields[key]
        text = _shaped(key, value, shape)
        if decl is not None:
            values = {"_command": command, "_helps": helps, "_defaults": {}, "_name": key, **data}
            decl.check(text, key, values)
            decl.check_joint(text, key, values)
        out[key] = _final(key, text, shape)
    return out


def read_toml(path: str | os.PathLike, what: str = "--config") -> dict[str, Any]:
    """The TOML file at `path` as a table: decoded as every text file is (UTF-8, a byte-order mark,
    UTF-16 with its mark), a syntax error one line naming the file."""
    from vlgap.paths import read_text_utf8

    text = read_text_utf8(path, what)
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise VlgapError(f"{what} {path}: not valid TOML: {err}") from None


def demo_values(path: str | os.PathLike) -> dict[str, Any]:
    """The demo keys of the TOML file at `path`, each checked (see the module docstring)."""
    from vlgap.probe.demo import check_keys

    where = f"--config {path}"
    data = read_toml(path)
    if "demo" in data:
        if not isinstance(data["demo"], dict):
            raise VlgapError(f"{where}: demo = {data['demo']!r}: need a [demo] table of keys, got {_kind(data['demo'])}")
        beside = sorted(k for k in data if k != "demo")
        if beside:
            raise VlgapError(f"{where}: keys {beside} sit beside the [demo] table and would be ignored; put every key "
                             "under [demo] (or use no table)")
        data = data["demo"]
    try:
        check_keys(data)
        return check_fields(data, _demo_fields(), "demo")
    except VlgapError as err:
        raise VlgapError(f"{where}: {err}") from None


def load_config(path: str | os.PathLike | None, overrides: dict[str, Any] | None = None):
    """The demo's configuration: DemoConfig's defaults, then the keys of the TOML file at `path` (checked
    here), then `overrides` (the command line's options, checked by their declarations; None: not given)."""
    from vlgap.probe.demo import config_from

    values = demo_values(Path(path)) if path is not None else {}
    values.update({k: v for k, v in (overrides or {}).items() if v is not None})
    return config_from(values)


__all__ = ["check_fields", "demo_values", "load_config", "read_toml"]
