"""The T2V-inversion check: scores equal vlgap's caption metrics on the same (prediction, held-out caption)
pairs, pairing by item, the experiment's sealed inversion files (computed from the saved models, reused,
recomputed when missing or stale, never retraining a finished cell), and `vlgap wsv invert`."""
import json
import shutil

import numpy as np
import pytest

from vlgap.captions.evaluate import caption_eval
from vlgap.errors import VlgapError
from vlgap.wsv.evaluate import ATTRIBUTES, attribute_scores, inversion_scores

from helpers.in_process_cli import run_cli

CAPTIONS = {f"s{i}": c for i, c in enumerate([
    "A red circle on a black background.", "A blue square moves to the left.",
    "The green star grows and then disappears.", "A pink heart and a white cross on a navy background.",
    "A yellow triangle in the top left corner.", "The cyan diamond turns red.",
    "Early on, the orange hexagon appears.", "A big purple star on a photo of a cat.",
    "The white circle shrinks.", "A green square moves up, then a red heart appears.",
    "A blue star on a grey background.", "The yellow hexagon turns green."])}
METRICS = ("bleu", "rouge", "cider")


def _refs(ids):
    return {i: [CAPTIONS[i]] for i in ids}


def test_scores_are_the_caption_metrics_of_each_prediction_against_its_own_caption():
    ids = list(CAPTIONS)
    copy = dict(CAPTIONS)  # a system that inverts its generator perfectly: it writes the caption back
    shifted = {i: CAPTIONS[ids[(k + 1) % len(ids)]] for k, i in enumerate(ids)}  # each caption one item off
    res = inversion_scores(copy, CAPTIONS, pred_real=shifted, n_bootstrap=50, n_permutations=200, seed=3,
                           metrics=METRICS)
    for side, pred in (("synthetic", copy), ("real", shifted)):
        want = caption_eval(pred, _refs(ids), metrics=list(METRICS), n_bootstrap=50, seed=3)
        for m in ("BLEU-4", "ROUGE-L", "CIDEr"):
            assert res[side][m]["score"] == pytest.approx(want[m]["score"]), (side, m)
            assert res[side][m]["ci"] == pytest.approx(want[m]["ci"]), (side, m)
    assert res["synthetic"]["BLEU-4"]["score"] == pytest.approx(1.0)  # the i-th prediction meets the i-th caption
    assert res["real"]["CIDEr"]["score"] < 0.5 * res["synthetic"]["CIDEr"]["score"]
    d = res["difference"]["CIDEr"]
    assert d["difference"] == pytest.approx(res["synthetic"]["CIDEr"]["score"] - res["real"]["CIDEr"]["score"])
    assert d["ci"][0] > 0 and d["p_value"] < 0.05
    assert res["real"]["n"] == res["synthetic"]["n"] == res["n"] == len(ids)


def test_attribute_difference_is_the_paired_mean_of_per_item_differences():
    from vlgap.data.shapes import item_rng, sample_spec, write_captions
    from vlgap.wsv.reader import read_caption

    specs, caps = {}, {}
    for k in range(12):
        spec = sample_spec(item_rng(5, k))
        specs[f"v{k}"], caps[f"v{k}"] = spec, write_captions(spec, k)[0]
    ids = list(caps)
    real = {i: caps[ids[(k + 3) % len(ids)]] for k, i in enumerate(ids)}  # another scene's caption
    res = inversion_scores(dict(caps), caps, pred_real=real, synthetic_specs=specs, real_specs=specs,
                           n_bootstrap=100, n_permutations=100, metrics=("cider",))

    def acc(text, spec):
        return np.mean([attribute_scores(read_caption(text, rng=0).stated, spec)[a][0] for a in ATTRIBUTES])

    want = np.mean([acc(caps[i], specs[i]) - acc(real[i], specs[i]) for i in ids])
    assert res["difference"]["attributes"]["difference"] == pytest.approx(want)
    assert res["synthetic"]["attributes"]["mean"]["accuracy"] == pytest.approx(np.mean([acc(caps[i], specs[i])
                                                                                       for i in ids]))
    att = res["difference"]["attributes"]
    lo, hi = att["ci"]
    assert lo <= want <= hi
    # one inference: the interval inverts the sign-flip test, so it excludes 0 exactly when p < 0.05
    from vlgap.stats.resampling import sign_flip_inference

    d = [acc(caps[i], specs[i]) - acc(real[i], specs[i]) for i in ids]
    interval, test = sign_flip_inference(d, n_permutations=100, seed=0)
    assert [lo, hi] == pytest.approx(interval.ci) and att["p_value"] == pytest.approx(test.p_value)
    assert (lo > 0 or hi < 0) == (att["p_value"] < 0.05)


