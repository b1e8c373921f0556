"""The README's examples are executed, so the README cannot drift from the API and the CLI.

Every fenced ```python block of README.md runs (exec, fresh namespace) and every line of every fenced
```bash / ```sh / ```shell block runs through the real CLI (`vlgap.cli` app, in process), in README
order, in one working folder that holds small generated files under the names the README uses
(X.safetensors, captions_a.txt, results.json, official VATEX / MSR-VTT / MSVD annotation layouts, ...).
One pytest case per Python block and per shell line; a case first runs the units above it that it has
not run yet (later lines use what earlier ones wrote, as a reader would), so any case also runs alone.

The commands run as written except for the sizes in SUBSTITUTIONS (applied by regex) and SIZE_PATCHES;
the lines in SKIPS need what a test machine lacks and are reported as pytest skips with the reason.
Every other line must exit 0. A second test checks that every `vlgap <command> --flag` named anywhere
in the README (prose included) names an existing command and option.
"""
from __future__ import annotations

import csv
import importlib
import importlib.util
import json
import os
import re
import shlex
import subprocess
import sys
import traceback
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

README = Path(__file__).resolve().parent.parent / "README.md"

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

# Lines that cannot run on a test machine: (pattern, reason). Kept short; each must match a README line.
SKIPS: list[tuple[str, str]] = [
    (r"^make demo\b", "the full demo (~5 min on 2 cores); its steps run below as make-data / extract / sweep / report"),
    (r"^make test\b", "the test suite itself"),
    (r"--device cuda\b", "needs a CUDA GPU"),
    (r"hf-video:MCG-NJU/", "a model hub id: nothing is downloaded in tests, and no video model ships offline"),
    (r"--clip (hf:openai/|pacs:)", "a CLIP hub id or a PAC-S checkpoint: nothing is downloaded in tests, and no CLIP "
     "weights ship offline (tests/test_captions_embedding.py runs these paths on random-weight CLIPs)"),
    (r"^vlgap wsv (train|caption|eval|gap|demo|experiment)\b",
     "trains the WSV captioner or reads a trained one (minutes to an hour on 2 cores); tests/test_wsv.py runs "
     "caption / eval / gap through the CLI on a tiny trained model"),
    (r"^vlgap cape (train|demo|experiment|export)\b|^vlgap cape rewrite .*--operator pe\b",
     "LoRA fine-tuning of SmolLM2 or the experiment (tens of minutes on 2 cores); tests/test_cape.py runs SFT, "
     "rewrite and the analysis on a tiny random-weight model"),
]

# Ray Data needs pyarrow, which `ray[default]` does not bring: skipped (with this reason) where it is missing.
if importlib.util.find_spec("pyarrow") is None:
    SKIPS.append((r"(?m)^import ray\.data$", "Ray Data needs pyarrow (pip install 'ray[data]'); tests/test_distributed_udf.py "
                  "runs EncoderUDF without Ray Data"))

SHELL_LANGS = {"bash", "sh", "shell", "console"}


# ---- the README, parsed --------------------------------------------------------------------------
@dataclass
class Unit:
    """One thing to run: a whole Python block or one shell line."""
    kind: str  # "python" | "shell"
    source: str  # as written in the README
    line: int  # 1-based line in README.md
    section: str
    id: str = ""
    skip: str | None = None
    run_source: str = ""  # after SUBSTITUTIONS
    substituted: list[str] = field(default_factory=list)


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


def parse_readme(text: str) -> list[Unit]:
    units: list[Unit] = []
    section, lang, start, body = "top", None, 0, []
    lines = text.splitlines()
    for no, raw in enumerate(lines, 1):
        fence = re.match(r"^```\s*([\w+-]*)", raw)
        if lang is None and fence:
            lang, start, body = (fence.group(1) or "text").lower(), no, []
            continue
        if lang is not None and raw.startswith("```"):
            if lang == "python":
                units.append(Unit("python", "\n".join(body), start + 1, section))
            elif lang in SHELL_LANGS:
                joined, first = "", None
                for off, ln in enumerate(body, start + 1):
                    first = first or off
                    if ln.rstrip().endswith("\\"):
                        joined += ln.rstrip()[:-1] + " "
                        continue
                    cmd = (joined + ln).strip()
                    joined = ""
                    if cmd and not cmd.startswith("#"):
                        units.append(Unit("shell", cmd, first, section))
                    first = None
            lang = None
            continue
        if lang is not None:
            body.append(raw)
        elif raw.startswith("#"):
            section = raw.lstrip("#").strip()
    assert lang is None, f"README.md: unclosed code fence opened at line {start}"
    seen: dict[str, int] = {}
    for u in units:
        base = f"{_slug(u.section)}-{u.kind}"
        seen[base] = seen.get(base, 0) + 1
        u.id = f"{base}{seen[base]}-L{u.line}"
        u.skip = next((why for pat, why in SKIPS if re.search(pat, u.source)), None)
        u.run_source, u.substituted = _substitute(u.source)
    return units


