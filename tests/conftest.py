"""Shared fixtures: tiny real media files written with PyAV, and a cheap deterministic encoder."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent / "helpers"))


def write_video(path: Path, n_frames: int, size: int = 32, fps: int = 10) -> Path:
    """An mp4 whose frame t is a flat colour encoding t, so decoded frames identify their index."""
    import av

    path.parent.mkdir(parents=True, exist_ok=True)
    with av.open(str(path), "w") as c:
        s = c.add_stream("mpeg4", rate=fps)
        s.width = s.height = size
        s.pix_fmt = "yuv420p"
        s.options = {"qscale": "2"}  # near-lossless so flat colours survive
        for t in range(n_frames):
            img = np.full((size, size, 3), min(255, 8 * t), np.uint8)  # grey level 8t: luma survives yuv420
            for p in s.encode(av.VideoFrame.from_ndarray(img, format="rgb24")):
                c.mux(p)
        for p in s.encode():
            c.mux(p)
    return path


def write_toy_manifest(root: Path, n: int, *, seed: int = 0, min_frames: int = 4, length_mod: int = 7,
                       vocab: int = 40, n_words: int = 8, n_captions: int = 3, caption_words: int = 3) -> Path:
    """`root/man.jsonl` over n tiny videos `root/m/v{i}.mp4` (min_frames + i % length_mod frames, 16 px),
    each with n_captions overlapping windows of caption_words random words "w0".."w{vocab-1}" (seeded)."""
    rows = []
    rng = np.random.default_rng(seed)
    for i in range(n):
        write_video(root / "m" / f"v{i}.mp4", min_frames + i % length_mod, size=16)
        words = [f"w{x}" for x in rng.integers(0, vocab, n_words)]
        rows.append({"id": f"v{i}", "video": f"m/v{i}.mp4",
                     "captions": [" ".join(words[j:j + caption_words]) for j in range(n_captions)]})
    man = root / "man.jsonl"
    man.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return man


@pytest.fixture
def tiny_dataset(tmp_path):
    """Six videos of different lengths, one image, one frame folder; 3 captions each."""
    from PIL import Image

    rows = []
    for i, n in enumerate([5, 12, 20, 31, 8, 16]):
        write_video(tmp_path / "media" / f"v{i}.mp4", n)
        rows.append({"id": f"v{i}", "video": f"media/v{i}.mp4",
                     "captions": [f"video {i} caption {j}" for j in range(3)]})
    Image.fromarray(np.full((40, 30, 3), 200, np.uint8)).save(tmp_path / "media" / "img.png")
    rows.append({"id": "img", "image": "media/img.png", "captions": ["a grey image", "flat grey", "nothing"]})
    frames = tmp_path / "media" / "frames"
    frames.mkdir()
    for t in range(4):
        Image.fromarray(np.full((24, 24, 3), 60 * t, np.uint8)).save(frames / f"{t:04d}.png")
    rows.append({"id": "folder", "video": "media/frames", "captions": ["dark to light", "fading", "a ramp"]})
    man = tmp_path / "manifest.jsonl"
    man.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return man


@pytest.fixture
def one_thread():
    """Compared paths encode with one torch thread (Ray's workers get one per CPU), so arrays match bit
    for bit."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
