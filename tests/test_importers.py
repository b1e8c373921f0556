"""Importers on fixtures written in each official layout: the exact captions kept (order, unicode) and
the exact items skipped / captions dropped, for well-formed and broken files; and the `import` CLI."""
from __future__ import annotations

import csv
import io
import json
import os
import re
import shlex
import shutil
from pathlib import Path

import pytest
from conftest import write_video
from in_process_cli import refused
from typer.testing import CliRunner

from vlgap.cli._app import app
from vlgap.data.importers import (
    import_msrvtt,
    import_msvd,
    import_vatex,
)
from vlgap.data.manifest import read_manifest
from vlgap.errors import VlgapError

BOM = "\ufeff"
UNI = "Ein Mädchen spielt — naïve café ☕ 中文 🎸"  # unicode must survive byte for byte


@pytest.fixture(scope="module")
def clip_bytes(tmp_path_factory):
    """One real decodable mp4; the importers only need the files to exist, so copies share its bytes."""
    return write_video(tmp_path_factory.mktemp("clip") / "c.mp4", 3, size=16).read_bytes()


def videos(folder, names, data):
    folder.mkdir(parents=True, exist_ok=True)
    for n in names:
        (folder / n).write_bytes(data)
    return folder


def manifest(path):
    return [(it.id, list(it.captions), it.meta) for it in read_manifest(path).items]


def skipped(path):
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def one_line_error(fn, *args, **kw) -> str:
    with pytest.raises(VlgapError) as ei:
        fn(*args, **kw)
    msg = str(ei.value)
    assert "\n" not in msg
    return msg


# ---- MSR-VTT --------------------------------------------------------------------------------------
def msrvtt_file(path, videos_, sentences, info=True, bom=False, crlf=False):
    obj = {"info": {"year": "2016", "version": "1.0", "contributor": "Microsoft"}} if info else {}
    obj.update({"videos": videos_, "sentences": sentences})
    text = json.dumps(obj, ensure_ascii=False, indent=1 if crlf else None)
    path.write_bytes(((BOM if bom else "") + (text.replace("\n", "\r\n") if crlf else text)).encode("utf-8"))
    return path


def v(vid, split, cat=0, i=0):
    return {"category": cat, "url": f"https://www.youtube.com/watch?v=x{i}", "video_id": vid,
            "start time": 1.0, "end time": 11.5, "split": split, "id": i}


def s(vid, sen_id, cap):
    return {"caption": cap, "video_id": vid, "sen_id": sen_id}


@pytest.fixture
def msrvtt_2016(tmp_path, clip_bytes):
    """train_val_videodatainfo.json (train + validate) and test_videodatainfo.json (test), 2016 layout."""
    tv = msrvtt_file(tmp_path / "train_val_videodatainfo.json",
                     [v("video0", "train", 9, 0), v("video1", "validate", 3, 1), v("video2", "train", 14, 2)],
                     [s("video0", 0, "a man sings"), s("video1", 2, "cars race"), s("video0", 1, UNI),
                      s("video2", 4, "a dog runs"), s("video1", 3, "a race on a track")])
    test = msrvtt_file(tmp_path / "test_videodatainfo.json",
                       [v("video7010", "test", 5, 7010), v("video7011", "test", 6, 7011)],
                       [s("video7010", 140200, "a cat jumps"), s("video7011", 140201, "people dance"),
                        s("video7010", 140202, "a kitten leaps")])
    videos(tmp_path / "videos", ["video0.mp4", "video1.mp4", "video2.mp4", "video7010.mp4", "video7011.mp4"], clip_bytes)
    return tv, test, tmp_path / "videos"


def test_msrvtt_2016_train_val_and_test_files(tmp_path, msrvtt_2016):
    tv, test, vd = msrvtt_2016
    rep = import_msrvtt(tv, vd, tmp_path / "all.jsonl")
    assert manifest(tmp_path / "all.jsonl") == [
        ("video0", ["a man sings", UNI], {"split": "train", "category": 9}),  # by sen_id, not file order
        ("video1", ["cars race", "a race on a track"], {"split": "validate", "category": 3}),
        ("video2", ["a dog runs"], {"split": "train", "category": 14})]
    assert rep.layout == "2016 train_val layout" and rep.skipped == [] and rep.dropped_captions == []
    assert not (tmp_path / "all.skipped_items.jsonl").exists()

    import_msrvtt(tv, vd, tmp_path / "train.jsonl", split="train")
    assert [m[0] for m in manifest(tmp_path / "train.jsonl")] == ["video0", "video2"]
    rep = import_msrvtt(test, vd, tmp_path / "test.jsonl", split="test")
    assert manifest(tmp_path / "test.jsonl") == [
        ("video7010", ["a cat jumps", "a kitten leaps"], {"split": "test", "category": 5}),
        ("video7011", ["people dance"], {"split": "test", "category": 6})]
    assert rep.layout.startswith("2016 test layout, split test: 2 of 2 videos") and rep.n_captions == 3

    # the README's old example: the test split is not in the train_val file; say where it is
    assert one_line_error(import_msrvtt, tv, vd, tmp_path / "x.jsonl", split="test") == (
        "split 'test' is in test_videodatainfo.json; train_val_videodatainfo.json holds train, validate")
    assert one_line_error(import_msrvtt, test, vd, tmp_path / "x.jsonl", split="train") == (
        "split 'train' is in train_val_videodatainfo.json; test_videodatainfo.json holds test")
    assert one_line_error(import_msrvtt, tv, vd, tmp_path / "x.jsonl", split="val") == (
        "unknown MSR-VTT split 'val': choose train, validate or test (train_val_videodatainfo.json holds train, validate)")
    assert not (tmp_path / "x.jsonl").exists()


