"""The documentation's examples are executed, so the docs cannot drift from the API and the CLI.

Every page of the documentation site (the .md files under docs/, in the order of mkdocs.yml's nav, then
any other page) and README.md (last: its front-page examples repeat the pages') are read as one document.
Every fenced ```python block runs (exec, fresh namespace) and every line of every fenced ```bash / ```sh /
```shell block runs through the real CLI (`vlgap.cli` app, in process), in that order, in one working
folder that holds small generated files under the names the docs use (X.safetensors, captions_a.txt,
results.json, official VATEX / MSR-VTT / MSVD annotation layouts, ...). One pytest case per Python block
and per shell line; a case first runs the units before it that it has not run yet (later lines use what
earlier ones wrote, as a reader would), so any case also runs alone. A block or line that repeats an
earlier one word for word (the README's examples are copies of the pages') is the same example: its
case passes or fails with the first.

Fences of other kinds (```text, a bare ```) are reference text: they are not run, but every `vlgap`
command line in them is checked like the rest. The commands run as written except for the sizes in
SUBSTITUTIONS (applied by regex) and SIZE_PATCHES; the lines in SKIPS need what a test machine lacks and
are reported as pytest skips with the reason. Every other line must exit 0. Further tests check that
every `vlgap <command> --flag` named anywhere (prose, reference blocks) names an existing command and
option, that mkdocs.yml's nav lists every page, that the API reference documents every public name of
`vlgap._API`, that the README's links resolve, and that `mkdocs build --strict` passes (where mkdocs
is installed: `make setup` installs the docs extra).
"""
from __future__ import annotations

import csv
import fnmatch
import importlib
import importlib.util
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import traceback
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest
import yaml
from typer.testing import CliRunner

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
README = ROOT / "README.md"
MKDOCS_YML = ROOT / "mkdocs.yml"

# Sizes only: (pattern, replacement, why). Flags, files, encoders and API names stay as written.
SUBSTITUTIONS: list[tuple[str, str, str]] = [
    (r"--n 1024\b", "--n 12", "12 shapes videos instead of 1,024 (the paper's N)"),
    (r"--bootstrap 1000\b", "--bootstrap 20", "20 bootstrap resamples instead of 1,000"),
    (r"--permutations 1000\b", "--permutations 20", "20 permutations instead of 1,000"),
    (r"\bn_bootstrap=1000\b", "n_bootstrap=20", "20 bootstrap resamples instead of 1,000"),
    (r"\bn_permutations=1000\b", "n_permutations=20", "20 permutations instead of 1,000"),
    (r"^(vlgap sweep (?!.*--bootstrap).*)$", r"\1 --bootstrap 5 --permutations 20",
     "the sweep's default 200 bootstrap resamples / permutations per cell -> 5 / 20 (32 cells, 2 CPU cores)"),
    (r"^(vlgap fit-scaling (?!.*--bootstrap).*)$", r"\1 --bootstrap 20",
     "fit-scaling's default 1,000 bootstrap refits per encoder pair -> 20"),
]
# The same for defaults that no flag reaches: (module, attribute, value, why), set while the examples run.
SIZE_PATCHES: list[tuple[str, str, object, str]] = [
    ("vlgap.probe.sweep", "FIT_BOOTSTRAP", 10, "the sweep's 300 bootstrap refits of the law per encoder pair -> 10"),
]

# Lines that cannot run on a test machine: (pattern, reason). Kept short; each must match a line of the docs.
SKIPS: list[tuple[str, str]] = [
    (r"^make demo\b", "the full demo (~5 min on 2 cores); its steps run below as make-data / extract / sweep / report"),
    (r"^make test\b", "the test suite itself"),
    (r"^make docs\b", "builds this site: test_mkdocs_build_strict runs the same build"),
    (r"--device cuda\b", "needs a CUDA GPU"),
    (r"hf-video:MCG-NJU/", "a model hub id: nothing is downloaded in tests, and no video model ships offline"),
    (r"--clip (hf:openai/|pacs:)", "a CLIP hub id or a PAC-S checkpoint: nothing is downloaded in tests, and no CLIP "
     "weights ship offline (tests/test_captions_embedding.py runs these paths on random-weight CLIPs)"),
    (r"^vlgap wsv (train|caption|eval|gap|invert|demo|experiment)\b",
     "trains the WSV captioner or reads a trained one (minutes to an hour on 2 cores); tests/test_wsv.py runs "
     "caption / eval / gap through the CLI on a tiny trained model, tests/test_wsv_inversion.py invert"),
    (r"^vlgap cape (train|demo|experiment|export)\b|^vlgap cape rewrite .*--operator pe\b",
     "LoRA fine-tuning of SmolLM2 or the experiment (tens of minutes on 2 cores); tests/test_cape.py runs SFT, "
     "rewrite and the analysis on a tiny random-weight model"),
]

