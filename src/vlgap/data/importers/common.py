"""What every importer shares: reading annotation text, the parsed form, video lookup, writing.

An importer turns its file into a `Parsed`: annotated videos in file order (id -> captions, meta) plus
two lists of problems, each record {"kind": "item"|"caption", "id", "where", "reason"}:

- `malformed`: entries of the wrong shape (missing key, wrong type, duplicate id, unknown video). An
  error naming the first one, unless `skip_bad`: then each is skipped and listed.
- `dropped`: empty or null captions. Always dropped, always counted and listed.

`finish` adds the item-level problems (no caption left, no video file), applies `limit`, writes the
manifest and, beside it, `<name>.skipped_items.jsonl` with every skipped item and dropped caption.
"""
from __future__ import annotations

import io
import json
import os
import random
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vlgap.data.manifest import IMAGE_SUFFIXES, VIDEO_SUFFIXES, Item, write_manifest
from vlgap.errors import VlgapError
from vlgap.io_utils import atomic_write_text

#: when one id exists with several suffixes, the first in this order is taken (a frame folder last)
SUFFIX_ORDER = (".mp4", ".webm", ".mkv", ".avi", ".mov", ".m4v", ".mpg", ".mpeg", ".gif")
SKIPPED_SUFFIX = ".skipped_items.jsonl"
EXAMPLES = 5  # ids quoted in a summary line; the skipped-items file has them all


@dataclass
class Entry:
    id: str
    captions: list[str]
    where: str  # "entry 3", "line 12": how the error messages name it
    meta: dict[str, Any] = field(default_factory=dict)
    media_names: tuple[str, ...] = ()  # extra names its video may have (MSVD vidN)


@dataclass
class Parsed:
    dataset: str
    layout: str
    entries: dict[str, Entry] = field(default_factory=dict)
    malformed: list[dict] = field(default_factory=list)
    dropped: list[dict] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    captionless: bool = False  # a layout without captions (VATEX private test): items are written with none
    id_key: str = "id"  # what the format calls an item's id, for messages

    def problem(self, kind: str, item_id: str | None, where: str, reason: str, malformed: bool = True) -> None:
        (self.malformed if malformed else self.dropped).append(
            {"kind": kind, "id": item_id, "where": where, "reason": reason})

    def add_caption(self, entry: Entry, caption: Any, where: str) -> bool:
        """Append one caption; None or blank is dropped (listed); any non-string makes the entry malformed."""
        if caption is None or (isinstance(caption, str) and not caption.strip()):
            self.problem("caption", entry.id, where, "null caption" if caption is None else "empty caption",
                         malformed=False)
            return True
        if not isinstance(caption, str):
            return False
        entry.captions.append(caption.strip())
        return True

    def restrict(self, keep: set[str]) -> None:
        """Keep only the entries in `keep` (a split), and only the problems that concern them or no known entry."""
        known = set(self.entries)
        self.entries = {k: e for k, e in self.entries.items() if k in keep}
        self.malformed = [r for r in self.malformed if r["id"] in keep or r["id"] not in known]
        self.dropped = [r for r in self.dropped if r["id"] in keep]


@dataclass
class ImportReport:
    dataset: str
    layout: str
    n_annotated: int
    n_written: int = 0
    n_captions: int = 0
    limit: int | None = None
    n_usable: int = 0
    skipped: list[dict] = field(default_factory=list)  # items left out (malformed, no captions, no video)
    dropped_captions: list[dict] = field(default_factory=list)
    several_suffixes: list[tuple[str, str, list[str]]] = field(default_factory=list)  # (id, taken, not taken)
    notes: list[str] = field(default_factory=list)
    manifest: Path | None = None
    skipped_file: Path | None = None

    @property
    def missing_video(self) -> list[str]:
        return [r["id"] for r in self.skipped if r.get("reason", "").startswith("no video file")]

    @property
    def no_captions(self) -> list[str]:
        return [r["id"] for r in self.skipped if "caption" in r.get("reason", "") and r["kind"] == "item"]

    def summary(self) -> str:
        """One fact per line; id lists are never wrapped (print with soft_wrap)."""
        lines = [(f"{self.dataset} ({self.layout}): {self.n_annotated} annotated videos, {self.n_written} written "
                  f"({self.n_captions} captions) to {self.manifest}")]
        if self.limit is not None and self.limit > self.n_usable:
            lines.append(f"--limit {self.limit} requested but only {self.n_usable} usable: wrote {self.n_written}")
        elif self.limit is not None:
            lines.append(f"--limit {self.limit}: random subset of {self.n_usable} usable items")
        if self.skipped:
            lines.append(f"skipped {len(self.skipped)} items (listed in {self.skipped_file}): " + _examples(self.skipped))
        if self.dropped_captions:
            kinds = sorted({r["reason"].split(" (")[0] for r in self.dropped_captions})
            lines.append(f"dropped {len(self.dropped_captions)} captions ({', '.join(kinds)}; listed in "
                         f"{self.skipped_file}): " + _examples(self.dropped_captions))
        if self.several_suffixes:
            ex = "; ".join(f"{vid}: took {taken} over {', '.join(others)}"
                           for vid, taken, others in self.several_suffixes[:EXAMPLES])
            more = len(self.several_suffixes) - EXAMPLES
            n = len(self.several_suffixes)
            lines.append(f"{n} video{'s' if n > 1 else ''} found with several suffixes (preference "
                         f"{' '.join(SUFFIX_ORDER)}, then a frame folder): {ex}" + (f"; {more} more" if more > 0 else ""))
        lines += self.notes
        if not self.skipped and not self.dropped_captions:
            lines.append("nothing skipped, no caption dropped")
        return "\n".join(lines)


