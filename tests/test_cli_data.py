"""The data CLI end to end: clean one-line errors (exit 2), make-data and extract with a real model."""
from __future__ import annotations

import subprocess
import sys

import pytest


def run(*args):
    return subprocess.run([sys.executable, "-c", "from vlgap.cli import main; main()", *args],
                          capture_output=True, text=True)


def test_bad_input_is_one_line_error(tmp_path):
    r = run("extract", str(tmp_path / "nope.jsonl"), "-e", "mobilenet_v2", "--n-frames", "1")
    assert r.returncode == 2 and "does not exist" in r.stderr and "Traceback" not in r.stderr
    r = run("import", "youtube8m", str(tmp_path / "a.json"), str(tmp_path), "--out", str(tmp_path / "m.jsonl"))
    assert r.returncode == 2 and "DATASET 'youtube8m': choose one of vatex | msrvtt | msvd | kinetics | ssv2" in r.stderr
    (tmp_path / "m.jsonl").write_text('{"id": "v1", "video": "v1.mp4", "captions": ["a"]}\n')
    r = run("extract", str(tmp_path / "m.jsonl"), "-e", "x", "--n-frames", "1,b")
    assert r.returncode == 2 and "comma-separated list of positive integers" in r.stderr


@pytest.mark.slow
def test_make_data_and_extract_with_real_encoder(tmp_path):
    r = run("make-data", "shapes", "--out", str(tmp_path / "s"), "--n", "12", "--n-frames", "8", "--size", "64")
    assert r.returncode == 0, r.stderr
    r = run("extract", str(tmp_path / "s" / "manifest.jsonl"), "-e", "mobilenet_v2", "--n-frames", "1,4",
            "--image-size", "96", "--cache-dir", str(tmp_path / "c"))
    assert r.returncode == 0, r.stderr
    assert "n_f=4: N=12 items x 19 layers" in r.stdout
    again = run("extract", str(tmp_path / "s" / "manifest.jsonl"), "-e", "mobilenet_v2", "--n-frames", "4",
                "--image-size", "96", "--cache-dir", str(tmp_path / "c"))
    assert "[cached]" in again.stdout


def test_make_data_shapes_camera_and_style_flags_reach_the_generator(tmp_path):
    """--camera-fraction / --style give exactly what generate_shapes(camera_fraction=, style=) writes."""
    from typer.testing import CliRunner

    from vlgap.cli._app import app
    from vlgap.data.manifest import read_manifest
    from vlgap.data.shapes import generate_shapes
    from vlgap.errors import VlgapError

    args = ["--n", "3", "--n-frames", "4", "--size", "32", "--seed", "5"]
    res = CliRunner().invoke(app, ["make-data", "shapes", "--out", str(tmp_path / "cli"), *args,
                                   "--camera-fraction", "1", "--style", "real"])
    assert res.exit_code == 0, res.output
    api = generate_shapes(tmp_path / "api", 3, seed=5, n_frames=4, size=32, camera_fraction=1.0, style="real")
    got, want = read_manifest(tmp_path / "cli" / "manifest.jsonl").items, read_manifest(api).items
    assert [(it.id, it.captions, it.meta) for it in got] == [(it.id, it.captions, it.meta) for it in want]
    assert all(it.meta["camera"] != "static" and it.meta["style"] == "real" for it in got)
    plain = CliRunner().invoke(app, ["make-data", "shapes", "--out", str(tmp_path / "plain"), *args])
    assert plain.exit_code == 0, plain.output
    assert all("camera" not in it.meta and "style" not in it.meta
               for it in read_manifest(tmp_path / "plain" / "manifest.jsonl").items)
    bad = CliRunner().invoke(app, ["make-data", "shapes", "--out", str(tmp_path / "b"), *args, "--style", "cartoon"])
    assert isinstance(bad.exception, VlgapError) and "--style 'cartoon': choose one of synthetic | real" in str(bad.exception)
    bad = CliRunner().invoke(app, ["make-data", "test-of-time", "--out", str(tmp_path / "t"), "--style", "real"])
    assert isinstance(bad.exception, VlgapError) and "apply to make-data shapes only" in str(bad.exception)