def test_msrvtt_2017_layout_one_file_all_splits(tmp_path, clip_bytes):
    f = msrvtt_file(tmp_path / "videodatainfo_2017.json",
                    [v("video0", "train"), v("video6513", "validate"), v("video7010", "test")],
                    [s("video0", 0, "a"), s("video6513", 1, "b"), s("video7010", 2, "c")], info=False, bom=True, crlf=True)
    vd = videos(tmp_path / "v", ["video0.mp4", "video6513.mp4", "video7010.mp4"], clip_bytes)
    rep = import_msrvtt(f, vd, tmp_path / "m.jsonl", split="validate")
    assert rep.layout == "2017 layout, all splits in one file, split validate: 1 of 3 videos"
    assert manifest(tmp_path / "m.jsonl") == [("video6513", ["b"], {"split": "validate", "category": 0})]


def test_msrvtt_missing_caption_key_null_and_empty(tmp_path, msrvtt_2016):
    _, _, vd = msrvtt_2016
    f = msrvtt_file(tmp_path / "train_val_videodatainfo.json", [v("video0", "train"), v("video1", "train")],
                    [s("video0", 0, "one"), {"video_id": "video0", "sen_id": 1}, s("video0", 2, None),
                     s("video1", 3, "  "), s("video1", 4, "two ")])
    # a sentence without 'caption' is malformed: one line naming it (no KeyError traceback)
    assert one_line_error(import_msrvtt, f, vd, tmp_path / "m.jsonl") == (
        "train_val_videodatainfo.json sentences[1] (sen_id 1) (video_id 'video0'): has no 'caption' key; "
        "fix the file, or pass --skip-bad to skip and list them")
    rep = import_msrvtt(f, vd, tmp_path / "m.jsonl", skip_bad=True)
    assert manifest(tmp_path / "m.jsonl") == [("video0", ["one"], {"split": "train", "category": 0}),
                                              ("video1", ["two"], {"split": "train", "category": 0})]
    assert skipped(tmp_path / "m.skipped_items.jsonl") == [
        {"kind": "caption", "id": "video0", "where": "sentences[2] (sen_id 2)", "reason": "null caption"},
        {"kind": "caption", "id": "video1", "where": "sentences[3] (sen_id 3)", "reason": "empty caption"},
        {"kind": "caption", "id": "video0", "where": "sentences[1] (sen_id 1)", "reason": "has no 'caption' key"}]
    assert rep.skipped == [] and len(rep.dropped_captions) == 3
    assert f"dropped 3 captions (empty caption, has no 'caption' key, null caption; listed in {tmp_path / 'm.skipped_items.jsonl'})" in rep.summary()


def test_msrvtt_wrong_types_and_unknown_videos(tmp_path, msrvtt_2016):
    _, _, vd = msrvtt_2016
    f = msrvtt_file(tmp_path / "t.json", [v("video0", "train"), {"video_id": 7, "split": "train"},
                                          {"video_id": "video1", "split": 2}],
                    [s("video0", 0, "ok"), s("video0", 1, ["a", "list"]), s("video9", 2, "orphan"), s(7, 3, "x")])
    assert one_line_error(import_msrvtt, f, vd, tmp_path / "m.jsonl") == (
        "t.json videos[1]: 'video_id' is a number, not a non-empty string; 4 more malformed entries; "
        "fix the file, or pass --skip-bad to skip and list them")
    rep = import_msrvtt(f, vd, tmp_path / "m.jsonl", skip_bad=True)
    assert manifest(tmp_path / "m.jsonl") == [("video0", ["ok"], {"split": "train", "category": 0})]
    assert [(r["kind"], r["id"], r["where"], r["reason"]) for r in skipped(tmp_path / "m.skipped_items.jsonl")] == [
        ("item", None, "videos[1]", "'video_id' is a number, not a non-empty string"),
        ("item", "video1", "videos[2]", "'split' is a number, not a string"),
        ("caption", "video0", "sentences[1] (sen_id 1)", "'caption' is a list, not a string"),
        ("caption", "video9", "sentences[2] (sen_id 2)", "video_id 'video9' is not in 'videos'"),
        ("caption", None, "sentences[3] (sen_id 3)", "'video_id' is a number, not a string")]
    assert len(rep.skipped) == 2 and len(rep.dropped_captions) == 3


def test_msrvtt_without_sentences_and_wrong_format(tmp_path, msrvtt_2016):
    _, _, vd = msrvtt_2016
    f = tmp_path / "test_videodatainfo_nosen.json"
    f.write_text(json.dumps({"videos": [v("video7010", "test")]}))
    rep = import_msrvtt(f, vd, tmp_path / "m.jsonl")
    assert manifest(tmp_path / "m.jsonl") == [("video7010", [], {"split": "test", "category": 0})]
    assert "no sentences" in rep.layout and "without captions" in rep.summary()
    f.write_text(json.dumps([{"videoID": "a_1_2", "enCap": ["x"]}]))
    assert "is a VATEX file" in one_line_error(import_msrvtt, f, vd, tmp_path / "m.jsonl")
    f.write_text(json.dumps({"sentences": []}))
    assert "no known MSR-VTT layout" in one_line_error(import_msrvtt, f, vd, tmp_path / "m.jsonl")


