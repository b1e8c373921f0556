"""`vlgap import folder CAPTIONS FOLDER --out M`: your own videos or pictures plus a captions CSV / JSON.

Checked against the manifest a reader would write by hand: ids, media kinds (video, picture, frame
folder), captions in file order, extra columns in meta; and every refusal or skip said in one line.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from conftest import write_video
from helpers.in_process_cli import refused, run_cli
from vlgap.data.importers import import_dataset
from vlgap.data.manifest import read_manifest
from vlgap.errors import VlgapError


@pytest.fixture
def media(tmp_path):
    folder = tmp_path / "media"
    write_video(folder / "clip1.mp4", 6, size=16)
    write_video(folder / "clip2.webm.mp4", 6, size=16)  # stem "clip2.webm": ids may hold dots
    Image.fromarray(np.zeros((12, 10, 3), np.uint8)).save(folder / "photo1.jpg")
    (folder / "frames1").mkdir()
    for i in range(3):
        Image.fromarray(np.full((8, 8, 3), 40 * i, np.uint8)).save(folder / "frames1" / f"{i:03d}.png")
    Image.fromarray(np.zeros((8, 8, 3), np.uint8)).save(folder / "unlisted.png")
    return folder


def _csv(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "captions.csv"
    p.write_text(text, encoding="utf-8")
    return p


def test_csv_to_manifest(tmp_path, media):
    caps = _csv(tmp_path, "id,caption,label\nclip1,a red disc moves,disc\nphoto1,a black picture,dark\n"
                          "clip1,\"a disc, moving right\",disc\nframes1,three frames,ramp\nclip1,  ,disc\n")
    report = import_dataset("folder", caps, media, tmp_path / "m.jsonl")
    man = read_manifest(tmp_path / "m.jsonl")
    got = {it.id: (it.kind, it.media.name, it.captions, it.meta) for it in man.items}
    assert got == {"clip1": ("video", "clip1.mp4", ("a red disc moves", "a disc, moving right"), {"label": "disc"}),
                   "photo1": ("image", "photo1.jpg", ("a black picture",), {"label": "dark"}),
                   "frames1": ("video", "frames1", ("three frames",), {"label": "ramp"})}
    summary = report.summary()
    assert "dropped 1 captions" in summary  # the blank one, listed
    assert "2 files in" in summary and "that no caption row names, left out: clip2.webm.mp4, unlisted.png" in summary
    lines = (tmp_path / "m.jsonl").read_text().splitlines()
    assert json.loads(lines[0])["video"] == "media/clip1.mp4"  # relative to the manifest


def test_json_layouts(tmp_path, media):
    (tmp_path / "a.json").write_text(json.dumps({"clip1": ["one", "two"], "photo1": "three"}))
    man = read_manifest(import_dataset("folder", tmp_path / "a.json", media, tmp_path / "a.jsonl").manifest)
    assert [(i.id, i.captions) for i in man.items] == [("clip1", ("one", "two")), ("photo1", ("three",))]
    (tmp_path / "b.json").write_text(json.dumps([{"id": "clip1", "caption": "x", "split": "test"},
                                                  {"id": "clip1", "caption": "y", "split": "test"},
                                                  {"id": "frames1", "captions": ["p", "q"]}]))
    man = read_manifest(import_dataset("folder", tmp_path / "b.json", media, tmp_path / "b.jsonl").manifest)
    assert [(i.id, i.captions, i.meta) for i in man.items] == [("clip1", ("x", "y"), {"split": "test"}),
                                                              ("frames1", ("p", "q"), {})]


@pytest.mark.parametrize("content,words", [
    ("file,text\nclip1,x\n", "no known captions layout: expected CSV with a header id,caption"),
    ("id,caption\nclip1,x\nnothere,y\n", "1 of 2 annotated videos have no file in"),
    ("id,caption,label\nclip1,x,a\nclip1,y,b\n", "'label' is 'b' here but 'a' at line 2"),
    ("id,caption\nclip1,x,extra\n", "line 2: has 3 fields, the header 2"),
    ("", "is empty"),
])
def test_bad_captions_files_are_one_line(tmp_path, media, content, words):
    with pytest.raises(VlgapError, match=None) as err:
        import_dataset("folder", _csv(tmp_path, content), media, tmp_path / "m.jsonl")
    assert words in str(err.value) and "\n" not in str(err.value), str(err.value)


def test_skip_bad_lists_what_it_skips(tmp_path, media):
    caps = _csv(tmp_path, "id,caption\nclip1,x\nnothere,y\n")
    report = import_dataset("folder", caps, media, tmp_path / "m.jsonl", skip_bad=True)
    assert report.n_written == 1 and report.missing_video == ["nothere"]
    assert json.loads(report.skipped_file.read_text().splitlines()[0])["id"] == "nothere"


def test_cli(tmp_path, media, monkeypatch, capsys):
    caps = _csv(tmp_path, "id,caption\nclip1,x\n")
    code, out, _err = run_cli(monkeypatch, capsys, "import", "folder", caps, media, "--out", tmp_path / "m.jsonl")
    assert code == 0 and "1 written" in out, out
    line = refused(capsys, "import", "folder", caps, media, "--out", tmp_path / "m.jsonl", "--split", "test")
    assert "--split is not an option of `vlgap import folder`" in line


# ---- id columns as real annotation files name them (issue 43, item 6) ----------------------------------------
@pytest.mark.parametrize("header,rows", [
    ("video_id,sen_id,caption", "clip1,0,a red disc\nphoto1,1,a dark picture\n"),          # MSR-VTT's names
    ("image_id,caption", "clip1,a red disc\nphoto1,a dark picture\n"),                      # COCO's
    ("filename,caption", "clip1.mp4,a red disc\nphoto1.jpg,a dark picture\n"),             # file names
    ("Video_ID,caption", "clip1,a red disc\nphoto1,a dark picture\n"),                      # case does not matter
])
def test_id_column_names_real_files_use(tmp_path, media, header, rows):
    caps = _csv(tmp_path, f"{header}\n{rows}")
    man = read_manifest(import_dataset("folder", caps, media, tmp_path / "m.jsonl").manifest)
    assert [(i.id, i.kind, i.captions) for i in man.items] == [("clip1", "video", ("a red disc",)),
                                                              ("photo1", "image", ("a dark picture",))]
    if "sen_id" in header:
        assert man.items[0].meta == {"sen_id": "0"}


def test_two_possible_id_columns_are_refused_and_id_column_chooses(tmp_path, media):
    # COCO-style rows: `id` is the caption's id, `image_id` names the picture
    caps = _csv(tmp_path, "id,image_id,caption\n7,clip1,a red disc\n8,photo1,a dark picture\n")
    with pytest.raises(VlgapError) as err:
        import_dataset("folder", caps, media, tmp_path / "m.jsonl")
    assert "'id' and 'image_id' could each be the id column" in str(err.value)
    assert "--id-column image_id" in str(err.value)
    man = read_manifest(import_dataset("folder", caps, media, tmp_path / "m.jsonl", id_column="image_id").manifest)
    assert [(i.id, i.meta) for i in man.items] == [("clip1", {"id": "7"}), ("photo1", {"id": "8"})]
    # any other column name, and a column that is not there
    other = _csv(tmp_path, "clip,caption\nclip1,a red disc\n")
    assert [i.id for i in read_manifest(import_dataset("folder", other, media, tmp_path / "o.jsonl",
                                                       id_column="clip").manifest).items] == ["clip1"]
    with pytest.raises(VlgapError, match=r"--id-column 'nope' is not among its columns \['clip', 'caption'\]"):
        import_dataset("folder", other, media, tmp_path / "o.jsonl", id_column="nope")
    with pytest.raises(VlgapError, match=r"has no id column: expected one of id, video_id, image_id"):
        import_dataset("folder", other, media, tmp_path / "o.jsonl")


def test_json_records_with_video_id(tmp_path, media):
    (tmp_path / "r.json").write_text(json.dumps([{"video_id": "clip1", "caption": "x", "sen_id": 3},
                                                 {"video_id": "frames1.mp4", "caption": "y"}]))
    man = read_manifest(import_dataset("folder", tmp_path / "r.json", media, tmp_path / "r.jsonl").manifest)
    assert [(i.id, i.captions, i.meta) for i in man.items] == [("clip1", ("x",), {"sen_id": 3}),
                                                              ("frames1", ("y",), {})]


def test_cli_id_column(tmp_path, media, monkeypatch, capsys):
    caps = _csv(tmp_path, "clip,caption\nclip1,x\n")
    code, out, _err = run_cli(monkeypatch, capsys, "import", "folder", caps, media, "--out", tmp_path / "m.jsonl",
                              "--id-column", "clip")
    assert code == 0 and "1 written" in out, out
    line = refused(capsys, "import", "msrvtt", caps, media, "--out", tmp_path / "n.jsonl", "--id-column", "clip")
    assert "--id-column is for folder only" in line
