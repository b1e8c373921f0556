"""Manifest reading, frame sampling rule, decoding and their bad-input errors (importers: test_importers.py)."""
from __future__ import annotations

import json

import numpy as np
import pytest

from vlgap.data.manifest import read_manifest
from vlgap.data.sampling import check_n_f, frame_indices, join_captions, subclips
from vlgap.data.video import count_frames, decode_threads, read_frames
from vlgap.errors import BadItemError, VlgapError



# ---- the paper's frame-sampling rule --------------------------------------------------------
def test_frame_indices_uniform_linear_nearest():
    assert frame_indices(100, 1).tolist() == [0]  # one frame = the first frame ("image on image")
    assert frame_indices(100, 2).tolist() == [0, 99]
    # linspace(0, 99, 4) = 0, 33, 66, 99
    assert frame_indices(100, 4).tolist() == [0, 33, 66, 99]
    # 8 over 30 frames: round(k * 29/7)
    assert frame_indices(30, 8).tolist() == [round(k * 29 / 7) for k in range(8)]
    # more frames than the video has: nearest-neighbour repeats
    assert frame_indices(3, 5).tolist() == [0, 0, 1, 2, 2]


def test_subclips_split_consecutive_and_refuse_non_multiples():
    idx = frame_indices(300, 32)
    clips = subclips(idx, 16)
    assert clips.shape == (2, 16)
    assert clips.ravel().tolist() == idx.tolist()  # consecutive: first half, then second half
    assert subclips(frame_indices(300, 8), 16).shape == (1, 8)
    with pytest.raises(VlgapError, match=r"nearest valid values: \[16, 32\]"):
        subclips(frame_indices(300, 24), 16)
    with pytest.raises(VlgapError, match=r"\[32, 48\]"):
        check_n_f(40, 16)
    check_n_f(48, 16)
    check_n_f(7, 16)


def test_join_captions_first_n_and_errors():
    caps = ("A cat sits", "It is grey.", "a mat")
    assert join_captions(caps, 2) == "A cat sits. It is grey."
    with pytest.raises(VlgapError, match="'x' has 3 captions but n_c=4"):
        join_captions(caps, 4, "x")
    with pytest.raises(VlgapError, match="empty caption"):
        join_captions(("ok", "  "), 2, "y")


# ---- manifest --------------------------------------------------------------------------------
def test_manifest_resolves_relative_paths(tiny_dataset):
    man = read_manifest(tiny_dataset)
    assert len(man) == 8
    assert all(it.media.is_absolute() and it.media.exists() for it in man.items)
    assert man.items[6].kind == "image"
    fp = man.fingerprint()
    assert fp == read_manifest(tiny_dataset).fingerprint()


@pytest.mark.parametrize("content,msg", [
    ("", "is empty"),
    ("{not json\n", "line 1: not valid JSON"),
    ('{"id": "a", "captions": ["x"]}\n', "exactly one of 'video' or 'image'"),
    ('{"id": "a", "video": "v.mp4", "captions": "x"}\n{"id": "a", "video": "w.mp4"}\n', "duplicate id 'a'"),
    ('{"video": "v.mp4"}\n', "missing 'id'"),
    ('{"id": "a", "video": "v.mp4", "captions": [1]}\n', "list of strings"),
])
def test_manifest_errors(tmp_path, content, msg):
    p = tmp_path / "m.jsonl"
    p.write_text(content)
    with pytest.raises(VlgapError, match=msg):
        read_manifest(p)


def test_missing_manifest(tmp_path):
    with pytest.raises(VlgapError, match="does not exist"):
        read_manifest(tmp_path / "nope.jsonl")


# ---- decoding ----------------------------------------------------------------------------------
def test_decode_returns_requested_frames_in_order(tiny_dataset):
    man = read_manifest(tiny_dataset)
    item = man.items[3]  # 31 frames; frame t is grey level 8t
    assert count_frames(item) == 31
    idx = frame_indices(31, 4)
    frames, total = read_frames(item, idx)
    assert total == 31 and frames.shape == (4, 32, 32, 3)
    red = frames[:, 16, 16, 0].astype(int)
    assert np.all(np.abs(red - np.minimum(255, 8 * idx)) <= 3), (red, idx)


def test_decode_threads_is_per_thread_and_checked():
    import threading

    from vlgap.data import video

    seen = []
    with decode_threads(1):
        t = threading.Thread(target=lambda: seen.append(getattr(video._local, "threads", None)))
        t.start()
        t.join()
        assert video._local.threads == 1
    assert seen == [None] and video._local.threads is None
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="decode threads"):
            with decode_threads(bad):
                pass


def test_image_is_one_frame_video_and_folder_of_frames(tiny_dataset):
    man = read_manifest(tiny_dataset)
    img, folder = man.items[6], man.items[7]
    assert count_frames(img) == 1
    frames, _ = read_frames(img, frame_indices(1, 3))
    assert frames.shape == (3, 40, 30, 3)
    assert count_frames(folder) == 4
    frames, _ = read_frames(folder, np.array([0, 3]))
    assert frames[:, 0, 0, 0].tolist() == [0, 180]


def test_bad_media_errors_name_the_item(tmp_path):
    (tmp_path / "broken.mp4").write_bytes(b"not a video at all")
    (tmp_path / "empty").mkdir()
    rows = [{"id": "gone", "video": "missing.mp4", "captions": ["x"]},
            {"id": "broken", "video": "broken.mp4", "captions": ["x"]},
            {"id": "nofr", "video": "empty", "captions": ["x"]}]
    p = tmp_path / "m.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in rows))
    man = read_manifest(p)
    with pytest.raises(BadItemError, match="'gone': media file not found"):
        read_frames(man.items[0], np.array([0]))
    with pytest.raises(BadItemError, match="'broken': cannot decode"):
        read_frames(man.items[1], np.array([0]))
    with pytest.raises(BadItemError, match="'nofr': frame folder .* holds no image files"):
        read_frames(man.items[2], np.array([0]))


def test_every_public_api_name_resolves():
    import vlgap

    for name in vlgap.__all__:
        assert getattr(vlgap, name) is not None, name
