"""dr-full sections 70_downstream and 71_intrinsic_dimension on a dozen-odd shapes videos and toy encoders
(features cached by the sweep, as in the demo)."""
from __future__ import annotations

import json

import pytest


def test_sections_70_71_on_shapes_with_toy_encoders(tmp_path):
    from toy_encoders import ToyText, ToyVision
    from vlgap.probe import dr_full
    from vlgap.probe.demo import DemoConfig, shapes_manifest
    from vlgap.probe.sweep import SweepConfig, run_sweep

    assert "vlgap.probe.dr_proxies" in dr_full.SECTION_MODULES
    names = dr_full.sections()
    assert "70_downstream" in names and "71_intrinsic_dimension" in names
    cfg = DemoConfig(n_videos=30, n_frames_per_video=8, video_size=32, vision=["toy_img", "toy_vid"],
                     text=["toy_txt"], n_frames=[1, 2, 4], n_captions=[1, 2, 4], k=3, n_bootstrap=20,
                     n_permutations=0, out=str(tmp_path / "run"), cache_dir=str(tmp_path / "cache"), preset="dr-full")
    enc = {"toy_img": ToyVision("image"), "toy_vid": ToyVision("video", n0=2), "toy_txt": ToyText()}
    sweep = SweepConfig(str(shapes_manifest(cfg)), cfg.vision, cfg.text, cfg.n_frames, cfg.n_captions, k=3,
                        text_dtype=cfg.text_dtype,
                        n_bootstrap=20, n_permutations=0, image_size=cfg.image_size, cache_dir=cfg.cache_dir)
    result = run_sweep(sweep, cfg.out, progress=False, encoders=enc)
    # the sections load no encoder: every feature they need is in the cache
    names["70_downstream"](cfg, result, False)
    names["71_intrinsic_dimension"](cfg, result, False)
    run = tmp_path / "run"
    prox = json.loads((run / "downstream" / "proxies.json").read_text())
    assert prox["config"]["n_items"] == 30 and prox["config"]["n_f"] == 4
    assert {r["task"] for r in prox["layers"]} == {f"{t}:{k}" for t in ("knn-classify", "linear-probe")
                                                  for k in ("background", "shape", "first_event")}
    for r in prox["layers"]:
        d = r["detail"]
        assert d["n"] == 30 and 0 <= d["ci"][0] <= d["accuracy"] <= d["ci"][1] <= 1 and 0 < d["chance"] <= 1
    assert prox["per_layer"]["tasks"][0]["n"] == 6
    intr = json.loads((run / "intrinsic" / "intrinsic_dimension.json").read_text())
    assert set(intr["layers"]) >= {"toy_img|n_f=4", "toy_vid|n_f=4"}
    # toy layer 0 is the mean colour: at most 3 dimensions
    assert intr["layers"]["toy_img|n_f=4"][0]["d"] < 3.5
    comp = intr["alpha_vs_2_over_d"]
    assert {(c["vision"], c["text"]) for c in comp} == {("toy_img", "toy_txt"), ("toy_vid", "toy_txt")}
    assert all("d_v" in c and c["layer"] >= 0 and c["n_f"] == 4 for c in comp)
    fits = json.loads((run / "scaling.json").read_text())
    for c in comp:
        if "alpha" in c:
            assert c["alpha"] == fits[f"{c['vision']}|{c['text']}"]["params"]["alpha"]
        if "d_v" in c:
            assert c["two_over_d"] == pytest.approx(2 / c["d_v"])
    for name in ("70_downstream", "71_intrinsic_dimension"):
        sec = json.loads((run / "sections" / f"{name}.json").read_text())
        assert sec["figures"] and (run / sec["figures"][0]).is_file()
