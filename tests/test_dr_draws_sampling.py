"""dr-full sections 50_caption_draws and 51_frame_sampling on a dozen shapes videos with toy encoders."""
from __future__ import annotations

import json

import pytest

from toy_encoders import ToyText, ToyVision
from vlgap.probe.demo import DemoConfig
from vlgap.probe.dr_draws_sampling import caption_draws_section, frame_sampling_section


@pytest.fixture
def cfg(tmp_path):
    return DemoConfig(n_videos=14, n_frames_per_video=16, video_size=32, vision=["tv"], text=["tt"],
                      n_frames=[1, 2, 4], n_captions=[1, 2], k=3, n_bootstrap=20, n_permutations=0, image_size=None,
                      out=str(tmp_path / "demo"), cache_dir=str(tmp_path / "cache")).check()


def test_sections_are_registered_for_the_preset():
    from vlgap.probe.dr_full import sections

    names = list(sections())
    assert "50_caption_draws" in names and "51_frame_sampling" in names


def test_caption_draws_section(cfg, tmp_path):
    encs = {"tv": ToyVision(), "tt": ToyText()}
    out = caption_draws_section(cfg, None, progress=False, encoders=encs, n_draws=3)
    first = {r["n_c"]: r for r in out["first"]}
    drawn = {r["n_c"]: r for r in out["drawn"]}
    assert sorted(first) == sorted(drawn) == [1, 2]
    assert drawn[1]["caption_draws"] == 3 and len(drawn[1]["draw_scores"]) == 3
    assert "caption_draws" not in first[1]
    sec = json.loads((tmp_path / "demo" / "sections" / "50_caption_draws.json").read_text())
    assert "first n_c" in sec["html"] and "mean of 3 draws" in sec["html"]


def test_frame_sampling_section(cfg, tmp_path):
    encs = {"tv": ToyVision(), "tt": ToyText()}
    rows = frame_sampling_section(cfg, None, progress=False, encoders=encs)
    # stride:4 at n_f=4 spans 13 of 16 frames: usable; every strategy gives every n_f
    assert {(r["frame_sampling"], r["n_f"]) for r in rows} == {
        (s, n) for s in ("uniform", "random", "stride:4", "keyframes") for n in (1, 2, 4)}
    sec = json.loads((tmp_path / "demo" / "sections" / "51_frame_sampling.json").read_text())
    assert sec["figures"] == ["figures/51_frame_sampling.png"]
    assert (tmp_path / "demo" / "figures" / "51_frame_sampling.png").is_file()
