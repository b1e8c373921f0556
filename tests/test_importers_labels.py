"""Kinetics (CSV) and Something-Something v2 (JSON + labels.json) importers on files built to the published
formats: labels written into meta, splits, test files without labels, malformed rows, and the CLI."""
from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from vlgap.cli._app import app
from vlgap.data.importers import import_dataset, import_kinetics, import_ssv2
from vlgap.data.manifest import read_manifest
from vlgap.errors import VlgapError

runner = CliRunner()
FAKE_MP4 = b"\x00\x00\x00\x18ftypmp42"  # importers only check that the files exist


def _videos(folder, names):
    folder.mkdir(parents=True, exist_ok=True)
    for n in names:
        (folder / n).write_bytes(FAKE_MP4)
    return folder


K400 = ("label,youtube_id,time_start,time_end,split\n"
        "abseiling,--07WQ2iBlw,1,11,train\n"
        '"passing American football (in game)",--33Lscn6sk,4,14,train\n'
        "abseiling,-0Ns2Ka7ZL8,30,40,val\n")
K700_2020 = ("label,youtube_id,time_start,time_end,split,is_cc\n"
             "dribbling basketball,a1b2c3d4e5f,12,22,train,1\n"
             "dribbling basketball,z9y8x7w6v5u,0,10,train,0\n")
K_TEST = "youtube_id,time_start,time_end,split\n--6bJUbfpnQ,17,27,test\n"


def test_kinetics_400_labels_and_split(tmp_path):
    (tmp_path / "train.csv").write_text(K400)
    vids = _videos(tmp_path / "v", ["--07WQ2iBlw_000001_000011.mp4", "--33Lscn6sk_000004_000014.mp4",
                                    "-0Ns2Ka7ZL8.mp4"])  # the bare youtube id is accepted too
    rep = import_kinetics(tmp_path / "train.csv", vids, tmp_path / "k.jsonl")
    items = read_manifest(tmp_path / "k.jsonl").items
    assert [it.id for it in items] == ["--07WQ2iBlw_000001_000011", "--33Lscn6sk_000004_000014",
                                       "-0Ns2Ka7ZL8_000030_000040"]
    assert [it.meta["label"] for it in items] == ["abseiling", "passing American football (in game)", "abseiling"]
    assert items[0].meta == {"youtube_id": "--07WQ2iBlw", "time_start": 1, "time_end": 11, "label": "abseiling",
                             "split": "train"}
    assert items[2].media.name == "-0Ns2Ka7ZL8.mp4" and all(it.captions == () for it in items)
    assert rep.n_written == 3 and "2 classes in meta.label" in rep.summary()
    rep = import_dataset("kinetics-400", tmp_path / "train.csv", vids, tmp_path / "val.jsonl", split="validate")
    assert [it.id for it in read_manifest(tmp_path / "val.jsonl").items] == ["-0Ns2Ka7ZL8_000030_000040"]
    with pytest.raises(VlgapError, match="split 'test' is not in train.csv: its split column holds train, val"):
        import_kinetics(tmp_path / "train.csv", vids, tmp_path / "x.jsonl", split="test")


def test_kinetics_700_2020_is_cc_and_test_file(tmp_path):
    (tmp_path / "k700.csv").write_text(K700_2020)
    (tmp_path / "test.csv").write_text(K_TEST)
    vids = _videos(tmp_path / "v", ["a1b2c3d4e5f_000012_000022.mp4", "z9y8x7w6v5u_000000_000010.mp4",
                                    "--6bJUbfpnQ_000017_000027.mp4"])
    import_kinetics(tmp_path / "k700.csv", vids, tmp_path / "k.jsonl")
    assert [it.meta["is_cc"] for it in read_manifest(tmp_path / "k.jsonl").items] == [True, False]
    rep = import_kinetics(tmp_path / "test.csv", vids, tmp_path / "t.jsonl")
    it = read_manifest(tmp_path / "t.jsonl").items[0]
    assert "label" not in it.meta and "this file has no labels" in rep.summary()


def test_kinetics_malformed_rows_and_wrong_layout(tmp_path):
    (tmp_path / "bad.csv").write_text(K400 + "abseiling,--07WQ2iBlw,1,11,train\ncooking,xyz,5,2,train\n")
    vids = _videos(tmp_path / "v", ["--07WQ2iBlw_000001_000011.mp4", "--33Lscn6sk_000004_000014.mp4",
                                    "-0Ns2Ka7ZL8_000030_000040.mp4"])
    with pytest.raises(VlgapError, match=r"bad.csv line 5 \(clip '--07WQ2iBlw_000001_000011'\): clip appears again "
                                         r"\(first at line 2\); 1 more malformed"):
        import_kinetics(tmp_path / "bad.csv", vids, tmp_path / "k.jsonl")
    rep = import_kinetics(tmp_path / "bad.csv", vids, tmp_path / "k.jsonl", skip_bad=True)
    assert rep.n_written == 3 and len(rep.skipped) == 2
    (tmp_path / "cap.csv").write_text("video_id,caption\nx,y\n")
    with pytest.raises(VlgapError, match="no known Kinetics layout"):
        import_kinetics(tmp_path / "cap.csv", vids, tmp_path / "k.jsonl")


