"""The rerun of issue 44's hostile sweep, part 1: the lost write, the 8 refusals that blocked the corrected
command, and the tracebacks. Every case is the sweep's own, replayed as a user runs it: `vlgap` in a
subprocess (tests/helpers/hostile.py), alone under a timeout, offline, with its own cache; the Python API
cases are called in this process. Each outcome is classified clean / lost / blocking / traceback / hang /
silent / misleading, and every case must be clean. Part 2 (silent results and misleading messages) is
tests/test_hostile_rerun_results.py. Run: `pytest -m slow tests/test_hostile_rerun.py
tests/test_hostile_rerun_results.py` (docs/getting-started.md, "The hostile-input rerun")."""
from __future__ import annotations

import json
import os
import stat
import subprocess

import pytest
from hostile import BAD, Tally, World, X, Y, call_api, can_mount, classify, refused_in_one_line, run_vlgap

import vlgap as api

pytestmark = [pytest.mark.slow, pytest.mark.skipif(os.name != "posix", reason="POSIX special files")]
TALLY = Tally()


@pytest.fixture(scope="module")
def w(tmp_path_factory):
    world = World(tmp_path_factory.mktemp("hostile"))
    yield world
    subprocess.run(["chattr", "-R", "-i", str(world.root)], capture_output=True)  # what a case made immutable


def immutable(path) -> None:
    if subprocess.run(["chattr", "+i", str(path)], capture_output=True).returncode != 0:
        pytest.skip(f"cannot make {path.name} immutable here (chattr +i needs root and a file system that has it)")


# ---- 1 lost: an output through a special file ---------------------------------------------------------

LOST = [
    ("caption-eval --out <a device node> (a FIFO here)", "fifo",
     r"--out \S+fifo: is a named pipe \(FIFO\), expected a file"),
    ("caption-eval --out <a device node> (a UNIX socket here)", "sock", r"--out \S+sock: is a socket, expected a file"),
    ("caption-eval --out <a device node> (a folder here)", "folder", r"--out \S+folder: is a folder, expected a file"),
]


@pytest.mark.parametrize("case, node, words", LOST, ids=[c[0] for c in LOST])
def test_lost(w, case, node, words):
    path = getattr(w, node)
    before = os.lstat(path).st_mode
    ran = run_vlgap(w.eval_to(path), w)
    outcome = classify(ran, words, kind="other")
    if stat.S_IFMT(os.lstat(path).st_mode) != stat.S_IFMT(before) or (node == "folder" and not
                                                                        (path / "keep.txt").is_file()):
        outcome = "lost"
    TALLY.record(case, outcome, ran.err)


# ---- 8 refusals that blocked the corrected command ------------------------------------------------------

def _demo(name, **keys):
    return lambda w, out: ["demo", "--config", w.demo_toml(name, out, **keys), "--quiet"]


def _cape_train(modules):
    def line(w, out):
        from tiny_lm import save_tiny_qwen2

        folder = w.root / "tiny-qwen2"
        if not folder.exists():
            save_tiny_qwen2(folder, max_positions=512)
        return ["cape", "train", "--out", out, "--lm", f"hf:{folder}", "--videos", 4, "--steps", 1, "--batch-size", 4,
                "--lora-r", 4, "--lora-modules", modules]
    return line


