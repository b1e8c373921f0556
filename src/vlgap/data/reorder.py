"""Temporal reorder triples (video, positive caption, negatives that tell the same events in another
order): from a shapes manifest (meta["reorder"]), from vlgap's JSON form, or from VideoComp's JSON."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vlgap.data.manifest import Item, Manifest, read_manifest
from vlgap.errors import VlgapError


@dataclass
class ReorderTriple:
    id: str
    video: Path
    positive: str
    negatives: list[str]
    meta: dict[str, Any] = field(default_factory=dict)


def reorder_triples(manifest) -> list[ReorderTriple]:
    """Triples of a shapes manifest: items whose meta holds {"reorder": {"positive", "negative"}}."""
    man = manifest if isinstance(manifest, Manifest) else read_manifest(manifest)
    out = []
    for it in man.items:
        r = it.meta.get("reorder")
        if isinstance(r, dict) and r.get("positive") and r.get("negative"):
            out.append(ReorderTriple(it.id, it.media, str(r["positive"]), [str(r["negative"])],
                                     {"swapped_events": r.get("swapped_events")}))
    if not out:
        raise VlgapError(f"manifest {man.path} has no item with meta.reorder (positive, negative); generate it with "
                         "`vlgap make-data shapes` or give a reorder JSON file")
    return out


def _flat_get(entry: dict, *names: str):
    for name in names:
        if name in entry:
            return entry[name]
        head, _, tail = name.partition("/")
        if tail and isinstance(entry.get(head), dict) and tail in entry[head]:
            return entry[head][tail]
    return None


def read_reorder_json(path: str | Path, *, video_dir: str | Path | None = None,
                      types: Sequence[str] = ("reorder",), video_template: str = "{video_id}.mp4") -> list[ReorderTriple]:
    """(video, positive, negatives) triples from a JSON list in either form:

    - vlgap form: [{"id": "...", "video": "clip.mp4", "positive": "...", "negatives": ["...", ...]}, ...]
      (`negative`: one string is accepted too; relative video paths resolve against the file's folder
      or `video_dir`).
    - VideoComp (Kim et al. 2025, github.com/google-deepmind/video_comp): entries with `key`, `video_id`
      (YouTube id), `type` (disruption type), `positive_text`, `negative_text` and query start/end times
      (flat "query_video/start_time" keys or nested objects). Entries whose type contains one of `types`
      (case-insensitive substring; default: the temporal reordering subset) are kept; entries sharing a
      video and positive become one triple with several negatives. Videos are local files
      `video_dir/<video_template>` (fields: key, video_id, type): the query clips, already trimmed.
    """
    p = Path(path).expanduser()
    if not p.is_file():
        raise VlgapError(f"reorder file {str(p)!r} does not exist")
    from vlgap.json_files import read_json

    data = read_json(p, "reorder file")
    if isinstance(data, dict):
        data = data.get("data") or data.get("items") or list(data.values())
    if not isinstance(data, list) or not data:
        raise VlgapError(f"{p}: expected a non-empty JSON list of triples")
    root = Path(video_dir).expanduser() if video_dir else p.resolve().parent
    triples: dict[tuple[str, str], ReorderTriple] = {}
    wanted = [t.lower() for t in types]
    for i, e in enumerate(data):
        if not isinstance(e, dict):
            raise VlgapError(f"{p} entry {i}: expected an object")
        if "positive_text" in e:  # VideoComp
            kind = str(e.get("type", ""))
            if wanted and not any(t in kind.lower() for t in wanted):
                continue
            fields = {"key": e.get("key", i), "video_id": e.get("video_id", ""), "type": kind}
            try:
                rel = video_template.format(**fields)
            except (KeyError, IndexError) as err:
                raise VlgapError(f"video_template {video_template!r} uses an unknown field {err}; "
                                 "available: key, video_id, type") from None
            video, pos = root / rel, str(e["positive_text"])
            negs = [str(e["negative_text"])] if e.get("negative_text") else []
            meta = {"type": kind, "key": e.get("key"), "video_id": e.get("video_id"),
                    "query_start": _flat_get(e, "query_video/start_time"),
                    "query_end": _flat_get(e, "query_video/end_time", "query_videl/end_time")}
            tid = str(e.get("video_id") or e.get("key") or i)
        else:
            if "video" not in e or "positive" not in e:
                raise VlgapError(f"{p} entry {i}: needs 'video' and 'positive' (and 'negatives'), or VideoComp's "
                                 "'positive_text'/'negative_text'")
            video = Path(str(e["video"])).expanduser()
            video = video if video.is_absolute() else root / video
            pos = str(e["positive"])
            negs = e.get("negatives", e.get("negative", []))
            negs = [negs] if isinstance(negs, str) else [str(x) for x in negs]
            meta = {}
            tid = str(e.get("id", i))
        if not negs:
            raise VlgapError(f"{p} entry {i} ({tid!r}): no negative caption")
        key = (str(video), pos)
        if key in triples:
            triples[key].negatives.extend(x for x in negs if x not in triples[key].negatives)
        else:
            triples[key] = ReorderTriple(tid, video, pos, list(negs), meta)
    if not triples:
        raise VlgapError(f"{p}: no entry of type {list(types)} (VideoComp 'type' values are matched as substrings)")
    out, seen = [], {}
    for t in triples.values():  # ids must be unique: one video may carry several positives
        seen[t.id] = seen.get(t.id, 0) + 1
        if seen[t.id] > 1:
            t.id = f"{t.id}#{seen[t.id]}"
        out.append(t)
    return out


def caption_manifest(rows: list[tuple[str, Path, str]]) -> Manifest:
    """A manifest of (id, media, one caption) rows: text features of captions that are not in any file."""
    return Manifest(None, [Item(i, media, "video", (txt,), {}) for i, media, txt in rows])
