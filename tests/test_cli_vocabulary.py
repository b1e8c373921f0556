"""One CLI vocabulary (issue 31, item 5): every command and subcommand of `vlgap`, walked from the Typer app.

A known idea has one option name (SYNONYMS: the first name of each group is the only spelling); every
`--out` says whether it is a file or a folder; every command that writes takes -o/--out; every command
with --bootstrap takes --confidence, and --ci-method unless its intervals are of fixed kinds
(vlgap.cli.options.FIXED_INTERVALS); each command's --ci-method offers its own methods and refuses the
others by name; every old spelling (vlgap.cli.options.RENAMES) is refused with its new name.
"""
from __future__ import annotations

import re

import pytest
import typer
from in_process_cli import refused
from typer.testing import CliRunner

from vlgap.cli import app
from vlgap.cli.options import (CI_METHODS, COMMAND_CI_METHODS, FIXED_INTERVALS, FIXED_LEVEL, RENAMES, check_ci_method,
                               check_confidence, seed_list)
from vlgap.errors import VlgapError

#: one idea, one option name: the first of each group; the others are second spellings
SYNONYMS = {
    "--cache-dir": {"--cache", "--cache-folder", "--cache-root", "--cachedir", "--cache-path"},
    "--ci-method": {"--interval", "--ci-type", "--interval-method", "--ci-kind", "--ci"},
    "--confidence": {"--level", "--confidence-level", "--ci-level", "--cl"},
    "--seeds": {"--generator-seeds", "--seed-list", "--training-seeds", "--random-seeds", "--train-seeds"},
    "--seed": {"--random-seed", "--random-state", "--rng-seed"},
    "--lm": {"--base", "--model", "--rewriter-model", "--llm", "--base-model", "--language-model", "--with"},
    "--out": {"--output", "--out-dir", "--outdir", "--output-dir", "--run-dir", "--per-item", "--baseline-out"},
    "--workers": {"--num-workers", "--n-workers", "--jobs", "--n-jobs", "--processes", "--procs"},
    "--threads": {"--num-threads", "--n-threads", "--torch-threads"},
    "--bootstrap": {"--n-bootstrap", "--resamples", "--n-resamples", "--boot"},
    "--permutations": {"--n-permutations", "--perms", "--n-perms"},
}

#: commands that write nothing of their own choosing, so take no --out, and why
NO_OUT = {
    "align": "prints", "layer-search": "prints", "fit-scaling": "prints", "gap": "prints", "compare": "prints",
    "encoders": "prints", "wsv eval": "prints",
    "extract": "writes into the cache (--cache-dir)", "cache": "checks and prunes the cache (--cache-dir)",
    "wsv gap": "caches latents (--cache-dir), prints", "cape rewrite": "caches rewrites (--cache-dir), prints",
    "report": "writes into its RUN_DIR argument", "cross-model-figures": "writes into its RUN_DIR argument",
    "cape controls": "writes into its RUN argument",
    "models install": "installs packages into this Python, converts models into the models folder ($VLGAP_MODELS)",
}


def walk(command=None, path: tuple[str, ...] = ()) -> dict[str, object]:
    """Every leaf command of the app by its path as typed ("cape rewrite")."""
    command = typer.main.get_command(app) if command is None else command
    subs = getattr(command, "commands", None)  # a group (click's or typer's vendored one)
    if not subs:
        return {" ".join(path): command}
    found = {}
    for name, sub in subs.items():
        found.update(walk(sub, path + (name,)))
    return found


def options(command) -> list:
    return [p for p in command.params if getattr(p, "param_type_name", "") == "option"]


def names(command) -> set[str]:
    return {o for p in options(command) if not p.hidden for o in (*p.opts, *p.secondary_opts)}


COMMANDS = walk()


def second_spellings(commands: dict[str, object]) -> list[str]:
    wrong = []
    for path, command in sorted(commands.items()):
        for name in sorted(names(command)):
            for canonical, others in SYNONYMS.items():
                if name in others:
                    wrong.append(f"vlgap {path} {name}: spell it {canonical}")
            if name != "--out" and (name.endswith("-out") or name.startswith("--output")):
                wrong.append(f"vlgap {path} {name}: spell it --out")
        for p in options(command):
            if "-o" in p.opts and "--out" not in p.opts:
                wrong.append(f"vlgap {path} -o is short for {'/'.join(p.opts)}; -o is --out only")
    return wrong


def test_walk_finds_every_command():
    for path in ("align", "layer-search", "caption-eval", "sweep", "split-captions", "wsv demo", "wsv experiment",
                 "cape rewrite", "cape experiment", "cape export"):
        assert path in COMMANDS
    assert len(COMMANDS) >= 37
    assert "--cache-dir" in names(COMMANDS["cape rewrite"]) and "--ci-method" in names(COMMANDS["gap"])