def _examples(records: list[dict]) -> str:
    out = "; ".join(f"{r['id'] if r['id'] is not None else r['where']}: {r['reason']}" for r in records[:EXAMPLES])
    return out + (f"; {len(records) - EXAMPLES} more" if len(records) > EXAMPLES else "")


# ---- reading ------------------------------------------------------------------------------------
def read_text(path: Path) -> str:
    """The whole file as text: UTF-8 with or without a byte-order mark (UTF-16 if it has that BOM), read by
    the one reader (`vlgap.paths.read_text_utf8`: a folder, a missing file, bytes that are not UTF-8 are
    one line naming the file, the line and the byte). Line ends are left to the callers' line readers,
    which accept LF, CRLF and CR."""
    from vlgap.paths import read_text_utf8

    return read_text_utf8(path, "annotation file")


def read_json(path: Path) -> Any:
    from vlgap.json_files import parse_json

    return parse_json(read_text(path), str(path))


def lines_of(text: str) -> Iterator[tuple[int, str]]:
    """(line number, line without its end) for LF, CRLF or CR files. Not str.splitlines, which would
    also break a caption at U+2028 or a form feed."""
    for lineno, line in enumerate(io.StringIO(text, newline=None), 1):
        yield lineno, line.rstrip("\n")


def type_name(value: Any) -> str:
    return {str: "a string", list: "a list", dict: "an object", bool: "a boolean", int: "a number",
            float: "a number", type(None): "null"}.get(type(value), type(value).__name__)


def record_id(p: Parsed, record: Any, where: str, key: str, seen: dict[str, str], shape: str) -> str | None:
    """The id under `key` of one item record, or None after reporting why it has none: not an object
    (`shape` says what was expected), no id, not a non-empty string, or an id seen before (`seen`
    maps ids to where they were first met; this record is added)."""
    if not isinstance(record, dict):
        p.problem("item", None, where, f"is {type_name(record)}, not an object with {shape}")
        return None
    rid = record.get(key)
    if not isinstance(rid, str) or not rid:
        p.problem("item", None, where, f"has no '{key}'" if rid is None else
                  f"'{key}' is {type_name(rid)}, not a non-empty string")
        return None
    if rid in seen:
        p.problem("item", rid, where, f"{key} appears again (first at {seen[rid]})")
        return None
    seen[rid] = where
    return rid


# ---- videos -------------------------------------------------------------------------------------
def _suffix_rank(p: Path) -> tuple[int, str]:
    suf = p.suffix.lower()
    if p.is_dir():
        return (len(SUFFIX_ORDER) + 1, p.name)
    return (SUFFIX_ORDER.index(suf) if suf in SUFFIX_ORDER else len(SUFFIX_ORDER), p.name)


def index_videos(video_dir: Path) -> tuple[dict[str, list[Path]], dict[str, Path]]:
    """Video files (and frame folders) by id, best suffix first; and broken symlinks by id.
    Paths are kept as the user gave them: a symlink is recorded by its own name, not its target."""
    if not video_dir.is_dir():
        raise VlgapError(f"video folder not found: {video_dir}")
    base = Path(os.path.abspath(video_dir))
    found: dict[str, list[Path]] = {}
    broken: dict[str, Path] = {}
    for p in base.iterdir():
        if p.name.startswith("._"):  # macOS AppleDouble companions of copied files, not videos
            continue
        if p.suffix.lower() in VIDEO_SUFFIXES:
            if not p.exists():
                broken[p.stem] = p
            elif p.is_file():
                found.setdefault(p.stem, []).append(p)
        elif p.is_dir():
            found.setdefault(p.name, []).append(p)
    for paths in found.values():
        paths.sort(key=_suffix_rank)
    return found, broken


def _kind(path: Path) -> str:
    """"image" for a picture file (one frame), else "video" (a video file or a folder of frames)."""
    suffix = path.suffix.lower()
    return "image" if path.is_file() and suffix in IMAGE_SUFFIXES and suffix not in VIDEO_SUFFIXES else "video"