SSV2_TRAIN = [
    {"id": "78687", "label": "holding potato next to vicks vaporub bottle",
     "template": "Holding [something] next to [something]", "placeholders": ["potato", "vicks vaporub bottle"]},
    {"id": "42326", "label": "spreading margarine onto bread", "template": "Spreading [something] onto [something]",
     "placeholders": ["margarine", "bread"]},
    {"id": "100904", "label": "putting pen on a surface", "template": "Putting [something] on a surface",
     "placeholders": ["pen"]},
]
SSV2_LABELS = {"Holding something next to something": "59", "Spreading something onto something": "148",
               "Putting something on a surface": "112"}


def test_ssv2_labels_index_and_caption(tmp_path):
    (tmp_path / "something-something-v2-train.json").write_text(json.dumps(SSV2_TRAIN))
    (tmp_path / "something-something-v2-labels.json").write_text(json.dumps(SSV2_LABELS))
    vids = _videos(tmp_path / "v", ["78687.webm", "42326.webm", "100904.webm"])
    rep = import_ssv2(tmp_path / "something-something-v2-train.json", vids, tmp_path / "s.jsonl", split="train")
    items = read_manifest(tmp_path / "s.jsonl").items
    assert [(it.id, it.meta["label"], it.meta["label_index"]) for it in items] == [
        ("78687", "Holding something next to something", 59), ("42326", "Spreading something onto something", 148),
        ("100904", "Putting something on a surface", 112)]
    assert items[0].captions == ("holding potato next to vicks vaporub bottle",)
    assert items[0].meta["placeholders"] == ["potato", "vicks vaporub bottle"] and items[0].meta["split"] == "train"
    assert "class indices from" in rep.summary()
    with pytest.raises(VlgapError, match="split 'validation' is in something-something-v2-validation.json"):
        import_ssv2(tmp_path / "something-something-v2-train.json", vids, tmp_path / "s.jsonl", split="validation")


def test_ssv2_unknown_class_test_file_and_cli(tmp_path):
    rows = SSV2_TRAIN + [{"id": "5", "label": "x", "template": "Poking [something]", "placeholders": ["x"]}]
    (tmp_path / "train.json").write_text(json.dumps(rows))
    (tmp_path / "map.json").write_text(json.dumps(SSV2_LABELS))
    vids = _videos(tmp_path / "v", ["78687.webm", "42326.webm", "100904.webm", "5.webm", "1420.webm"])
    with pytest.raises(VlgapError, match=r"entry 3 \(id '5'\): class 'Poking something' is not in the labels file"):
        import_ssv2(tmp_path / "train.json", vids, tmp_path / "s.jsonl", label_map=tmp_path / "map.json")
    (tmp_path / "something-something-v2-test.json").write_text(json.dumps([{"id": "1420"}]))
    rep = import_ssv2(tmp_path / "something-something-v2-test.json", vids, tmp_path / "t.jsonl")
    it = read_manifest(tmp_path / "t.jsonl").items[0]
    assert it.id == "1420" and it.captions == () and "label" not in it.meta and "withholds labels" in rep.summary()
    with pytest.raises(VlgapError, match="--label-map is for ssv2 only"):
        import_dataset("kinetics", tmp_path / "train.json", vids, tmp_path / "x.jsonl", label_map=tmp_path / "map.json")
    out = runner.invoke(app, ["import", "ssv2", str(tmp_path / "train.json"), str(vids), "--out",
                              str(tmp_path / "c.jsonl"), "--label-map", str(tmp_path / "map.json"), "--skip-bad"])
    assert out.exit_code == 0, out.output
    assert [it.meta["label_index"] for it in read_manifest(tmp_path / "c.jsonl").items] == [59, 148, 112]
    (tmp_path / "k.csv").write_text(K400)
    kv = _videos(tmp_path / "kv", ["--07WQ2iBlw.mp4", "--33Lscn6sk.mp4", "-0Ns2Ka7ZL8.mp4"])
    out = runner.invoke(app, ["import", "kinetics", str(tmp_path / "k.csv"), str(kv), "--out", str(tmp_path / "k.jsonl"),
                              "--split", "train"])
    assert out.exit_code == 0, out.output
    assert len(read_manifest(tmp_path / "k.jsonl").items) == 2