def test_attribute_difference_interval_never_contradicts_its_p_value():
    from vlgap.wsv.evaluate import _paired_mean_difference

    rng = np.random.default_rng(3)
    agree, decisions = [], set()
    for k in range(40):  # shifts from none to clear, so both decisions occur
        a = rng.uniform(0, 1, 25)
        b = a - 0.01 * k + rng.normal(0, 0.1, 25)
        r = _paired_mean_difference(a, b, n_permutations=200, seed=k)
        agree.append((r["ci"][0] > 0 or r["ci"][1] < 0) == (r["p_value"] < 0.05))
        decisions.add(r["p_value"] < 0.05)
    assert all(agree) and decisions == {True, False}
    few = _paired_mean_difference(np.ones(3), np.zeros(3), n_permutations=200, seed=0)
    assert few["ci"] is None and "ci_reason" in few and few["difference"] == 1.0
    none = _paired_mean_difference(np.ones(8), np.zeros(8), n_permutations=0, seed=0)
    assert none["p_value"] is None and none["ci"] is None and none["ci_reason"] == "no permutations asked for"


def test_bad_inputs_name_the_items():
    with pytest.raises(VlgapError, match="no held-out caption.*s_extra"):
        inversion_scores({"s_extra": "A red circle."}, CAPTIONS, n_bootstrap=0, metrics=METRICS)
    with pytest.raises(VlgapError, match="same items.*s1"):
        inversion_scores({"s0": "A red circle."}, CAPTIONS, pred_real={"s1": "A red circle."}, n_bootstrap=0,
                         metrics=METRICS)
    with pytest.raises(VlgapError, match="no synthetic captions"):
        inversion_scores({}, CAPTIONS, n_bootstrap=0)


# ---- the experiment ----

TRAIN = dict(head_steps=3, polisher_steps=3, lm_pretrain_steps=3, caption_steps=6, batch_size=8, lm_dim=16,
             lm_layers=1, lm_heads=2, prompter_dim=8, prompter_layers=1, polisher_hidden=4, n_prompts=2,
             checkpoint_every=2, max_len=24, val_every=1)
TINY = dict(n_train=3, n_eval=5, n_unlabelled=5, n_frames=4, size=32, n_bootstrap=20, n_permutations=10,
            c2st_permutations=2, train=TRAIN, metrics=("bleu", "rouge", "cider"), seeds=(0,),
            systems=("wsv", "oracle"), generators=("synthetic",))


@pytest.fixture(scope="module")
def tiny_experiment(tmp_path_factory):
    import torch

    from vlgap.wsv.experiment import ExperimentConfig, run_experiment

    root = tmp_path_factory.mktemp("wsv_inversion")
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    cfg = ExperimentConfig(**TINY)
    lines: list[str] = []
    summary = run_experiment(root / "exp", cfg, cache_dir=root / "cache", log=lines.append)
    yield root, cfg, summary, lines
    torch.set_num_threads(before)