# ---- VATEX ----------------------------------------------------------------------------------------
VATEX_IDS = ["Ptf_2VRj-V0_000122_000132", "--33Lscn6sk_000004_000014", "abc-DEF_123_000001_000011"]


@pytest.fixture
def vatex_videos(tmp_path, clip_bytes):
    return videos(tmp_path / "videos", [f"{i}.mp4" for i in VATEX_IDS], clip_bytes)


def vatex_file(path, entries, bom=False, crlf=False):
    text = json.dumps(entries, ensure_ascii=False, indent=1)
    if crlf:
        text = text.replace("\n", "\r\n")
    path.write_bytes(((BOM if bom else "") + text).encode("utf-8"))
    return path


def test_vatex_train_and_validation_layouts(tmp_path, vatex_videos):
    caps = [f"caption {k} of the video" for k in range(9)] + [UNI]
    entries = [{"videoID": VATEX_IDS[0], "enCap": caps, "chCap": ["一个人在弹吉他。"] * 10},
               {"videoID": VATEX_IDS[1], "enCap": ["A woman dances.", "Someone is dancing."], "chCap": []}]
    f = vatex_file(tmp_path / "vatex_training_v1.0.json", entries, bom=True, crlf=True)
    rep = import_vatex(f, vatex_videos, tmp_path / "vatex.jsonl", split="train")
    assert manifest(tmp_path / "vatex.jsonl") == [(VATEX_IDS[0], caps, {"split": "train"}),
                                                  (VATEX_IDS[1], ["A woman dances.", "Someone is dancing."],
                                                   {"split": "train"})]
    assert rep.n_captions == 12 and rep.layout == "videoID + enCap layout, split train (by file name)"
    assert one_line_error(import_vatex, f, vatex_videos, tmp_path / "x.jsonl", split="validation") == (
        "split 'validation' is in vatex_validation_v1.0.json; vatex_training_v1.0.json holds train")
    assert one_line_error(import_vatex, f, vatex_videos, tmp_path / "x.jsonl", split="bogus").startswith(
        "unknown VATEX split 'bogus': choose train, validation, public_test, private_test")
    renamed = shutil.copy(f, tmp_path / "my_vatex.json")
    assert "is not named like one, so its split is unknown: leave out --split" in one_line_error(
        import_vatex, renamed, vatex_videos, tmp_path / "x.jsonl", split="train")
    import_vatex(renamed, vatex_videos, tmp_path / "r.jsonl")  # without --split: the whole file, no split meta
    assert [m[2] for m in manifest(tmp_path / "r.jsonl")] == [{}, {}]


def test_vatex_string_encap_is_an_error_not_56_captions(tmp_path, vatex_videos):
    entries = [{"videoID": VATEX_IDS[0], "enCap": ["A man plays."]},
               {"videoID": VATEX_IDS[1], "enCap": "A woman dances on a stage with lights.", "chCap": []},
               {"videoID": VATEX_IDS[2], "enCap": ["fine", 3]}]
    f = vatex_file(tmp_path / "vatex_validation_v1.0.json", entries)
    assert one_line_error(import_vatex, f, vatex_videos, tmp_path / "m.jsonl") == (
        f"vatex_validation_v1.0.json entry 1 (videoID '{VATEX_IDS[1]}'): 'enCap' is a string, not a list of "
        "strings; 1 more malformed entries; fix the file, or pass --skip-bad to skip and list them")
    rep = import_vatex(f, vatex_videos, tmp_path / "m.jsonl", skip_bad=True)
    assert manifest(tmp_path / "m.jsonl") == [(VATEX_IDS[0], ["A man plays."], {"split": "validation"})]
    assert skipped(tmp_path / "m.skipped_items.jsonl") == [
        {"kind": "item", "id": VATEX_IDS[1], "where": "entry 1", "reason": "'enCap' is a string, not a list of strings"},
        {"kind": "item", "id": VATEX_IDS[2], "where": "entry 2", "reason": "enCap[1] is a number, not a string"}]
    assert rep.summary().splitlines()[1] == (
        f"skipped 2 items (listed in {tmp_path / 'm.skipped_items.jsonl'}): {VATEX_IDS[1]}: 'enCap' is a string, "
        f"not a list of strings; {VATEX_IDS[2]}: enCap[1] is a number, not a string")