# Ray Data needs pyarrow, which `ray[default]` does not bring: skipped (with this reason) where it is missing.
if importlib.util.find_spec("pyarrow") is None:
    SKIPS.append((r"(?m)^import ray\.data$", "Ray Data needs pyarrow (pip install 'ray[data]'); tests/test_distributed_udf.py "
                  "runs EncoderUDF without Ray Data"))

SHELL_LANGS = {"bash", "sh", "shell", "console"}


# ---- the pages, in reading order --------------------------------------------------------------------
def _mkdocs_config() -> dict:
    return yaml.safe_load(MKDOCS_YML.read_text(encoding="utf-8"))


def _nav_files(nav) -> list[str]:
    """Every page named in a mkdocs nav (nested sections included), in order, as docs/-relative paths."""
    out: list[str] = []
    for entry in nav:
        value = next(iter(entry.values())) if isinstance(entry, dict) else entry
        if isinstance(value, list):
            out += _nav_files(value)
        elif isinstance(value, str) and not re.match(r"^[a-z]+://", value):
            out.append(value)
    return out


def _excluded(rel: str, config: dict) -> bool:
    """mkdocs' exclude_docs (gitignore-style lines; the simple forms used here: a name, /path, globs)."""
    for pat in (config.get("exclude_docs") or "").split("\n"):
        pat = pat.strip()
        if pat and not pat.startswith("#"):
            anchored = pat.startswith("/")
            pat = pat.lstrip("/")
            if fnmatch.fnmatch(rel, pat) or (not anchored and fnmatch.fnmatch(Path(rel).name, pat)):
                return True
    return False