def test_each_cell_captions_its_generators_heldout_latents_scored_against_their_captions(tiny_experiment):
    from vlgap.wsv.experiment import prepare
    from vlgap.wsv.train import load_model

    root, cfg, summary, _ = tiny_experiment
    prep = prepare(cfg, cache_dir=root / "cache", log=lambda m: None)
    refs = {i: [c] for i, c in zip(prep.eval_ids, prep.heldout_captions)}
    for i, c in zip(prep.eval_ids, prep.heldout_captions):  # pairing: caption i belongs to scene i
        assert c in prep.eval_refs[i]
    for s in ("wsv", "oracle"):
        inv = json.loads((root / "exp" / "inversion" / f"synthetic-{s}-s0.json").read_text())
        cell = json.loads((root / "exp" / "cells" / f"synthetic-{s}-s0.json").read_text())
        model = load_model(root / "exp" / "work" / f"synthetic-{s}-s0" / "model.pt")
        want = dict(zip(prep.eval_ids, model.caption(prep.heldout_synth["synthetic"])))  # raw latents, no polisher
        assert inv["predictions_synthetic"] == want, s
        if s == "wsv":  # with a polisher: also its training input, the polished synthetic latents
            polished = dict(zip(prep.eval_ids, model.caption(prep.heldout_synth["synthetic"], polish=True)))
            assert inv["predictions_synthetic_polished"] == polished
            ref = caption_eval(polished, refs, metrics=["cider"], seed=0, on_empty="keep")
            assert inv["synthetic_polished"]["CIDEr"]["score"] == pytest.approx(ref["CIDEr"]["score"])
        else:
            assert "synthetic_polished" not in inv
        assert inv["held_out_captions"] == dict(zip(prep.eval_ids, prep.heldout_captions))
        for side, pred in (("synthetic", want), ("real", cell["predictions"])):
            ref = caption_eval(pred, refs, metrics=list(cfg.metrics), n_bootstrap=cfg.n_bootstrap, seed=0,
                               on_empty="keep")
            assert inv[side]["CIDEr"]["score"] == pytest.approx(ref["CIDEr"]["score"]), (s, side)
            assert inv[side]["BLEU-4"]["score"] == pytest.approx(ref["BLEU-4"]["score"]), (s, side)
        # real-side attributes: the same captions against the same true specs as the cell's own
        assert inv["real"]["attributes"]["mean"] == cell["scores"]["attributes"]["mean"]
        assert inv["difference"]["attributes"]["difference"] == pytest.approx(
            inv["synthetic"]["attributes"]["mean"]["accuracy"] - inv["real"]["attributes"]["mean"]["accuracy"])
    chance = json.loads((root / "exp" / "inversion" / "chance-s0.json").read_text())
    cpred = json.loads((root / "exp" / "cells" / "chance-s0.json").read_text())["predictions"]
    assert chance["predictions_synthetic"] == cpred
    ref = caption_eval(cpred, refs, metrics=["cider"], seed=0)
    assert chance["synthetic"]["CIDEr"]["score"] == chance["real"]["CIDEr"]["score"] == pytest.approx(
        ref["CIDEr"]["score"])
    rows = {r["system"]: r for r in summary["inversion"]["rows"]}
    assert set(rows) == {"wsv", "oracle"} and summary["inversion"]["chance"]["system"] == "chance"
    assert rows["wsv"]["synthetic"]["CIDEr"]["per_seed"] == [
        json.loads((root / "exp" / "inversion" / "synthetic-wsv-s0.json").read_text())["synthetic"]["CIDEr"]["score"]]
    from vlgap.wsv.experiment import summary_html, summary_markdown

    assert "T2V inversion" in summary_markdown(summary) and "T2V inversion" in summary_html(summary)
    assert "CIDEr, synthetic - real" in summary_html(summary)


def test_missing_or_stale_inversion_is_recomputed_without_retraining(tiny_experiment, tmp_path):
    from vlgap.wsv.experiment import _cell_key, _write_cell, run_experiment

    root, cfg, _, _ = tiny_experiment
    exp = tmp_path / "exp"
    shutil.copytree(root / "exp", exp)
    name = "synthetic-wsv-s0"
    first = json.loads((exp / "inversion" / f"{name}.json").read_text())
    cell_bytes = (exp / "cells" / f"{name}.json").read_bytes()
    # a folder from before the check: cells without inversion files
    shutil.rmtree(exp / "inversion")
    lines: list[str] = []
    summary = run_experiment(exp, cfg, cache_dir=root / "cache", log=lines.append, summary_only=True)
    assert summary["inversion"]["n_cells"] == 0 and not (exp / "inversion" / f"{name}.json").exists()
    run_experiment(exp, cfg, cache_dir=root / "cache", log=lines.append)
    assert not any("training" in ln for ln in lines), [ln for ln in lines if "training" in ln]
    assert (exp / "cells" / f"{name}.json").read_bytes() == cell_bytes  # the cell was reused as it was
    assert json.loads((exp / "inversion" / f"{name}.json").read_text()) == first
    # a third run reads the sealed file
    lines.clear()
    run_experiment(exp, cfg, cache_dir=root / "cache", log=lines.append)
    assert not any(ln.startswith(f"inversion {name}") for ln in lines)
    # the cell changed (recomputed elsewhere): its inversion is stale and is recomputed
    cell = json.loads(cell_bytes)
    cell["predictions"] = {i: "A red circle." for i in cell["predictions"]}
    _write_cell(exp / "cells" / f"{name}.json", cell, _cell_key(cfg, "cell", generator="synthetic", system="wsv",
                                                                 seed=0))
    lines.clear()
    run_experiment(exp, cfg, cache_dir=root / "cache", log=lines.append)
    again = json.loads((exp / "inversion" / f"{name}.json").read_text())
    assert any(ln.startswith(f"inversion {name}: captioning") for ln in lines)
    assert again["predictions_synthetic"] == first["predictions_synthetic"]
    assert set(again["real"]["CIDEr"]) and again["real"]["CIDEr"]["score"] != first["real"]["CIDEr"]["score"]
    # the saved model gone: the cell retrains (deterministically) for its inversion, same captions
    shutil.rmtree(exp / "work" / name)
    (exp / "inversion" / f"{name}.json").unlink()
    lines.clear()
    run_experiment(exp, cfg, cache_dir=root / "cache", log=lines.append)
    assert any("no saved model" in ln for ln in lines)
    assert json.loads((exp / "inversion" / f"{name}.json").read_text())["predictions_synthetic"] == \
        first["predictions_synthetic"]


