"""Camera behaviour and render styles of the shapes world: the camera round-trips through the spec's
dict form, pans move content the right way by the right amount and zooms scale it, the "real" style is
measurably another domain that keeps colours recognisable, everything is deterministic, and the
defaults draw and write exactly what they did before cameras and styles existed."""
from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest

from vlgap.data import shapes as S
from vlgap.errors import VlgapError


def _one_circle(camera: str = "static", background: str = "black", colour: str = "red", size: str = "large"):
    return S.SceneSpec(background, (S.SceneObject("circle", colour, size, 0.5, 0.5),), (), camera=camera)


def _mask(frames: np.ndarray, colour: str) -> np.ndarray:
    """Pixels within 60 RGB units of the colour: [T, H, W] bool."""
    return np.linalg.norm(frames.astype(float) - np.array(S.COLOURS[colour], float), axis=-1) < 60


# ---------------------------------------------------------------------------------------------- spec
@pytest.mark.parametrize("camera", S.CAMERAS)
def test_camera_round_trips_and_static_keeps_the_old_form(camera):
    spec = replace(S.sample_spec(S.item_rng(0, 3)), camera=camera)
    d = spec.to_dict()
    assert ("camera" in d) == (camera != "static")
    assert S.spec_from_dict(json.loads(json.dumps(d))) == spec
    assert camera in S.CAMERA_DESCRIPTIONS and S.CAMERA_DESCRIPTIONS[camera]


def test_unknown_camera_is_refused_with_the_valid_ones():
    d = S.sample_spec(S.item_rng(0, 1)).to_dict()
    d["camera"] = "dolly zoom"
    with pytest.raises(VlgapError, match=r"unknown camera 'dolly zoom'; valid: \['static', 'pan left'"):
        S.spec_from_dict(d)


def test_camera_fraction_zero_draws_nothing_and_positive_keeps_other_fields():
    for i in range(20):
        r0, r1 = S.item_rng(4, i), S.item_rng(4, i)
        a = S.sample_spec(r0)
        b = S.sample_spec(r1, camera_fraction=0.0)
        assert a == b and r0.integers(2**31) == r1.integers(2**31)  # same stream afterwards
        c = S.sample_spec(S.item_rng(4, i), camera_fraction=1.0)
        assert c.camera in S.CAMERAS[1:] and replace(c, camera="static") == a
    cams = [S.sample_spec(np.random.default_rng(i), camera_fraction=0.5).camera for i in range(200)]
    assert 60 < sum(c != "static" for c in cams) < 140 and set(cams) == set(S.CAMERAS)
    with pytest.raises(VlgapError, match="camera_fraction"):
        S.sample_spec(np.random.default_rng(0), camera_fraction=1.5)


# ---------------------------------------------------------------------------------------------- camera
def test_pan_moves_a_still_object_the_right_way_by_the_window_travel():
    n, side = 8, 64
    t = (np.arange(n) + 0.5) / n
    xs = {}
    for camera in ("static", "pan left", "pan right"):
        m = _mask(S.render(_one_circle(camera), n, side), "red")
        xs[camera] = np.array([np.nonzero(f)[1].mean() + 0.5 for f in m])
    assert np.ptp(xs["static"]) < 1e-9
    # the window (1 - p wide) travels p of the scene: in frame pixels the content moves p / (1 - p) * side
    p = S.PAN_FRACTION
    expected = p / (1 - p) * side * (t - t[0])
    assert np.all(np.diff(xs["pan left"]) > 0) and np.all(np.diff(xs["pan right"]) < 0)  # pan left: content drifts right
    assert np.allclose(xs["pan left"] - xs["pan left"][0], expected, atol=0.5)
    assert np.allclose(xs["pan right"][0] - xs["pan right"], expected, atol=0.5)


def test_zoom_changes_the_apparent_size_by_the_zoom_factor():
    n = 6
    t = (np.arange(n) + 0.5) / n
    areas = {c: _mask(S.render(_one_circle(c, size="small"), n, 96), "red").sum(axis=(1, 2)).astype(float)
             for c in ("static", "zoom in", "zoom out")}
    assert np.ptp(areas["static"]) == 0
    assert np.all(np.diff(areas["zoom in"]) > 0) and np.all(np.diff(areas["zoom out"]) < 0)
    ratio = areas["zoom in"][-1] / areas["zoom in"][0]
    assert ratio == pytest.approx(S.ZOOM_FACTOR ** (2 * (t[-1] - t[0])), rel=0.08)


def test_camera_windows_stay_inside_the_scene():
    for camera in S.CAMERAS:
        w = S.camera_windows(camera, 16)
        assert np.all(w[:, :2] >= 0) and np.all(w[:, :2] + w[:, 2:] <= 1 + 1e-12)
    with pytest.raises(VlgapError, match="valid"):
        S.camera_windows("tilt", 4)


