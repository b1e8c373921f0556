"""Your own data: a folder of videos or images plus a captions file, into a manifest (`vlgap import folder`).

Media are found in the folder by id: `<id>.mp4` (any video suffix), `<id>.jpg` (any picture suffix) or a
folder of frames `<id>/`; a video is preferred over a picture of the same id. The captions file is one of:

    CSV with a header, one caption per row (an id's rows in order; more columns go to meta):
        id,caption[,label,...]
      The id column may also be named as real annotation files name it: video_id (MSR-VTT), image_id
      (COCO), filename, file_name or file; `id_column` (--id-column) names any other. An id that ends in
      a media suffix (clip1.mp4, as a filename column holds it) names that file: the item's id is its stem.
    JSON object, id -> captions:
        {"clip1": ["a dog runs", "a brown dog"], "clip2": "one caption"}
    JSON list of records (more keys go to meta; the id key may be named as a CSV's id column):
        [{"id": "clip1", "caption": "a dog runs"}, {"id": "clip2", "captions": ["...", "..."]}]

The shared rules of the importers apply (importers/__init__.py): malformed entries and ids without a file
are an error naming the first unless `skip_bad`; empty captions are dropped and listed. Files of the folder
that no caption row names are left out of the manifest and said so in the summary (count and examples).
Extra columns or keys become the item's meta (strings as given); an id's rows must agree on them.
"""
from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

from vlgap.data.importers.common import (EXAMPLES, Entry, ImportReport, Parsed, finish, index_videos, lines_of,
                                         read_json, read_text, type_name)
from vlgap.data.manifest import IMAGE_SUFFIXES, VIDEO_SUFFIXES
from vlgap.errors import VlgapError

LAYOUTS = ("CSV with a header id,caption[,more columns -> meta]", 'JSON {"<id>": ["caption", ...]}',
           'JSON [{"id": ..., "caption" | "captions": ...}]')
_CAPTION_KEYS = ("caption", "captions")
#: names an id column goes by in real annotation files (case does not matter), tried when --id-column is not given
ID_COLUMNS = ("id", "video_id", "image_id", "filename", "file_name", "file")


def find_id_column(names: list[str], given: str | None, where: str) -> str:
    """The id column (or JSON key) among `names`: `given` (must be there), else the one of ID_COLUMNS present.
    Two of them (COCO's annotations have an `id` per caption and an `image_id` per picture) are refused:
    which one names the media is the user's to say."""
    low = {n.lower(): n for n in names}
    if given is not None:
        if given.lower() not in low:
            raise VlgapError(f"{where}: --id-column {given!r} is not among its columns {names[:8]}")
        return low[given.lower()]
    found = [low[c] for c in ID_COLUMNS if c in low]
    if len(found) > 1:
        raise VlgapError(f"{where}: {' and '.join(repr(f) for f in found)} could each be the id column; name the one "
                         f"that names the media files with --id-column (e.g. --id-column {found[-1]})")
    if not found:
        raise VlgapError(f"{where} has no id column: expected one of {', '.join(ID_COLUMNS)} (or name yours with "
                         f"--id-column); its columns are {names[:8]}")
    return found[0]


def id_of(value: str) -> str:
    """An id as written, less a media suffix: "clip1.mp4" (a filename column) names the file whose id is clip1."""
    value = value.strip()
    suffix = Path(value).suffix.lower()
    return Path(value).stem if suffix and suffix in VIDEO_SUFFIXES | IMAGE_SUFFIXES and Path(value).stem else value


def _add(p: Parsed, item_id: str, captions: Any, meta: dict, where: str) -> None:
    """One record's captions and meta for `item_id` (a later record of the same id adds captions)."""
    entry = p.entries.get(item_id)
    if entry is None:
        entry = p.entries[item_id] = Entry(item_id, [], where, dict(meta))
    else:
        clash = [k for k in meta if k in entry.meta and entry.meta[k] != meta[k]]
        if clash:
            p.problem("item", item_id, where, f"{clash[0]!r} is {meta[clash[0]]!r} here but {entry.meta[clash[0]]!r} "
                      f"at {entry.where}: an id's rows must agree on the extra columns")
            return
        entry.meta.update(meta)
    for i, cap in enumerate(captions if isinstance(captions, list) else [captions]):
        if not p.add_caption(entry, cap, f"{where}, caption {i}"):
            p.problem("caption", item_id, f"{where}, caption {i}", f"caption is {type_name(cap)}, not a string")