# ---- the command ----

@pytest.fixture(scope="module")
def model_and_manifest(tmp_path_factory):
    import torch

    from vlgap.data.shapes import generate_shapes
    from vlgap.wsv.api import train_system

    root = tmp_path_factory.mktemp("wsv_invert")
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    model = train_system(root / "model", system="wsv", n_train=2, n_frames=4, size=32, cache_dir=root / "cache",
                         **TRAIN)
    manifest = generate_shapes(root / "eval", 4, seed=1, n_frames=4, size=32, style="real")
    yield root, model, manifest
    torch.set_num_threads(before)


def test_a_run_stopped_after_a_cell_keeps_its_inversion_without_the_saved_model(tiny_experiment, tmp_path,
                                                                             monkeypatch):
    """Each cell's inversion is computed right after the cell: a run stopped in the next cell leaves the
    finished one as small sealed files only, so its models (work/) may be lost and nothing is retrained."""
    import vlgap.wsv.experiment as xp

    root, cfg, _, _ = tiny_experiment
    real_run_cell = xp.run_cell

    def stop_at_the_oracle(prep, cfg, g, s, *args, **kw):
        if s == "oracle":
            raise KeyboardInterrupt("stopped in the second cell")
        return real_run_cell(prep, cfg, g, s, *args, **kw)

    monkeypatch.setattr(xp.runner, "run_cell", stop_at_the_oracle)  # where run_experiment calls it
    exp = tmp_path / "exp"
    with pytest.raises(KeyboardInterrupt):
        xp.run_experiment(exp, cfg, cache_dir=root / "cache", log=lambda m: None)
    name = "synthetic-wsv-s0"
    want = json.loads((root / "exp" / "inversion" / f"{name}.json").read_text())
    assert json.loads((exp / "inversion" / f"{name}.json").read_text()) == want
    assert not (exp / "inversion" / "synthetic-oracle-s0.json").exists()
    shutil.rmtree(exp / "work")  # the models are not kept (e.g. a run folder carried to another machine)
    monkeypatch.setattr(xp.runner, "run_cell", real_run_cell)
    assert not (exp / "cells" / "synthetic-oracle-s0.lock").exists()  # the stopped worker gave its claim back
    lines: list[str] = []
    summary = xp.run_experiment(exp, cfg, cache_dir=root / "cache", log=lines.append)
    assert [ln for ln in lines if "training" in ln] == [ln for ln in lines if "synthetic-oracle-s0: training" in ln]
    assert len([ln for ln in lines if "training" in ln]) == 1 and not any("no saved model" in ln for ln in lines)
    assert summary["inversion"]["n_cells"] == 2
    assert json.loads((exp / "inversion" / f"{name}.json").read_text()) == want


