"""`extract --n-frames N` checks each video's length before drawing (and allocating) N frame indices
(issue 32): before, n_f = 10^9 on a 32-frame video drew a billion indices first (gigabytes, minutes)
and only then said "video has 32 frames"."""
from __future__ import annotations

import json

import pytest

from toy_encoders import ToyVision

from vlgap.errors import VlgapError


@pytest.fixture
def short_video(tmp_path):
    from conftest import write_video

    write_video(tmp_path / "v.mp4", 6, size=16)
    man = tmp_path / "m.jsonl"
    man.write_text(json.dumps({"id": "v", "video": "v.mp4", "captions": ["a b c"]}) + "\n")
    return man


def test_a_huge_n_f_on_a_short_video_is_refused_before_any_index_is_drawn(short_video, tmp_path, monkeypatch):
    import vlgap.features.chunk_steps as cs
    from vlgap.features.extract import extract

    real = cs.sample_frames

    def guarded(num_frames, n_f, *a, **k):
        assert n_f <= 1000, f"{n_f} indices drawn for a {num_frames}-frame video before its length was checked"
        return real(num_frames, n_f, *a, **k)

    monkeypatch.setattr(cs, "sample_frames", guarded)
    for n_f in (10 ** 9, 100_000, 7):
        with pytest.raises(VlgapError, match=rf"item 'v': its video has 6 frames but n_f={n_f} were requested"):
            extract(short_video, "tv", n_frames=[n_f], cache_dir=tmp_path / "c", progress=False, workers=1,
                    loaded_encoder=ToyVision())
    # asked for: repeated frames are sampled as requested, and listed
    res = extract(short_video, "tv", n_frames=[8], cache_dir=tmp_path / "c", progress=False, workers=1,
                  loaded_encoder=ToyVision(), allow_repeated_frames=True)
    assert res.features[8].n == 1
