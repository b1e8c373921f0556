"""The door before the folder (issues 43 and 44): every check runs before a run folder records anything,
and a folder whose run recorded a configuration but computed nothing is reused by the corrected command
without --force. A folder holding computed results still refuses a changed configuration."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from in_process_cli import run_cli  # tests/helpers
from toy_encoders import ToyText, ToyVision
from vlgap.errors import VlgapError


def one_line_error(code, err) -> str:
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 2 and len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


# ------------------------------------------------------------------------------------------------ the folder

def test_a_folder_that_computed_nothing_is_reused_and_one_with_results_is_not(tmp_path):
    from vlgap.runs.folder import HOLDER, open_run_folder

    out, said = tmp_path / "run", []
    open_run_folder(out, "sweep", {"k": 3, "metric": "mutual_knn"}, results=("cells",), log=said.append)
    (out / "cells").mkdir()
    (out / "cells" / "a.lock").write_text("999999999")  # a dead worker's lock: no result
    # the corrected command: another configuration, taken over without force, said in one line
    assert open_run_folder(out, "sweep", {"k": 4, "metric": "mutual_knn"}, results=("cells",),
                           log=said.append) is False
    assert said == [f"{out}: its run recorded another configuration (k: 3 -> 4) but computed nothing: reused for "
                    "this one"]
    assert json.loads((out / "run_config.json").read_text())["config"]["k"] == 4
    # a computed result makes it a run to protect
    (out / "cells" / "a.json").write_text("{}")
    with pytest.raises(VlgapError, match=r"holds a sweep run with another configuration \(k: 4 -> 5\).*--force"):
        open_run_folder(out, "sweep", {"k": 5, "metric": "mutual_knn"}, results=("cells",), log=said.append)
    (out / "cells" / "a.json").unlink()
    # a caller that does not say what it computes keeps the old rule: refused
    with pytest.raises(VlgapError, match="another configuration"):
        open_run_folder(out, "sweep", {"k": 5, "metric": "mutual_knn"})
    # a run still alive in the folder (its holder file names a live process) keeps it, results or not
    alive = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        (out / HOLDER).write_text(str(alive.pid))
        with pytest.raises(VlgapError, match="another configuration"):
            open_run_folder(out, "sweep", {"k": 5, "metric": "mutual_knn"}, results=("cells",), log=said.append)
    finally:
        alive.kill()
        alive.wait()
    assert open_run_folder(out, "sweep", {"k": 5, "metric": "mutual_knn"}, results=("cells",),
                           log=said.append) is False  # its process is gone
    assert len(said) == 2


# ------------------------------------------------------------------------------------------------ sweeps

@pytest.fixture
def toy(tmp_path):
    """A toy manifest (one video of 3 frames) and the toy encoders' features in a cache, so that the CLI
    finds `tv` and `tt` by name."""
    from conftest import write_toy_manifest, write_video
    from vlgap.features.extract import extract

    man = write_toy_manifest(tmp_path, 14, n_captions=3, min_frames=5)
    rows = [json.loads(x) for x in man.read_text().splitlines()]
    write_video(tmp_path / "m" / "short.mp4", 3, size=16)
    rows[4]["video"] = "m/short.mp4"
    man.write_text("".join(json.dumps(r) + "\n" for r in rows))
    cache = tmp_path / "cache"
    extract(man, "tv", n_frames=[2, 4], cache_dir=cache, loaded_encoder=ToyVision(), skip_bad=True, progress=False)
    extract(man, "tt", n_captions=[1, 2, 3], cache_dir=cache, loaded_encoder=ToyText(), progress=False)
    return man, cache


def _sweep_line(man, cache, out, *extra):
    return ["sweep", man, "--vision", "tv", "--text", "tt", "--n-frames", "2,4", "--n-captions", "1,2", "--k", 3,
            "--bootstrap", 0, "--permutations", 0, "--out", out, "--cache-dir", cache, *extra]


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="needs a machine without a CUDA GPU")
def test_sweep_refused_for_a_device_then_corrected_without_force(toy, tmp_path, monkeypatch, capsys):
    man, cache = toy
    out = tmp_path / "run"
    line = one_line_error(*run_cli(monkeypatch, capsys, *_sweep_line(man, cache, out, "--skip-bad", "--device",
                                                                      "cuda"))[::2])
    assert "device 'cuda' (--device) is not valid here (no CUDA GPU is visible here)" in line
    assert not out.exists()
    code, _, err = run_cli(monkeypatch, capsys, *_sweep_line(man, cache, out, "--skip-bad", "--device", "cpu"))
    assert code == 0, err
    assert (out / "sweep.json").is_file()


def test_sweep_refused_for_counts_and_items_then_corrected_without_force(toy, tmp_path, monkeypatch, capsys):
    man, cache = toy
    out = tmp_path / "run"
    # more captions than the items have: every item is named by the count, the first by its id
    line = one_line_error(*run_cli(monkeypatch, capsys, *_sweep_line(man, cache, out, "--skip-bad"),
                                   "--n-captions", "1,5")[::2])
    assert line.startswith("error: only 0 of 14 items reach every cell of this grid (1 too few frames, 14 too few "
                           "captions); k=3 needs more than k+1")
    line = one_line_error(*run_cli(monkeypatch, capsys, *_sweep_line(man, cache, out), "--n-captions", "1,5")[::2])
    assert "item 'v0' has 3 captions but n_c=5 were requested" in line and "13 more items" in line
    # a short video without --skip-bad: refused, naming it
    line = one_line_error(*run_cli(monkeypatch, capsys, *_sweep_line(man, cache, out))[::2])
    assert "item 'v4': its video has 3 frames but n_f=4 were requested" in line
    assert not out.exists()
    code, printed, err = run_cli(monkeypatch, capsys, *_sweep_line(man, cache, out, "--skip-bad"))
    assert code == 0, err
    assert "too few frames: 'v4' (3 frames, fewer than n_f=4)" in err and "N = 13 of 14 items" in err
    assert f"items: N = 13 of 14 in every cell; 1 left out (1 too few frames): {out}/dropped_items.jsonl" in printed
    doc = json.loads((out / "sweep.json").read_text())
    assert doc["items"]["n_kept"] == 13 and doc["items"]["dropped"][0]["id"] == "v4"
    assert {r["n"] for r in doc["rows"]} == {13}


def test_a_sweep_stopped_before_its_first_cell_leaves_a_folder_the_next_command_reuses(toy, tmp_path, monkeypatch,
                                                                                        capsys):
    from vlgap.probe import sweep
    from vlgap.probe.sweep import SweepConfig, run_sweep

    man, cache = toy
    out = tmp_path / "run"
    encs = {"tv": ToyVision(), "tt": ToyText()}
    cfg = dict(manifest=str(man), vision=["tv"], text=["tt"], n_frames=[2, 4], n_captions=[1, 2], k=3, n_bootstrap=0,
               n_permutations=0, cache_dir=str(cache), skip_bad=True, fit=False)

    def killed(*a, **kw):
        raise KeyboardInterrupt("killed while extracting")

    with monkeypatch.context() as m:
        m.setattr(sweep, "extract", killed)
        with pytest.raises(KeyboardInterrupt):
            run_sweep(SweepConfig(**cfg), out, progress=False, encoders=encs)
    assert (out / "run_config.json").is_file() and not (out / "cells").exists()
    capsys.readouterr()
    res = run_sweep(SweepConfig(**{**cfg, "k": 4}), out, progress=False, encoders=encs)  # no force
    assert "its run recorded another configuration (k: 3 -> 4) but computed nothing: reused" in capsys.readouterr().err
    assert {r["k"] for r in res.rows} == {4}
    # now the folder holds computed cells: a changed configuration is refused with the difference
    with pytest.raises(VlgapError, match=r"holds a sweep run with another configuration \(k: 4 -> 5\).*--force"):
        run_sweep(SweepConfig(**{**cfg, "k": 5}), out, progress=False, encoders=encs)
    assert run_sweep(SweepConfig(**{**cfg, "k": 5}), out, progress=False, encoders=encs, force=True).rows[0]["k"] == 5


def test_a_bogus_metric_is_refused_by_the_configuration(tmp_path):
    from vlgap.probe.sweep import SweepConfig

    with pytest.raises(VlgapError, match="metric='bogus': choose one of mutual_knn"):
        SweepConfig("m.jsonl", ["a"], ["b"], [1], [1], metric="bogus")
    with pytest.raises(VlgapError, match="preset='nope': choose one of platonic-rep"):
        SweepConfig("m.jsonl", ["a"], ["b"], [1], [1], preset="nope")


# ------------------------------------------------------------------------------------------------ the demo

DEMO_TOML = """[demo]
n_videos = 14
n_frames_per_video = 6
video_size = 16
vision = ["tv"]
text = ["tt"]
n_frames = [1, 2]
n_captions = [1, 2]
k = 3
n_bootstrap = 0
n_permutations = 0
dtype = "float32"
text_dtype = "float32"
temporal = false
metric = "{metric}"
out = "{out}"
cache_dir = "{cache}"
"""


def test_demo_with_a_bogus_metric_then_fixed_without_force(tmp_path, monkeypatch, capsys):
    from vlgap.features.extract import extract
    from vlgap.cli.config_file import load_config
    from vlgap.probe.demo import shapes_manifest

    out, cache = tmp_path / "demo", tmp_path / "cache"
    toml = tmp_path / "demo.toml"
    toml.write_text(DEMO_TOML.format(metric="mutual_knn", out=out.as_posix(), cache=cache.as_posix()))
    # the toy encoders' features of the demo's shapes videos, so the demo finds `tv` and `tt` by name
    cfg = load_config(toml)
    man = shapes_manifest(cfg)
    toml.write_text(DEMO_TOML.format(metric="bogus", out=out.as_posix(), cache=cache.as_posix()))
    extract(man, "tv", n_frames=[1, 2], cache_dir=cache, image_size=cfg.image_size, loaded_encoder=ToyVision(),
            progress=False)
    extract(man, "tt", n_captions=[1, 2], cache_dir=cache, loaded_encoder=ToyText(), progress=False)
    capsys.readouterr()
    line = one_line_error(*run_cli(monkeypatch, capsys, "demo", "--config", toml, "--quiet")[::2])
    assert "metric 'bogus': choose one of mutual_knn" in line and not out.exists()  # refused as the file is read
    toml.write_text(DEMO_TOML.format(metric="mutual_knn", out=out.as_posix(), cache=cache.as_posix()))
    code, _, err = run_cli(monkeypatch, capsys, "demo", "--config", toml, "--quiet")
    assert code == 0, err
    assert (out / "report.html").is_file() and "<h2>Items</h2>" in (out / "report.html").read_text()


# ------------------------------------------------------------------------------------------------ cape train

def test_cape_train_with_bogus_lora_modules_then_fixed_without_force(tmp_path, monkeypatch, capsys):
    from tiny_lm import save_tiny_qwen2  # tests/helpers

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    folder = save_tiny_qwen2(tmp_path / "tiny-qwen2", max_positions=512)
    capsys.readouterr()
    out = tmp_path / "train"
    common = ["cape", "train", "--out", out, "--lm", f"hf:{folder}", "--videos", 4, "--steps", 1, "--batch-size", 4,
              "--lora-r", 4]
    line = one_line_error(*run_cli(monkeypatch, capsys, *common, "--lora-modules", "bogus_proj")[::2])
    assert "--lora-modules bogus_proj: bogus_proj is not a module of this model; its linear layers are" in line
    assert "q_proj" in line and "lm_head" not in line and not out.exists()
    line = one_line_error(*run_cli(monkeypatch, capsys, *common, "--lora-layers", "7")[::2])
    assert "--lora-layers: layer 7 does not exist; the model has 2 decoder layers" in line and not out.exists()
    code, _, err = run_cli(monkeypatch, capsys, *common, "--lora-modules", "q_proj,v_proj")
    assert code == 0, err
    assert json.loads((out / "sft.json").read_text())["saved"] == "adapter"


def test_lora_targets_are_checked_as_peft_matches_them():
    import torch

    from vlgap.cape.finetune import check_lora_targets

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.q_proj, self.c_attn = torch.nn.Linear(2, 2), torch.nn.Conv1d(2, 2, 1)

    class Model(torch.nn.Module):
        config = type("C", (), {"num_hidden_layers": 2})()

        def __init__(self):
            super().__init__()
            self.layers = torch.nn.ModuleList([Block(), Block()])

    model = Model()
    for ok in ("all-linear", "q_proj", "c_attn", "q_proj,c_attn", "layers.0.q_proj"):
        check_lora_targets(model, modules=ok)
    check_lora_targets(model, layers="0,1", modules="q_proj")
    with pytest.raises(VlgapError, match=r"--lora-modules q_proj,k_proj: k_proj is not a module of this model; its "
                                         r"linear layers are q_proj \(or all-linear\)"):
        check_lora_targets(model, modules="q_proj,k_proj")
    with pytest.raises(VlgapError, match="layer 2 does not exist; the model has 2 decoder layers"):
        check_lora_targets(model, layers="2", modules="q_proj")