def _parse_csv(path: Path, text: str, id_col: str | None = None) -> Parsed:
    reader = csv.reader(io.StringIO(text, newline=""))
    header = next(reader, None)
    cols = [c.strip() for c in header or []]
    low = [c.lower() for c in cols]
    if "caption" not in low:
        raise VlgapError(f"{path.name} is in no known captions layout: expected {' or '.join(LAYOUTS)}; "
                         f"its first line has the columns {cols[:8]}")
    if len(set(low)) != len(low):
        raise VlgapError(f"{path.name}: a column name appears twice in the header {cols}")
    i_id, i_cap = low.index(find_id_column(cols, id_col, path.name).lower()), low.index("caption")
    extra = [(j, cols[j]) for j in range(len(cols)) if j not in (i_id, i_cap)]
    p = Parsed("folder", f"captions CSV ({', '.join(cols)})")
    for lineno, row in enumerate(reader, 2):
        if not any(c.strip() for c in row):
            continue
        where = f"line {lineno}"
        if len(row) != len(cols):
            p.problem("item", None, where, f"has {len(row)} fields, the header {len(cols)}")
            continue
        name = id_of(row[i_id])
        if not name:
            p.problem("item", None, where, "has an empty id")
            continue
        _add(p, name, row[i_cap], {col: row[j] for j, col in extra}, where)
    return p


def _parse_json(path: Path, id_col: str | None = None) -> Parsed:
    data = read_json(path)
    p = Parsed("folder", "")
    if isinstance(data, dict) and not any(k in data for k in ("annotations", "images")):
        p.layout = "captions JSON {id: captions}"
        for n, (item_id, caps) in enumerate(data.items()):
            where = f"key {item_id!r}"
            if not item_id.strip():
                p.problem("item", None, f"key {n}", "is an empty id")
            elif not isinstance(caps, (str, list)):
                p.problem("item", item_id, where, f"captions are {type_name(caps)}, not a string or a list of strings")
            else:
                _add(p, item_id.strip(), caps, {}, where)
        return p
    if isinstance(data, list):
        p.layout = "captions JSON [{id, caption(s)}]"
        first = next((rec for rec in data if isinstance(rec, dict)), {})
        key = find_id_column(list(first), id_col, f"{path.name} entry 0") if first else "id"
        for n, rec in enumerate(data):
            where = f"entry {n}"
            if not isinstance(rec, dict):
                p.problem("item", None, where, f"is {type_name(rec)}, not an object with id and caption")
                continue
            item_id, keys = rec.get(key), [k for k in _CAPTION_KEYS if k in rec]
            if isinstance(item_id, int) and not isinstance(item_id, bool):
                item_id = str(item_id)
            if not isinstance(item_id, str) or not item_id.strip():
                p.problem("item", None, where, f"has no {key!r} (a non-empty string)" if item_id is None else
                          f"{key!r} is {type_name(item_id)}, not a non-empty string")
            elif len(keys) != 1:
                p.problem("item", item_id, where, "needs one of 'caption' (a string) or 'captions' (a list)")
            else:
                meta = {k: v for k, v in rec.items() if k not in (key, *_CAPTION_KEYS)}
                _add(p, id_of(item_id), rec[keys[0]], meta, where)
        return p
    raise VlgapError(f"{path.name} is in no known captions layout: expected {' or '.join(LAYOUTS)}; got "
                     + ("COCO annotations (use `vlgap caption-eval` for those)" if isinstance(data, dict)
                        else type_name(data)))


def index_media(folder: Path) -> dict[str, list[Path]]:
    """Videos, frame folders and pictures of `folder` by id (file stem), videos first."""
    videos, _broken = index_videos(folder)
    found = {k: list(v) for k, v in videos.items()}
    for p in sorted(folder.iterdir()):
        if p.is_file() and p.suffix.lower() in IMAGE_SUFFIXES - VIDEO_SUFFIXES and not p.name.startswith("._"):
            found.setdefault(p.stem, []).append(p)
    return found


def import_folder(annotations: str | Path, video_dir: str | Path, out: str | Path, limit: int | None = None,
                  seed: int = 0, skip_bad: bool = False, split: str | None = None,
                  id_column: str | None = None) -> ImportReport:
    """A folder of videos or images plus a captions CSV / JSON into a manifest; see the module docstring.
    id_column: the CSV column (or JSON key) holding the ids, when it is none of ID_COLUMNS."""
    path, folder = Path(annotations), Path(video_dir)
    if split is not None:
        raise VlgapError("--split is not an option of `vlgap import folder`: a captions file has no splits "
                         "(give one file per split)")
    if path.suffix.lower() == ".json":
        parsed = _parse_json(path, id_column)
    else:
        text = read_text(path)
        if not any(line.strip() for _, line in lines_of(text)):
            raise VlgapError(f"{path.name} is empty: expected {' or '.join(LAYOUTS)}")
        parsed = _parse_csv(path, text, id_column)
    if not parsed.entries and not parsed.malformed:
        raise VlgapError(f"{path.name} holds no captions (layout {parsed.layout})")
    media = index_media(folder)
    unnamed = sorted(set(media) - set(parsed.entries))
    if unnamed:
        ex = ", ".join(media[k][0].name for k in unnamed[:EXAMPLES])
        parsed.notes.append(f"{len(unnamed)} file{'s' if len(unnamed) > 1 else ''} in {folder} that no caption row "
                            f"names, left out: {ex}" + (f"; {len(unnamed) - EXAMPLES} more" if len(unnamed) > EXAMPLES
                                                        else ""))
    return finish(parsed, path, folder, Path(out), limit, seed, skip_bad, media=media)