def test_experiment_folder_refuses_another_configuration_before_any_work(tiny_experiment):
    """vlgap.runs: the folder records its configuration; a changed one is refused with the differences
    (and --force named) before anything is read, trained or written."""
    from dataclasses import replace

    from vlgap.wsv.experiment import run_experiment

    root, cfg, _, _ = tiny_experiment
    before = sorted((p.name, p.stat().st_mtime_ns) for p in (root / "exp").rglob("*"))
    with pytest.raises(VlgapError) as err:
        run_experiment(root / "exp", replace(cfg, n_eval=6, seeds=(0, 1)), cache_dir=root / "cache",
                       log=lambda m: pytest.fail(f"worked on a refused folder: {m}"))
    msg = str(err.value)
    assert "another configuration" in msg and "n_eval: 5 -> 6" in msg and "seeds: [0] -> [0,1]" in msg
    assert "--force" in msg
    assert sorted((p.name, p.stat().st_mtime_ns) for p in (root / "exp").rglob("*")) == before


def test_invert_command_scores_synthetic_and_real_against_the_first_captions(model_and_manifest, monkeypatch,
                                                                             capsys):
    from vlgap.data.manifest import read_manifest
    from vlgap.wsv.api import caption_manifest
    from vlgap.wsv.generate import ShapesT2V
    from vlgap.wsv.latents import MobileNetLatents
    from vlgap.wsv.train import load_model

    root, model, manifest = model_and_manifest
    code, out, err = run_cli(monkeypatch, capsys, "wsv", "invert", model, manifest, "--out", root / "inv.json",
                             "--bootstrap", "20", "--permutations", "20", "--metrics", "bleu,rouge,cider", "--seed",
                             "2", "--cache-dir", root / "cache")
    assert code == 0, err
    assert "CIDEr" in out and "synthetic - real" in out
    res = json.loads((root / "inv.json").read_text())
    m = read_manifest(manifest)
    firsts = [it.captions[0] for it in m.items]
    z = MobileNetLatents(image_size=32, n_frames=4).encode(ShapesT2V(n_frames=4, size=32).generate(firsts, seed=2))
    want = dict(zip(m.ids, load_model(model).caption(z)))
    assert res["predictions"]["synthetic"] == want
    assert res["predictions"]["synthetic_polished"] == dict(zip(m.ids, load_model(model).caption(z, polish=True)))
    real = {p["image_id"]: p["caption"] for p in caption_manifest(model, manifest)}
    assert res["predictions"]["real"] == real
    refs = {i: [c] for i, c in zip(m.ids, firsts)}
    for side, pred in (("synthetic", want), ("real", real)):
        ref = caption_eval(pred, refs, metrics=["bleu", "rouge", "cider"], on_empty="keep")
        assert res[side]["CIDEr"]["score"] == pytest.approx(ref["CIDEr"]["score"])
        assert "attributes" in res[side]
    assert res["difference"]["CIDEr"]["difference"] == pytest.approx(
        res["synthetic"]["CIDEr"]["score"] - res["real"]["CIDEr"]["score"])
    # a text file: the synthetic side only
    (root / "caps.txt").write_text("\n".join(firsts) + "\n")
    code, out, err = run_cli(monkeypatch, capsys, "wsv", "invert", model, root / "caps.txt", "--json",
                             "--bootstrap", "0", "--metrics", "cider", "--seed", "2", "--cache-dir", root / "cache")
    assert code == 0, err
    txt = json.loads(out)
    assert txt["real"] is None and txt["synthetic"]["CIDEr"]["score"] == pytest.approx(res["synthetic"]["CIDEr"]["score"])


def test_invert_bad_inputs_are_one_line_errors(model_and_manifest, monkeypatch, capsys):
    root, model, _ = model_and_manifest
    (root / "empty.txt").write_text("\n")
    (root / "caps.csv").write_text("a\n")
    for path, message in ((root / "empty.txt", "is empty"), (root / "caps.csv", "unknown kind .csv"),
                          (root / "nope.txt", "does not exist (expected a file)")):
        code, _, err = run_cli(monkeypatch, capsys, "wsv", "invert", model, path)
        assert code == 2 and message in err, err
    (root / "unreadable.txt").write_text("hello world\n")
    code, _, err = run_cli(monkeypatch, capsys, "wsv", "invert", model, root / "unreadable.txt",
                           "--cache-dir", root / "cache")
    assert code == 2 and "hello world" in err, err