def test_vatex_null_and_empty_captions_are_counted_and_listed(tmp_path, vatex_videos):
    caps = ["c0", "c1", None, "c3", "", "c5", "c6", "c7", "c8", "c9"]
    entries = [{"videoID": VATEX_IDS[0], "enCap": caps}, {"videoID": VATEX_IDS[1], "enCap": [None, " "]},
               {"videoID": VATEX_IDS[2], "enCap": ["kept"]}]
    f = vatex_file(tmp_path / "vatex_training_v1.0.json", entries)
    # an item left without any caption is a bad item: an error naming it, or a listed skip
    assert one_line_error(import_vatex, f, vatex_videos, tmp_path / "m.jsonl") == (
        f"VATEX: 1 of 3 annotated videos have no caption ({VATEX_IDS[1]}: no captions left (all 2 were empty, "
        "null or malformed)); pass --skip-bad to skip and list them")
    rep = import_vatex(f, vatex_videos, tmp_path / "m.jsonl", skip_bad=True)
    assert manifest(tmp_path / "m.jsonl") == [(VATEX_IDS[0], ["c0", "c1", "c3", "c5", "c6", "c7", "c8", "c9"],
                                               {"split": "train"}),
                                              (VATEX_IDS[2], ["kept"], {"split": "train"})]
    assert skipped(tmp_path / "m.skipped_items.jsonl") == [
        {"kind": "item", "id": VATEX_IDS[1], "where": "entry 1",
         "reason": "no captions left (all 2 were empty, null or malformed)"},
        {"kind": "caption", "id": VATEX_IDS[0], "where": "entry 0 enCap[2]", "reason": "null caption"},
        {"kind": "caption", "id": VATEX_IDS[0], "where": "entry 0 enCap[4]", "reason": "empty caption"},
        {"kind": "caption", "id": VATEX_IDS[1], "where": "entry 1 enCap[0]", "reason": "null caption"},
        {"kind": "caption", "id": VATEX_IDS[1], "where": "entry 1 enCap[1]", "reason": "empty caption"}]
    assert "dropped 4 captions (empty caption, null caption; listed in" in rep.summary()


def test_vatex_private_test_layout_and_missing_videos(tmp_path, vatex_videos):
    f = vatex_file(tmp_path / "vatex_private_test_without_annotations.json",
                   [{"videoID": VATEX_IDS[0]}, {"videoID": VATEX_IDS[2]}, {"videoID": "gone_000001_000011"}])
    msg = one_line_error(import_vatex, f, vatex_videos, tmp_path / "m.jsonl")
    assert msg == (f"VATEX: 1 of 3 annotated videos have no file in {vatex_videos} (e.g. gone_000001_000011); "
                   "download them, or pass --skip-bad to skip and list them")
    rep = import_vatex(f, vatex_videos, tmp_path / "m.jsonl", skip_bad=True, split="private_test")
    assert manifest(tmp_path / "m.jsonl") == [(VATEX_IDS[0], [], {"split": "private_test"}),
                                              (VATEX_IDS[2], [], {"split": "private_test"})]
    assert [r["id"] for r in skipped(tmp_path / "m.skipped_items.jsonl")] == ["gone_000001_000011"]
    assert rep.missing_video == ["gone_000001_000011"]
    assert "withholds its captions" in rep.summary()


def test_vatex_duplicates_wrong_file_and_no_layout(tmp_path, vatex_videos):
    f = vatex_file(tmp_path / "v.json", [{"videoID": VATEX_IDS[0], "enCap": ["a"]},
                                         {"videoID": VATEX_IDS[0], "enCap": ["b"]}, {"enCap": ["c"]}])
    assert one_line_error(import_vatex, f, vatex_videos, tmp_path / "m.jsonl").startswith(
        f"v.json entry 1 (videoID '{VATEX_IDS[0]}'): videoID appears again (first at entry 0); 1 more")
    import_vatex(f, vatex_videos, tmp_path / "m.jsonl", skip_bad=True)
    assert manifest(tmp_path / "m.jsonl") == [(VATEX_IDS[0], ["a"], {})]
    assert [r["reason"] for r in skipped(tmp_path / "m.skipped_items.jsonl")] == [
        "videoID appears again (first at entry 0)", "has no 'videoID'"]
    f.write_text(json.dumps({"videos": [], "sentences": []}))
    assert "is an MSR-VTT file" in one_line_error(import_vatex, f, vatex_videos, tmp_path / "m.jsonl")
    f.write_text(json.dumps([{"id": 1}]))
    assert "no known VATEX layout" in one_line_error(import_vatex, f, vatex_videos, tmp_path / "m.jsonl")
    f.write_text("[{]")
    assert one_line_error(import_vatex, f, vatex_videos, tmp_path / "m.jsonl") == (
        f"{f}: not valid JSON at column 3 (Expecting property name enclosed in double quotes)")
    assert "video folder not found" in one_line_error(import_vatex, vatex_file(f, [{"videoID": "a", "enCap": ["x"]}]),
                                                      tmp_path / "nowhere", tmp_path / "m.jsonl")


# ---- MSVD -----------------------------------------------------------------------------------------
MSVD_HEADER = ["VideoID", "Start", "End", "WorkerID", "Source", "AnnotationTime", "Language", "Description"]
MSVD_ROWS = [
    ["-4wsuPCjDBc", "5", "15", "1", "clean", "10", "English", "A squirrel is eating a peanut."],
    ["-4wsuPCjDBc", "5", "15", "2", "clean", "12", "German", "Ein Eichhörnchen frisst."],
    ["-4wsuPCjDBc", "5", "15", "3", "unverified", "9", "English", UNI],
    ["mv89psg6zh4", "33", "46", "4", "clean", "7", "English", "A bird bathes, in water."],
    ["mv89psg6zh4", "33", "46", "5", "clean", "7", "English", ""],
    ["zv2RIbUsnSw", "159", "165", "6", "clean", "8", "Spanish", "Un hombre corta."],
]


