"""MSR-VTT: one JSON object per file, {"info", "videos", "sentences"}.

    videos:    [{"video_id": "video0", "category": 9, "url": ..., "start time": ..., "end time": ...,
                 "split": "train" | "validate" | "test", "id": 0}]
    sentences: [{"caption": "...", "video_id": "video0", "sen_id": 0}]

The 2016 release has two files: `train_val_videodatainfo.json` (train 6,513 + validate 497 videos)
and `test_videodatainfo.json` (test 2,990); the 2017 `videodatainfo_2017.json` holds all three splits.
A file without sentences (a challenge test file) gives items without captions, said in the summary.
Captions keep file order sorted by `sen_id`; `split` selects by the videos' own `split` field.
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

SPLITS = ("train", "validate", "test")
#: the 2016 release file that holds each split
OFFICIAL_FILE = {"train": "train_val_videodatainfo.json", "validate": "train_val_videodatainfo.json",
                 "test": "test_videodatainfo.json"}
_LAYOUT = ("an object with 'videos' [{video_id, category, url, start time, end time, split, id}] and "
           "'sentences' [{caption, video_id, sen_id}] (train_val_videodatainfo.json, test_videodatainfo.json, "
           "videodatainfo_2017.json)")


def _layout_name(holds: list[str], captionless: bool) -> str:
    name = {("train", "validate"): "2016 train_val layout", ("test",): "2016 test layout",
            SPLITS: "2017 layout, all splits in one file"}.get(tuple(holds), "splits " + ", ".join(holds) if holds
                                                                else "no split field")
    return name + (", no sentences" if captionless else "")


def _parse_videos(p: Parsed, videos: list) -> set[str]:
    seen: dict[str, str] = {}
    for i, v in enumerate(videos):
        where = f"videos[{i}]"
        vid = record_id(p, v, where, "video_id", seen, "'video_id'")
        if vid is None:
            continue
        meta = {}
        for key, want in (("split", str), ("category", int)):
            val = v.get(key)
            if val is not None and (not isinstance(val, want) or isinstance(val, bool)):
                p.problem("item", vid, where, f"'{key}' is {type_name(val)}, not {'a string' if want is str else 'an integer'}")
                break
            if val is not None:
                meta[key] = val
        else:
            p.entries[vid] = Entry(vid, [], where, meta)
    return set(seen)


def _parse_sentences(p: Parsed, sentences: list, all_ids: set[str]) -> None:
    rows = []  # (sort key, video id, caption, where)
    for j, s in enumerate(sentences):
        where = f"sentences[{j}]"
        if not isinstance(s, dict):
            p.problem("caption", None, where, f"is {type_name(s)}, not an object with 'caption', 'video_id', 'sen_id'")
            continue
        vid, sen_id = s.get("video_id"), s.get("sen_id")
        if sen_id is not None:
            where += f" (sen_id {sen_id})"
        if not isinstance(vid, str):
            p.problem("caption", None, where, "has no 'video_id'" if vid is None else
                      f"'video_id' is {type_name(vid)}, not a string")
            continue
        if sen_id is not None and (not isinstance(sen_id, int) or isinstance(sen_id, bool)):
            p.problem("caption", vid, where, f"'sen_id' is {type_name(sen_id)}, not an integer")
            continue
        if vid not in all_ids:
            p.problem("caption", vid, where, f"video_id {vid!r} is not in 'videos'")
            continue
        if vid not in p.entries:  # its video entry is malformed and already listed; its captions go with it
            continue
        if "caption" not in s:
            p.problem("caption", vid, where, "has no 'caption' key")
            continue
        cap = s["caption"]
        if cap is not None and not isinstance(cap, str):
            p.problem("caption", vid, where, f"'caption' is {type_name(cap)}, not a string")
            continue
        rows.append((sen_id if sen_id is not None else j, vid, cap, where))
    rows.sort(key=lambda r: r[0])  # stable: equal sen_ids keep file order
    for _, vid, cap, where in rows:
        p.add_caption(p.entries[vid], cap, where)


def parse_msrvtt(path: Path) -> Parsed:
    data = read_json(path)
    if isinstance(data, list) and any(isinstance(e, dict) and "videoID" in e for e in data):
        raise VlgapError(f"{path.name} is a VATEX file (a list of videoID/enCap entries), not MSR-VTT; "
                         "import it with `vlgap import vatex`")
    if not isinstance(data, dict) or "videos" not in data:
        raise VlgapError(f"{path.name} is in no known MSR-VTT layout: expected {_LAYOUT}")
    videos, sentences = data["videos"], data.get("sentences")
    if not isinstance(videos, list):
        raise VlgapError(f"{path.name}: 'videos' is {type_name(videos)}, not a list; expected {_LAYOUT}")
    if sentences is not None and not isinstance(sentences, list):
        raise VlgapError(f"{path.name}: 'sentences' is {type_name(sentences)}, not a list; expected {_LAYOUT}")
    captionless = not sentences
    p = Parsed("MSR-VTT", "", captionless=captionless, id_key="video_id")
    all_ids = _parse_videos(p, videos)
    _parse_sentences(p, sentences or [], all_ids)
    counts = {s: sum(1 for e in p.entries.values() if e.meta.get("split") == s) for s in SPLITS}
    p.layout = _layout_name([s for s in SPLITS if counts[s]], captionless)
    if captionless:
        p.notes.append(f"{path.name} has no sentences: items are written without captions, usable for vision features only")
    return p


def import_msrvtt(annotations: str | Path, video_dir: str | Path, out: str | Path, limit: int | None = None,
                  seed: int = 0, skip_bad: bool = False, split: str | None = None) -> ImportReport:
    """Import an MSR-VTT annotation file into a manifest (items in `videos` order, meta split+category)."""
    path = Path(annotations)
    p = parse_msrvtt(path)
    holds = [s for s in SPLITS if any(e.meta.get("split") == s for e in p.entries.values())]
    if split is not None:
        in_file = f"{path.name} holds {', '.join(holds)}" if holds else f"{path.name} records no split per video"
        if split not in SPLITS:
            raise VlgapError(f"unknown MSR-VTT split {split!r}: choose train, validate or test ({in_file})")
        if not holds:
            raise VlgapError(f"{in_file}: leave out --split to import the whole file")
        if split not in holds:
            raise VlgapError(f"split {split!r} is in {OFFICIAL_FILE[split]}; {in_file}")
        keep = {vid for vid, e in p.entries.items() if e.meta.get("split") == split}
        n_all = len(p.entries)
        p.restrict(keep)
        p.layout += f", split {split}: {len(keep)} of {n_all} videos"
    return finish(p, path, Path(video_dir), Path(out), limit, seed, skip_bad)
