"""Input formats and bad inputs for caption_eval: clear errors naming the ids, or a reported policy."""
from __future__ import annotations

import json

import pytest

from vlgap.captions.evaluate import caption_eval
from vlgap.captions.io import load_captions
from vlgap.errors import VlgapError

REFS = {"annotations": [{"image_id": 1, "caption": "a dog runs"}, {"image_id": 1, "caption": "the dog is running"},
                        {"image_id": 2, "caption": "a cat sleeps"}, {"image_id": 2, "caption": "cat on a sofa"}]}
PREDS = [{"image_id": 1, "caption": "a dog running"}, {"image_id": 2, "caption": "a cat sleeping"}]


def _write(path, obj):
    path.write_text(json.dumps(obj), encoding="utf-8")
    return path


def test_coco_and_jsonl_files_give_the_same_items(tmp_path):
    coco = load_captions(_write(tmp_path / "p.json", PREDS), _write(tmp_path / "r.json", REFS))
    (tmp_path / "p.jsonl").write_text('{"id": 1, "caption": "a dog running"}\n{"id": "2", "caption": "a cat sleeping"}\n')
    (tmp_path / "r.jsonl").write_text('{"id": "1", "captions": ["a dog runs", "the dog is running"]}\n'
                                      '{"id": 2, "caption": "a cat sleeps"}\n{"id": 2, "caption": "cat on a sofa"}\n')
    jsonl = load_captions(tmp_path / "p.jsonl", tmp_path / "r.jsonl")
    assert [str(i) for i in coco.ids] == [str(i) for i in jsonl.ids] == ["1", "2"]
    assert coco.predictions == jsonl.predictions
    assert coco.references == jsonl.references
    assert not coco.report


def test_in_memory_dicts():
    data = load_captions({"a": "x y", "b": "z"}, {"a": ["x y z"], "b": ["z", "w"]})
    assert data.ids == ["a", "b"] and data.references[1] == ["z", "w"]


def test_missing_ids_on_both_sides_are_named():
    preds = PREDS + [{"image_id": 7, "caption": "extra"}]
    refs = {"annotations": REFS["annotations"] + [{"image_id": 9, "caption": "no prediction"}]}
    with pytest.raises(VlgapError, match=r"1 predicted id\(s\) have no reference: 7.*1 reference id\(s\) have no prediction: 9"):
        load_captions(preds, refs)


def test_missing_ids_drop_policy_is_reported():
    preds = PREDS + [{"image_id": 7, "caption": "extra"}]
    data = load_captions(preds, REFS, on_missing="drop")
    assert data.ids == [1, 2]
    assert data.report["missing"] == {"policy": "drop", "predictions_without_references": 1,
                                      "references_without_predictions": 0, "ids": [7]}


def test_several_predictions_for_one_id():
    preds = PREDS + [{"image_id": 1, "caption": "another one"}]
    with pytest.raises(VlgapError, match=r"several predictions: 1"):
        load_captions(preds, REFS)
    data = load_captions(preds, REFS, on_duplicate="first")
    assert data.predictions[0] == "a dog running"
    assert data.report["duplicate_predictions"]["n"] == 1


@pytest.mark.parametrize("caption", ["", "   ", "\n\t"])
def test_empty_prediction(caption):
    preds = [{"image_id": 1, "caption": caption}, PREDS[1]]
    with pytest.raises(VlgapError, match=r"empty prediction\(s\): 1"):
        load_captions(preds, REFS)
    data = load_captions(preds, REFS, on_empty="keep")
    assert data.report["empty_captions"]["predictions"] == 1


def test_empty_reference_caption():
    refs = {"annotations": REFS["annotations"] + [{"image_id": 2, "caption": ""}]}
    with pytest.raises(VlgapError, match=r"empty reference caption\(s\) for 1 item\(s\): 2"):
        load_captions(PREDS, refs)


def test_item_without_any_reference():
    with pytest.raises(VlgapError, match=r"without any caption: 'b'"):
        load_captions({"a": "x", "b": "y"}, {"a": ["x"], "b": []})


def test_undecodable_file(tmp_path):
    path = tmp_path / "p.jsonl"
    path.write_bytes(b'{"id": 1, "caption": "ok"}\n{"id": 2, "caption": "caf\xe9"}\n')
    with pytest.raises(VlgapError, match=r"p.jsonl: not UTF-8 text at line 2 \(byte 0xe9 at offset 52\)"):
        load_captions(path, REFS)


def test_unpaired_surrogate_is_named():
    with pytest.raises(VlgapError, match=r"item 2: the prediction holds undecodable text"):
        load_captions([PREDS[0], {"image_id": 2, "caption": "bad \ud800 text"}], REFS)


def test_non_string_caption_and_missing_fields():
    with pytest.raises(VlgapError, match=r"item 2: the prediction is int"):
        load_captions([PREDS[0], {"image_id": 2, "caption": 5}], REFS)
    with pytest.raises(VlgapError, match=r"row 1: no id field"):
        load_captions([PREDS[0], {"caption": "x"}], REFS)
    with pytest.raises(VlgapError, match=r"row 0 \(item 1\): no 'caption' field"):
        load_captions([{"image_id": 1}], REFS)