def doc_pages() -> list[Path]:
    """The site's pages (nav order, then any page the nav lacks, so that its examples still run), then README."""
    config = _mkdocs_config()
    nav = [p for p in _nav_files(config.get("nav") or []) if (DOCS / p).is_file()]
    rest = sorted(p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md"))
    pages = nav + [p for p in rest if p not in nav and not _excluded(p, config)]
    return [DOCS / p for p in pages] + [README]


def _page_name(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


@dataclass
class Unit:
    """One thing to run: a whole Python block or one shell line (or, for kind "text", a line only checked)."""
    kind: str  # "python" | "shell" | "text"
    source: str  # as written on the page
    page: str  # path relative to the repository root
    line: int  # 1-based line on the page
    section: str
    id: str = ""
    skip: str | None = None
    run_source: str = ""  # after SUBSTITUTIONS
    substituted: list[str] = field(default_factory=list)
    same_as: int | None = None  # index of the earlier unit this one repeats word for word

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:24].strip("-") or "top"


def _substitute(text: str) -> tuple[str, list[str]]:
    done = []
    for pat, rep, why in SUBSTITUTIONS:
        new = re.sub(pat, rep, text, flags=re.M)
        if new != text:
            done.append(why)
            text = new
    return text, done


def _command_lines(body: list[str], first_line: int):
    """(line, command) per command of a shell or text block: `\\` continuations joined, comments skipped."""
    joined, first = "", None
    for off, ln in enumerate(body, first_line):
        first = first or off
        if ln.rstrip().endswith("\\"):
            joined += ln.rstrip()[:-1] + " "
            continue
        cmd = (joined + ln).strip()
        joined = ""
        if cmd and not cmd.startswith("#"):
            yield first, cmd
        first = None


def parse_page(text: str, page: str) -> list[Unit]:
    units: list[Unit] = []
    section, lang, start, body, indent = "top", None, 0, [], ""
    for no, raw in enumerate(text.splitlines(), 1):
        fence = re.match(r"^(\s*)```\s*([\w+-]*)", raw)
        if lang is None and fence:
            indent, lang, start, body = fence.group(1), (fence.group(2) or "text").lower(), no, []
            continue
        if lang is not None and raw.strip().startswith("```"):
            if lang == "python":
                units.append(Unit("python", "\n".join(body), page, start + 1, section))
            else:
                kind = "shell" if lang in SHELL_LANGS else "text"
                units += [Unit(kind, cmd, page, line, section) for line, cmd in _command_lines(body, start + 1)]
            lang = None
            continue
        if lang is not None:
            body.append(raw[len(indent):] if raw.startswith(indent) else raw)
        elif raw.startswith("#"):
            section = raw.lstrip("#").strip()
    assert lang is None, f"{page}: unclosed code fence opened at line {start}"
    return units


def collect_units() -> list[Unit]:
    units: list[Unit] = []
    for path in doc_pages():
        units += parse_page(path.read_text(encoding="utf-8"), _page_name(path))
    seen: dict[str, int] = {}
    for u in units:
        base = f"{_slug(Path(u.page).with_suffix('').as_posix())}-{_slug(u.section)}-{u.kind}"
        seen[base] = seen.get(base, 0) + 1
        u.id = f"{base}{seen[base]}-L{u.line}"
        u.skip = next((why for pat, why in SKIPS if re.search(pat, u.source)), None)
        u.run_source, u.substituted = _substitute(u.source)
    return units


def _runnable(units: list[Unit]) -> list[Unit]:
    """The units that run (not reference text), each repetition pointing at the first of its words."""
    runnable = [u for u in units if u.kind != "text"]
    first: dict[tuple[str, str], int] = {}
    for i, u in enumerate(runnable):
        u.same_as = first.get((u.kind, u.source))
        first.setdefault((u.kind, u.source), i)
    return runnable


ALL_UNITS = collect_units()
UNITS = _runnable(ALL_UNITS)  # what runs


# ---- the working folder: small files under the names the docs use --------------------------------------
def _write_inputs(root: Path) -> None:
    from safetensors.numpy import save_file
    from test_importers import lay_out_import_sources

    from conftest import write_video
    from vlgap.data.shapes import sample_spec, write_captions

    # Feature files for `vlgap align X.safetensors Y.npz`: two related "models", 60 items.
    rng = np.random.default_rng(0)
    z = rng.normal(size=(60, 6))
    save_file({"layer_0": (z @ rng.normal(size=(6, 32))).astype(np.float32),
               "layer_1": (z @ rng.normal(size=(6, 32)) + rng.normal(size=(60, 32))).astype(np.float32)},
              str(root / "X.safetensors"))
    np.savez(root / "Y.npz", (z @ rng.normal(size=(6, 24)) + 0.5 * rng.normal(size=(60, 24))).astype(np.float32))

    # Captions of generated scenes: two styles for `vlgap gap`, coco files for `vlgap caption-eval`.
    caps = [write_captions(sample_spec(np.random.default_rng(i)), i) for i in range(40)]
    (root / "captions_a.txt").write_text("".join(c[8] + "\n" for c in caps[:20]))
    (root / "captions_b.txt").write_text("".join(c[9] + "\n" for c in caps[20:]))
    (root / "prompts.txt").write_text("".join(c[3] + "\n" for c in caps[:6]))  # `vlgap cape rewrite` input
    refs = {"annotations": [{"image_id": i, "id": 10 * i + j, "caption": c[j]} for i, c in enumerate(caps)
                            for j in range(5)],
            "images": [{"id": i} for i in range(len(caps))]}
    for name in ("captions_val.json", "refs.json"):
        (root / name).write_text(json.dumps(refs))
    for name, col in (("results.json", 5), ("sysA.json", 6), ("sysB.json", 0)):
        (root / name).write_text(json.dumps([{"image_id": i, "caption": c[col]} for i, c in enumerate(caps)]))

    # A 2x2 design for `vlgap compare scores.csv --factorial`: item, a, b, score.
    with open(root / "scores.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["item", "a", "b", "score"])
        for i in range(24):
            for a in ("base", "tuned"):
                for b in ("short", "long"):
                    w.writerow([f"q{i}", a, b, round(0.4 + 0.1 * (a == "tuned") + 0.05 * (b == "long")
                                                     + float(rng.normal(scale=0.1)), 4)])

    # Official annotation layouts for `vlgap import` (the layout tests/test_importers.py runs the same lines on).
    lay_out_import_sources(root, write_video(root / "_clip" / "c.mp4", 16, size=16).read_bytes())


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    """The docs' working folder. Features go to a fresh cache inside it; converted models (the one-time
    GGUF dequantisation) are this test process's (tests/conftest.py links the user's conversions in)."""
    from vlgap.io_utils import cache_root

    root = tmp_path_factory.mktemp("docs")
    models = cache_root() / "models"
    models.mkdir(parents=True, exist_ok=True)
    (root / "cache").mkdir()
    (root / "cache" / "models").symlink_to(models, target_is_directory=True)
    _write_inputs(root)
    mp = pytest.MonkeyPatch()
    mp.setenv("VLGAP_CACHE", str(root / "cache"))
    for module, attr, value, _why in SIZE_PATCHES:
        mp.setattr(f"{module}.{attr}", value)
    yield root
    mp.undo()


# ---- running the units in reading order ----------------------------------------------------------
_OUTCOME: dict[int, str | None] = {}  # unit index -> None (ran fine) or the failure text


def _run_python(unit: Unit) -> None:
    if re.search(r"^import ray\b", unit.run_source, flags=re.M):
        # A real process, as for the --ray lines below: a Ray driver must not share the test session's process.
        proc = subprocess.run([sys.executable, "-c", unit.run_source], capture_output=True, text=True, timeout=900)
        if proc.returncode != 0:
            raise AssertionError(f"exit code {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
        return
    code = compile(unit.run_source, unit.where, "exec")
    exec(code, {"__name__": "__docs__"})  # noqa: S102 - the page's own example


def _run_shell(unit: Unit) -> None:
    from vlgap.cli._app import app

    argv = shlex.split(unit.run_source, comments=True)
    if not argv or argv[0] != "vlgap":
        raise AssertionError(f"not a vlgap command; run it here or add it to SKIPS with a reason: {unit.source}")
    if "--ray" in argv:
        # A real process, as a user runs it: Ray's driver owns its local cluster and may end the process
        # when that cluster fails, which must not take the test session with it.
        proc = subprocess.run([sys.executable, "-c", "from vlgap.cli import main; main()", *argv[1:]],
                              capture_output=True, text=True, timeout=900)
        if proc.returncode != 0:
            raise AssertionError(f"exit code {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
        return
    res = CliRunner().invoke(app, argv[1:])
    if res.exit_code != 0:
        detail = "".join(traceback.format_exception(res.exception)) if res.exception else ""
        raise AssertionError(f"exit code {res.exit_code}\n{res.output[-3000:]}\n{detail[-3000:]}")


def _run(i: int, root: Path) -> str | None:
    unit = UNITS[i]
    if unit.same_as is not None:
        return _run(unit.same_as, root)
    if i in _OUTCOME:
        return _OUTCOME[i]
    cwd = os.getcwd()
    os.chdir(root)
    try:
        (_run_python if unit.kind == "python" else _run_shell)(unit)
        _OUTCOME[i] = None
    except BaseException as err:  # noqa: BLE001 - recorded and re-raised by the unit's own case
        if isinstance(err, KeyboardInterrupt):
            raise
        _OUTCOME[i] = f"{type(err).__name__}: {err}\n{traceback.format_exc()[-4000:]}"
    finally:
        os.chdir(cwd)
    return _OUTCOME[i]


@pytest.mark.slow  # real bundled models (MobileNetV2, MiniLM, SmolLM2): ~1-3 min for all the docs on 2 cores
@pytest.mark.parametrize("i", range(len(UNITS)), ids=[u.id for u in UNITS])
def test_docs_example_runs(i, workdir):
    unit = UNITS[i]
    if unit.skip:
        pytest.skip(f"{unit.where} `{unit.source}`: {unit.skip}")
    earlier = [j for j in range(i) if not UNITS[j].skip and _run(j, workdir) is not None]
    failure = _run(i, workdir)
    if failure:
        note = (f"\n(earlier examples failed too: {', '.join(UNITS[j].id for j in earlier)})" if earlier else "")
        same = f"\n(it repeats {UNITS[unit.same_as].where}, which ran it)" if unit.same_as is not None else ""
        subs = f"\nrun with substitutions: {'; '.join(unit.substituted)}" if unit.substituted else ""
        pytest.fail(f"{unit.where} ({unit.section}) does not run:\n{unit.source}{subs}{same}\n{failure}{note}",
                    pytrace=False)


def test_docs_have_examples_and_the_tables_are_used():
    kinds = [u.kind for u in UNITS]
    assert kinds.count("python") >= 3 and kinds.count("shell") >= 15, kinds
    texts = "\n".join(p.read_text(encoding="utf-8") for p in doc_pages())
    for pat, why in SKIPS:
        assert any(re.search(pat, u.source) for u in UNITS), f"SKIPS entry {pat!r} ({why}) matches no line of the docs"
    for pat, rep, why in SUBSTITUTIONS:
        assert re.search(pat, texts, flags=re.M), f"SUBSTITUTIONS entry {pat!r} ({why}) matches nothing in the docs"
    for module, attr, _value, why in SIZE_PATCHES:
        assert hasattr(importlib.import_module(module), attr), f"SIZE_PATCHES {module}.{attr} ({why}) does not exist"
    # The README's quick start is the two commands, and its examples are the pages' (so they run once).
    readme = [u for u in UNITS if u.page == "README.md"]
    assert [u.source.split("#")[0].strip() for u in readme[:2]] == ["make demo", "make test"], readme[:2]


# ---- every command and flag the docs name exists -------------------------------------------------
_ENV_PREFIX = re.compile(r"^(?:\$\s+)?(?:[A-Z_][A-Z0-9_]*=\S*\s+)*")


def _named_commands() -> list[tuple[str, list[str]]]:
    """(where, argv) of every `vlgap ...` in inline code, in a shell block or on a line of a reference block."""
    found = []
    for u in ALL_UNITS:
        cmd = _ENV_PREFIX.sub("", u.source) if u.kind == "text" else u.source
        if cmd.startswith("vlgap "):
            found.append((u.where, shlex.split(cmd, comments=True)))
    for path in doc_pages():
        text = path.read_text(encoding="utf-8")
        # inline code spans (they may wrap onto the next line), fenced blocks blanked out first
        prose = re.sub(r"^\s*```.*?^\s*```", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.M | re.S)
        for m in re.finditer(r"`([^`]+)`", prose):
            cmd = re.search(r"(?:^|\s)(vlgap [a-z].*)", m.group(1), flags=re.S)
            if cmd:
                found.append((f"{_page_name(path)}:{prose.count(chr(10), 0, m.start()) + 1}", cmd.group(1).split()))
    return found


def test_every_command_and_flag_named_in_the_docs_exists():
    import typer

    from vlgap.cli._app import app

    group = typer.main.get_command(app)
    named = _named_commands()
    assert len(named) >= 20
    runner = CliRunner()
    helped: set[str] = set()
    problems = []
    for where, argv in named:
        # walk nested groups (`vlgap wsv train`): the command is the deepest name that resolves
        cmd, path, rest = group, [], argv[1:]
        while rest and hasattr(cmd, "commands") and rest[0] in cmd.commands:
            cmd, path, rest = cmd.commands[rest[0]], [*path, rest[0]], rest[1:]
        name = " ".join(path)
        if not path or (hasattr(cmd, "commands") and rest):  # typer may vendor click: duck-type groups
            choices = cmd.commands if hasattr(cmd, "commands") else group.commands
            problems.append(f"{where}: `vlgap {' '.join(argv[1:3])}` is not a command ({', '.join(sorted(choices))})")
            continue
        if name not in helped:
            res = runner.invoke(app, [*path, "--help"])
            assert res.exit_code == 0, (name, res.output)
            helped.add(name)
        opts = {o for p in cmd.params for o in (*p.opts, *p.secondary_opts)}
        for tok in rest:
            flag = tok.strip("[]").split("=")[0]
            if flag.startswith("--") and flag not in opts:
                problems.append(f"{where}: `vlgap {name}` has no option {flag}")
    assert not problems, "\n".join(problems)


# ---- the site: nav, API reference, links, the strict build ---------------------------------------
def test_nav_lists_every_page():
    config = _mkdocs_config()
    nav = _nav_files(config.get("nav") or [])
    missing = [p for p in nav if not (DOCS / p).is_file()]
    assert not missing, f"mkdocs.yml's nav names pages that do not exist: {missing}"
    pages = sorted(p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md"))
    left_out = [p for p in pages if p not in nav and not _excluded(p, config)]
    assert not left_out, f"pages under docs/ that mkdocs.yml's nav does not list (add them, or to exclude_docs): {left_out}"
    assert len(nav) == len(set(nav)), f"a page is listed twice in the nav: {nav}"


def test_api_reference_documents_every_public_name():
    import vlgap

    reference = "\n".join(p.read_text(encoding="utf-8") for p in sorted((DOCS / "api").glob("*.md")))
    documented = set(re.findall(r"^::: ([\w.]+)\s*$", reference, flags=re.M))
    headings = set(re.findall(r'^\s+heading: "vlgap\.(\w+)"', reference, flags=re.M))
    def defined_at(name: str, target: str) -> set[str]:
        """The `_API` path, and where the object is defined (a re-export may be documented there)."""
        obj = getattr(vlgap, name)
        return {target.replace(":", "."), f"{getattr(obj, '__module__', '')}.{getattr(obj, '__qualname__', '')}"}

    missing = [f"vlgap.{name} ({target})" for name, target in sorted(vlgap._API.items())
               if not defined_at(name, target) & documented or name not in headings]
    assert not missing, "public names with no entry in docs/api/*.md (`::: module.attr` with heading " \
                        f"\"vlgap.NAME\"): {', '.join(missing)}"


def test_readme_links_resolve_and_results_pages_say_what_made_them():
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 260, "the README is a front page (about 250 lines): move the detail to docs/"
    broken = []
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        path = target.split("#")[0]
        if path and not re.match(r"^[a-z]+:", path) and not (ROOT / path).exists():
            broken.append(target)
    assert not broken, f"README.md links to files that do not exist: {broken}"
    for page in sorted((DOCS / "results").glob("*.md")):
        body = page.read_text(encoding="utf-8")
        assert re.search(r"\bcommit\W{1,6}[0-9a-f]{7,40}\b", body), f"{page.name} does not name the commit that produced it"
        assert re.search(r"\b20\d\d-\d\d-\d\d\b", body), f"{page.name} does not give the date its results were made"
        assert re.search(r"`vlgap [a-z]|`make demo`|`python (benchmarks|experiments)/", body), f"{page.name} gives no command"


def _mkdocs_command() -> list[str] | None:
    if importlib.util.find_spec("mkdocs") is not None and importlib.util.find_spec("mkdocstrings_handlers") is not None:
        return [sys.executable, "-m", "mkdocs"]
    exe = os.environ.get("VLGAP_MKDOCS")  # an mkdocs executable of another environment
    return [exe] if exe and shutil.which(exe) else None


@pytest.mark.slow  # ~10 s: griffe reads the whole package
def test_mkdocs_build_strict(tmp_path):
    cmd = _mkdocs_command()
    if cmd is None:
        pytest.skip("mkdocs with mkdocstrings is not installed here: pip install -e '.[docs]' (`make setup` installs "
                    "it) or set VLGAP_MKDOCS to an mkdocs executable")
    proc = subprocess.run([*cmd, "build", "--strict", "--site-dir", str(tmp_path / "site")], cwd=ROOT,
                          capture_output=True, text=True, timeout=600, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert proc.returncode == 0, f"mkdocs build --strict failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}"