UNITS = parse_readme(README.read_text(encoding="utf-8"))


# ---- the working folder: small files under the README's names --------------------------------------
def _write_inputs(root: Path) -> None:
    from safetensors.numpy import save_file
    from test_importers import TXT, VATEX_IDS, msrvtt_file, msvd_csv, s, v, vatex_file, videos

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

    # Official annotation layouts for `vlgap import` (writers shared with tests/test_importers.py).
    clip = write_video(root / "_clip" / "c.mp4", 16, size=16).read_bytes()
    names = ["video0", "video1", "video7010", "video7011"] + VATEX_IDS
    videos(root / "videos", [f"{n}.mp4" for n in names], clip)
    videos(root / "YouTubeClips", ["-4wsuPCjDBc_5_15.avi", "mv89psg6zh4_33_46.avi"], clip)
    vatex_file(root / "vatex_validation_v1.0.json", [{"videoID": i, "enCap": [f"caption {j} of {i}" for j in range(10)]}
                                                      for i in VATEX_IDS])  # 10 English captions, as VATEX
    # The folder every node mounts (shared/ in "Running on a cluster"): the VATEX videos.
    videos(root / "shared" / "vatex" / "videos", [f"{n}.mp4" for n in VATEX_IDS], clip)
    msrvtt_file(root / "train_val_videodatainfo.json", [v("video0", "train"), v("video1", "validate")],
                [s("video0", 0, "a man sings"), s("video1", 1, "cars race")])
    msrvtt_file(root / "test_videodatainfo.json", [v("video7010", "test"), v("video7011", "test")],
                [s("video7010", 2, "a cat jumps"), s("video7011", 3, "people dance")])
    msvd_csv(root / "MSR Video Description Corpus.csv")
    # Kinetics CSV and SSv2 JSON + labels.json (formats of tests/test_importers_labels.py)
    from test_importers_labels import K400, SSV2_LABELS, SSV2_TRAIN

    (root / "kinetics400_val.csv").write_text(K400)
    videos(root / "kinetics", ["--07WQ2iBlw.mp4", "--33Lscn6sk.mp4", "-0Ns2Ka7ZL8_000030_000040.mp4"], clip)
    (root / "something-something-v2-validation.json").write_text(json.dumps(SSV2_TRAIN))
    (root / "something-something-v2-labels.json").write_text(json.dumps(SSV2_LABELS))
    videos(root / "ssv2", [f"{e['id']}.webm" for e in SSV2_TRAIN], clip)
    (root / "AllVideoDescriptions.txt").write_text(TXT)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    """The README's working folder. Features go to a fresh cache inside it; converted models (the one-time
    GGUF dequantisation) are shared with the user's cache, whose writes are atomic."""
    from vlgap.io_utils import cache_root

    root = tmp_path_factory.mktemp("readme")
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


# ---- running the units in README order ------------------------------------------------------------
_OUTCOME: dict[int, str | None] = {}  # unit index -> None (ran fine) or the failure text