NO_CUDA = pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="needs a machine without a CUDA GPU")
BLOCKING = [  # (the words, refused command, words of its refusal, the corrected command without --force)
    pytest.param("sweep --device cuda on a machine without one",
                 lambda w, o: w.sweep(o, "--skip-bad", "--device", "cuda"),
                 r"device 'cuda' \(--device\) is not valid here",
                 lambda w, o: w.sweep(o, "--skip-bad", "--device", "cpu"),
                 marks=NO_CUDA),
    ("sweep --n-captions 11 for items with 10", lambda w, o: w.sweep(o, "--skip-bad", "--n-captions", "1,11"),
     r"15 too few captions", lambda w, o: w.sweep(o, "--skip-bad", "--n-captions", "1,10")),
    ("sweep with a bad video", lambda w, o: w.sweep(o), r"'v14'", lambda w, o: w.sweep(o, "--skip-bad")),
    ("sweep --metric bogus", lambda w, o: w.sweep(o, "--skip-bad", "--metric", "bogus"), r"metric.*'bogus'",
     lambda w, o: w.sweep(o, "--skip-bad")),
    pytest.param('demo: device = "cuda" on a machine without one', _demo("d1.toml", device="cuda"),
                 r"device 'cuda' \(--device\) is not valid here", _demo("d1.toml", device="cpu"), marks=NO_CUDA),
    ("demo: n_captions = [1, 11] for items with fewer", _demo("d2.toml", n_captions=[1, 11]), r"n_c ?= ?11",
     _demo("d2.toml")),
    ('demo: metric = "bogus"', _demo("d3.toml", metric="bogus"), r"metric 'bogus': choose one of", _demo("d3.toml")),
    ("cape train --lora-modules bogus_proj", _cape_train("bogus_proj"),
     r"--lora-modules bogus_proj: bogus_proj is not a module of this model", _cape_train("q_proj,v_proj")),
]


@pytest.mark.parametrize("case, bad, words, fixed", BLOCKING, ids=[getattr(c, "values", c)[0] for c in BLOCKING])
def test_blocking(w, case, bad, words, fixed):
    out = w.fresh("run")
    ran = run_vlgap(bad(w, out), w)
    outcome = classify(ran, words, kind="other")
    if outcome == "clean" and not refused_in_one_line(ran):
        outcome = "other"
    if outcome == "clean":
        ran = run_vlgap(fixed(w, out), w)  # without --force
        outcome = classify(ran, lambda r, _: True, codes=(0,), kind="blocking")
        if "another configuration" in ran.text and ran.code != 0:
            outcome = "blocking"
    TALLY.record(case, outcome, ran.out + ran.err)


# ---- tracebacks: OS errors, unchecked reads, unchecked values ------------------------------------------

def _full(folder):
    return {"full": folder}


def _cape_folder(w):
    run = w.fresh("exp")
    run.mkdir()
    w.write(f"{run.parent.name}/exp/data.json", {"train_captions": "a caption", "test_prompts": ["p"]})
    return ["cape", "controls", run]


def _immutable_figures(w):
    run = _copy_of_the_good_run(w)
    (run / "figures").mkdir()
    immutable(run / "figures")
    return ["report", run]


def _prune_immutable(w):
    from vlgap import reuse

    cache = w.fresh("cache")
    cell = cache / "runs" / "cell.json"
    reuse.write_artefact(cell, b'{"score": 0.5}', {"cell": 1})
    cell.write_bytes(b'{"score": 0.9}')  # corrupt: --prune removes it, or says it could not
    immutable(cell)
    return ["cache", "--cache-dir", cache, "--prune"]


def _figures_a_file(w):
    run = _copy_of_the_good_run(w)
    (run / "figures").write_text("mine")
    return ["report", run]


def _report_html_a_folder(w):
    run = _figures_a_file(w)[1]
    (run / "figures").unlink()
    (run / "report.html").mkdir()
    return ["report", run]


def _copy_of_the_good_run(w):
    run = w.fresh("run")
    run.mkdir()
    (run / "sweep.json").write_bytes((w.good_copy / "sweep.json").read_bytes())
    return run


def _scaling_field(w):
    run = _copy_of_the_good_run(w)
    fit = {"params": {"S_inf": 0.5, "C_f": 0.1, "C_c": 0.1, "alpha": "a", "beta": 1.0}, "r2": 0.9}
    (run / "scaling.json").write_text(json.dumps({"vis|txt": fit}))
    return ["report", run]


