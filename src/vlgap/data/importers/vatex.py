"""VATEX: a JSON list per split file.

- `vatex_training_v1.0.json`, `vatex_validation_v1.0.json`, `vatex_public_test_english_v1.1.json`:
  [{"videoID": "<YouTube id>_<start 6 digits>_<end 6 digits>", "enCap": [10 English captions], "chCap": [...]}]
- `vatex_private_test_without_annotations.json`: [{"videoID": ...}] only; its items are written
  without captions (usable for vision features) and the summary says so.

The files carry no split field: a split is a file. `--split` checks that the file is that split's
official file (and every item gets meta.split); for a renamed file the split cannot be known and
`--split` is refused rather than guessed.
"""
from __future__ import annotations

from pathlib import Path

from vlgap.data.importers.common import (
    Entry,
    ImportReport,
    Parsed,
    finish,
    read_json,
    record_id,
    type_name,
)
from vlgap.errors import VlgapError

SPLIT_FILES = {
    "train": "vatex_training_v1.0.json",
    "validation": "vatex_validation_v1.0.json",
    "public_test": "vatex_public_test_english_v1.1.json",
    "private_test": "vatex_private_test_without_annotations.json",
}
_NAME_PARTS = (("training", "train"), ("validation", "validation"), ("public_test", "public_test"),
               ("private_test", "private_test"))


def split_of_file(name: str) -> str | None:
    """The split an official VATEX file name holds (tolerates other versions, `(1)` copies...)."""
    low = name.lower()
    if "vatex" in low:
        for part, split in _NAME_PARTS:
            if part in low:
                return split
    return None


def parse_vatex(path: Path) -> Parsed:
    data = read_json(path)
    if isinstance(data, dict) and ("videos" in data or "sentences" in data):
        raise VlgapError(f"{path.name} is an MSR-VTT file (an object with 'videos' and 'sentences'), not VATEX; "
                         "import it with `vlgap import msrvtt`")
    if not isinstance(data, list) or not any(isinstance(e, dict) and "videoID" in e for e in data):
        raise VlgapError(
            f"{path.name} is in no known VATEX layout: expected a JSON list of {{\"videoID\", \"enCap\", \"chCap\"}} "
            f"objects (vatex_training_v1.0.json, vatex_validation_v1.0.json, vatex_public_test_english_v1.1.json) "
            f"or of {{\"videoID\"}} (vatex_private_test_without_annotations.json); got {type_name(data)}"
            + (f" of {len(data)} entries without 'videoID'" if isinstance(data, list) else ""))
    captionless = not any(isinstance(e, dict) and "enCap" in e for e in data)
    p = Parsed("VATEX", "private-test layout: videoID only, no captions" if captionless else "videoID + enCap layout",
               captionless=captionless, id_key="videoID")
    first_at: dict[str, str] = {}
    for i, e in enumerate(data):
        where = f"entry {i}"
        vid = record_id(p, e, where, "videoID", first_at, "'videoID' and 'enCap'")
        if vid is None:
            continue
        entry = Entry(vid, [], where)
        if not captionless:
            if "enCap" not in e:
                p.problem("item", vid, where, "has no 'enCap' (its English captions)")
                continue
            caps = e["enCap"]
            if not isinstance(caps, list):
                p.problem("item", vid, where, f"'enCap' is {type_name(caps)}, not a list of strings")
                continue
            wrong = next((j for j, c in enumerate(caps) if c is not None and not isinstance(c, str)), None)
            if wrong is not None:
                p.problem("item", vid, where, f"enCap[{wrong}] is {type_name(caps[wrong])}, not a string")
                continue
            for j, c in enumerate(caps):
                p.add_caption(entry, c, f"{where} enCap[{j}]")
        p.entries[vid] = entry
    if captionless:
        p.notes.append("no entry has 'enCap' (the VATEX private test withholds its captions): items are written "
                       "without captions, usable for vision features only")
    return p


def import_vatex(annotations: str | Path, video_dir: str | Path, out: str | Path, limit: int | None = None,
                 seed: int = 0, skip_bad: bool = False, split: str | None = None) -> ImportReport:
    """Import a VATEX split file into a manifest; see the module docstring for layouts and `split`."""
    path = Path(annotations)
    parsed = parse_vatex(path)
    file_split = split_of_file(path.name) or ("private_test" if parsed.captionless else None)
    if split is not None:
        listing = ", ".join(f"{f} = {s}" for s, f in SPLIT_FILES.items())
        if split not in SPLIT_FILES:
            raise VlgapError(f"unknown VATEX split {split!r}: choose {', '.join(SPLIT_FILES)} (each is its own file: {listing})")
        if file_split is None:
            raise VlgapError(f"VATEX keeps each split in its own file ({listing}); {path.name} is not named like one, "
                             "so its split is unknown: leave out --split to import the whole file")
        if split != file_split:
            raise VlgapError(f"split {split!r} is in {SPLIT_FILES[split]}; {path.name} holds {file_split}")
    if file_split is not None:
        for e in parsed.entries.values():
            e.meta["split"] = file_split
        parsed.layout += f", split {file_split} (by file name)"
    return finish(parsed, path, Path(video_dir), Path(out), limit, seed, skip_bad)