def test_late_fall_is_how_much_the_lowest_loss_improved_over_the_last_fifth_of_steps():
    from vlgap.wsv.experiment import late_fall

    steps = range(100, 1001, 100)
    line = [[t, 1.0 - 0.5 * (t - 100) / 900] for t in steps]  # 1.0 at step 100 down to 0.5 at step 1000
    at_800 = 1.0 - 0.5 * 700 / 900
    assert late_fall(line) == pytest.approx((at_800 - 0.5) / at_800)
    assert late_fall([[t, 0.7] for t in steps]) == 0.0
    assert late_fall([[t, 0.5 + (t > 800) * 0.1] for t in steps]) == 0.0  # turned up: no new low
    # a noisy flat curve: one high point just before the stretch does not count as a fall (minima both sides)
    noisy = [[t, 0.7 + 0.02 * (-1) ** (t // 100) + (t == 800) * 0.05] for t in steps]
    assert late_fall(noisy) == 0.0
    # a new low within the stretch counts against the lowest point before it, not the last one
    assert late_fall([[100, 1.0], [500, 0.6], [800, 0.9], [900, 0.8], [1000, 0.57]]) == pytest.approx(0.05)
    assert late_fall([[50, 1.0]]) is None and late_fall([]) is None


def test_loss_table_says_per_seed_whether_the_validation_loss_was_still_falling(tiny_experiment):
    from vlgap.wsv.experiment import STILL_FALLING, late_fall, summary_tables

    root, _, summary, _ = tiny_experiment
    loss = next(t for t in summary_tables(summary) if t["title"].startswith("Training and validation loss"))
    column = loss["header"].index("validation loss fall over the last fifth of steps, per seed")
    rows = {r["system"]: r for r in summary["rows"]}
    for s in ("wsv", "oracle"):
        cell = json.loads((root / "exp" / "cells" / f"synthetic-{s}-s0.json").read_text())
        fall = late_fall(cell["loss_curves"]["val"])
        assert rows[s]["val_late_fall"] == [fall]
        shown = next(r[column] for r in loss["rows"] if r[1] == rows[s]["label"])
        assert shown.startswith(f"{max(fall, 0.0):.1%}") and ("still falling" in shown) == (fall > STILL_FALLING)


def test_mean_loss_curve_over_seeds_that_trained_different_numbers_of_steps():
    from vlgap.wsv.experiment import mean_curve

    a = [[100, 3.0], [200, 2.0], [300, 1.0]]
    b = [[100, 5.0], [200, 4.0], [300, 3.0]]
    assert mean_curve([a, b]) == [[100, 4.0], [200, 3.0], [300, 2.0]]  # one grid: the plain mean
    # a seed that went on to step 400 (windows ending elsewhere): interpolated onto the shorter run's steps
    longer = [[120, 6.0], [240, 4.0], [360, 2.0], [400, 1.5]]
    got = mean_curve([a, longer])
    want_longer = [6.0, 6.0 - 2.0 * 80 / 120, 4.0 - 2.0 * 60 / 120]  # 100: clamped to its first window
    assert [p[0] for p in got] == [100, 200, 300]
    assert [p[1] for p in got] == pytest.approx([(x + y) / 2 for x, y in zip([3.0, 2.0, 1.0], want_longer)])


def test_workers_asking_for_more_threads_than_cores_are_warned(tmp_path):
    import os
    import subprocess
    import sys

    from vlgap.wsv.experiment import oversubscription_warning

    (tmp_path / "cells").mkdir()
    assert oversubscription_warning(tmp_path, 2, 2) is None  # this worker alone
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        (tmp_path / "cells" / "synthetic-wsv-s0.lock").write_text(str(other.pid))  # another live worker's cell
        (tmp_path / "cells" / "synthetic-oracle-s0.lock").write_text("999999999")  # a dead one's: not counted
        (tmp_path / "cells" / "text_only-s0.lock").write_text("")  # being written (no pid yet): not counted
        (tmp_path / "cells" / "synthetic-frozen_lm-s0.lock").write_text(str(os.getpid()))  # this one's
        msg = oversubscription_warning(tmp_path, 2, 2)
        assert msg is not None and msg.startswith("2 experiment workers") and "2 torch threads each on 2 cores" in msg
        assert msg.endswith("--threads 1")
        assert oversubscription_warning(tmp_path, 1, 2) is None
        assert oversubscription_warning(tmp_path, 2, 4) is None
    finally:
        other.kill()
        other.wait()
    assert oversubscription_warning(tmp_path, 2, 2) is None  # it is gone
