"""Frame-sampling strategies (issue 22, item 2): uniform (the paper), random, stride:S and keyframes
(the container's key frames, else a scene-change score), in the feature key, the record, the sweep
(strategies side by side) and the report (an n_f curve per strategy)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from toy_encoders import ToyText, ToyVision
from vlgap.data.manifest import Item
from vlgap.data.sampling import (frame_indices, keyframe_indices, parse_frame_samplings, sample_frames,
                                 scene_change_scores)
from vlgap.errors import VlgapError


def write_video(path: Path, greys: list[int], keyframes: set[int] | None = None, size: int = 16) -> Path:
    """An mp4 whose frame t is the flat grey greys[t]; with `keyframes`, exactly those frames are key
    frames (no automatic scene-cut key frames, one GOP otherwise)."""
    import av

    path.parent.mkdir(parents=True, exist_ok=True)
    with av.open(str(path), "w") as c:
        s = c.add_stream("mpeg4", rate=10)
        s.width = s.height = size
        s.pix_fmt = "yuv420p"
        s.codec_context.gop_size = 10_000
        s.options = {"qscale": "2", "sc_threshold": "1000000000"}
        for t, g in enumerate(greys):
            frame = av.VideoFrame.from_ndarray(np.full((size, size, 3), g, np.uint8), format="rgb24")
            if keyframes is not None and t in keyframes:
                frame.pict_type = av.video.frame.PictureType.I
            for p in s.encode(frame):
                c.mux(p)
        for p in s.encode():
            c.mux(p)
    return path


def test_strategies_pick_known_indices():
    assert np.array_equal(sample_frames(24, 4, "uniform"), frame_indices(24, 4))
    assert list(sample_frames(20, 4, "stride:3")) == [5, 8, 11, 14]  # 10 frames spanned, centred
    assert list(sample_frames(24, 1, "stride:5")) == [11]
    with pytest.raises(VlgapError, match=r"'v1': stride:8 with n_f=4 spans 25 frames but its video has 20; use stride:6"):
        sample_frames(20, 4, "stride:8", "v1")
    r4, r8 = sample_frames(30, 4, "random", "v1"), sample_frames(30, 8, "random", "v1")
    assert len(set(r4)) == 4 and list(r4) == sorted(r4) and set(r4) <= set(r8)  # distinct, in time order, nested
    assert np.array_equal(r4, sample_frames(30, 4, "random", "v1"))  # seeded by the item
    assert not np.array_equal(r8, sample_frames(30, 8, "random", "v2"))
    assert parse_frame_samplings("uniform, random,STRIDE:2,keyframes,random") == ["uniform", "random", "stride:2",
                                                                                   "keyframes"]
    for bad in ("stride:0", "stride:x", "every"):
        with pytest.raises(VlgapError, match="uniform | random | stride:S"):
            parse_frame_samplings(bad)


def test_keyframes_from_the_container_else_scene_changes():
    keys = [0, 7, 15, 20]
    assert list(keyframe_indices(24, 2, keys, None)[0]) == [0, 20]
    assert list(keyframe_indices(24, 4, keys, None)[0]) == keys
    greys = np.array([10] * 5 + [200] * 5 + [90] * 14, np.uint8)
    change = scene_change_scores(np.broadcast_to(greys[:, None, None, None], (24, 2, 2, 3)))
    assert change[0] == np.inf and change[5] == pytest.approx(190) and change[10] == pytest.approx(110)
    idx, source = keyframe_indices(24, 3, [0], change)  # one key frame: the two scene cuts complete it
    assert list(idx) == [0, 5, 10] and "scene-change" in source


def test_keyframes_read_from_a_video_encoded_with_known_key_frames(tmp_path):
    from vlgap.data.video import keyframe_info

    greys = [40] * 12 + [200] * 6 + [120] * 6  # scene cuts at 12 and 18
    video = write_video(tmp_path / "k.mp4", greys, keyframes={0, 7, 15})
    keys, change, total = keyframe_info(Item("k", video, "video", ("x",)))
    assert list(keys) == [0, 7, 15] and total == 24
    assert int(np.argmax(change[1:])) + 1 == 12 and change[18] > 50
    assert list(keyframe_indices(total, 3, keys, change)[0]) == [0, 7, 15]
    # a single key frame: the scene cuts are found from the decoded frames
    video = write_video(tmp_path / "one.mp4", greys, keyframes={0})
    keys, change, total = keyframe_info(Item("one", video, "video", ("x",)))
    assert list(keys) == [0]
    assert list(keyframe_indices(total, 3, keys, change)[0]) == [0, 12, 18]


def _manifest(tmp_path, n=3):
    rows = []
    for i in range(n):
        greys = [40 + 2 * i] * 12 + [200 - 3 * i] * 6 + [120 + i] * 6  # content changes at frames 12 and 18
        write_video(tmp_path / "m" / f"v{i}.mp4", greys, keyframes={0})
        rows.append({"id": f"v{i}", "video": f"m/v{i}.mp4", "captions": [f"video {i}"]})
    man = tmp_path / "man.jsonl"
    man.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return man


def test_extraction_keys_records_and_changes_the_features(tmp_path):
    from vlgap.features.extract import encoder_key, extract

    assert "frame_sampling" not in encoder_key("tv")  # uniform keeps older caches valid
    assert encoder_key("tv", frame_sampling="stride:2")["frame_sampling"] == "stride:2"
    man = _manifest(tmp_path)
    got = {}
    for fs in ("uniform", "stride:2", "keyframes"):
        res = extract(man, "tv", n_frames=[3], cache_dir=tmp_path / "cache", loaded_encoder=ToyVision(),
                      frame_sampling=fs, progress=False)
        got[fs] = res.features[3]
    idx = {fs: got[fs].record["sampling"]["frame_indices"]["v0"] for fs in got}
    assert idx == {"uniform": [0, 12, 23], "stride:2": [9, 11, 13], "keyframes": [0, 12, 18]}
    assert got["keyframes"].record["sampling"]["frame_sampling"] == "keyframes"
    assert "frame_sampling" not in got["uniform"].record["sampling"]
    # the mean-colour layer is the mean of the sampled frames' greys (lossy codec: within 2 grey levels)
    expected = {"uniform": (40 + 200 + 120) / 3, "stride:2": (40 + 40 + 200) / 3, "keyframes": (40 + 200 + 120) / 3}
    for fs, grey in expected.items():
        assert got[fs].layers[0][0] == pytest.approx(np.full(3, grey / 255), abs=2 / 255)
    paths = {str(fs.path) for fs in got.values()}
    assert len(paths) == 3  # cached apart
    with pytest.raises(VlgapError, match="applies to vision encoders"):
        extract(man, "tt", n_captions=[1], cache_dir=tmp_path / "cache", loaded_encoder=ToyText(),
                frame_sampling="random", progress=False)
    with pytest.raises(VlgapError, match=r"item 'v0': stride:12 with n_f=3 spans 25 frames but its video has 24; use stride:11 .* --skip-bad"):
        extract(man, "tv", n_frames=[3], cache_dir=tmp_path / "cache", loaded_encoder=ToyVision(),
                frame_sampling="stride:12", progress=False)


def test_sweep_runs_strategies_side_by_side_and_the_report_draws_them(tmp_path):
    from vlgap.probe.report import write_report
    from vlgap.probe.sweep import SweepConfig, cell_key, run_sweep

    rng = np.random.default_rng(0)
    rows = []
    for i in range(16):
        write_video(tmp_path / "m" / f"v{i}.mp4", list(rng.integers(0, 256, 12)))
        rows.append({"id": f"v{i}", "video": f"m/v{i}.mp4",
                     "captions": [" ".join(f"w{x}" for x in rng.integers(0, 30, 3)) for _ in range(2)]})
    man = tmp_path / "man.jsonl"
    man.write_text("".join(json.dumps(r) + "\n" for r in rows))
    base = dict(k=3, n_bootstrap=10, n_permutations=10, cache_dir=str(tmp_path / "cache"), fit=False)
    assert "frame_sampling" not in SweepConfig(str(man), ["tv"], ["tt"], [1], [1], **base).to_dict()
    cfg = SweepConfig(str(man), ["tv"], ["tt"], [1, 2, 4], [1], frame_sampling="uniform,random", **base)
    res = run_sweep(cfg, tmp_path / "run", progress=False, encoders={"tv": ToyVision(), "tt": ToyText()})
    assert sorted({r["vision"] for r in res.rows}) == ["tv", "tv [random]"]
    assert {(r["vision"], r["vision_encoder"], r["frame_sampling"]) for r in res.rows} == {
        ("tv", "tv", "uniform"), ("tv [random]", "tv", "random")}
    one = {r["vision"]: r["score"] for r in res.rows if r["n_f"] == 1}
    assert one["tv"] != one["tv [random]"]  # frame 0 vs a random frame: different features, different score
    keys = {json.dumps(cell_key(cfg, {}, "x", (v, "tt", 1, 1), 0), sort_keys=True) for v in ("tv", "tv [random]")}
    assert len(keys) == 2
    page = write_report(tmp_path / "run", progress=False).read_text()
    assert "Frame sampling: tv × tt" in page
    assert (tmp_path / "run" / "figures" / "tv__tt_frame_sampling.png").is_file()