def _section_shape(w):
    run = _copy_of_the_good_run(w)
    (run / "sections").mkdir()
    (run / "sections" / "50_x.json").write_text(json.dumps({"title": "x", "html": 5}))
    return ["report", run]


def _deep_sweep(w):
    run = _copy_of_the_good_run(w)
    (run / "sweep.json").write_text("[" * 100_000 + "]" * 100_000)
    return ["report", run]


def _toml(text, encoding="utf-8"):
    def line(w):
        p = w.fresh("demo.toml")
        p.write_bytes(text.encode(encoding))
        return ["demo", "--config", p, "--quiet"]
    return line


def _demo_runs(encoding="utf-8", **keys):
    def line(w):
        out = w.fresh("demo")
        p = w.demo_toml(f"{out.parent.name}.toml", out, **keys)
        p.write_bytes(p.read_text().encode(encoding))
        return ["demo", "--config", p, "--quiet"]
    return line


def _ran_to_a_report(ran, w) -> bool:
    return "report.html" in ran.text


DISK_FULL = "no space left on the device \\(ENOSPC\\)"
TRACEBACKS = [  # (the words, command, words, exit codes, how it runs)
    ("disk full on --out", lambda w: w.eval_to(w.root / "full-1" / "per_item.csv"),
     rf"cannot write \S+per_item.csv: {DISK_FULL}",
     (2,), _full("full-1")),
    ("disk full on --cache-dir", lambda w: ["cape", "rewrite", w.write("prompts.txt", "a red ball\na blue cube\n"),
                                            "--operator", "template", "--cache-dir", w.root / "full-2" / "cache"],
     rf"cannot write \S+full-2/cache\S*: {DISK_FULL}", (2,), _full("full-2")),
    ("disk full on a sweep's folder", lambda w: w.sweep(w.root / "full-3" / "run", "--skip-bad"),
     rf"cannot write \S+full-3/run/\S+: {DISK_FULL}", (2,), _full("full-3")),
    ("stdout to a full device", lambda w: ["encoders"], f"cannot write to standard output: {DISK_FULL}", (2,),
     {"full": "full-4", "stdout_to_full": True}),
    ("a report folder where `figures` is a file", _figures_a_file,
     r"cannot write \S+/figures/\S+: \S+/figures is a file, not a folder", (2,), {}),
    ("a report folder where `report.html` is a folder", _report_html_a_folder,
     r"cannot write \S+report.html: is a folder, expected a file", (2,), {}),
    ("an immutable `figures/`", _immutable_figures, r"cannot write \S+/figures/\S+ operation not permitted", (2,), {}),
    ("`cache --prune` on an entry it cannot delete", _prune_immutable, r"could not remove it: operation not permitted",
     (1,), {}),
    ("a symlink loop as `--out`", lambda w: w.eval_to(w.loop), r"--out \S+loop-a: a loop of symbolic links \(ELOOP\)",
     (2,), {}),
    ("`VLGAP_CACHE` naming a file", lambda w: ["cache"], r"VLGAP_CACHE=\S+: is a file, expected a folder", (2,),
     {"env": lambda w: {"VLGAP_CACHE": str(w.write("cache-file", "x"))}}),
    ("run-folder JSON without its seals: report", lambda w: ["report", w.bad_copy],
     r"sweep.json: rows/0/score: must be a number or null", (2,), {}),
    ("run-folder JSON without its seals: cross-model-figures", lambda w: ["cross-model-figures", w.bad_copy],
     r"sweep.json: rows/0/score: must be a number or null", (2,), {}),
    ("run-folder JSON without its seals: intrinsic-dim --sweep",
     lambda w: ["intrinsic-dim", w.manifest, "--vision", "vis", "--sweep", w.bad_copy],
     r"sweep.json: rows/0/score: must be a number or null", (2,), {}),
    ("run-folder JSON without its seals: report (a scaling.json field)", _scaling_field,
     r"scaling.json: vis\|txt/params/alpha: must be a number or null, got a string \('a'\)", (2,), {}),
    ("run-folder JSON without its seals: report (a section of the wrong shape)", _section_shape,
     r"sections/50_x.json: html: must be a string, got a number \(5\)", (2,), {}),
    ("run-folder JSON without its seals: report (sweep.json 100k deep)", _deep_sweep,
     r"sweep.json: JSON nested more than 100 levels deep", (2,), {}),
    ("run-folder JSON without its seals: cape controls", _cape_folder,
     r"data.json: train_captions: must be a list, got a string", (2,), {}),
    ("the demo's TOML: n_frames = 4", _demo_runs(n_frames=4), _ran_to_a_report, (0,), {}),
    ("the demo's TOML: demo = 5", _toml("demo = 5\n"), r"demo = 5: need a \[demo\] table of keys", (2,), {}),
    ("the demo's TOML: cache_dir = ['a']", _toml("[demo]\ncache_dir = ['a']\n"), r"cache_dir = \['a'\]: need a path",
     (2,), {}),
    ("the demo's TOML: seed = -1.5", _toml("[demo]\nseed = -1.5\n"), r"seed = -1.5: need a whole number", (2,), {}),
    ("the demo's TOML: a UTF-16 file", _demo_runs("utf-16"), _ran_to_a_report, (0,), {}),
    ("`downstream` without `--task` (no files)", lambda w: ["downstream"], r"^error: .*(SCORES|scores|--task)",
     (2,), {}),
    ("`downstream` without `--task` (a manifest)", lambda w: ["downstream", w.manifest],
     r"error: .*(SCORES|ALIGNMENT|--task|alignment)", (2,), {}),
    ("100k-deep JSON (RecursionError)",
     lambda w: ["caption-eval", "--pred", w.write("deep.json", "[" * 100_000 + "]" * 100_000), "--refs", w.refs,
                "--metrics", "bleu"],
     r"deep.json: JSON nested more than 100 levels deep", (2,), {}),
]


