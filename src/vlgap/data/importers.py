"""Importers from official annotation files into a vlgap manifest.

- VATEX: `vatex_training_v1.0.json` / `vatex_validation_v1.0.json`: a list of
  {"videoID": "<youtube id>_<start>_<end>", "enCap": [10 English captions], "chCap": [...]}.
- MSR-VTT: `train_val_videodatainfo.json` / `test_videodatainfo.json` (or the 2017 `videodatainfo`):
  {"videos": [{"video_id": "video0", "split": "train", ...}], "sentences": [{"video_id", "caption", "sen_id"}]}.
- MSVD: `MSR Video Description Corpus.csv` (VideoID, Start, End, WorkerID, Source, AnnotationTime,
  Language, Description; clips are named `<VideoID>_<Start>_<End>.avi`) or the widely shared
  `AllVideoDescriptions.txt` ("<clip name> <caption>" per line, '#' comment lines).

Videos are looked up in `video_dir` by id with any common video suffix. Items whose video is missing
are an error listing them, unless `skip_missing=True`: then they are dropped and reported.
`limit`/`seed` draw a uniform random subset (the paper samples 1024 VATEX videos), after the
missing ones are removed, in a stable order.
"""
from __future__ import annotations

import csv
import json
import random
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path

from vlgap.data.manifest import VIDEO_SUFFIXES, Item, write_manifest
from vlgap.errors import VlgapError


@dataclass
class ImportReport:
    dataset: str
    n_annotated: int
    n_written: int
    missing_video: list[str] = field(default_factory=list)
    no_captions: list[str] = field(default_factory=list)
    manifest: Path | None = None

    def summary(self) -> str:
        parts = [f"{self.dataset}: {self.n_annotated} annotated videos, {self.n_written} written to {self.manifest}"]
        if self.missing_video:
            parts.append(f"{len(self.missing_video)} skipped: video file not found (e.g. {self.missing_video[:3]})")
        if self.no_captions:
            parts.append(f"{len(self.no_captions)} skipped: no captions (e.g. {self.no_captions[:3]})")
        return "; ".join(parts)


def _load_json(path: Path):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except FileNotFoundError:
        raise VlgapError(f"annotation file not found: {path}") from None
    except json.JSONDecodeError as err:
        raise VlgapError(f"{path} is not valid JSON ({err.msg} at line {err.lineno})") from None


def _index_videos(video_dir: Path) -> dict[str, Path]:
    if not video_dir.is_dir():
        raise VlgapError(f"video folder not found: {video_dir}")
    index: dict[str, Path] = {}
    for p in video_dir.iterdir():
        if p.suffix.lower() in VIDEO_SUFFIXES or p.is_dir():
            index.setdefault(p.stem if p.is_file() else p.name, p)
    return index


def _finish(dataset: str, captions: "OrderedDict[str, list[str]]", video_dir: Path, out: Path,
            limit: int | None, seed: int, skip_missing: bool, meta: dict[str, dict] | None = None) -> ImportReport:
    videos = _index_videos(Path(video_dir))
    report = ImportReport(dataset, len(captions), 0)
    usable = []
    for vid, caps in captions.items():
        caps = [c.strip() for c in caps if isinstance(c, str) and c.strip()]
        if not caps:
            report.no_captions.append(vid)
        elif vid not in videos:
            report.missing_video.append(vid)
        else:
            usable.append((vid, caps))
    if report.missing_video and not skip_missing:
        raise VlgapError(
            f"{dataset}: {len(report.missing_video)} of {len(captions)} annotated videos have no file in {video_dir} "
            f"(e.g. {report.missing_video[:5]}); download them, or pass --skip-missing to drop and report them"
        )
    if not usable:
        raise VlgapError(f"{dataset}: no usable items (annotated {len(captions)}, none with both a video and captions)")
    if limit is not None:
        if limit < 1:
            raise VlgapError(f"--limit must be >= 1, got {limit}")
        if limit < len(usable):
            chosen = sorted(random.Random(seed).sample(range(len(usable)), limit))
            usable = [usable[i] for i in chosen]
    items = [Item(vid, videos[vid].resolve(), "video", tuple(caps), (meta or {}).get(vid, {})) for vid, caps in usable]
    write_manifest(items, out)
    report.n_written = len(items)
    report.manifest = Path(out)
    return report


