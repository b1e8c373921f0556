"""A common test over the whole CLI (issue 32, item 6), in the spirit of scikit-learn's common tests.

It walks every parameter of every command of the Typer app (so a new option is found the moment it is
added), looks up its declaration (vlgap.cli.declarations), and tries every invalid value the declaration's
constraint generates (negative, zero, huge, wrong type, not a choice, a value given twice in a list, a
missing path, a read-only one, a file for a folder and the reverse, a named pipe, a loop of symbolic links
and the full device /dev/full as an output, bytes that are not UTF-8) through the real entry point: each must exit 2
with one line naming the option, before the command's body runs and with no file written. The commands'
bodies are replaced by a stand-in, so nothing loads a model: a value the declaration lets through fails the
test instead of starting work. The other half checks that the valid samples and every default pass.
"""
from __future__ import annotations

import os
import typing
from pathlib import Path

import pytest
import typer
from in_process_cli import build_once, refused, run_cli

from vlgap.cli import app, declarations
from vlgap.cli.constraints import READ_ONLY, Flag


def walk(command=None, path: tuple[str, ...] = ()) -> dict[str, object]:
    """Every leaf command of the app by its path as typed ("cape rewrite")."""
    command = typer.main.get_command(app) if command is None else command
    subs = getattr(command, "commands", None)
    if not subs:
        return {" ".join(path): command}
    found = {}
    for name, sub in subs.items():
        found.update(walk(sub, path + (name,)))
    return found


COMMANDS = walk()
PARAMS = [(path, p.name) for path, cmd in sorted(COMMANDS.items()) for p in cmd.params
          if not isinstance(declarations.declaration(path, p.name), (Flag, type(None)))]


class Reached(Exception):
    """The command's body was called: every value passed its declaration."""


@pytest.fixture
def cli(monkeypatch, tmp_path):
    """The entry point, built once, bodies replaced by `Reached`, run in an empty working folder; a folder
    named READ_ONLY that vlgap.paths sees as unwritable (os.access, so that root is refused too)."""
    build_once(monkeypatch)

    def body(callback, args, kwargs):
        raise Reached(kwargs)

    monkeypatch.setattr(declarations, "_call_body", body)
    real = os.access
    monkeypatch.setattr(os, "access", lambda p, mode, *a, **k: False if Path(p).name == READ_ONLY and mode & os.W_OK
                        else real(p, mode, *a, **k))
    inputs, work = tmp_path / "inputs", tmp_path / "work"
    inputs.mkdir()
    work.mkdir()
    monkeypatch.chdir(work)
    return inputs, work


def _param(path: str, name: str):
    return next(p for p in COMMANDS[path].params if p.name == name)


def _is_argument(p) -> bool:
    return getattr(p, "param_type_name", "") == "argument"


def command_line(path: str, inputs: Path, name: str | None = None, value: str | None = None) -> list[str]:
    """`path`'s command line: every required parameter at a valid sample of its declaration, and parameter
    `name` (if given) at `value`."""
    args, options = path.split(), []
    params = COMMANDS[path].params
    # an optional argument before the one tried is given too, so that the value lands in its place
    last = max((i for i, p in enumerate(params) if p.name == name and _is_argument(p)), default=-1)
    for i, p in enumerate(params):
        decl = declarations.declaration(path, p.name)
        if p.name == name:
            v = value
        elif p.required or (_is_argument(p) and i < last):
            v = decl.valid(inputs)
        else:
            continue
        if _is_argument(p):
            args.append(v)
        else:
            options += [declarations.label(p), v]
    return args + options


def _snapshot(*folders: Path) -> set[str]:
    return {str(p) for f in folders for p in f.rglob("*")}


# ---- every option has one declaration, of its type ---------------------------------------------------

def test_every_option_of_every_command_is_declared():
    assert declarations.undeclared(COMMANDS) == []
    assert len(COMMANDS) >= 37 and len(PARAMS) >= 300


def test_an_undeclared_option_is_found(monkeypatch):
    """The check fails on a new command or option without a declaration (here: a fake command on the app)."""
    fake = typer.Typer()

    @fake.command("frobnicate")
    def frobnicate(widgets: int = typer.Option(3, "--widgets"), seed: int = typer.Option(0, "--seed")):
        """A command nobody declared."""

    monkeypatch.setattr(app, "registered_commands", [*app.registered_commands, *fake.registered_commands])
    assert declarations.undeclared(walk()) == ["frobnicate widgets"]  # --seed is SHARED: declared once