def _run_python(unit: Unit) -> None:
    if re.search(r"^import ray\b", unit.run_source, flags=re.M):
        # A real process, as for the --ray lines below: a Ray driver must not share the test session's process.
        proc = subprocess.run([sys.executable, "-c", unit.run_source], capture_output=True, text=True, timeout=900)
        if proc.returncode != 0:
            raise AssertionError(f"exit code {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
        return
    code = compile(unit.run_source, f"README.md:{unit.line}", "exec")
    exec(code, {"__name__": "__readme__"})  # noqa: S102 - the README's own example


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
    if i in _OUTCOME:
        return _OUTCOME[i]
    unit = UNITS[i]
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


@pytest.mark.slow  # real bundled models (MobileNetV2, MiniLM, SmolLM2): ~1-3 min for the whole README on 2 cores
@pytest.mark.parametrize("i", range(len(UNITS)), ids=[u.id for u in UNITS])
def test_readme_example_runs(i, workdir):
    unit = UNITS[i]
    if unit.skip:
        pytest.skip(f"README.md:{unit.line} `{unit.source}`: {unit.skip}")
    earlier = [j for j in range(i) if not UNITS[j].skip and _run(j, workdir) is not None]
    failure = _run(i, workdir)
    if failure:
        note = (f"\n(earlier README examples failed too: {', '.join(UNITS[j].id for j in earlier)})"
                if earlier else "")
        subs = f"\nrun with substitutions: {'; '.join(unit.substituted)}" if unit.substituted else ""
        pytest.fail(f"README.md:{unit.line} ({unit.section}) does not run:\n{unit.source}{subs}\n{failure}{note}",
                    pytrace=False)


def test_readme_has_examples_and_the_tables_are_used():
    kinds = [u.kind for u in UNITS]
    assert kinds.count("python") >= 3 and kinds.count("shell") >= 15, kinds
    text = README.read_text(encoding="utf-8")
    for pat, why in SKIPS:
        assert any(re.search(pat, u.source) for u in UNITS), f"SKIPS entry {pat!r} ({why}) matches no README line"
    for pat, rep, why in SUBSTITUTIONS:
        assert re.search(pat, text, flags=re.M), f"SUBSTITUTIONS entry {pat!r} ({why}) matches nothing in the README"
    for module, attr, _value, why in SIZE_PATCHES:
        assert hasattr(importlib.import_module(module), attr), f"SIZE_PATCHES {module}.{attr} ({why}) does not exist"


# ---- every command and flag the README names exists ----------------------------------------------
def _named_commands(text: str) -> list[tuple[int, list[str]]]:
    """(line, argv) of every `vlgap ...` in inline code or in a shell block, placeholders included."""
    found = []
    for u in UNITS:
        if u.kind == "shell" and u.source.startswith("vlgap "):
            found.append((u.line, shlex.split(u.source, comments=True)))
    # inline code spans (they may wrap onto the next line), fenced blocks blanked out first
    prose = re.sub(r"^```.*?^```", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.M | re.S)
    for m in re.finditer(r"`([^`]+)`", prose):
        cmd = re.search(r"(?:^|\s)(vlgap [a-z].*)", m.group(1), flags=re.S)
        if cmd:
            found.append((prose.count("\n", 0, m.start()) + 1, cmd.group(1).split()))
    return found


def test_every_command_and_flag_named_in_the_readme_exists():
    import typer

    from vlgap.cli._app import app

    group = typer.main.get_command(app)
    text = README.read_text(encoding="utf-8")
    named = _named_commands(text)
    assert len(named) >= 20
    runner = CliRunner()
    helped: set[str] = set()
    problems = []
    for no, argv in named:
        # walk nested groups (`vlgap wsv train`): the command is the deepest name that resolves
        cmd, path, rest = group, [], argv[1:]
        while rest and hasattr(cmd, "commands") and rest[0] in cmd.commands:
            cmd, path, rest = cmd.commands[rest[0]], [*path, rest[0]], rest[1:]
        name = " ".join(path)
        if not path or (hasattr(cmd, "commands") and rest):  # typer may vendor click: duck-type groups
            choices = cmd.commands if hasattr(cmd, "commands") else group.commands
            problems.append(f"README.md:{no}: `vlgap {' '.join(argv[1:3])}` is not a command "
                            f"({', '.join(sorted(choices))})")
            continue
        if name not in helped:
            res = runner.invoke(app, [*path, "--help"])
            assert res.exit_code == 0, (name, res.output)
            helped.add(name)
        opts = {o for p in cmd.params for o in (*p.opts, *p.secondary_opts)}
        for tok in rest:
            flag = tok.strip("[]").split("=")[0]
            if flag.startswith("--") and flag not in opts:
                problems.append(f"README.md:{no}: `vlgap {name}` has no option {flag}")
    assert not problems, "\n".join(problems)