def import_vatex(annotations: str | Path, video_dir: str | Path, out: str | Path, limit: int | None = None,
                 seed: int = 0, skip_missing: bool = False) -> ImportReport:
    data = _load_json(Path(annotations))
    if not isinstance(data, list):
        raise VlgapError(f"{annotations}: VATEX annotations are a JSON list of {{videoID, enCap}} objects")
    caps: "OrderedDict[str, list[str]]" = OrderedDict()
    for i, entry in enumerate(data):
        if not isinstance(entry, dict) or "videoID" not in entry or "enCap" not in entry:
            raise VlgapError(f"{annotations}: entry {i} lacks 'videoID' or 'enCap' (VATEX format)")
        caps[str(entry["videoID"])] = list(entry["enCap"])
    return _finish("VATEX", caps, Path(video_dir), Path(out), limit, seed, skip_missing)


def import_msrvtt(annotations: str | Path, video_dir: str | Path, out: str | Path, limit: int | None = None,
                  seed: int = 0, skip_missing: bool = False, split: str | None = None) -> ImportReport:
    data = _load_json(Path(annotations))
    if not isinstance(data, dict) or "sentences" not in data:
        raise VlgapError(f"{annotations}: MSR-VTT annotations are an object with 'videos' and 'sentences'")
    videos = data.get("videos", [])
    meta = {str(v["video_id"]): {k: v[k] for k in ("split", "category") if k in v} for v in videos}
    if split is not None:
        allowed = {vid for vid, m in meta.items() if m.get("split") == split}
        if not allowed:
            raise VlgapError(f"{annotations}: no videos in split {split!r} (splits: {sorted({m.get('split') for m in meta.values()})})")
    caps: "OrderedDict[str, list[str]]" = OrderedDict((vid, []) for vid in meta)
    for s in sorted(data["sentences"], key=lambda s: (str(s.get("video_id")), s.get("sen_id", 0))):
        vid = str(s["video_id"])
        caps.setdefault(vid, []).append(s["caption"])
    if split is not None:
        caps = OrderedDict((k, v) for k, v in caps.items() if k in allowed)
    return _finish("MSR-VTT", caps, Path(video_dir), Path(out), limit, seed, skip_missing, meta)


def import_msvd(annotations: str | Path, video_dir: str | Path, out: str | Path, limit: int | None = None,
                seed: int = 0, skip_missing: bool = False, language: str = "English") -> ImportReport:
    path = Path(annotations)
    if not path.is_file():
        raise VlgapError(f"annotation file not found: {path}")
    caps: "OrderedDict[str, list[str]]" = OrderedDict()
    if path.suffix.lower() == ".csv":
        with open(path, encoding="utf-8", newline="") as f:
            reader = csv.DictReader(f)
            need = {"VideoID", "Start", "End", "Language", "Description"}
            if not reader.fieldnames or not need <= set(reader.fieldnames):
                raise VlgapError(f"{path}: MSVD CSV needs columns {sorted(need)}, found {reader.fieldnames}")
            for row in reader:
                if row["Language"] != language or not row["Description"]:
                    continue
                clip = f"{row['VideoID']}_{row['Start']}_{row['End']}"
                caps.setdefault(clip, []).append(row["Description"])
    else:
        with open(path, encoding="utf-8") as f:
            for lineno, line in enumerate(f, 1):
                line = line.strip()
                if not line or line.startswith("#"):
                    continue
                parts = line.split(" ", 1)
                if len(parts) != 2:
                    raise VlgapError(f"{path} line {lineno}: expected '<clip name> <caption>'")
                caps.setdefault(parts[0], []).append(parts[1])
    if not caps:
        raise VlgapError(f"{path}: no {language} captions found")
    return _finish("MSVD", caps, Path(video_dir), Path(out), limit, seed, skip_missing)