def _annotation(p):
    ann = getattr(getattr(p, "type_descriptor", None), "annotation", None)
    return typing.get_origin(ann) or ann


@pytest.mark.parametrize("path", sorted(COMMANDS))
def test_each_declaration_fits_its_option(path):
    wrong = []
    for p in COMMANDS[path].params:
        decl = declarations.declaration(path, p.name)
        ann = _annotation(p)
        if ann is not None and not any(ann is t or (isinstance(ann, type) and issubclass(ann, t)) for t in decl.types):
            wrong.append(f"{path} {p.name}: {type(decl).__name__} declares {decl.types}, the option is {ann}")
    assert wrong == []


@pytest.mark.parametrize("path", sorted(p for p in COMMANDS if any(q.name == "out" for q in COMMANDS[p].params)))
def test_out_is_declared_as_its_help_says(path, tmp_path):
    """--out's help says "file" or "folder" (tests/test_cli_vocabulary.py); its declaration checks that kind."""
    import re

    p = _param(path, "out")
    decl = declarations.declaration(path, "out")
    said = re.search(r"\b(file|folder)\b", p.help or "", re.I).group(1).lower()
    kind = decl.kind("x", {"kind": "shapes"}) if callable(decl.kind) else decl.kind
    assert kind == said, f"vlgap {path} --out: help says {said}, declared {kind}"


# ---- every invalid value is refused at the door -----------------------------------------------------

@pytest.mark.parametrize("path, name", PARAMS, ids=[f"{p}:{n}" for p, n in PARAMS])
def test_invalid_values_are_refused_with_one_line_naming_the_option(cli, capsys, path, name):
    inputs, work = cli
    p = _param(path, name)
    decl = declarations.declaration(path, name)
    cases = [(kind, value, command_line(path, inputs, name, value)) for kind, value in decl.invalid(inputs)]
    before = _snapshot(inputs, work)  # the samples are written: what follows must write nothing
    for kind, value, line in cases:
        err = refused(capsys, *line)
        assert declarations.label(p) in err, f"vlgap {path} {declarations.label(p)} {value!r} ({kind}): {err}"
    assert _snapshot(inputs, work) == before, f"vlgap {path} wrote a file while refusing {name}"


@pytest.mark.parametrize("path", sorted(COMMANDS))
def test_valid_samples_and_defaults_pass(cli, monkeypatch, capsys, path):
    """The required parameters at their valid samples, the others at their defaults: the body is reached."""
    inputs, work = cli
    with pytest.raises(Reached):
        run_cli(monkeypatch, capsys, *command_line(path, inputs))
    assert list(work.iterdir()) == []


def test_a_value_the_declaration_lets_through_would_fail_this_test(cli, monkeypatch, capsys):
    """The harness itself: a declaration that refuses nothing is caught (the body is reached, not exit 2)."""
    inputs, _ = cli
    monkeypatch.setitem(declarations.COMMANDS["gap"], "alpha", declarations.Text())
    with pytest.raises(Reached):
        refused(capsys, *command_line("gap", inputs, "alpha", "2"))


def test_wrong_types_and_bad_choices_are_one_line(cli, capsys):
    inputs, _ = cli
    line = command_line("gap", inputs, "top_k", "abc")
    assert "Invalid value for '--top-k'" in refused(capsys, *line)
    err = refused(capsys, *command_line("sweep", inputs, "metric", "bogus"))
    assert "--metric 'bogus': choose one of mutual_knn" in err


def test_a_refused_sweep_leaves_no_run_folder(cli, capsys):
    """Issue 32: `sweep --metric bogus` wrote run_config.json before refusing, so the corrected command
    was refused as another configuration."""
    inputs, work = cli
    for option, value in (("metric", "bogus"), ("preset", "foo"), ("text_pooling", "cls")):
        refused(capsys, *command_line("sweep", inputs, option, value))
    assert not (work / "runs").exists()


def test_every_kind_of_invalid_value_is_tried_somewhere(tmp_path):
    kinds = {kind for path, name in PARAMS for kind, _ in declarations.declaration(path, name).invalid(tmp_path)}
    assert {"negative", "zero", "huge", "wrong type", "not a choice", "missing path", "read-only path",
            "a file for a folder", "a folder for a file", "not UTF-8", "empty", "repeated", "special file",
            "symlink loop", "full device", "empty path"} <= kinds