def msvd_csv(path, rows=MSVD_ROWS, bom=False, crlf=True):
    buf = io.StringIO(newline="")
    w = csv.writer(buf, lineterminator="\r\n" if crlf else "\n")
    w.writerow(MSVD_HEADER)
    w.writerows(rows)
    path.write_bytes(((BOM if bom else "") + buf.getvalue()).encode("utf-8"))
    return path


@pytest.fixture
def msvd_clips(tmp_path, clip_bytes):
    return videos(tmp_path / "YouTubeClips", ["-4wsuPCjDBc_5_15.avi", "mv89psg6zh4_33_46.avi"], clip_bytes)


@pytest.mark.parametrize("bom", [False, True])
def test_msvd_csv_english_rows_with_and_without_bom(tmp_path, msvd_clips, bom):
    f = msvd_csv(tmp_path / "MSR Video Description Corpus.csv", bom=bom)
    rep = import_msvd(f, msvd_clips, tmp_path / "msvd.jsonl")
    assert manifest(tmp_path / "msvd.jsonl") == [("-4wsuPCjDBc_5_15", ["A squirrel is eating a peanut.", UNI], {}),
                                                 ("mv89psg6zh4_33_46", ["A bird bathes, in water."], {})]
    assert skipped(tmp_path / "msvd.skipped_items.jsonl") == [
        {"kind": "caption", "id": "mv89psg6zh4_33_46", "where": "line 6", "reason": "empty caption"}]
    assert "kept the 4 English rows; left out 2 rows in other languages (Spanish 1, German 1)" in rep.summary()
    import_msvd(f, msvd_clips, tmp_path / "de.jsonl", language="German")
    assert manifest(tmp_path / "de.jsonl") == [("-4wsuPCjDBc_5_15", ["Ein Eichhörnchen frisst."], {})]


def test_msvd_csv_malformed_rows_and_missing_columns(tmp_path, msvd_clips):
    rows = MSVD_ROWS[:1] + [["-4wsuPCjDBc", "5", "15", "English"]] + [["", "1", "2", "7", "c", "1", "English", "x"]]
    f = msvd_csv(tmp_path / "c.csv", rows)
    assert one_line_error(import_msvd, f, msvd_clips, tmp_path / "m.jsonl") == (
        "c.csv line 3: has 4 fields; the header has 8; 1 more malformed entries; "
        "fix the file, or pass --skip-bad to skip and list them")
    import_msvd(f, msvd_clips, tmp_path / "m.jsonl", skip_bad=True)
    assert manifest(tmp_path / "m.jsonl") == [("-4wsuPCjDBc_5_15", ["A squirrel is eating a peanut."], {})]
    assert [(r["where"], r["reason"]) for r in skipped(tmp_path / "m.skipped_items.jsonl")] == [
        ("line 3", "has 4 fields; the header has 8"), ("line 4", "VideoID, Start or End is empty")]
    (tmp_path / "d.csv").write_text("VideoID,Start,End,Description\nabc,1,2,x\n")
    assert one_line_error(import_msvd, tmp_path / "d.csv", msvd_clips, tmp_path / "m.jsonl") == (
        "d.csv: MSVD CSV needs columns VideoID, Start, End, Language, Description; missing Language "
        "(found VideoID, Start, End, Description)")


TXT = ("#" * 40 + "\n# Microsoft Research Video Description Corpus: English descriptions\n" + "#" * 40 + "\n"
       "-4wsuPCjDBc_5_15 a squirrel is eating a peanut in it's shell\n"
       "-4wsuPCjDBc_5_15 " + UNI + "\n"
       "mv89psg6zh4_33_46 a bird is bathing in a sink\n"
       "mv89psg6zh4_33_46\n")


def test_msvd_txt_layout_with_bom_and_crlf_keeps_the_first_caption(tmp_path, msvd_clips):
    f = tmp_path / "AllVideoDescriptions.txt"
    f.write_bytes((BOM + TXT.replace("\n", "\r\n")).encode("utf-8"))
    rep = import_msvd(f, msvd_clips, tmp_path / "t.jsonl")
    assert manifest(tmp_path / "t.jsonl") == [
        ("-4wsuPCjDBc_5_15", ["a squirrel is eating a peanut in it's shell", UNI], {}),
        ("mv89psg6zh4_33_46", ["a bird is bathing in a sink"], {})]
    assert skipped(tmp_path / "t.skipped_items.jsonl") == [
        {"kind": "caption", "id": "mv89psg6zh4_33_46", "where": "line 7", "reason": "empty caption"}]
    assert rep.layout == "AllVideoDescriptions.txt layout"
    # a BOM at the very first clip line (no comment header) must not glue onto the clip id
    f.write_bytes((BOM + "mv89psg6zh4_33_46 a bird\r\n").encode("utf-8"))
    import_msvd(f, msvd_clips, tmp_path / "t2.jsonl")
    assert manifest(tmp_path / "t2.jsonl") == [("mv89psg6zh4_33_46", ["a bird"], {})]
    f.write_text("-4wsuPCjDBc_5_15 fine\nnot-a-clip caption\n")
    assert one_line_error(import_msvd, f, msvd_clips, tmp_path / "t.jsonl").startswith(
        "AllVideoDescriptions.txt line 2: starts with 'not-a-clip', not a clip name <VideoID>_<Start>_<End>")


MAPPING = "-4wsuPCjDBc_5_15 vid1\nmv89psg6zh4_33_46 vid1301\nzv2RIbUsnSw_159_165 vid1201\n"


