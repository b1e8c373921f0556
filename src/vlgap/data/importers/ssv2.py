"""Something-Something v2: a JSON list per split plus labels.json (the 20BN / Qualcomm release).

- `something-something-v2-train.json`, `something-something-v2-validation.json`:
  [{"id": "78687", "label": "holding potato next to vicks vaporub bottle",
    "template": "Holding [something] next to [something]", "placeholders": ["potato", "vicks vaporub bottle"]}]
- `something-something-v2-test.json`: [{"id": "1420"}] (no labels): items without captions or labels.
- `something-something-v2-labels.json` (or `labels.json`): {"<class name>": "<index>"}; the class of an
  entry is its template without the brackets ("Holding something next to something").

Videos are `<id>.webm`. Each item gets the filled-in `label` as its one caption, `meta.label` (the
class name), `meta.label_index` (from labels.json, which is found beside the annotations or videos
when not given; a class missing from it is a malformed entry), `meta.template`, `meta.placeholders`.
"""
from __future__ import annotations

from pathlib import Path

from vlgap.data.importers.common import Entry, ImportReport, Parsed, finish, read_json, record_id, type_name
from vlgap.errors import VlgapError

SPLIT_FILES = {"train": "something-something-v2-train.json", "validation": "something-something-v2-validation.json",
               "test": "something-something-v2-test.json"}
LABEL_FILES = ("something-something-v2-labels.json", "labels.json")


def class_of(template: str) -> str:
    """SSv2's class name of a template: the template with its [ ] brackets removed."""
    return template.replace("[", "").replace("]", "")


def read_label_map(path: Path) -> dict[str, int]:
    data = read_json(path)
    if not isinstance(data, dict) or not data:
        raise VlgapError(f"{path.name} is not an SSv2 labels file: expected a JSON object {{class name: index}}, "
                         f"got {type_name(data)}")
    out = {}
    for name, idx in data.items():
        try:
            out[name] = int(idx)
        except (TypeError, ValueError):
            raise VlgapError(f"{path.name}: class {name!r} has index {idx!r}, not a whole number") from None
    return out


def find_label_map(annotations: Path, video_dir: Path) -> Path | None:
    for folder in (annotations.parent, video_dir, video_dir.parent):
        for name in LABEL_FILES:
            if (folder / name).is_file() and (folder / name).resolve() != annotations.resolve():
                return folder / name
    return None


def parse_ssv2(path: Path, label_map: dict[str, int] | None) -> Parsed:
    data = read_json(path)
    if isinstance(data, dict):
        raise VlgapError(f"{path.name} is an object, not an SSv2 annotation list (a labels.json? pass it as "
                         "--label-map and the split file as the annotations)")
    if not isinstance(data, list) or not any(isinstance(e, dict) and "id" in e for e in data):
        raise VlgapError(f"{path.name} is in no known SSv2 layout: expected a JSON list of {{\"id\", \"label\", "
                         "\"template\", \"placeholders\"}} (train/validation) or of {\"id\"} (test); got "
                         f"{type_name(data)}")
    unlabelled = not any(isinstance(e, dict) and "template" in e for e in data)
    p = Parsed("SSv2", "id only (test: no labels)" if unlabelled else "id + label + template + placeholders",
               captionless=unlabelled, id_key="id")
    seen: dict[str, str] = {}
    for i, e in enumerate(data):
        where = f"entry {i}"
        if isinstance(e, dict) and isinstance(e.get("id"), int):
            e = dict(e, id=str(e["id"]))
        vid = record_id(p, e, where, "id", seen, "'id', 'label', 'template'")
        if vid is None:
            continue
        entry = Entry(vid, [], where)
        if not unlabelled:
            template = e.get("template")
            if not isinstance(template, str) or not template.strip():
                p.problem("item", vid, where, "has no 'template' (its class)")
                continue
            name = class_of(template)
            entry.meta.update(label=name, template=template)
            if isinstance(e.get("placeholders"), list):
                entry.meta["placeholders"] = e["placeholders"]
            if label_map is not None:
                if name not in label_map:
                    p.problem("item", vid, where, f"class {name!r} is not in the labels file")
                    continue
                entry.meta["label_index"] = label_map[name]
            if not p.add_caption(entry, e.get("label"), f"{where} label"):
                p.problem("item", vid, where, f"'label' is {type_name(e.get('label'))}, not a string")
                continue
        p.entries[vid] = entry
    if unlabelled:
        p.notes.append("no entry has a 'template' (the SSv2 test file withholds labels): items are written "
                       "without captions or labels")
    else:
        p.notes.append(f"{len({e.meta['label'] for e in p.entries.values()})} classes in meta.label; each item's "
                       "caption is its filled-in label")
    return p


def import_ssv2(annotations: str | Path, video_dir: str | Path, out: str | Path, limit: int | None = None,
                seed: int = 0, skip_bad: bool = False, split: str | None = None,
                label_map: str | Path | None = None) -> ImportReport:
    """Import an SSv2 split file into a manifest (labels in meta.label / meta.label_index)."""
    path = Path(annotations)
    map_path = Path(label_map) if label_map is not None else find_label_map(path, Path(video_dir))
    if label_map is not None and not map_path.is_file():
        raise VlgapError(f"labels file not found: {map_path}")
    labels = read_label_map(map_path) if map_path is not None else None
    parsed = parse_ssv2(path, labels)
    parsed.notes.append(f"class indices from {map_path}" if map_path is not None else
                        "no labels.json found beside the annotations or videos: meta.label_index not written "
                        "(pass --label-map)")
    if split is not None:
        if split not in SPLIT_FILES:
            raise VlgapError(f"unknown SSv2 split {split!r}: choose {', '.join(SPLIT_FILES)}")
        low = path.name.lower()
        file_split = next((s for s in SPLIT_FILES if f"-{s}" in low), None)
        if file_split is None:
            raise VlgapError(f"SSv2 keeps each split in its own file ({', '.join(SPLIT_FILES.values())}); "
                             f"{path.name} is not named like one: leave out --split to import the whole file")
        if file_split != split:
            raise VlgapError(f"split {split!r} is in {SPLIT_FILES[split]}; {path.name} holds {file_split}")
        for e in parsed.entries.values():
            e.meta["split"] = split
    return finish(parsed, path, Path(video_dir), Path(out), limit, seed, skip_bad)
