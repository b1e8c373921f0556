"""The dataset manifest: JSONL, one item per line.

    {"id": "vid0", "video": "clips/vid0.mp4", "captions": ["...", "..."], "meta": {...}}
    {"id": "img3", "image": "photos/img3.jpg", "captions": ["..."]}

`video` is an mp4/webm/avi/mkv/mov/gif file or a folder of frames; `image` is one picture (a one-frame
video). Relative paths resolve against the manifest's folder. Every line is validated against the JSON
Schema shipped as vlgap/resources/manifest.schema.json (`manifest_schema()`); a line that breaks it is
a one-line error naming the line, the item and what the field must be.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable

from vlgap.errors import VlgapError
from vlgap.io_utils import atomic_write_text

VIDEO_SUFFIXES = {".mp4", ".webm", ".avi", ".mkv", ".mov", ".gif", ".m4v", ".mpg", ".mpeg"}
IMAGE_SUFFIXES = {".jpg", ".jpeg", ".png", ".bmp", ".webp", ".tif", ".tiff", ".gif"}


@dataclass(frozen=True)
class Item:
    id: str
    media: Path  # absolute path of the video file, frame folder or image
    kind: str  # "video" or "image"
    captions: tuple[str, ...]
    meta: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    def to_json(self, relative_to: Path | None = None) -> dict[str, Any]:
        path = self.media
        if relative_to is not None:
            try:
                path = self.media.relative_to(relative_to)
            except ValueError:
                pass
        out: dict[str, Any] = {"id": self.id, self.kind: str(path), "captions": list(self.captions)}
        if self.meta:
            out["meta"] = self.meta
        return out


@dataclass
class Manifest:
    path: Path | None
    items: list[Item]

    def __len__(self) -> int:
        return len(self.items)

    @property
    def ids(self) -> list[str]:
        return [it.id for it in self.items]

    def fingerprint(self) -> str:
        """Content hash of ids, captions and media (file bytes for small files, size+name otherwise).
        Two manifests with the same items and media share cached features, wherever they live."""
        h = hashlib.sha256()
        for it in self.items:
            h.update(json.dumps([it.id, it.kind, list(it.captions)], ensure_ascii=False).encode())
            h.update(_media_digest(it.media).encode())
        return h.hexdigest()[:16]

    def subset(self, ids: Iterable[str]) -> "Manifest":
        keep = set(ids)
        return Manifest(self.path, [it for it in self.items if it.id in keep])


_digest_cache: dict[tuple[str, int, int], str] = {}


def _media_digest(path: Path) -> str:
    if not path.exists():
        return f"missing:{path.name}"
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES)
        return "dir:" + ",".join(_media_digest(p) for p in files)
    st = path.stat()
    key = (str(path), st.st_size, st.st_mtime_ns)
    if key not in _digest_cache:
        if st.st_size <= 32 * 2**20:
            _digest_cache[key] = hashlib.sha256(path.read_bytes()).hexdigest()[:16]
        else:  # large media: size plus head and tail bytes is a cheap, stable identity
            with open(path, "rb") as f:
                head = f.read(2**20)
                f.seek(-(2**20), 2)
                tail = f.read()
            _digest_cache[key] = f"{st.st_size}:" + hashlib.sha256(head + tail).hexdigest()[:16]
    return _digest_cache[key]


#: The JSON Schema of one manifest line, shipped in the package (docs/own-data.md shows it as a table).
SCHEMA_PATH = Path(__file__).resolve().parent.parent / "resources" / "manifest.schema.json"
SCHEMA_NAME = "vlgap/resources/manifest.schema.json"


@lru_cache(maxsize=1)
def manifest_schema() -> dict[str, Any]:
    """The manifest item's JSON Schema (draft 2020-12), as shipped in vlgap/resources/."""
    return json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))


@lru_cache(maxsize=1)
def _validator():
    from jsonschema import Draft202012Validator

    schema = manifest_schema()
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


def _kind_of(value: Any) -> str:
    if value == "":
        return "an empty string"
    if isinstance(value, list):
        bad = next((i for i, v in enumerate(value) if not isinstance(v, str)), None)
        if bad is not None:
            return f"a list holding {_kind_of(value[bad])} at index {bad}"
    return {str: "a string", list: "a list", dict: "an object", bool: "a boolean", int: "a number",
            float: "a number", type(None): "null"}.get(type(value), type(value).__name__)


_KEYS = frozenset({"id", "video", "image", "captions", "meta"})