def test_msvd_mapping_file_is_refused_as_captions_and_used_for_vidN(tmp_path, clip_bytes):
    (tmp_path / "youtube_mapping.txt").write_text(MAPPING)
    vd = videos(tmp_path / "clips", ["vid1.avi", "vid1301.avi"], clip_bytes)
    # given as the annotations: refused, not imported as one caption "vid1" per clip
    assert one_line_error(import_msvd, tmp_path / "youtube_mapping.txt", vd, tmp_path / "m.jsonl") == (
        "youtube_mapping.txt is the MSVD youtube_mapping.txt (clip -> vidN names), not captions: give the captions "
        'file ("MSR Video Description Corpus.csv" (header VideoID,Start,End,WorkerID,Source,AnnotationTime,'
        'Language,Description) or AllVideoDescriptions.txt ("<VideoID>_<Start>_<End> <caption>" per line)) and '
        "pass this one as --mapping")
    f = tmp_path / "AllVideoDescriptions.txt"
    f.write_text(TXT.replace("mv89psg6zh4_33_46\n", ""))
    rep = import_msvd(f, vd, tmp_path / "m.jsonl")  # mapping found beside the annotations
    items = read_manifest(tmp_path / "m.jsonl").items
    assert [(it.id, it.media.name, it.meta) for it in items] == [
        ("-4wsuPCjDBc_5_15", "vid1.avi", {"vid": "vid1", "split": "train"}),
        ("mv89psg6zh4_33_46", "vid1301.avi", {"vid": "vid1301", "split": "test"})]
    assert f"clip names from {tmp_path / 'youtube_mapping.txt'}" in rep.layout
    rep = import_msvd(f, vd, tmp_path / "test.jsonl", split="test")
    assert manifest(tmp_path / "test.jsonl") == [("mv89psg6zh4_33_46", ["a bird is bathing in a sink"],
                                                  {"vid": "vid1301", "split": "test"})]
    assert rep.layout.endswith("split test: 1 of 2 clips")


def test_msvd_split_needs_the_mapping_and_unknown_layouts_are_refused(tmp_path, msvd_clips):
    f = msvd_csv(tmp_path / "MSR Video Description Corpus.csv")
    msg = one_line_error(import_msvd, f, msvd_clips, tmp_path / "m.jsonl", split="test")
    assert msg.startswith("MSVD files define no splits; the common split (train vid1-vid1200, validate "
                          "vid1201-vid1300, test vid1301-vid1970) numbers clips by youtube_mapping.txt")
    assert one_line_error(import_msvd, f, msvd_clips, tmp_path / "m.jsonl", split="bogus").startswith(
        "unknown MSVD split 'bogus'")
    for name, text in [("x.json", '{"videos": []}'), ("notes.txt", "hello world\nsecond line\n"), ("e.txt", "# only\n")]:
        (tmp_path / name).write_text(text)
        msg = one_line_error(import_msvd, tmp_path / name, msvd_clips, tmp_path / "m.jsonl")
        assert re.search(r"(no known MSVD layout|no annotation lines).*expected \"MSR Video Description Corpus.csv\"", msg), msg
    (tmp_path / "latin1.txt").write_bytes("-4wsuPCjDBc_5_15 caf\xe9\n".encode("latin-1"))
    assert one_line_error(import_msvd, tmp_path / "latin1.txt", msvd_clips, tmp_path / "m.jsonl") == (
        f"annotation file {tmp_path / 'latin1.txt'}: not UTF-8 text at line 1 (byte 0xe9 at offset 20); "
        "re-encode the file as UTF-8, or name its encoding (--encoding cp1252)")


# ---- shared: limit, suffixes, symlinks, skipped-items file ------------------------------------------
def test_limit_above_usable_is_reported_and_subsets_are_reproducible(tmp_path, msrvtt_2016):
    tv, _, vd = msrvtt_2016
    rep = import_msrvtt(tv, vd, tmp_path / "m.jsonl", limit=5)
    assert rep.n_written == 3 and "--limit 5 requested but only 3 usable: wrote 3" in rep.summary()
    a = import_msrvtt(tv, vd, tmp_path / "a.jsonl", limit=2, seed=4)
    import_msrvtt(tv, vd, tmp_path / "b.jsonl", limit=2, seed=4)
    assert a.n_written == 2 and read_manifest(tmp_path / "a.jsonl").ids == read_manifest(tmp_path / "b.jsonl").ids
    assert "--limit 2: random subset of 3 usable items" in a.summary()
    assert one_line_error(import_msrvtt, tv, vd, tmp_path / "m.jsonl", limit=0) == "--limit must be >= 1, got 0"
    assert one_line_error(import_msrvtt, tv, vd, tv) == f"--out {tv} is the annotation file itself; give a new .jsonl path"
    assert json.loads(tv.read_text())["sentences"]  # untouched


