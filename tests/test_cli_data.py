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
    assert r.returncode == 2 and "choose one of ['msrvtt', 'msvd', 'vatex']" in r.stderr
    r = run("extract", str(tmp_path / "nope.jsonl"), "-e", "x", "--n-frames", "1,b")
    assert r.returncode == 2 and "comma-separated list of integers" in r.stderr


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