# ---------------------------------------------------------------------------------------------- styles
def _laplacian_energy(frames: np.ndarray) -> float:
    g = frames.astype(float).mean(axis=-1)
    lap = 4 * g[:, 1:-1, 1:-1] - g[:, :-2, 1:-1] - g[:, 2:, 1:-1] - g[:, 1:-1, :-2] - g[:, 1:-1, 2:]
    return float(np.mean(lap ** 2))


@pytest.mark.parametrize("background", ["gray", "beige", "coffee"])
def test_real_style_is_another_domain_that_keeps_colours(background):
    spec = _one_circle(background=background, colour="blue" if background != "gray" else "yellow")
    colour = spec.objects[0].colour
    syn = S.render(spec, 8, 64)
    real = S.render(spec, 8, 64, style="real", style_seed=3)
    assert syn.shape == real.shape and real.dtype == np.uint8
    diff = real.astype(float) - syn.astype(float)
    assert np.std(diff) > 4.0  # per-pixel differences well beyond rounding
    if background in S.PLAIN_BACKGROUNDS:
        # a flat colour has no high frequencies; texture, noise and compression add them
        corner = (slice(None), slice(0, 12), slice(0, 12))
        assert _laplacian_energy(syn[corner]) < 1e-9 and _laplacian_energy(real[corner]) > 5
        # the textured background keeps the plain colour's name: its mean (away from the object) stays
        # nearest to that plain colour
        bg = real[:, :, :14].reshape(-1, 3).mean(0)
        nearest_bg = min(S.PLAIN_BACKGROUNDS, key=lambda c: np.linalg.norm(bg - np.array(S.PLAIN_BACKGROUNDS[c])))
        assert nearest_bg == background and np.linalg.norm(bg - S.PLAIN_BACKGROUNDS[background]) < 40
    # the object's colour is still the nearest named colour inside it (centre, away from blurred edges)
    inner = real[:, 26:38, 26:38].reshape(-1, 3).mean(0)
    nearest = min(S.COLOURS, key=lambda c: np.linalg.norm(inner - np.array(S.COLOURS[c])))
    assert nearest == colour


def test_styles_are_deterministic_and_defaults_unchanged():
    spec = replace(S.sample_spec(S.item_rng(0, 2)), camera="zoom in")
    a = S.render(spec, 6, 48, style="real", style_seed=7)
    assert np.array_equal(a, S.render(spec, 6, 48, style="real", style_seed=7))
    assert not np.array_equal(a, S.render(spec, 6, 48, style="real", style_seed=8))
    static = S.sample_spec(S.item_rng(0, 2))
    assert np.array_equal(S.render(static, 6, 48), S.render(static, 6, 48, style="synthetic", style_seed=99))
    assert set(S.STYLE_DESCRIPTIONS) == set(S.STYLES) == {"synthetic", "real"}
    with pytest.raises(VlgapError, match=r"valid: \['synthetic', 'real'\]"):
        S.render(static, 2, 32, style="cartoon")


# ---------------------------------------------------------------------------------------------- captions
def test_moving_camera_is_stated_by_some_captions_only():
    for i in range(10):
        static = S.sample_spec(S.item_rng(1, i))
        moving = replace(static, camera=S.CAMERAS[1 + i % 4])
        cs, cm = S.write_captions(static, 5), S.write_captions(moving, 5)
        fs, fm = S.caption_facts(static, 5), S.caption_facts(moving, 5)
        fact = f"camera:{moving.camera}"
        assert fact in S.all_facts(moving) and not any(f.startswith("camera") for f in S.all_facts(static))
        for slot in range(S.N_CAPTIONS):
            if slot in S.CAMERA_SLOTS:
                assert fact in fm[slot] and cm[slot] != cs[slot]
                assert moving.camera.split()[0] in cm[slot]  # "pan" / "zoom"
                assert fm[slot][:-1] == fs[slot]
            else:
                assert cm[slot] == cs[slot] and fm[slot] == fs[slot]


def test_generate_records_camera_and_style_only_when_not_default(tmp_path):
    m = S.generate_shapes(tmp_path / "a", 3, seed=2, n_frames=4, size=32, camera_fraction=1.0, style="real")
    items = [json.loads(line) for line in m.read_text().splitlines()]
    for it in items:
        meta = it["meta"]
        assert meta["camera"] in S.CAMERAS[1:] and meta["spec"]["camera"] == meta["camera"]
        assert meta["style"] == "real" and isinstance(meta["style_seed"], int)
    gen = json.loads((tmp_path / "a" / "generator.json").read_text())
    assert gen["style"] == "real" and gen["camera_fraction"] == 1.0
    m = S.generate_shapes(tmp_path / "b", 2, seed=2, n_frames=4, size=32)
    for line in m.read_text().splitlines():
        meta = json.loads(line)["meta"]
        assert not {"camera", "style", "style_seed"} & set(meta) and "camera" not in meta["spec"]