def schema_valid(obj: Any) -> bool:
    """Whether `obj` satisfies manifest.schema.json: the same answer as jsonschema's validator (a test
    compares them on generated objects), about 100x faster (50,000 lines: 0.15 s against 16 s for
    jsonschema's validator on a loaded 2-core machine), which is left to word the error of a failing line."""
    if type(obj) is not dict or not obj.keys() <= _KEYS:
        return False
    i = obj.get("id")
    if not ((type(i) is str and i) or type(i) is int or (type(i) is float and i.is_integer())):
        return False
    has_video, has_image = "video" in obj, "image" in obj
    if has_video == has_image:
        return False
    media = obj["video" if has_video else "image"]
    if type(media) is not str or not media:
        return False
    caps = obj.get("captions", "")
    if type(caps) is not str and not (type(caps) is list and all(type(c) is str for c in caps)):
        return False
    return obj.get("meta") is None or type(obj["meta"]) is dict


def schema_problem(obj: Any) -> str | None:
    """What is wrong with one manifest line's object under the schema, in words (None: it is valid).
    The first problem only, in the order a reader fixes them: shape, unknown keys, id, media, fields."""
    if schema_valid(obj):
        return None
    validator = _validator()
    if validator.is_valid(obj):  # cannot happen while schema_valid agrees with the schema (tested)
        return None
    schema = manifest_schema()
    props = schema["properties"]
    if not isinstance(obj, dict):
        return f"expected {schema['x-expected']}, got {_kind_of(obj)}"
    unknown = [k for k in obj if k not in props]
    if unknown:
        import difflib

        hints = [f"{k!r} (did you mean {m[0]!r}?)" if (m := difflib.get_close_matches(k, props, 1, 0.6)) else repr(k)
                 for k in unknown]
        return f"unknown key {', '.join(hints)}; an item has {', '.join(props)}"
    if "id" not in obj:
        return f"missing 'id' ({props['id']['x-expected']})"
    for key in props:  # a field of the wrong type or an empty path
        if key in obj and not validator.evolve(schema=props[key]).is_valid(obj[key]):
            return f"{key!r} must be {props[key]['x-expected']}, got {_kind_of(obj[key])}"
    if ("video" in obj) == ("image" in obj):
        return "give exactly one of 'video' or 'image' (the item's media path)"
    error = next(iter(sorted(validator.iter_errors(obj), key=lambda e: list(e.path))))  # anything else
    return f"{'/'.join(map(str, error.path)) or 'the item'}: {error.message}"


def _parse_line(obj: Any, lineno: int, root: Path, where: str) -> Item:
    problem = schema_problem(obj)
    if problem is not None:
        item = f" (item {str(obj['id'])!r})" if isinstance(obj, dict) and isinstance(obj.get("id"), (str, int)) \
            and not isinstance(obj.get("id"), bool) else ""
        raise VlgapError(f"{where} line {lineno}{item}: {problem} (schema: {SCHEMA_NAME})")
    item_id = str(int(obj["id"])) if isinstance(obj["id"], float) else str(obj["id"])
    kind = "video" if "video" in obj else "image"
    media = Path(str(obj[kind])).expanduser()
    if not media.is_absolute():
        media = (root / media).resolve()
    caps = obj.get("captions", [])
    if isinstance(caps, str):
        caps = [caps]
    return Item(item_id, media, kind, tuple(caps), obj.get("meta") or {})


def read_manifest(path: str | Path) -> Manifest:
    """Read and validate a JSONL manifest. Structural problems raise at once; problems of one item's
    media or captions are left to extraction, where `--skip-bad` can turn them into reported skips."""
    from vlgap.paths import read_text_utf8

    path = Path(path).expanduser()
    from vlgap.json_files import parse_json

    text = read_text_utf8(path, "manifest")  # a folder, a missing file, non-UTF-8 bytes: one line naming it
    root = path.resolve().parent
    items: list[Item] = []
    seen: dict[str, int] = {}
    for lineno, line in enumerate(text.split("\n"), 1):  # as a file's lines: \n only
        if not line.strip():
            continue
        obj = parse_json(line, f"{path} line {lineno}")
        item = _parse_line(obj, lineno, root, str(path))
        if item.id in seen:
            raise VlgapError(f"{path} line {lineno}: duplicate id {item.id!r} (first on line {seen[item.id]})")
        seen[item.id] = lineno
        items.append(item)
    if not items:
        raise VlgapError(f"manifest {path} is empty: it needs at least one item line")
    return Manifest(path, items)


def write_manifest(items: Iterable[Item | dict], path: str | Path, relative: bool = True) -> Path:
    """Write items as JSONL atomically; media paths are stored relative to the manifest when possible."""
    path = Path(path)
    root = path.resolve().parent
    lines = []
    for it in items:
        obj = it.to_json(root if relative else None) if isinstance(it, Item) else it
        lines.append(json.dumps(obj, ensure_ascii=False))
    atomic_write_text(path, "\n".join(lines) + "\n")
    return path
