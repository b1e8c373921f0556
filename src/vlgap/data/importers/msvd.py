"""MSVD (Microsoft Research Video Description Corpus), in either of its two common layouts:

- `MSR Video Description Corpus.csv`: columns VideoID, Start, End, WorkerID, Source, AnnotationTime,
  Language, Description; one caption per row, in many languages (English only by default). A clip
  is `<VideoID>_<Start>_<End>`, which is also the file name in `YouTubeClips/` (`.avi`).
- `AllVideoDescriptions.txt`: "<clip> <caption>" per line, English, '#' comment lines.

Many copies rename the clips `vid1.avi` ... `vid1970.avi` and ship `youtube_mapping.txt`
("<clip> vid<N>" per line). Given with `mapping` (or found as `youtube_mapping.txt` beside the
annotations or the videos), it finds `vidN` files and defines the split convention most papers use
(Venugopalan et al. 2015; Yao et al. 2015): train vid1-vid1200, validate vid1201-vid1300, test
vid1301-vid1970. The files themselves define no split, so `split` needs the mapping.

The layout is recognised from the content (a BOM and CRLF line ends are fine), never the suffix;
the mapping file itself, or any other text, given as annotations is refused.
"""
from __future__ import annotations

import csv
import io
import re
from collections import Counter
from pathlib import Path

from vlgap.data.importers.common import (
    Entry,
    ImportReport,
    Parsed,
    finish,
    lines_of,
    read_text,
)
from vlgap.errors import VlgapError

CSV_COLUMNS = ("VideoID", "Start", "End", "WorkerID", "Source", "AnnotationTime", "Language", "Description")
CSV_NEEDED = ("VideoID", "Start", "End", "Language", "Description")
SPLITS = {"train": (1, 1200), "validate": (1201, 1300), "test": (1301, 1970)}
MAPPING_NAME = "youtube_mapping.txt"
CLIP_RE = re.compile(r"^[A-Za-z0-9_-]+_\d+_\d+$")  # <YouTube id>_<start s>_<end s>
_MAPPING_RE = re.compile(r"^(\S+)\s+(vid(\d+))$")
LAYOUTS = ('"MSR Video Description Corpus.csv" (header ' + ",".join(CSV_COLUMNS) + ") or "
           'AllVideoDescriptions.txt ("<VideoID>_<Start>_<End> <caption>" per line)')


def _data_lines(text: str) -> list[tuple[int, str]]:
    return [(n, s.strip()) for n, s in lines_of(text) if s.strip() and not s.lstrip().startswith("#")]


def _is_mapping(lines: list[tuple[int, str]]) -> bool:
    return bool(lines) and all(_MAPPING_RE.match(s) for _, s in lines)


def read_mapping(path: Path) -> dict[str, str]:
    """youtube_mapping.txt as {clip: "vidN"}; any other line is an error (it is a key, not data)."""
    lines = _data_lines(read_text(path))
    clips: dict[str, str] = {}
    seen_vid: dict[str, str] = {}
    for lineno, s in lines:
        m = _MAPPING_RE.match(s)
        if not m:
            raise VlgapError(f"{path.name} line {lineno}: expected '<clip> vid<N>' (the MSVD {MAPPING_NAME} layout), "
                             f"got {s[:60]!r}")
        clip, vid = m.group(1), m.group(2)
        if clip in clips or vid in seen_vid:
            raise VlgapError(f"{path.name} line {lineno}: {clip if clip in clips else vid} is mapped twice")
        clips[clip], seen_vid[vid] = vid, clip
    if not clips:
        raise VlgapError(f"{path.name}: no '<clip> vid<N>' lines (the MSVD {MAPPING_NAME} layout)")
    return clips


def find_mapping(annotations: Path, video_dir: Path) -> Path | None:
    for folder in (annotations.parent, video_dir, video_dir.parent):
        if (folder / MAPPING_NAME).is_file():
            return folder / MAPPING_NAME
    return None


def _parse_csv(p: Parsed, text: str, name: str, language: str) -> None:
    reader = csv.reader(io.StringIO(text, newline=""))
    header = next((h for h in reader if any(c.strip() for c in h)), [])
    header = [h.strip() for h in header]
    missing = [c for c in CSV_NEEDED if c not in header]
    if missing:
        raise VlgapError(f"{name}: MSVD CSV needs columns {', '.join(CSV_NEEDED)}; missing {', '.join(missing)} "
                         f"(found {', '.join(header)})")
    col = {c: header.index(c) for c in CSV_NEEDED}
    languages: Counter[str] = Counter()
    for row in reader:
        where = f"line {reader.line_num}"
        if not any(c.strip() for c in row):
            continue
        if len(row) != len(header):
            p.problem("caption", None, where, f"has {len(row)} fields; the header has {len(header)}")
            continue
        lang = row[col["Language"]].strip()
        languages[lang] += 1
        if lang != language:
            continue
        vid, start, end = (row[col[c]].strip() for c in ("VideoID", "Start", "End"))
        if not (vid and start and end):
            p.problem("caption", None, where, "VideoID, Start or End is empty")
            continue
        clip = f"{vid}_{start}_{end}"
        entry = p.entries.setdefault(clip, Entry(clip, [], where))
        p.add_caption(entry, row[col["Description"]], where)
    others = sorted(((n, lang) for lang, n in languages.items() if lang != language), reverse=True)
    if others:
        shown = ", ".join(f"{lang or '(empty)'} {n}" for n, lang in others[:5])
        p.notes.append(f"kept the {languages[language]} {language} rows; left out {sum(n for n, _ in others)} rows "
                       f"in other languages ({shown}{', ...' if len(others) > 5 else ''}); --language picks another")
    if not languages[language]:
        raise VlgapError(f"{name}: no rows with Language {language!r} (languages: "
                         f"{', '.join(sorted(languages)) or 'none'})")