def test_several_suffixes_symlinks_and_stale_skip_lists(tmp_path, clip_bytes):
    vd = videos(tmp_path / "videos", ["video0.webm", "video0.mp4", "video1.mkv"], clip_bytes)
    blob = tmp_path / "blobs" / "3f2a9c"  # a content-addressed store: no suffix on the target
    blob.parent.mkdir()
    blob.write_bytes(clip_bytes)
    (vd / "video2.mp4").symlink_to(blob)
    (vd / "video3.mp4").symlink_to(tmp_path / "blobs" / "gone")
    f = msrvtt_file(tmp_path / "t.json", [v(f"video{i}", "train") for i in range(4)],
                    [s(f"video{i}", i, f"c{i}") for i in range(4)])
    rep = import_msrvtt(f, vd, tmp_path / "m.jsonl", skip_bad=True)
    lines = [json.loads(line) for line in (tmp_path / "m.jsonl").read_text().splitlines()]
    assert [ln["video"] for ln in lines] == ["videos/video0.mp4", "videos/video1.mkv", "videos/video2.mp4"]
    assert rep.several_suffixes == [("video0", "video0.mp4", ["video0.webm"])]
    assert "video0: took video0.mp4 over video0.webm" in rep.summary()
    assert skipped(tmp_path / "m.skipped_items.jsonl") == [
        {"kind": "item", "id": "video3", "where": "videos[3]", "reason": "no video file: video3.mp4 is a broken symlink"}]
    (vd / "video3.mp4").unlink()
    (vd / "video3.mp4").write_bytes(clip_bytes)
    rep = import_msrvtt(f, vd, tmp_path / "m.jsonl")
    assert not (tmp_path / "m.skipped_items.jsonl").exists() and rep.skipped_file is None
    assert "nothing skipped, no caption dropped" in rep.summary()


def test_manifest_and_skip_list_get_normal_permissions(tmp_path, msrvtt_2016):
    tv, _, vd = msrvtt_2016
    old = os.umask(0o022)
    try:
        import_msrvtt(tv, vd, tmp_path / "m.jsonl", split="train")
    finally:
        os.umask(old)
    assert (tmp_path / "m.jsonl").stat().st_mode & 0o777 == 0o644


# ---- the CLI ----------------------------------------------------------------------------------------
cli_error = refused  # the real entry point: bad input exits 2 with one line on stderr


def test_cli_errors_are_one_line_exit_2(tmp_path, capsys, msrvtt_2016, vatex_videos):
    tv, _, vd = msrvtt_2016
    f = vatex_file(tmp_path / "vatex_validation_v1.0.json", [{"videoID": VATEX_IDS[0], "enCap": ["x"]}])
    assert cli_error(capsys, "import", "vatex", f, vatex_videos, "--out", tmp_path / "m.jsonl", "--split", "bogus"
                     ).startswith("error: unknown VATEX split 'bogus'")
    assert cli_error(capsys, "import", "msrvtt", tv, vd, "--out", tmp_path / "m.jsonl", "--split", "test") == (
        "error: split 'test' is in test_videodatainfo.json; train_val_videodatainfo.json holds train, validate")
    assert "--skip-missing is now --skip-bad" in cli_error(capsys, "import", "vatex", f, vatex_videos, "--out",
                                                           tmp_path / "m.jsonl", "--skip-missing")
    assert cli_error(capsys, "import", "vatex", f, vatex_videos, "--out", tmp_path / "m.jsonl", "--mapping", f) == (
        "error: --mapping is for msvd only; vatex has no such option")
    message = cli_error(capsys, "import", "youtube8m", f, vatex_videos, "--out", tmp_path / "m.jsonl")
    assert "DATASET 'youtube8m': choose one of vatex | msrvtt" in message and "folder" in message
    assert "--skip-missing is now --skip-bad" in cli_error(capsys, "make-data", "real", "--out", tmp_path / "r",
                                                           "--skip-missing")


def test_cli_import_summary_lists_skips_unwrapped(tmp_path, clip_bytes):
    long_ids = [f"a_very_long_video_identifier_number_{i:03d}_000010_000020" for i in range(4)]
    f = vatex_file(tmp_path / "vatex_validation_v1.0.json",
                   [{"videoID": i, "enCap": ["a caption"]} for i in ["kept_000001_000011"] + long_ids])
    vd = videos(tmp_path / "videos", ["kept_000001_000011.mp4"], clip_bytes)
    out = tmp_path / "vatex.jsonl"
    res = CliRunner().invoke(app, ["import", "vatex", str(f), str(vd), "--out", str(out), "--skip-bad", "--limit", "9"])
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    skip_line = next(ln for ln in lines if ln.startswith("skipped 4 items"))
    assert all(i in skip_line for i in long_ids) and len(skip_line) > 300  # one line, not hard-wrapped
    assert "--limit 9 requested but only 1 usable: wrote 1" in lines
    assert [r["id"] for r in skipped(tmp_path / "vatex.skipped_items.jsonl")] == long_ids


def test_readme_import_examples_run_as_written(tmp_path, clip_bytes, monkeypatch):
    """Every `vlgap import` line of the docs (README.md and docs/*.md), run on small files in the official layouts."""
    root = Path(__file__).parent.parent
    pages = [root / "README.md", *sorted((root / "docs").rglob("*.md"))]
    lines = [ln for page in pages for ln in page.read_text(encoding="utf-8").splitlines()]
    commands = list(dict.fromkeys(ln.split("#")[0].strip() for ln in lines if ln.startswith("vlgap import ")))
    assert len(commands) >= 3
    monkeypatch.chdir(tmp_path)
    lay_out_import_sources(tmp_path, clip_bytes)
    runner = CliRunner()
    for cmd in commands:
        argv = shlex.split(cmd)[1:]
        res = runner.invoke(app, argv)
        assert res.exit_code == 0, (cmd, res.output, res.exception)
        out = argv[argv.index("--out") + 1]
        assert len(read_manifest(out)) >= 1, cmd