def test_no_command_spells_a_known_idea_a_second_way():
    assert second_spellings(COMMANDS) == []


def test_the_check_catches_a_second_spelling():
    import click

    fake = click.Command("x", params=[click.Option(["--cache"]), click.Option(["--generator-seeds"]),
                                      click.Option(["--report-out"]), click.Option(["--output", "-o"]),
                                      click.Option(["--cache-dir"])])
    assert second_spellings({"x": fake}) == [
        "vlgap x --cache: spell it --cache-dir", "vlgap x --generator-seeds: spell it --seeds",
        "vlgap x --output: spell it --out", "vlgap x --output: spell it --out",
        "vlgap x --report-out: spell it --out", "vlgap x -o is short for --output/-o; -o is --out only"]


def _out(command):
    return next((p for p in options(command) if "--out" in p.opts), None)


@pytest.mark.parametrize("path", sorted(COMMANDS))
def test_every_writer_takes_o_out_and_says_file_or_folder(path):
    out = _out(COMMANDS[path])
    if path in NO_OUT:
        assert out is None, f"vlgap {path} takes --out: take it out of NO_OUT"
        return
    assert out is not None, f"vlgap {path}: a command that writes takes -o/--out (or say why not in NO_OUT)"
    assert "-o" in out.opts, f"vlgap {path} --out has no -o"
    assert re.search(r"\b(file|folder)\b", out.help or "", re.I), f"vlgap {path} --out: say file or folder"


@pytest.mark.parametrize("path", sorted(COMMANDS))
def test_bootstrap_comes_with_confidence_and_ci_method(path):
    have = names(COMMANDS[path])
    if "--bootstrap" not in have:
        assert path not in COMMAND_CI_METHODS and path not in FIXED_INTERVALS and path not in FIXED_LEVEL
        return
    assert "--confidence" in have, f"vlgap {path} takes --bootstrap but no --confidence"
    assert ("--ci-method" in have) == (path in COMMAND_CI_METHODS), path
    assert ("--ci-method" in have) != (path in FIXED_INTERVALS), \
        f"vlgap {path}: --ci-method, or its fixed kinds of interval in FIXED_INTERVALS (not both)"


def test_ci_methods_are_one_vocabulary():
    for path, allowed in COMMAND_CI_METHODS.items():
        assert path in COMMANDS and allowed and set(allowed) <= set(CI_METHODS), path
        ci = next(p for p in options(COMMANDS[path]) if "--ci-method" in p.opts)
        assert ci.default == allowed[0]
        assert all(m in ci.help for m in allowed)


@pytest.mark.parametrize("path, method", [(p, m) for p, a in sorted(COMMAND_CI_METHODS.items())
                                          for m in sorted(set(CI_METHODS) - set(a))])
def test_a_method_that_does_not_apply_is_refused_by_name(path, method):
    res = CliRunner().invoke(app, [*path.split(), "--ci-method", method])
    assert isinstance(res.exception, VlgapError), res.output
    use = " | ".join(COMMAND_CI_METHODS[path])
    assert str(res.exception) == f"--ci-method {method} does not apply to {path}; use {use}"


def test_ci_method_and_confidence_checks():
    assert check_ci_method("align", "simultaneous") == "simultaneous"
    with pytest.raises(VlgapError, match=r"--ci-method 'bcaa' is not an interval method .*gap takes bca \| percentile"):
        check_ci_method("gap", "bcaa")
    assert check_confidence("gap", 0.8) == 0.8
    with pytest.raises(VlgapError, match=r"--confidence 0.8 does not apply to sweep: its intervals are at 0.95 only"):
        check_confidence("sweep", 0.8)
    with pytest.raises(VlgapError, match=r"--confidence 1.0: an interval level in \(0, 1\)"):
        check_confidence("gap", 1.0)


def test_seed_lists():
    assert seed_list("0,1, 2") == [0, 1, 2]
    with pytest.raises(VlgapError, match="--seeds must be a comma-separated list of integers >= 0"):
        seed_list("0,a")
    with pytest.raises(VlgapError, match="--seeds '-1'"):
        seed_list("-1")


RENAMED = [(r, path) for r in RENAMES for path in r.commands]


@pytest.mark.parametrize("rename, path", RENAMED, ids=[f"{p} {r.old}" for r, p in RENAMED])
def test_every_old_spelling_is_refused_with_its_new_name(rename, path):
    assert path in COMMANDS, path
    have = names(COMMANDS[path])
    assert rename.old not in have and rename.new in have, (path, rename)
    value = [] if rename.flag else ["7"]
    for args in ([rename.old, *value], [f"{rename.old}={value[0]}"] if value else None):
        if args is None:
            continue
        res = CliRunner().invoke(app, [*path.split(), *args])
        assert isinstance(res.exception, VlgapError), res.output
        assert f"is now {rename.new}" in str(res.exception)
        assert str(res.exception).startswith(rename.old)