def _parse_txt(p: Parsed, lines: list[tuple[int, str]]) -> None:
    for lineno, s in lines:
        where = f"line {lineno}"
        parts = s.split(None, 1)
        if not CLIP_RE.match(parts[0]):
            p.problem("caption", None, where, f"starts with {parts[0][:40]!r}, not a clip name <VideoID>_<Start>_<End>")
            continue
        entry = p.entries.setdefault(parts[0], Entry(parts[0], [], where))
        p.add_caption(entry, parts[1] if len(parts) > 1 else "", where)


def parse_msvd(path: Path, language: str = "English") -> Parsed:
    text = read_text(path)
    lines = _data_lines(text)
    if not lines:
        raise VlgapError(f"{path.name} holds no annotation lines; expected {LAYOUTS}")
    first = lines[0][1]
    if first.split(",")[0].strip().strip('"') == "VideoID":
        p = Parsed("MSVD", "MSR Video Description Corpus.csv layout", id_key="clip")
        _parse_csv(p, text, path.name, language)
        return p
    if _is_mapping(lines):
        raise VlgapError(f"{path.name} is the MSVD {MAPPING_NAME} (clip -> vidN names), not captions: give the "
                         f"captions file ({LAYOUTS}) and pass this one as --mapping")
    if not CLIP_RE.match(first.split(None, 1)[0]):
        raise VlgapError(f"{path.name} is in no known MSVD layout (line {lines[0][0]} starts with {first[:40]!r}); "
                         f"expected {LAYOUTS}")
    if language != "English":
        raise VlgapError(f"{path.name}: AllVideoDescriptions.txt holds English captions only; --language {language} "
                         "needs the CSV layout")
    p = Parsed("MSVD", "AllVideoDescriptions.txt layout", id_key="clip")
    _parse_txt(p, lines)
    return p


def import_msvd(annotations: str | Path, video_dir: str | Path, out: str | Path, limit: int | None = None,
                seed: int = 0, skip_bad: bool = False, language: str = "English", split: str | None = None,
                mapping: str | Path | None = None) -> ImportReport:
    """Import MSVD captions (CSV or TXT layout) into a manifest; see the module docstring."""
    path, video_dir = Path(annotations), Path(video_dir)
    if split is not None and split not in SPLITS:
        raise VlgapError(f"unknown MSVD split {split!r}: choose train, validate or test (the vid1-1200 / "
                         "1201-1300 / 1301-1970 convention of youtube_mapping.txt)")
    p = parse_msvd(path, language)
    map_path = Path(mapping) if mapping is not None else find_mapping(path, video_dir)
    if map_path is None:
        if split is not None:
            raise VlgapError(
                f"MSVD files define no splits; the common split (train vid1-vid1200, validate vid1201-vid1300, "
                f"test vid1301-vid1970) numbers clips by {MAPPING_NAME}, and none was found beside {path.name} "
                f"or in {video_dir}: pass --mapping {MAPPING_NAME}")
        return finish(p, path, video_dir, Path(out), limit, seed, skip_bad)
    if not map_path.is_file():
        raise VlgapError(f"mapping file not found: {map_path}")
    clips = read_mapping(map_path)
    for clip, e in p.entries.items():
        vid = clips.get(clip)
        if vid is not None:
            n = int(vid[3:])
            e.media_names = (vid,)
            e.meta["vid"] = vid
            in_split = [s for s, (lo, hi) in SPLITS.items() if lo <= n <= hi]
            if in_split:
                e.meta["split"] = in_split[0]
    unmapped = [c for c in p.entries if c not in clips]
    p.layout += f", clip names from {map_path}"
    if split is not None:
        keep = {c for c, e in p.entries.items() if e.meta.get("split") == split}
        n_all = len(p.entries)
        p.restrict(keep)
        p.layout += f", split {split}: {len(keep)} of {n_all} clips"
        if unmapped:
            p.notes.append(f"{len(unmapped)} clips are not in {map_path.name}, so in no split, and were not imported: "
                           + ", ".join(unmapped[:5]) + (f"; {len(unmapped) - 5} more" if len(unmapped) > 5 else ""))
    elif unmapped:
        p.notes.append(f"{len(unmapped)} clips are not in {map_path.name}: looked up by clip name only")
    return finish(p, path, video_dir, Path(out), limit, seed, skip_bad)