def lay_out_import_sources(root: Path, clip: bytes) -> None:
    """The files every `vlgap import` line of the docs reads, in the official layouts, under `root` (shared
    with tests/test_docs_examples.py, which runs the same lines among the pages' other examples)."""
    from test_importers_labels import K400, SSV2_LABELS, SSV2_TRAIN  # Kinetics CSV, SSv2 JSON + labels.json

    names = ["video0", "video1", "video7010", "video7011"] + VATEX_IDS + ["-4wsuPCjDBc_5_15", "mv89psg6zh4_33_46"]
    videos(root / "videos", [f"{n}.mp4" for n in names], clip)
    videos(root / "YouTubeClips", ["-4wsuPCjDBc_5_15.avi", "mv89psg6zh4_33_46.avi"], clip)
    # your own folder and captions CSV (docs/own-data.md; its first example writes the same names there)
    videos(root / "my_videos", ["shapes_00000.mp4", "shapes_00001.mp4"], clip)
    (root / "my_captions.csv").write_text("id,caption\nshapes_00000,a disc moves\nshapes_00001,a square stays\n"
                                          "shapes_00000,a red disc\n", encoding="utf-8")
    # the folder every node mounts (shared/ in "Running on a cluster"): the VATEX videos
    videos(root / "shared" / "vatex" / "videos", [f"{n}.mp4" for n in VATEX_IDS], clip)
    vatex_file(root / "vatex_validation_v1.0.json", [{"videoID": i, "enCap": [f"caption {j} of {i}" for j in range(10)]}
                                                      for i in VATEX_IDS])  # 10 English captions, as VATEX
    msrvtt_file(root / "train_val_videodatainfo.json", [v("video0", "train"), v("video1", "validate")],
                [s("video0", 0, "a man sings"), s("video1", 1, "cars race")])
    msrvtt_file(root / "test_videodatainfo.json", [v("video7010", "test"), v("video7011", "test")],
                [s("video7010", 2, "a cat jumps"), s("video7011", 3, "people dance")])
    msvd_csv(root / "MSR Video Description Corpus.csv")
    (root / "AllVideoDescriptions.txt").write_text(TXT)
    (root / "kinetics400_val.csv").write_text(K400)
    videos(root / "kinetics", ["--07WQ2iBlw.mp4", "--33Lscn6sk.mp4", "-0Ns2Ka7ZL8_000030_000040.mp4"], clip)
    (root / "something-something-v2-validation.json").write_text(json.dumps(SSV2_TRAIN))
    (root / "something-something-v2-labels.json").write_text(json.dumps(SSV2_LABELS))
    videos(root / "ssv2", [f"{e['id']}.webm" for e in SSV2_TRAIN], clip)


def test_every_caption_is_kept_or_listed(tmp_path, clip_bytes):
    """Conservation on a seeded random VATEX file: each input caption is either in the manifest (same text,
    same order) or listed in the skipped-items file, and each skipped item is listed with its reason."""
    import random

    rng = random.Random(7)
    pool = ["A man runs.", UNI, "  padded  ", "", None, " \t ", "Two dogs play fetch."]
    entries, expect_kept, expect_dropped, expect_skipped = [], {}, set(), {}
    names = []
    for i in range(40):
        vid = f"v{i:02d}_{i:06d}_{i + 10:06d}"
        caps = [rng.choice(pool) for _ in range(rng.randint(0, 6))]
        malformed = rng.random() < 0.1
        has_video = rng.random() < 0.85
        entries.append({"videoID": vid, "enCap": " ".join(c or "" for c in caps) if malformed else caps})
        if has_video:
            names.append(f"{vid}.mp4")
        kept = [c.strip() for c in caps if c is not None and c.strip()]
        if malformed:
            expect_skipped[vid] = "'enCap' is a string, not a list of strings"
            continue
        expect_dropped |= {(vid, f"entry {i} enCap[{j}]") for j, c in enumerate(caps) if c is None or not c.strip()}
        if not kept:
            expect_skipped[vid] = "no captions"
        elif not has_video:
            expect_skipped[vid] = "no video file"
        else:
            expect_kept[vid] = kept
    f = vatex_file(tmp_path / "vatex_training_v1.0.json", entries)
    vd = videos(tmp_path / "videos", names, clip_bytes)
    rep = import_vatex(f, vd, tmp_path / "m.jsonl", skip_bad=True)
    assert {m[0]: m[1] for m in manifest(tmp_path / "m.jsonl")} == expect_kept
    assert read_manifest(tmp_path / "m.jsonl").ids == list(expect_kept)  # file order
    listed = skipped(tmp_path / "m.skipped_items.jsonl")
    assert {(r["id"], r["where"]) for r in listed if r["kind"] == "caption"} == expect_dropped
    items = {r["id"]: r["reason"] for r in listed if r["kind"] == "item"}
    assert set(items) == set(expect_skipped)
    assert all(items[k].startswith(why) for k, why in expect_skipped.items())
    assert rep.n_written == len(expect_kept) and len(rep.skipped) == len(expect_skipped)
    assert len(expect_dropped) > 5 and len(expect_skipped) > 5  # the draw exercises every path