def test_old_spelling_exits_2_with_one_line_from_the_entry_point(capsys):
    assert refused(capsys, "cape", "rewrite", "p.txt", "--cache", "runs/rw") == (
        "error: --cache runs/rw is now --cache-dir runs/rw")


class Called(Exception):
    """Raised by a stand-in API function: the CLI got as far as calling it with these keywords."""


def _capture(monkeypatch, module: str, name: str, result=None):
    import importlib

    seen = {}

    def fake(*args, **kwargs):
        seen.update(kwargs, _args=args)
        if result is None:
            raise Called()
        return result

    monkeypatch.setattr(importlib.import_module(module), name, fake)
    return seen


def _inputs(monkeypatch, tmp_path):
    """The input files the commands below name, in the working folder (inputs are checked at the door)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "m.jsonl").write_text('{"id": "v1", "video": "v1.mp4", "captions": ["a"]}\n')
    (tmp_path / "p.json").write_text("[]\n")
    for name in ("a.npy", "b.npy"):
        (tmp_path / name).write_bytes(b"\x93NUMPY")


@pytest.mark.parametrize("args, module, name, result", [
    (["test-of-time", "--vision", "a", "--text", "b"], "vlgap.probe.test_of_time", "run_test_of_time", None),
    (["temporal", "m.jsonl", "--vision", "a", "--text", "b", "--no-frame-order"], "vlgap.probe.reorder",
     "run_reorder", None),
    (["cross-vision", "m.jsonl", "--vision", "a,b"], "vlgap.probe.cross_model", "run_cross_alignment", None),
    (["caption-diversity", "m.jsonl", "--vision", "a", "--text", "b"], "vlgap.probe.caption_diversity",
     "caption_diversity", None),
    (["gap", "a.npy", "b.npy"], "vlgap.stats.gap", "gap", None),
    (["wsv", "eval", "p.json", "m.jsonl"], "vlgap.wsv.api", "evaluate_predictions", None),
])
def test_confidence_reaches_the_api(monkeypatch, tmp_path, args, module, name, result):
    _inputs(monkeypatch, tmp_path)
    seen = _capture(monkeypatch, module, name, result)
    res = CliRunner().invoke(app, [*args, "--confidence", "0.8", "--json"])
    assert isinstance(res.exception, Called), res.output
    assert seen["confidence"] == 0.8


def test_new_names_reach_the_api(monkeypatch, tmp_path):
    _inputs(monkeypatch, tmp_path)
    runner = CliRunner()
    seen = _capture(monkeypatch, "vlgap.data.split_captions", "split_captions")
    assert isinstance(runner.invoke(app, ["split-captions", "m.jsonl", "-o", "s.jsonl", "--parts", "3",
                                          "--lm", "smollm2"]).exception, Called)
    assert seen["splitter"] == "lm:smollm2" and seen["_args"][1] == __import__("pathlib").Path("s.jsonl")
    runner.invoke(app, ["split-captions", "m.jsonl", "-o", "s.jsonl", "--parts", "3"])
    assert seen["splitter"] == "rule"

    seen = _capture(monkeypatch, "vlgap.features.extract", "extract")
    assert isinstance(runner.invoke(app, ["extract", "m.jsonl", "-e", "minilm", "--decode-threads", "3"]).exception,
                      Called)
    assert seen["workers"] == 3

    seen = _capture(monkeypatch, "vlgap.cape.experiment", "run_experiment")
    assert isinstance(runner.invoke(app, ["cape", "experiment", "-o", str(tmp_path / "c"), "--seeds", "0,2",
                                          "--lm", "hf:x", "--rewriter-lm", "gemma3_270m"]).exception, Called)
    cfg = seen["_args"][1]
    assert cfg.generator_seeds == (0, 2) and cfg.base == "hf:x" and cfg.rewriter_model == "gemma3_270m"

    prompts = tmp_path / "p.txt"
    prompts.write_text("a red ball\n")
    seen = _capture(monkeypatch, "vlgap.cape.operators", "get_operator")
    assert isinstance(runner.invoke(app, ["cape", "rewrite", str(prompts), "--lm", "hf:b", "--rewriter-lm", "hf:r",
                                          "--endpoint-lm", "served", "--cache-dir", "d"]).exception, Called)
    assert (seen["base"], seen["rewriter_model"], seen["model"]) == ("hf:b", "hf:r", "served")

    import torch

    monkeypatch.setattr(torch, "set_num_threads", lambda n: None)  # the demo sets the process's torch threads
    seen = _capture(monkeypatch, "vlgap.wsv.report", "run_demo")
    assert isinstance(runner.invoke(app, ["wsv", "demo", "-o", str(tmp_path / "w"), "--workers", "3"]).exception,
                      Called)
    assert seen["_args"][0] == tmp_path / "w" and seen["workers"] == 3