def test_bad_json_names_the_line(tmp_path):
    path = tmp_path / "p.jsonl"
    path.write_text('{"id": 1, "caption": "ok"}\n{"id": 2, caption}\n')
    with pytest.raises(VlgapError, match=r"line 2: not valid JSON"):
        load_captions(path, REFS)


def test_unknown_policy_and_metric():
    with pytest.raises(VlgapError, match=r"on_missing='skip'"):
        load_captions(PREDS, REFS, on_missing="skip")
    with pytest.raises(VlgapError, match=r"unknown metric\(s\) spice"):
        caption_eval(PREDS, REFS, ["bleu", "spice"])


def test_policies_reach_the_result():
    preds = PREDS + [{"image_id": 7, "caption": "extra"}]
    result = caption_eval(preds, REFS, ["bleu"], on_missing="drop")
    assert result["n"] == 2
    assert result["input"]["missing"]["predictions_without_references"] == 1


def test_int_and_string_ids_are_the_same_item():
    data = load_captions([{"image_id": "1", "caption": "a dog"}, {"image_id": 2, "caption": "a cat"}], REFS)
    assert data.predictions == ["a dog", "a cat"]


def test_one_utf8_reader_names_file_line_and_byte_for_captions_and_annotations(tmp_path):
    """Captions (vlgap.captions.io) and annotation files (the importers) read text through the one reader,
    vlgap.paths.read_text_utf8: the same message (file, line, byte), a folder named as a folder, and a
    UTF-16 file with its byte-order mark read as the importers always did."""
    from vlgap.data.importers.common import read_text

    bad = tmp_path / "refs.jsonl"
    bad.write_bytes(b'{"id": 1, "captions": ["ok"]}\n{"id": 2, "captions": ["caf\xe9"]}\n')
    with pytest.raises(VlgapError, match=r"refs.jsonl: not UTF-8 text at line 2 \(byte 0xe9 at offset \d+\)"):
        load_captions({1: "ok", 2: "x"}, bad)
    with pytest.raises(VlgapError, match=r"annotation file .*refs.jsonl: not UTF-8 text at line 2 \(byte 0xe9"):
        read_text(bad)
    with pytest.raises(VlgapError, match=r"is a folder, expected a file"):
        load_captions(tmp_path, REFS)
    with pytest.raises(VlgapError, match=r"annotation file .*: is a folder, expected a file"):
        read_text(tmp_path)
    wide = tmp_path / "u16.jsonl"
    wide.write_bytes('{"id": 1, "caption": "café"}\n'.encode("utf-16"))
    assert read_text(wide) == '{"id": 1, "caption": "café"}\n'
    assert load_captions(wide, {1: ["café"]}).predictions == ["café"]


def test_load_captions_fast_path_equals_the_row_by_row_reading(monkeypatch):
    import sys
    from pathlib import Path

    from vlgap.captions import io

    sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "captions"))
    from corpus import make_corpus

    refs, preds = make_corpus(300, 3, seed=4, nasty=True)
    cases = [
        (preds, refs, {}),
        (list(preds.values()), [refs[k] for k in preds], {}),                      # list-aligned: ids 0..n-1
        ({i: c for i, c in enumerate(preds.values())}, {i: r for i, r in enumerate(refs.values())}, {}),
        ({**preds, "x": "  "}, {**refs, "x": ["a"]}, {"on_empty": "keep"}),        # a blank prediction
        (preds, {**refs, next(iter(refs)): ["ok", " "]}, {"on_empty": "keep"}),    # a blank reference
        ({**preds, 7: "a"}, {**refs, 7: "just one"}, {}),                          # a string, not a list
        ({**preds, 1: "a", "1": "b"}, {**refs, 1: ["a"], "1": ["b"]}, {"on_duplicate": "first"}),  # str(id) twice
        ({**preds, "y": ["one", "two"]}, {**refs, "y": ["r"]}, {"on_duplicate": "first"}),
    ]
    for p, r, options in cases:
        fast = io.load_captions(p, r, **options)
        with monkeypatch.context() as m:
            m.setattr(io, "_plain_items", lambda data, kind: None)
            slow = io.load_captions(p, r, **options)
        assert (fast.ids, fast.predictions, fast.references, fast.report) == \
            (slow.ids, slow.predictions, slow.references, slow.report)
    for bad in ({"a": ["\ud800"]}, {"a": [3]}, {"a": []}):
        for reader in ("fast", "slow"):
            with monkeypatch.context() as m:
                if reader == "slow":
                    m.setattr(io, "_plain_items", lambda data, kind: None)
                try:
                    io.load_captions({"a": "x"}, bad)
                except Exception as e:  # noqa: BLE001
                    message = str(e)
                else:
                    message = None
            if reader == "fast":
                fast_message = message
        assert message is not None and message == fast_message