def finish(parsed: Parsed, annotations: Path, video_dir: Path, out: Path, limit: int | None, seed: int,
           skip_bad: bool, media: dict[str, list[Path]] | None = None) -> ImportReport:
    """Item-level checks, `limit`, the manifest and its skipped-items file. `media`: the files by id when
    the importer indexed the folder itself (pictures too: an item whose file is a picture is an image
    item); by default the videos and frame folders of `video_dir`."""
    if limit is not None and limit < 1:
        raise VlgapError(f"--limit must be >= 1, got {limit}")
    name = annotations.name
    if parsed.malformed and not skip_bad:
        first = parsed.malformed[0]
        more = len(parsed.malformed) - 1
        raise VlgapError(
            f"{name} {first['where']}" + (f" ({parsed.id_key} {first['id']!r})" if first["id"] is not None else "")
            + f": {first['reason']}" + (f"; {more} more malformed entries" if more else "")
            + "; fix the file, or pass --skip-bad to skip and list them")
    report = ImportReport(parsed.dataset, parsed.layout, len(parsed.entries), notes=list(parsed.notes))
    skipped = [r for r in parsed.malformed if r["kind"] == "item"]
    dropped = list(parsed.dropped) + [r for r in parsed.malformed if r["kind"] == "caption"]

    no_caption = []
    n_dropped = Counter(r["id"] for r in dropped)
    for e in parsed.entries.values():
        if not e.captions and not parsed.captionless:
            n_drop = n_dropped[e.id]
            why = f"no captions left (all {n_drop} were empty, null or malformed)" if n_drop else "no captions"
            no_caption.append({"kind": "item", "id": e.id, "where": e.where, "reason": why})
    if no_caption and not skip_bad:
        raise VlgapError(f"{parsed.dataset}: {len(no_caption)} of {len(parsed.entries)} annotated videos have no "
                         f"caption ({_examples(no_caption)}); pass --skip-bad to skip and list them")
    skipped += no_caption
    empty = {r["id"] for r in no_caption}

    videos, broken = index_videos(video_dir)
    if media is not None:
        videos = media
    usable: list[tuple[Entry, Path]] = []
    no_video: list[dict] = []
    for e in parsed.entries.values():
        if e.id in empty:
            continue
        names = (e.id,) + e.media_names
        hits = next((videos[n] for n in names if n in videos), None)
        if hits is None:
            link = next((broken[n] for n in names if n in broken), None)
            why = (f"no video file: {link.name} is a broken symlink" if link is not None else
                   f"no video file{' or picture' if media is not None else ''} named {' or '.join(names)} (.mp4, .webm, "
                   f"...{', .jpg, .png, ...' if media is not None else ''} or a frame folder) in {video_dir}")
            no_video.append({"kind": "item", "id": e.id, "where": e.where, "reason": why})
            continue
        if len(hits) > 1:
            report.several_suffixes.append((e.id, hits[0].name, [h.name for h in hits[1:]]))
        usable.append((e, hits[0]))
    if no_video and not skip_bad:
        ids = ", ".join(r["id"] for r in no_video[:EXAMPLES])
        raise VlgapError(
            f"{parsed.dataset}: {len(no_video)} of {len(parsed.entries)} annotated videos have no file in "
            f"{video_dir} (e.g. {ids}); download them, or pass --skip-bad to skip and list them")
    skipped += no_video
    if not usable:
        raise VlgapError(f"{parsed.dataset}: no usable items in {name} (annotated {len(parsed.entries)}, "
                         f"{len(skipped)} skipped: {_examples(skipped) if skipped else 'none'})")
    report.n_usable = len(usable)
    report.limit = limit
    if limit is not None and limit < len(usable):
        chosen = sorted(random.Random(seed).sample(range(len(usable)), limit))
        usable = [usable[i] for i in chosen]

    out = Path(out)
    if out.is_dir():
        out = out / "manifest.jsonl"
    if out.exists() and out.resolve() == annotations.resolve():
        raise VlgapError(f"--out {out} is the annotation file itself; give a new .jsonl path")
    skipped_file = out.with_name(out.name.removesuffix(".jsonl") + SKIPPED_SUFFIX)
    if skipped or dropped:
        atomic_write_text(skipped_file, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in skipped + dropped))
        report.skipped_file = skipped_file
    elif skipped_file.exists():  # a list from an earlier run would describe a different manifest
        skipped_file.unlink()
    items = [Item(e.id, path, _kind(path), tuple(e.captions), e.meta) for e, path in usable]
    write_manifest(items, out)
    report.manifest = out
    report.n_written = len(items)
    report.n_captions = sum(len(it.captions) for it in items)
    report.skipped = skipped
    report.dropped_captions = dropped
    return report

