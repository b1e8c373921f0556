"""Breaking things on purpose (issue 17, part B): every reusable artefact of the sweep, WSV and CAPE is
keyed and verified before reuse. Flipped bytes, truncations, hand edits and changed settings must never be
reused silently: they are recomputed (said in one line) or refused with the differences named, and the
result equals an uninterrupted run. Degenerate inputs and bad counts are one-line errors (CLI exit 2)."""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from in_process_cli import run_cli  # tests/helpers
from toy_encoders import ToyText, ToyVision
from vlgap import reuse
from vlgap.errors import VlgapError


# ------------------------------------------------------------------------------------------------ helpers


def one_line_error(code, err) -> str:
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 2, err
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def flip_byte(path: Path, where: float = 0.5) -> None:
    raw = bytearray(path.read_bytes())
    raw[int(len(raw) * where)] ^= 0x10
    path.write_bytes(bytes(raw))


def flip_tensor_byte(path: Path) -> None:
    """Flip a byte inside the largest tensor of a torch.save file: the zip still opens and torch.load
    succeeds (it checks no checksum), so only vlgap's seal can notice."""
    import zipfile

    with zipfile.ZipFile(path) as z:
        info = max((i for i in z.infolist() if "/data/" in i.filename), key=lambda i: i.file_size)
    raw = bytearray(path.read_bytes())
    start = info.header_offset + 30 + int.from_bytes(raw[info.header_offset + 26:info.header_offset + 28], "little") \
        + int.from_bytes(raw[info.header_offset + 28:info.header_offset + 30], "little")
    raw[start + info.file_size // 2] ^= 0x40
    path.write_bytes(bytes(raw))
    torch.load(path, weights_only=False)  # still loads


def truncate(path: Path) -> None:
    raw = path.read_bytes()
    path.write_bytes(raw[: len(raw) // 2])


def old_temporary(folder: Path, name: str) -> Path:
    """A leftover of a killed atomic write (vlgap's own temporary name), an hour old."""
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / f".{name}.0123456789ab.tmp"
    tmp.write_bytes(b"half a file")
    past = time.time() - 3600
    os.utime(tmp, (past, past))
    return tmp


# ------------------------------------------------------------------------------------------------ sweep

N_ITEMS = 14


def _manifest(root: Path, n: int = N_ITEMS, name: str = "man.jsonl") -> Path:
    """n still images of random noise (distinct features at every n_f) with random word captions."""
    from PIL import Image

    rng = np.random.default_rng(0)
    rows = []
    for i in range(n):
        img = root / "img" / f"i{i}.png"
        if not img.exists():
            img.parent.mkdir(parents=True, exist_ok=True)
            Image.fromarray(rng.integers(0, 256, (16, 16, 3), dtype=np.uint8)).save(img)
        words = [f"w{x}" for x in np.random.default_rng(i).integers(0, 40, 8)]
        rows.append({"id": f"i{i}", "image": f"img/i{i}.png", "captions": [" ".join(words[j:j + 4]) for j in range(3)]})
    path = root / name
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.fixture(scope="module")
def sweep_env(tmp_path_factory):
    root = tmp_path_factory.mktemp("sweep")
    return root, _manifest(root)


ENCODERS = {"tv": ToyVision(), "tt": ToyText()}


def _cfg(manifest, root, **kw):
    from vlgap.probe.sweep import SweepConfig

    base = dict(k=3, n_bootstrap=10, n_permutations=10, seed=0, cache_dir=str(root / "cache"), fit=False)
    return SweepConfig(str(manifest), ["tv"], ["tt"], [1, 2], [1, 2], **{**base, **kw})


def _sweep(cfg, out, **kw):
    from vlgap.probe.sweep import run_sweep

    return run_sweep(cfg, out, progress=False, encoders=ENCODERS, **kw)


def _csv_rows(out: Path) -> list[str]:
    return (out / "sweep.csv").read_text().splitlines()


def test_sweep_rerun_with_other_settings_is_refused_with_differences_then_forced(sweep_env, tmp_path):
    root, man = sweep_env
    out = tmp_path / "run"
    _sweep(_cfg(man, root), out)
    new = _cfg(man, root, k=4, metric="cka", seed=7)
    with pytest.raises(VlgapError) as info:
        _sweep(new, out)
    msg = str(info.value)
    assert "k: 3 -> 4" in msg and 'metric: "mutual_knn" -> "cka"' in msg and "seed: 0 -> 7" in msg
    assert "--force" in msg and "\n" not in msg
    res = _sweep(new, out, force=True)
    assert {r["metric"] for r in res.rows} == {"cka"}
    assert json.loads((out / "config.json").read_text())["k"] == 4
    assert {line.split(",")[-1] for line in _csv_rows(out)[1:]} == {"cka"}  # no k=3 mutual_knn cell left
    fresh = _sweep(new, tmp_path / "fresh")
    assert _csv_rows(out) == _csv_rows(tmp_path / "fresh")
    assert [r["score"] for r in res.rows] == [r["score"] for r in fresh.rows]


def test_sweep_of_another_manifest_into_the_folder_is_refused(sweep_env, tmp_path):
    root, man = sweep_env
    small = _manifest(root, n=12, name="small.jsonl")
    out = tmp_path / "run"
    _sweep(_cfg(man, root), out)
    with pytest.raises(VlgapError, match=r"data\.manifest_fingerprint: .*data\.n_items: 14 -> 12"):
        _sweep(_cfg(small, root), out)
    res = _sweep(_cfg(small, root), out, force=True)
    assert {r["n"] for r in res.rows} == {12}  # never the 14-item cells


def test_sweep_cell_edited_by_hand_is_recomputed_not_tabulated(sweep_env, tmp_path, capsys):
    root, man = sweep_env
    out = tmp_path / "run"
    first = _sweep(_cfg(man, root, fit=True), out)
    csv_before, fits_before = _csv_rows(out), first.fits
    cell = out / "cells" / "tv__tt__f2_c1.json"
    row = json.loads(cell.read_text())
    text = cell.read_text().replace(json.dumps(row["score"]), json.dumps(round(row["score"] + 0.9, 3)), 1)
    assert text != cell.read_text()
    cell.write_text(text)
    capsys.readouterr()
    again = _sweep(_cfg(man, root, fit=True), out)
    err = capsys.readouterr().err
    assert "sweep cell" in err and "corrupt" in err and "tv__tt__f2_c1.json" in err
    assert _csv_rows(out) == csv_before
    assert [r["score"] for r in again.rows] == [r["score"] for r in first.rows]
    assert json.dumps(again.fits, sort_keys=True, default=str) == json.dumps(fits_before, sort_keys=True, default=str)


@pytest.mark.parametrize("damage", [flip_byte, truncate])
def test_sweep_matrix_or_cell_damaged_is_recomputed(sweep_env, tmp_path, capsys, damage):
    root, man = sweep_env
    out = tmp_path / "run"
    first = _sweep(_cfg(man, root), out)
    damage(out / "matrices" / "tv__tt__f1_c2.npy")
    damage(out / "cells" / "tv__tt__f2_c2.json")
    capsys.readouterr()
    again = _sweep(_cfg(man, root), out)
    err = capsys.readouterr().err
    assert err.count("corrupt") == 2
    assert [r["score"] for r in again.rows] == [r["score"] for r in first.rows]
    assert reuse.check_artefact(out / "matrices" / "tv__tt__f1_c2.npy").ok


def test_sweep_removes_leftovers_of_a_killed_run_and_report_refuses_an_edited_table(sweep_env, tmp_path):
    from vlgap.probe.report import write_report

    root, man = sweep_env
    out = tmp_path / "run"
    _sweep(_cfg(man, root), out)
    leftovers = [old_temporary(out, "sweep.csv"), old_temporary(out / "cells", "tv__tt__f1_c1.json")]
    _sweep(_cfg(man, root), out)
    assert not any(p.exists() for p in leftovers)
    doc = out / "sweep.json"
    doc.write_text(doc.read_text().replace('"n_f": 1', '"n_f": 3', 1))
    with pytest.raises(VlgapError, match="sweep.json: corrupt"):
        write_report(out, progress=False)


def test_sweep_interrupted_resumes_computing_only_the_missing_cells(sweep_env, tmp_path, monkeypatch):
    """A sweep killed after two of its four cells (vlgap.runs: each cell sealed when it arrives) resumes with
    the other two only, and its table equals an uninterrupted run's."""
    import vlgap.probe.sweep as sweep

    root, man = sweep_env
    real, done = sweep.score_cell, []
    monkeypatch.setenv("VLGAP_WORKERS", "1")  # cells in order: the kill comes after exactly two (threads: test_sweep_parallel)

    def interrupted(*args, **kw):
        if len(done) == 2:
            raise KeyboardInterrupt("killed")
        done.append(1)
        return real(*args, **kw)

    monkeypatch.setattr(sweep, "score_cell", interrupted)
    with pytest.raises(KeyboardInterrupt):
        _sweep(_cfg(man, root), tmp_path / "run")
    assert len(list((tmp_path / "run" / "cells").glob("[!.]*.json"))) == 2
    done.clear()
    monkeypatch.setattr(sweep, "score_cell", lambda *a, **kw: (done.append(1), real(*a, **kw))[1])
    _sweep(_cfg(man, root), tmp_path / "run")
    assert len(done) == 2  # the two finished cells were read back, not computed again
    _sweep(_cfg(man, root), tmp_path / "fresh")
    assert _csv_rows(tmp_path / "run") == _csv_rows(tmp_path / "fresh")


def test_sweep_cli_bad_counts_and_other_configuration_are_one_line_errors(sweep_env, tmp_path, monkeypatch, capsys):
    root, man = sweep_env
    base = ["sweep", man, "--vision", "tv", "--text", "tt", "--n-frames", "1,2", "--n-captions", "1,2",
            "--out", tmp_path / "run", "--cache-dir", root / "cache"]  # the toy encoders' features are there
    for flag, value in (("--k", 0), ("--bootstrap", -1), ("--permutations", -5)):
        line = one_line_error(*run_cli(monkeypatch, capsys, *base, flag, value)[::2])
        assert flag in line
    _sweep(_cfg(man, root), tmp_path / "run")
    capsys.readouterr()
    code, _, err = run_cli(monkeypatch, capsys, *base, "--k", 4, "--bootstrap", 10, "--permutations", 10)
    line = one_line_error(code, err)
    assert "k: 3 -> 4" in line and "--force" in line


# ------------------------------------------------------------------------------------------------ metrics

@pytest.mark.parametrize("metric", ["mutual_knn", "cycle_knn", "cknna", "lcs_knn", "edit_distance_knn", "cka"])
def test_constant_features_are_refused_naming_the_side(metric):
    from vlgap.metrics import alignment as A

    rng = np.random.default_rng(0)
    const, y = np.ones((50, 8)), rng.normal(size=(50, 8))
    fn = getattr(A, metric)
    args = () if metric == "cka" else (10,)
    with pytest.raises(VlgapError, match=rf"{metric}: feats_A layer 0 of 1 has zero variance \(all 50 items"):
        fn(const, y, *args)
    with pytest.raises(VlgapError, match="feats_B layer 0 of 1 has zero variance"):
        fn(y, const, *args)


def test_layer_search_leaves_a_constant_layer_out_and_says_so():
    from vlgap.metrics.layer_search import layer_search

    rng = np.random.default_rng(1)
    x_good, y = rng.normal(size=(40, 6)), rng.normal(size=(40, 6))
    x_good[:, 0] += y[:, 0] * 3
    xs = [np.full((40, 6), 2.0), x_good]
    res = layer_search(xs, [y], k=5, n_bootstrap=20, n_permutations=20, seed=3)
    ref = layer_search([x_good], [y], k=5, n_bootstrap=20, n_permutations=20, seed=3)
    assert np.isnan(res.scores[0, 0]) and res.scores[1, 0] == ref.scores[0, 0]
    assert (res.x_layer, res.best_score, res.ci, res.p_value) == (1, ref.best_score, ref.ci, ref.p_value)
    assert res.bootstrap.best_pair_frequency[0]["x_layer"] == 1
    assert len(res.notes) == 1 and "X layer 0 of 2 has zero variance" in res.notes[0]
    assert res.to_dict()["notes"] == res.notes
    with pytest.raises(VlgapError, match="X layers \\[0, 1\\] of 2 have zero variance"):
        layer_search([xs[0], xs[0]], [y], k=5)


def test_align_cli_on_constant_features_is_one_line(tmp_path, monkeypatch, capsys):
    np.save(tmp_path / "x.npy", np.zeros((30, 4)))
    np.save(tmp_path / "y.npy", np.random.default_rng(0).normal(size=(30, 4)))
    line = one_line_error(*run_cli(monkeypatch, capsys, "align", tmp_path / "x.npy", tmp_path / "y.npy",
                                   "--k", 5)[::2])
    assert "X layer 0 of 1 has zero variance" in line


def test_sweep_cell_on_constant_features_is_na_with_the_reason(sweep_env, tmp_path):
    from vlgap.probe.sweep import score_cell

    rng = np.random.default_rng(0)
    res = score_cell([np.ones((20, 4))], [rng.normal(size=(20, 4))], k=3, metric="mutual_knn", n_bootstrap=0,
                     n_permutations=0, seed=0)
    assert np.isnan(res["score"]) and "zero variance" in res["na_reason"] and np.isnan(res["matrix"]).all()


def test_fit_scaling_refuses_duplicate_cells_naming_the_rows(tmp_path, monkeypatch, capsys):
    from vlgap.scaling import fit_scaling

    rows = [{"n_f": f, "n_c": c, "score": 0.5 - 0.1 / f - 0.1 / c} for f in (1, 2, 4) for c in (1, 2, 4)]
    rows.append({"n_f": 2, "n_c": 4, "score": 0.9})
    with pytest.raises(VlgapError, match=r"1 duplicate cell\(s\): rows 5 and 9 \(n_f=2, n_c=4"):
        fit_scaling(rows, n_bootstrap=0)
    grid = tmp_path / "grid.csv"
    grid.write_text("n_f,n_c,score\n" + "".join(f"{r['n_f']},{r['n_c']},{r['score']}\n" for r in rows))
    line = one_line_error(*run_cli(monkeypatch, capsys, "fit-scaling", grid, "--bootstrap", 0)[::2])
    assert "rows 5 and 9" in line
    # a sweep.csv of two encoder pairs: refused as a whole, fitted pair by pair
    two = tmp_path / "sweep.csv"
    two.write_text("vision,text,n_f,n_c,score\n" + "".join(
        f"{v},tt,{r['n_f']},{r['n_c']},{r['score'] + (0.1 if v == 'b' else 0)}\n" for v in ("a", "b") for r in rows[:9]))
    line = one_line_error(*run_cli(monkeypatch, capsys, "fit-scaling", two, "--bootstrap", 0)[::2])
    assert "9 duplicate cell(s)" in line and "--vision V --text T" in line
    code, out, _ = run_cli(monkeypatch, capsys, "fit-scaling", two, "--bootstrap", 0, "--vision", "b", "--json")
    assert code == 0 and json.loads(out)["n_cells"] == 9
    line = one_line_error(*run_cli(monkeypatch, capsys, "fit-scaling", two, "--vision", "c")[::2])
    assert "no row with vision = 'c'" in line


# ------------------------------------------------------------------------------------------------ WSV

C, GRID = 8, (4, 2, 2)
TINY = dict(head_steps=2, polisher_steps=2, lm_pretrain_steps=2, caption_steps=3, batch_size=8, lm_dim=32,
            lm_layers=1, lm_heads=2, prompter_dim=16, prompter_layers=1, polisher_hidden=8, n_prompts=2,
            checkpoint_every=1, max_len=24)
CAPTIONS = ["A red circle on a black background.", "A blue square moves to the left.",
            "The green star grows and then disappears.", "Two shapes: a pink heart and a white cross.",
            "A yellow triangle in the top left corner.", "The cyan diamond turns red."]


def _data():
    from vlgap.wsv.train import TrainData

    rng = np.random.default_rng(0)
    emb = rng.normal(size=(6, 12)).astype(np.float32)
    return TrainData(CAPTIONS, rng.normal(size=(6, C, *GRID)).astype(np.float32),
                     emb / np.linalg.norm(emb, axis=1, keepdims=True))


def _same_weights(a, b) -> bool:
    sa, sb = a.state_dict(), b.state_dict()
    return sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)


@pytest.fixture(scope="module")
def wsv_full(tmp_path_factory):
    from vlgap.wsv.train import WSVConfig, train

    out = tmp_path_factory.mktemp("wsv") / "full"
    return train(_data(), WSVConfig(system="wsv", **TINY), out), out


@pytest.mark.parametrize("damage", [flip_tensor_byte, flip_byte, truncate])
def test_wsv_damaged_checkpoint_is_not_resumed_and_training_equals_uninterrupted(wsv_full, tmp_path, capsys,
                                                                                damage):
    from vlgap.wsv.train import WSVConfig, train

    full, _ = wsv_full
    cfg = WSVConfig(system="wsv", **TINY)
    lines = []
    train(_data(), cfg, tmp_path, stop_after=4, log=lines.append)  # "killed" mid-way (polisher stage)
    damage(tmp_path / "checkpoint.pt")
    resumed = train(_data(), cfg, tmp_path, log=lines.append)
    said = [ln for ln in lines if "checkpoint" in ln]
    assert len(said) == 1 and "corrupt" in said[0] and "from step 0" in said[0]
    assert _same_weights(full, resumed)


def test_wsv_rerun_with_other_settings_is_refused_then_forced(tmp_path):
    from vlgap.wsv.train import WSVConfig, train

    train(_data(), WSVConfig(system="no_polisher", **TINY), tmp_path, stop_after=1)
    other = WSVConfig(system="no_polisher", **{**TINY, "caption_steps": 4, "lr": 2e-3})
    with pytest.raises(VlgapError, match=r"config\.caption_steps: 3 -> 4; config\.lr: 0\.001 -> 0\.002.*--force"):
        train(_data(), other, tmp_path)
    forced = train(_data(), other, tmp_path, force=True)
    assert _same_weights(forced, train(_data(), other, tmp_path / "fresh"))


def test_wsv_damaged_model_is_refused_in_one_line(wsv_full, tmp_path):
    import shutil

    from vlgap.wsv.train import load_model

    _, out = wsv_full
    shutil.copytree(out, tmp_path / "m")
    flip_tensor_byte(tmp_path / "m" / "model.pt")
    with pytest.raises(VlgapError, match=r"model\.pt changed after it was written \(checksum mismatch\)"):
        load_model(tmp_path / "m" / "model.pt")
    assert len(load_model(out / "model.pt").history) > 0  # the untouched one loads


def test_wsv_leftover_temporaries_are_removed(tmp_path):
    from vlgap.wsv.train import WSVConfig, train

    cfg = WSVConfig(system="no_polisher", **TINY)
    train(_data(), cfg, tmp_path, stop_after=1)
    leftovers = [old_temporary(tmp_path, "model.pt"), old_temporary(tmp_path, "checkpoint.pt")]
    train(_data(), cfg, tmp_path)
    assert not any(p.exists() for p in leftovers)


@pytest.mark.parametrize("damage", [flip_byte, truncate])
def test_wsv_damaged_latent_cache_is_recomputed(tmp_path, damage):
    from vlgap.wsv.latents import cached_latents

    calls, lines = [], []

    def compute():
        calls.append(1)
        return {"z": np.arange(4000, dtype=np.float32).reshape(10, 400)}

    key = {"what": "test", "n": 10}
    first = cached_latents(key, compute, cache_dir=tmp_path, log=lines.append)
    files = list((tmp_path / "wsv" / "latents").glob("*.npz"))
    assert len(files) == 1 and len(calls) == 1
    damage(files[0])
    again = cached_latents(key, compute, cache_dir=tmp_path, log=lines.append)
    assert len(calls) == 2 and len(lines) == 1 and "corrupt" in lines[0]
    np.testing.assert_array_equal(again["z"], first["z"])
    assert cached_latents(key, compute, cache_dir=tmp_path)["z"].shape == (10, 400) and len(calls) == 2


def test_wsv_bad_counts_are_one_line_errors(wsv_full, tmp_path, monkeypatch, capsys):
    from vlgap.wsv.train import WSVConfig

    _, out = wsv_full
    with pytest.raises(VlgapError, match=r"--caption-steps=-1: need an integer >= 1"):
        WSVConfig(caption_steps=-1)
    man = tmp_path / "m.jsonl"
    man.write_text("")
    cases = [(["wsv", "train", "--out", tmp_path / "t", "--caption-steps", -1], "--caption-steps"),
             (["wsv", "train", "--out", tmp_path / "t", "--batch-size", 0], "--batch-size"),
             (["wsv", "caption", out / "model.pt", man, "--out", tmp_path / "p.json", "--batch-size", 0],
              "--batch-size"),
             (["wsv", "caption", out / "model.pt", man, "--out", tmp_path / "p.json", "--beam", 0], "--beam"),
             (["wsv", "experiment", "--out", tmp_path / "e", "--bootstrap", -2], "--bootstrap"),
             (["wsv", "experiment", "--out", tmp_path / "e", "--seeds", "0,-1"], "--seeds")]
    for args, flag in cases:
        line = one_line_error(*run_cli(monkeypatch, capsys, *args)[::2])
        assert flag in line, line
    full, _ = wsv_full
    with pytest.raises(VlgapError, match="--beam"):
        full.caption(np.zeros((1, C, *GRID), np.float32), beam=0)


# ------------------------------------------------------------------------------------------------ CAPE

def _prompts(n=5):
    from vlgap.cape import world as W

    return [W.user_prompt(v) for v in W.sample_videos(n, seed=8)]


@pytest.mark.parametrize("damage", ["flip", "edit"])
def test_cape_rewrite_cache_damaged_is_recomputed(tmp_path, capsys, damage):
    from vlgap.cape.operators import TemplateOperator, rewrite

    texts = _prompts()
    first = rewrite(TemplateOperator(), texts, cache_dir=tmp_path)
    cache = tmp_path / "template.json"
    if damage == "flip":
        flip_byte(cache)
    else:
        doc = json.loads(cache.read_text())
        entry = next(iter(doc["entries"].values()))
        entry["main_object"] = "a hand-edited object"
        cache.write_text(json.dumps(doc))
    capsys.readouterr()

    class Counting(TemplateOperator):
        calls: list = []

        def rewrite_batch(self, batch):
            self.calls.extend(batch)
            return super().rewrite_batch(batch)

    op = Counting()
    again = rewrite(op, texts, cache_dir=tmp_path)
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "rewrite cache" in err and "corrupt" in err
    assert op.calls == texts and again == first


def test_cape_adapter_and_sft_checkpoint_damaged_are_caught(tmp_path):
    from vlgap.cape.lm import LoadedLM, check_folder, load_adapter, seal_folder

    key = {"format": 2, "steps": 4}
    adapter = tmp_path / "adapter"
    adapter.mkdir()
    (adapter / "adapter_model.safetensors").write_bytes(b"w" * 200)
    (adapter / "adapter_config.json").write_text("{}")
    seal_folder(adapter, key)
    assert check_folder(adapter, key) == []
    assert check_folder(adapter, {**key, "steps": 5})[0].endswith("(made with other settings: steps: 4 -> 5)")
    flip_byte(adapter / "adapter_model.safetensors")
    assert "corrupt" in check_folder(adapter, key)[0]
    with pytest.raises(VlgapError, match="LoRA adapter file .*adapter_model.safetensors: corrupt"):
        load_adapter(LoadedLM(None, None, "base", "h"), adapter)


def test_cape_experiment_folder_other_config_refused_and_force_starts_over(tmp_path):
    from vlgap.cape.experiment import CapeConfig, claim_cape_folder

    out = tmp_path / "run"
    claim_cape_folder(out, CapeConfig(n_test=12), log=lambda m: None)
    step = out / "sft" / "pe" / "checkpoints" / "checkpoint-2"  # an HF checkpoint of this configuration
    step.mkdir(parents=True)
    (step / "trainer_state.json").write_text("{}")
    leftover = old_temporary(out / "rewrites", "pe.json")
    default_steps = CapeConfig().sft_steps
    with pytest.raises(VlgapError, match=rf"another configuration \(.*n_test: 12 -> 20.*sft_steps: {default_steps} -> 3"):
        claim_cape_folder(out, CapeConfig(n_test=20, sft_steps=3), log=lambda m: None)
    assert (out / "sft" / "pe" / "checkpoints").is_dir()  # a refusal touches nothing
    claim_cape_folder(out, CapeConfig(n_test=20, sft_steps=3), force=True, log=lambda m: None)
    assert not (out / "sft").exists() and not leftover.exists()  # never resumed into the new configuration


def test_cape_bad_counts_are_one_line_errors(tmp_path, monkeypatch, capsys):
    from vlgap.cape.experiment import CapeConfig

    p = tmp_path / "prompts.txt"
    p.write_text("a red ball\n")
    for args, flag in ((["cape", "rewrite", p, "--batch-size", 0], "--batch-size"),
                       (["cape", "rewrite", p, "--max-input-tokens", -1], "--max-input-tokens"),
                       (["cape", "experiment", "--out", tmp_path / "c", "--seeds", "x"], "--seeds"),
                       (["cape", "experiment", "--out", tmp_path / "c", "--sft-steps", -3], "--sft-steps"),
                       (["cape", "train", "--out", tmp_path / "t", "--steps", 0], "--steps")):
        line = one_line_error(*run_cli(monkeypatch, capsys, *args)[::2])
        assert flag in line, line
    with pytest.raises(VlgapError, match="--bootstrap"):
        CapeConfig(n_bootstrap=-1)
