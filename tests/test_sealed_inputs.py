"""Every sealed artefact is verified wherever it is read (issue 32, item 3).

One small sweep on toy encoders writes the artefacts a user hands back to vlgap by path: its sweep.csv
(`fit-scaling`), the feature cache's features.safetensors (`align` / `layer-search`), its score matrices
(`report`) and its cells (`cache --check --run`). Each is read intact, and refused (exit 2, one line,
the reason) or reported once a byte changed; an unsealed file of the user's own is still read. Before,
each of these read the changed bytes without a word.
"""
from __future__ import annotations

import json
import shutil

import pytest

from in_process_cli import refused, run_cli
from toy_encoders import ToyText, ToyVision

from vlgap import reuse
from vlgap.errors import VlgapError


@pytest.fixture(scope="module")
def sweep_run(tmp_path_factory):
    from conftest import write_toy_manifest

    from vlgap.probe.sweep import SweepConfig, run_sweep

    base = tmp_path_factory.mktemp("sealed")
    man = write_toy_manifest(base, 14, n_words=6)
    cfg = SweepConfig(str(man), ["tv"], ["tt"], [2, 3, 4], [1, 2, 3], k=3, n_bootstrap=0, n_permutations=0,
                      cache_dir=str(base / "cache"))
    run_sweep(cfg, base / "run", progress=False, encoders={"tv": ToyVision(), "tt": ToyText()})
    return base


def _copy(sweep_run, tmp_path, name: str):
    shutil.copytree(sweep_run / name, tmp_path / name)
    return tmp_path / name


def _flip(path, at: int = -3) -> None:
    raw = bytearray(path.read_bytes())
    raw[at] ^= 0x01
    path.write_bytes(bytes(raw))


def test_fit_scaling_refuses_a_hand_edited_sealed_sweep_csv(sweep_run, tmp_path, monkeypatch, capsys):
    run = _copy(sweep_run, tmp_path, "run")
    grid = run / "sweep.csv"
    code, out, err = run_cli(monkeypatch, capsys, "fit-scaling", grid, "--bootstrap", "0", "--json")
    assert code == 0, err
    lines = grid.read_text().splitlines()
    cells = lines[1].split(",")
    cells[4] = "0.999"  # the score of the first cell, edited by hand
    grid.write_text("\n".join([lines[0], ",".join(cells), *lines[2:]]) + "\n")
    err = refused(capsys, "fit-scaling", grid, "--bootstrap", "0")
    assert f"GRID {grid}: checksum mismatch" in err or f"GRID {grid}: size" in err
    assert "no longer matches its seal" in err and "rerun the sweep" in err
    # the same numbers as the user's own table (no seal beside it): fitted
    own = tmp_path / "own.csv"
    shutil.copy(grid, own)
    code, out, err = run_cli(monkeypatch, capsys, "fit-scaling", own, "--bootstrap", "0", "--json")
    assert code == 0, err


def test_fit_scaling_refuses_a_sweep_csv_whose_seal_is_damaged(sweep_run, tmp_path, capsys):
    run = _copy(sweep_run, tmp_path, "run")
    sp = reuse.seal_path(run / "sweep.csv")
    seal = json.loads(sp.read_text())
    seal["key"]["k"] = 4
    sp.write_text(json.dumps(seal))
    err = refused(capsys, "fit-scaling", run / "sweep.csv", "--bootstrap", "0")
    assert "its seal is damaged: key_sha256 does not match its key" in err


def _features_file(cache):
    found = sorted(cache.rglob("features.safetensors"))
    assert found
    return found[0]


def test_align_refuses_a_cache_file_with_a_flipped_byte(sweep_run, tmp_path, monkeypatch, capsys):
    cache = _copy(sweep_run, tmp_path, "cache")
    feats = _features_file(cache)
    code, out, err = run_cli(monkeypatch, capsys, "align", feats, feats, "--k", "3", "--json")
    assert code == 0, err
    _flip(feats)  # a byte of the last layer's numbers (the header still parses)
    for command in ("align", "layer-search"):
        err = refused(capsys, command, feats, feats, "--k", "3")
        assert f"features {feats}: checksum mismatch" in err and "vlgap extract" in err
    # an unsealed copy is the user's own file: read
    own = tmp_path / "own.safetensors"
    shutil.copy(feats, own)
    code, out, err = run_cli(monkeypatch, capsys, "align", own, own, "--k", "3", "--json")
    assert code == 0, err


def test_report_refuses_a_changed_score_matrix(sweep_run, tmp_path):
    from vlgap.probe.report import write_report

    run = _copy(sweep_run, tmp_path, "run")
    assert write_report(run, progress=False).is_file()
    for m in sorted((run / "matrices").glob("*.npy")):
        _flip(m)
    with pytest.raises(VlgapError, match=r"score matrix .*\.npy: checksum mismatch.*rerun `vlgap sweep"):
        write_report(run, progress=False)


def test_cache_check_verifies_run_cells_and_names_a_damaged_seal(sweep_run, tmp_path, monkeypatch, capsys):
    run = _copy(sweep_run, tmp_path, "run")
    cache = _copy(sweep_run, tmp_path, "cache")
    code, out, err = run_cli(monkeypatch, capsys, "cache", "--cache-dir", cache, "--run", run, "--json")
    assert code == 0, out
    found = json.loads(out)
    areas = {f["area"] for f in found["findings"] if f["status"] == "ok"}
    assert {"features", "cell", "matrix", "artefact"} <= areas
    cells = sorted(p for p in (run / "cells").glob("*.json") if not p.name.startswith("."))
    assert len(cells) == 9
    # a flipped key_sha256, a changed key value, changed bytes, an unsealed cell (an interrupted write)
    sp = reuse.seal_path(cells[0])
    seal = json.loads(sp.read_text())
    seal["key_sha256"] = ("0" if seal["key_sha256"][0] != "0" else "1") + seal["key_sha256"][1:]
    sp.write_text(json.dumps(seal))
    sp = reuse.seal_path(cells[1])
    seal = json.loads(sp.read_text())
    seal["key"]["seed"] = 12345
    sp.write_text(json.dumps(seal))
    cells[2].write_text(cells[2].read_text().replace("{", "{ ", 1))
    reuse.seal_path(cells[3]).unlink()
    code, out, err = run_cli(monkeypatch, capsys, "cache", "--cache-dir", cache, "--run", run)
    assert code == 1
    text = " ".join(out.split())
    for c in cells[:2]:
        assert f"corrupt: cell {c} (its seal is damaged: key_sha256 does not match its key)" in text
    assert f"corrupt: cell {cells[2]} (size" in text or f"corrupt: cell {cells[2]} (checksum" in text
    assert f"orphaned: cell {cells[3]} (no seal: an interrupted write" in text
    code, out, err = run_cli(monkeypatch, capsys, "cache", "--cache-dir", cache, "--run", run, "--prune")
    assert code == 0, out + err
    assert not any(c.exists() for c in cells[:4]) and cells[4].exists()
    code, out, err = run_cli(monkeypatch, capsys, "cache", "--cache-dir", cache, "--run", run)
    assert code == 0 and "everything verified" in out


def test_cache_check_of_a_run_folder_that_does_not_exist_is_refused(tmp_path, capsys):
    err = refused(capsys, "cache", "--cache-dir", tmp_path, "--run", tmp_path / "nope")
    assert "--run" in err and "nope" in err
