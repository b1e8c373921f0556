"""How many frames each item's media holds, asked before any extraction (the sweep's item plan,
`vlgap.probe.items`): the container's count where it gives one; counted by decoding where it gives
none, or where it is below what the run needs (extraction decides a video's length the same way,
`vlgap.features.chunk_steps.VisionSteps.decode_one`). Media that cannot be read give their reason
instead of a count. A still image is one frame by declaration (its header is read to know it is an
image).

The answers are kept in the cache under the manifest's fingerprint (which covers the media's bytes):
a rerun asks the files again only for what it has not been told yet, e.g. a decoded count where an
earlier run needed only the container's.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from vlgap.data.manifest import Item, Manifest
from vlgap.errors import BadItemError
from vlgap.io_utils import atomic_write_json, cache_root

#: version of the kept answers: a change asks every file again
FORMAT = 1


@dataclass(frozen=True)
class MediaCount:
    """An item's frame count (`frames`), or why its media cannot be read (`reason`). `decoded`: the
    count comes from decoding every frame (else from the container, which a decoder may contradict)."""

    frames: int | None
    reason: str | None = None
    decoded: bool = False

    def to_dict(self) -> dict:
        return {"reason": self.reason} if self.reason else {"frames": self.frames, "decoded": self.decoded}

    @staticmethod
    def from_dict(d) -> "MediaCount | None":
        if not isinstance(d, dict):
            return None
        if isinstance(d.get("reason"), str):
            return MediaCount(None, d["reason"])
        frames = d.get("frames")
        if isinstance(frames, int) and not isinstance(frames, bool) and frames >= 1:
            return MediaCount(frames, None, d.get("decoded") is True)
        return None


def shown_path(path: Path, base: Path | None) -> str:
    """`path` relative to `base` (the manifest's folder) where it lies under it, else its name."""
    if base is not None:
        try:
            return str(path.relative_to(base))
        except ValueError:
            pass
    return path.name


def probe(item: Item, need: int, base: Path | None = None) -> MediaCount:
    """`item`'s frame count, decoded when the container's is below `need`; or why it cannot be read."""
    from vlgap.data.video import count_frames, read_frames

    where = shown_path(item.media, base)
    try:
        if item.kind == "image":
            if not item.media.is_file():
                return MediaCount(None, f"media file not found: {where}")
            from PIL import Image

            with Image.open(item.media):
                pass
            return MediaCount(1, None, True)
        total = count_frames(item)
        decoded = False
        if total < need and item.media.is_file():  # the container's count: make sure, as extraction does
            _, total = read_frames(item, None, max_side=16)
            decoded = True
    except BadItemError as err:
        return MediaCount(None, err.reason.replace(str(item.media), where))
    except Exception as err:  # Pillow and PyAV raise many types; the file and the cause are what matter
        return MediaCount(None, f"cannot read {where}: {type(err).__name__}: {err}")
    if total < 1:
        return MediaCount(None, f"{where} has no frames")
    return MediaCount(int(total), None, decoded)


def _memo_path(man: Manifest, cache_dir) -> Path:
    return cache_root(cache_dir) / "media" / f"frame-counts-{man.fingerprint()}.json"


def _read_memo(path: Path) -> dict[str, MediaCount]:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(doc, dict) or doc.get("format") != FORMAT or not isinstance(doc.get("items"), dict):
        return {}
    out = {}
    for item_id, d in doc["items"].items():
        got = MediaCount.from_dict(d)
        if got is not None:
            out[item_id] = got
    return out


def frame_counts(man: Manifest, need: int, cache_dir: str | os.PathLike | None = None, *,
                 progress: bool = False) -> dict[str, MediaCount]:
    """{item id: MediaCount} for every item of `man`; a count below `need` is a decoded one."""
    from vlgap.parallel import threaded_map, workers_for
    from vlgap.progress import counter

    path = _memo_path(man, cache_dir)
    known = _read_memo(path)
    base = man.path.parent if man.path is not None else None

    def usable(c: MediaCount | None) -> bool:
        return c is not None and (c.reason is not None or c.decoded or (c.frames or 0) >= need)

    todo = [it for it in man.items if not usable(known.get(it.id))]
    if todo:
        with counter("counting frames", len(todo), "items", progress and len(todo) > 50) as report:
            for done, (item_id, got) in enumerate(threaded_map(lambda it: (it.id, probe(it, need, base)), todo,
                                                               workers_for(len(todo))), 1):
                known[item_id] = got
                report(done)
        try:
            atomic_write_json(path, {"format": FORMAT, "items": {i: c.to_dict() for i, c in known.items()}})
        except OSError:
            pass  # the answers are a convenience: without them the next run asks the files again
    return {it.id: known[it.id] for it in man.items}