@pytest.mark.parametrize("case, line, words, codes, how", TRACEBACKS, ids=[c[0] for c in TRACEBACKS])
def test_traceback(w, case, line, words, codes, how):
    if "full" in how and can_mount():
        pytest.skip(f"a full disk is a private tmpfs, and {can_mount()}")
    env = how["env"](w) if "env" in how else None
    ran = run_vlgap(line(w), w, env=env, full=w.root / how["full"] if "full" in how else None,
                stdout_to_full=how.get("stdout_to_full", False))
    outcome = classify(ran, words, codes=codes, kind="other", world=w)
    if outcome == "clean" and codes == (2,) and not refused_in_one_line(ran):
        outcome = "other"
    TALLY.record(case, outcome, ran.out + ran.err)


API_TRACEBACKS = [  # (the words, call, words naming the argument)
    ("layer_search(None)", lambda: api.layer_search(None, [Y]), r"^xs: expected a list of \[N, D\] arrays.*got None$"),
    ("layer_search(dict)", lambda: api.layer_search({"a": X}, [Y]), r"^xs: expected .*got a dict$"),
    ("layer_search(generator)", lambda: api.layer_search((x for x in [X]), [Y]), r"^xs: expected .*got a generator$"),
    ("align(k=True)", lambda: api.align(X, Y, k=True), r"^align\(\): k=True \(a bool\): expected an integer"),
]


@pytest.mark.parametrize("case, call, words", API_TRACEBACKS, ids=[c[0] for c in API_TRACEBACKS])
def test_api_traceback(case, call, words):
    outcome, said = call_api(call, words)
    TALLY.record(case, outcome, said)


def test_the_rerun_part_1_found_nothing():
    counts = TALLY.counts()
    print("hostile rerun, part 1:", dict(counts))
    assert not any(counts[c] for c in BAD), dict(counts)
