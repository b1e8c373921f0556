"""The forward trace (vlgap.encoders.forward_trace): off by default, one line per forward call when asked
for, with what a replay needs; the replay runs the same shapes through the same encoders."""
import json

import numpy as np
import pytest
import torch

from vlgap.encoders.floor import replay, replay_input
from vlgap.encoders.forward_trace import ENV, forward_trace, read_trace, trace_target
from vlgap.encoders.registry import get_encoder
from vlgap.errors import VlgapError


@pytest.fixture(scope="module")
def mobilenet():
    return get_encoder("mobilenet_v2", image_size=64)


@pytest.fixture(scope="module")
def minilm():
    return get_encoder("minilm")


def test_off_by_default_writes_nothing(tmp_path, monkeypatch, mobilenet):
    monkeypatch.delenv(ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    assert trace_target() is None
    mobilenet.forward_layers(torch.zeros(2, 3, 64, 64))
    assert list(tmp_path.iterdir()) == []
    with forward_trace(None):  # an explicit "off" inside a traced process
        monkeypatch.setenv(ENV, str(tmp_path / "t.jsonl"))
        mobilenet.forward_layers(torch.zeros(1, 3, 64, 64))
    assert list(tmp_path.iterdir()) == []


def test_vision_and_text_calls_are_traced(tmp_path, monkeypatch, mobilenet, minilm):
    monkeypatch.delenv(ENV, raising=False)
    path = tmp_path / "trace.jsonl"
    texts = ["a red square moves left.", "two circles, one blue and one green, meet in the middle of the frame."]
    with forward_trace(path):
        mobilenet.forward_layers(torch.zeros(3, 3, 64, 64))
        minilm.encode(texts)
    lines = read_trace(path)
    assert [r["encoder"]["name"] for r in lines] == ["mobilenet_v2", "minilm"]
    vis, txt = lines
    assert vis["shape"] == [3, 3, 64, 64] and vis["dtype"] == "float32"
    assert vis["encoder"] == {"name": "mobilenet_v2", "modality": "vision", "dtype": "float32", "device": "cpu",
                              "image_size": 64}
    ids = minilm.token_ids(texts)
    assert txt["shape"] == [2, max(len(i) for i in ids)]
    assert txt["lengths"] == [len(i) for i in ids]          # real tokens per row, padding excluded
    assert txt["threads"] == torch.get_num_threads() and txt["wall_s"] >= 0 and txt["cpu_s"] >= 0
    # the environment variable turns it on as well (the benchmark traces a demo in another process)
    monkeypatch.setenv(ENV, str(path))
    mobilenet.forward_layers(torch.zeros(1, 3, 64, 64))
    assert len(read_trace(path)) == 3


def test_forward_tokens_is_encode_after_tokenisation(minilm):
    texts = ["a red square moves left.", "a blue circle."]
    enc = minilm.tokenizer(texts, padding=True, return_tensors="pt")
    by_text = minilm.encode(texts)
    by_ids = minilm.forward_tokens(enc["input_ids"], enc["attention_mask"])
    assert len(by_ids) == len(by_text)
    for a, b in zip(by_text, by_ids):
        assert torch.equal(a, b)


def test_replay_inputs_have_the_traced_shapes_and_padding(minilm, mobilenet):
    gen = torch.Generator().manual_seed(0)
    rec = {"encoder": {"name": "minilm", "modality": "text", "dtype": "float32", "device": "cpu"},
           "shape": [3, 7], "lengths": [7, 2, 5]}
    x = replay_input(minilm, rec, gen)
    assert x["input_ids"].shape == (3, 7)
    assert x["attention_mask"].sum(1).tolist() == [7, 2, 5]
    assert (x["input_ids"][1, 2:] == minilm.tokenizer.pad_token_id).all()
    rec = {"encoder": {"name": "mobilenet_v2", "modality": "vision", "dtype": "float32", "device": "cpu"},
           "shape": [2, 3, 64, 64], "dtype": "float32"}
    assert replay_input(mobilenet, rec, gen).shape == (2, 3, 64, 64)
    with pytest.raises(VlgapError, match="do not fit"):
        replay_input(minilm, {**rec, "encoder": {**rec["encoder"], "modality": "text"}, "shape": [2, 4],
                              "lengths": [5, 1]}, gen)


def test_replay_sums_each_encoders_calls(tmp_path, mobilenet, minilm):
    path = tmp_path / "trace.jsonl"
    with forward_trace(path):
        for n in (4, 2):
            mobilenet.forward_layers(torch.zeros(n, 3, 64, 64))
        minilm.encode(["one caption.", "another, longer caption about shapes."])
    loaded = {"mobilenet_v2": mobilenet, "minilm": minilm}
    asked = []
    floor = replay(read_trace(path), load=lambda spec: asked.append(spec["name"]) or loaded[spec["name"]])
    assert asked == ["mobilenet_v2", "minilm"]                       # each encoder loaded once
    calls = {e.spec["name"]: (e.calls, e.items) for e in floor.encoders}
    assert calls == {"mobilenet_v2": (2, 6), "minilm": (1, 2)}
    assert floor.wall_s == pytest.approx(sum(e.wall_s for e in floor.encoders)) and floor.wall_s > 0
    doc = floor.to_dict()
    assert [e["encoder"] for e in doc["encoders"]] == ["mobilenet_v2", "minilm"]
    assert np.isfinite(doc["traced_wall_s"])


def test_a_damaged_trace_is_refused_in_one_line(tmp_path):
    with pytest.raises(VlgapError, match="not found"):
        read_trace(tmp_path / "none.jsonl")
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"encoder": {"name": "x"}, "shape": [1]}) + "\n{not json\n")
    with pytest.raises(VlgapError, match="line 2"):
        read_trace(bad)
