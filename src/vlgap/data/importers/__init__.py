"""Importers from official annotation files into a vlgap manifest: VATEX, MSR-VTT, MSVD, Kinetics
(400/600/700, CSV) and Something-Something v2 (JSON); the last two write class labels into meta.label.
`folder` (folder.py) takes your own folder of videos or pictures plus a captions CSV or JSON.

Each format module (vatex.py, msrvtt.py, msvd.py) documents the layouts it accepts; a file in no
known layout is refused, naming the accepted ones. Shared rules (common.py):

- Videos are looked up in `video_dir` by id with any common suffix (preference .mp4 .webm .mkv .avi
  .mov ...; a frame folder last; the summary says which was taken when several exist). Paths are
  recorded as given: a symlink keeps its own name, not its target's.
- Malformed entries (missing key, wrong type, duplicate id) and annotated videos without a file are a
  one-line error naming the first, unless `skip_bad`: then each is skipped.
- Empty or null captions are dropped; an item left with no caption is skipped (or an error without
  `skip_bad`). Every skipped item and dropped caption is written to `<manifest>.skipped_items.jsonl`
  (one JSON object per line: kind, id, where, reason) and counted in the summary.
- `split` selects a split where the format defines one (MSR-VTT: the videos' field; VATEX: the
  official file name; MSVD: youtube_mapping.txt numbering) and is refused otherwise.
- `limit`/`seed` draw a uniform random subset of the usable items (the paper samples 1024 VATEX
  videos) in a stable order; a limit above the usable count writes all and says so.
"""
from __future__ import annotations

from pathlib import Path

from vlgap.data.importers.common import ImportReport
from vlgap.data.importers.folder import import_folder
from vlgap.data.importers.kinetics import import_kinetics
from vlgap.data.importers.msrvtt import import_msrvtt
from vlgap.data.importers.msvd import import_msvd
from vlgap.data.importers.ssv2 import import_ssv2
from vlgap.data.importers.vatex import import_vatex
from vlgap.errors import VlgapError

IMPORTERS = {"vatex": import_vatex, "msrvtt": import_msrvtt, "msvd": import_msvd, "kinetics": import_kinetics,
             "ssv2": import_ssv2, "folder": import_folder}
#: other spellings of dataset names
ALIASES = {"kinetics400": "kinetics", "kinetics600": "kinetics", "kinetics700": "kinetics", "k400": "kinetics",
           "k700": "kinetics", "somethingsomethingv2": "ssv2", "smthsmthv2": "ssv2"}

__all__ = ["IMPORTERS", "ImportReport", "import_dataset", "import_folder", "import_kinetics", "import_msrvtt", "import_msvd",
           "import_ssv2", "import_vatex"]


def import_dataset(dataset: str, annotations: str | Path, video_dir: str | Path, out: str | Path,
                   limit: int | None = None, seed: int = 0, skip_bad: bool = False, split: str | None = None,
                   mapping: str | Path | None = None, language: str | None = None,
                   label_map: str | Path | None = None, id_column: str | None = None) -> ImportReport:
    """`vlgap import`: dispatch to the importer of `dataset` (vatex | msrvtt | msvd | kinetics | ssv2 |
    folder: your own media folder and captions CSV / JSON).
    Options that the format does not have (`mapping`, `language`: MSVD only; `label_map`: SSv2 only) are
    refused, never ignored."""
    key = dataset.lower().replace("-", "").replace("_", "")
    key = ALIASES.get(key, key)
    if key not in IMPORTERS:
        raise VlgapError(f"unknown dataset {dataset!r}; choose one of {sorted(IMPORTERS)}")
    extra: dict = {}
    for name, value in (("mapping", mapping), ("language", language)):
        if value is not None:
            if key != "msvd":
                raise VlgapError(f"--{name} is for msvd only; {key} has no such option")
            extra[name] = value
    if label_map is not None:
        if key != "ssv2":
            raise VlgapError(f"--label-map is for ssv2 only; {key} has no such option")
        extra["label_map"] = label_map
    if id_column is not None:
        if key != "folder":
            raise VlgapError(f"--id-column is for folder only; {key}'s annotation layout fixes its id field")
        extra["id_column"] = id_column
    from vlgap.paths import input_file, input_folder, output_file

    input_file(annotations, "ANNOTATIONS")  # a folder for a file (or the reverse) says so, before any work
    input_folder(video_dir, "VIDEO_DIR")
    for what, path in (("--mapping", mapping), ("--label-map", label_map)):
        if path is not None:
            input_file(path, what)
    output_file(out, "--out")
    return IMPORTERS[key](annotations, video_dir, out, limit=limit, seed=seed, skip_bad=skip_bad, split=split, **extra)
