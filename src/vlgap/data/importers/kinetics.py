"""Kinetics-400 / 600 / 700 (and 700-2020): one CSV per split, the DeepMind release layout.

    label,youtube_id,time_start,time_end,split            (Kinetics-400/600/700 train, validate)
    label,youtube_id,time_start,time_end,split,is_cc      (Kinetics-700-2020)
    youtube_id,time_start,time_end,split                  (test files without labels)

A clip is the `time_start`..`time_end` seconds of a YouTube video; the download scripts name its file
`<youtube_id>_<start:06d>_<end:06d>.mp4`, which is the item id here (a file named by the bare
`youtube_id` is accepted too). Kinetics has class labels, not captions: items are written without
captions, with `meta.label` (the class name; use `vlgap downstream --labels label`), `meta.split` and
`meta.is_cc` when present. `--split` keeps the rows of that split value (train | val | validate | test).
"""
from __future__ import annotations

import csv
import io
from pathlib import Path

from vlgap.data.importers.common import Entry, ImportReport, Parsed, finish, read_text
from vlgap.errors import VlgapError

REQUIRED = ("youtube_id", "time_start", "time_end")
LAYOUTS = ("label,youtube_id,time_start,time_end,split[,is_cc]", "youtube_id,time_start,time_end,split (test)")


def _seconds(value: str) -> int | None:
    try:
        v = float(value)
    except ValueError:
        return None
    return int(v) if v.is_integer() and v >= 0 else None


def clip_id(youtube_id: str, start: int, end: int) -> str:
    """The file stem the Kinetics download scripts give a clip."""
    return f"{youtube_id}_{start:06d}_{end:06d}"


def parse_kinetics(path: Path) -> Parsed:
    text = read_text(path)
    reader = csv.DictReader(io.StringIO(text, newline=""))
    cols = [(c or "").strip().lower() for c in (reader.fieldnames or [])]
    if path.suffix.lower() == ".json" or not all(c in cols for c in REQUIRED):
        raise VlgapError(f"{path.name} is in no known Kinetics layout: expected a CSV with a header "
                         f"{' or '.join(LAYOUTS)}; got columns {cols[:8]}")
    has_label = "label" in cols
    layout = ",".join(cols) + ("" if has_label else " (no labels: a test file)")
    p = Parsed("Kinetics", layout, captionless=True, id_key="clip")
    seen: dict[str, str] = {}
    for lineno, raw in enumerate(reader, 2):
        row = {(k or "").strip().lower(): (v or "").strip() for k, v in raw.items() if k is not None}
        where = f"line {lineno}"
        yid = row.get("youtube_id", "")
        start, end = _seconds(row.get("time_start", "")), _seconds(row.get("time_end", ""))
        if not yid:
            p.problem("item", None, where, "has no youtube_id")
            continue
        if start is None or end is None or end < start:
            p.problem("item", yid, where, f"time_start {row.get('time_start')!r} / time_end {row.get('time_end')!r} "
                      "are not whole seconds with start <= end")
            continue
        cid = clip_id(yid, start, end)
        if cid in seen:
            p.problem("item", cid, where, f"clip appears again (first at {seen[cid]})")
            continue
        seen[cid] = where
        meta: dict = {"youtube_id": yid, "time_start": start, "time_end": end}
        if has_label:
            if not row.get("label"):
                p.problem("item", cid, where, "has an empty label")
                continue
            meta["label"] = row["label"]
        if row.get("split"):
            meta["split"] = row["split"]
        if row.get("is_cc") not in (None, ""):
            meta["is_cc"] = row["is_cc"] in ("1", "true", "True")
        p.entries[cid] = Entry(cid, [], where, meta, media_names=(yid,))
    n_classes = len({e.meta["label"] for e in p.entries.values()}) if has_label else 0
    p.notes.append("Kinetics has class labels, not captions: items are written without captions, "
                   + (f"{n_classes} classes in meta.label" if has_label else "and this file has no labels"))
    return p


_SPLIT_ALIASES = {"validate": "val", "validation": "val"}


def import_kinetics(annotations: str | Path, video_dir: str | Path, out: str | Path, limit: int | None = None,
                    seed: int = 0, skip_bad: bool = False, split: str | None = None) -> ImportReport:
    """Import a Kinetics CSV into a manifest (labels in meta.label); see the module docstring."""
    path = Path(annotations)
    parsed = parse_kinetics(path)
    if split is not None:
        want = _SPLIT_ALIASES.get(split, split)
        values = sorted({_SPLIT_ALIASES.get(e.meta.get("split", ""), e.meta.get("split", ""))
                         for e in parsed.entries.values()} - {""})
        if want not in values:
            raise VlgapError(f"Kinetics split {split!r} is not in {path.name}: its split column holds "
                             f"{', '.join(values) or 'nothing'}")
        parsed.restrict({k for k, e in parsed.entries.items()
                         if _SPLIT_ALIASES.get(e.meta.get("split", ""), e.meta.get("split", "")) == want})
        parsed.layout += f", split {want}"
    return finish(parsed, path, Path(video_dir), Path(out), limit, seed, skip_bad)
