"""The dataset manifest: JSONL, one item per line.

    {"id": "vid0", "video": "clips/vid0.mp4", "captions": ["...", "..."], "meta": {...}}
    {"id": "img3", "image": "photos/img3.jpg", "captions": ["..."]}

`video` is an mp4/webm/avi/mkv/mov/gif file or a folder of frames; `image` is one picture (a one-frame
video). Relative paths resolve against the manifest's folder.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
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


def _parse_line(obj: Any, lineno: int, root: Path, where: str) -> Item:
    if not isinstance(obj, dict):
        raise VlgapError(f"{where} line {lineno}: expected a JSON object with id, video|image, captions")
    item_id = obj.get("id")
    if not isinstance(item_id, (str, int)) or str(item_id) == "":
        raise VlgapError(f"{where} line {lineno}: missing 'id' (a non-empty string)")
    item_id = str(item_id)
    has_video, has_image = "video" in obj, "image" in obj
    if has_video == has_image:
        raise VlgapError(f"{where} line {lineno} (item {item_id!r}): give exactly one of 'video' or 'image'")
    kind = "video" if has_video else "image"
    media = Path(str(obj[kind])).expanduser()
    if not media.is_absolute():
        media = (root / media).resolve()
    caps = obj.get("captions", [])
    if isinstance(caps, str):
        caps = [caps]
    if not isinstance(caps, list) or not all(isinstance(c, str) for c in caps):
        raise VlgapError(f"{where} line {lineno} (item {item_id!r}): 'captions' must be a list of strings")
    meta = obj.get("meta") or {}
    if not isinstance(meta, dict):
        raise VlgapError(f"{where} line {lineno} (item {item_id!r}): 'meta' must be an object")
    return Item(item_id, media, kind, tuple(caps), meta)


def read_manifest(path: str | Path) -> Manifest:
    """Read and validate a JSONL manifest. Structural problems raise at once; problems of one item's
    media or captions are left to extraction, where `--skip-bad` can turn them into reported skips."""
    from vlgap.paths import read_text_utf8

    path = Path(path).expanduser()
    text = read_text_utf8(path, "manifest")  # a folder, a missing file, non-UTF-8 bytes: one line naming it
    root = path.resolve().parent
    items: list[Item] = []
    seen: dict[str, int] = {}
    for lineno, line in enumerate(text.split("\n"), 1):  # as a file's lines: \n only
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as err:
            raise VlgapError(f"{path} line {lineno}: not valid JSON ({err.msg})") from None
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
