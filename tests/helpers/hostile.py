"""The rerun of issue 44's hostile sweep (tests/test_hostile_rerun*.py): `vlgap` run in a subprocess as a
user runs it, each case alone under a timeout, its outcome classified as the sweep classified it, and the
small inputs the cases share, built on first use in the test's own folder."""
from __future__ import annotations

import functools
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np

from vlgap.errors import VlgapError

REPOSITORY = Path(__file__).resolve().parents[2]
BAD = ("lost", "blocking", "traceback", "hang", "silent", "misleading", "other")
LIBRARY_ADVICE = ("allow_pickle", "pickled data", "weights_only", "WeightsUnpickler", "RuntimeWarning")
TIMEOUT = 300


@dataclass
class Ran:
    code: int | None
    out: str
    err: str

    @property
    def text(self) -> str:
        return " ".join((self.out + "\n" + self.err).split())  # Rich wraps lines: compare words

    @property
    def hung(self) -> bool:
        return self.code is None


def run_vlgap(args, world: "World", *, env: dict | None = None, full: Path | None = None, stdout_to_full: bool = False,
          timeout: int = TIMEOUT) -> Ran:
    """`python -m vlgap ARGS` with the test's own cache, offline. `full`: a folder made a full file system
    first (a tmpfs of one page, filled, in a mount namespace of the command's own); `stdout_to_full`:
    standard output goes to a file there."""
    cmd = [sys.executable, "-m", "vlgap", *map(str, args)]
    if full is not None:
        full.mkdir(parents=True, exist_ok=True)
        script = ('mount -t tmpfs -o size=4k none "$0" || exit 97; dd if=/dev/zero of="$0/.fill" bs=4k '
                  '2>/dev/null; ' + ('exec "$@" > "$0/stdout"' if stdout_to_full else 'exec "$@"'))
        cmd = ["unshare", "--mount", "sh", "-c", script, str(full), *cmd]
    environment = {**os.environ, "PYTHONPATH": str(REPOSITORY / "src"), "VLGAP_CACHE": str(world.root / "vlgap-cache"),
                   "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "COLUMNS": "200", **(env or {})}
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, env=environment, timeout=timeout, cwd=world.root,
                           stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as e:
        return Ran(None, str(e.stdout or ""), str(e.stderr or ""))
    return Ran(r.returncode, r.stdout, r.stderr)


@functools.cache
def can_mount() -> str | None:
    """None where a private tmpfs can be mounted (root with CAP_SYS_ADMIN), else why not."""
    if shutil.which("unshare") is None:
        return "no unshare(1) here"
    probe = subprocess.run(["unshare", "--mount", "sh", "-c", 'mount -t tmpfs none "$0"', tempfile.gettempdir()],
                           capture_output=True)  # a mount namespace of its own: nobody else sees the tmpfs
    return None if probe.returncode == 0 else "cannot mount a tmpfs here (needs root with CAP_SYS_ADMIN)"


def classify(ran: Ran, expect, codes=(2,), kind: str = "other", world: "World | None" = None) -> str:
    """clean, or what the case still is: hang, traceback, `kind` (the case's own class: a lost file, a silent
    result, a misleading message) when the expected words or exit code are not there."""
    if ran.hung:
        return "hang"
    if "Traceback (most recent call last)" in ran.err or ran.code not in (0, 1, 2):
        return "traceback"
    if any(a in ran.text for a in LIBRARY_ADVICE):
        return "misleading"
    if ran.code not in codes:
        return kind
    if callable(expect):
        return "clean" if expect(ran, world) else kind
    return "clean" if re.search(expect, ran.text) else kind


def call_api(call, words: str) -> tuple[str, str]:
    """A Python API case: (outcome, what it said). Clean when the call raises VlgapError or TypeError in one
    line matching `words` with no library advice; a result is silent, another exception a traceback."""
    try:
        call()
    except (VlgapError, TypeError) as e:
        said = str(e)
        plain = "\n" not in said and not any(a in said for a in LIBRARY_ADVICE)
        return ("clean" if re.search(words, said) and plain else "misleading"), said
    except Exception as e:  # noqa: BLE001 - what a user saw as a traceback
        return "traceback", repr(e)
    return "silent", "returned a result"


def refused_in_one_line(ran: Ran) -> bool:
    """Exit 2 and an `error:` line last on stderr (progress lines may come before it)."""
    lines = [ln for ln in ran.err.splitlines() if ln.strip()]
    return ran.code == 2 and bool(lines) and lines[-1].startswith("error: ")


class Tally:
    """Outcomes of one module's cases, by class."""

    def __init__(self):
        self.outcomes: dict[str, str] = {}

    def record(self, case_id: str, outcome: str, detail: str = "") -> None:
        self.outcomes[case_id] = outcome
        assert outcome == "clean", f"{case_id}: {outcome}\n{detail[-3000:]}"

    def counts(self) -> Counter:
        return Counter(self.outcomes.values())


# ---- inputs ------------------------------------------------------------------------------------------

RNG = np.random.default_rng(44)
X = RNG.normal(size=(60, 16))
Y = X @ RNG.normal(size=(16, 12)) + RNG.normal(size=(60, 12))
REFS = {str(i): [f"a {c} {s} moves {d}" for d in ("left", "right")]
        for i, (c, s) in enumerate((c, s) for c in ("red", "blue", "green") for s in ("circle", "square", "star"))}


DEMO = {"n_videos": 14, "n_frames_per_video": 6, "video_size": 16, "vision": ["tv"], "text": ["tt"],
        "n_frames": [1, 2], "n_captions": [1, 2], "k": 3, "n_bootstrap": 0, "n_permutations": 0, "dtype": "float32",
        "text_dtype": "float32", "temporal": False, "metric": "mutual_knn"}


class World:
    """The case's inputs under `root`, each made when first asked for."""

    def __init__(self, root: Path):
        self.root = root

    def fresh(self, name: str = "") -> Path:
        """A path under a new, empty folder of its own: an output no other case writes."""
        self._n = getattr(self, "_n", 0) + 1
        folder = self.root / f"case-{self._n}"
        folder.mkdir()
        return folder / name if name else folder

    def write(self, name: str, data) -> Path:
        p = self.root / name
        p.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(data, bytes):
            p.write_bytes(data)
        elif isinstance(data, str):
            p.write_text(data)
        elif isinstance(data, np.ndarray):
            np.save(p, data)
        else:
            p.write_text(json.dumps(data))
        return p

    def npy(self, name: str, a) -> Path:
        return self.write(name, np.asarray(a))

    @cached_property
    def refs(self) -> Path:
        return self.write("refs.json", REFS)

    @cached_property
    def pred(self) -> Path:
        return self.write("pred.json", {i: r[0].replace("moves", "goes") for i, r in REFS.items()})

    def eval_to(self, out) -> list:
        return ["caption-eval", "--pred", self.pred, "--refs", self.refs, "--metrics", "bleu", "--out", out]

    @cached_property
    def fifo(self) -> Path:
        os.mkfifo(self.root / "fifo")
        return self.root / "fifo"

    @cached_property
    def sock(self) -> Path:
        s = socket.socket(socket.AF_UNIX)
        s.bind(str(self.root / "sock"))
        s.close()
        return self.root / "sock"

    @cached_property
    def folder(self) -> Path:
        (self.root / "folder").mkdir()
        (self.root / "folder" / "keep.txt").write_text("mine")
        return self.root / "folder"

    @cached_property
    def loop(self) -> Path:
        (self.root / "loop-a").symlink_to(self.root / "loop-b")
        (self.root / "loop-b").symlink_to(self.root / "loop-a")
        return self.root / "loop-a"

    @cached_property
    def x(self) -> Path:
        return self.npy("x.npy", X)

    @cached_property
    def y(self) -> Path:
        return self.npy("y.npy", Y)

    def scaled(self, s: float) -> Path:
        return self.npy(f"x-{s:g}.npy", X * s)

    @cached_property
    def manifest(self) -> Path:
        """Two items whose videos are never opened (refused before)."""
        return self.write("m.jsonl", "".join(json.dumps({"id": i, "video": f"{i}.mp4", "captions": [f"a {i}"]})
                                             + "\n" for i in ("v1", "v2")))

    def sweep_copy(self, name: str, sweep: dict) -> Path:
        """A sweep folder copied without its dot-files (`cp dir/*`): sweep.json, no seals."""
        run = self.root / name
        run.mkdir()
        (run / "sweep.json").write_text(json.dumps(sweep))
        return run

    @cached_property
    def good_copy(self) -> Path:
        rows = [{"vision": "vis", "text": "txt", "n_f": nf, "n_c": nc, "score": 0.3 + 0.01 * nf + 0.02 * nc,
                 "ci_lo": 0.2, "ci_hi": 0.5, "p_value": None, "null_mean": None, "x_layer": 1, "y_layer": 0,
                 "x_layer_name": "", "y_layer_name": "", "n": 40, "k": 5, "chance": 5 / 39, "metric": "mutual_knn"}
                for nf in (1, 2) for nc in (1, 2)]
        return self.sweep_copy("good-copy", {"rows": rows, "config": {}, "description": "copied"})

    @cached_property
    def bad_copy(self) -> Path:
        """The good copy with one score edited into a string, and an empty scaling.json."""
        doc = json.loads((self.good_copy / "sweep.json").read_text())
        doc["rows"][0]["score"] = "x"
        run = self.sweep_copy("bad-copy", doc)
        (run / "scaling.json").write_text("{}")
        return run

    def downstream_csvs(self, scores: dict[str, list[float]], models="abcd") -> list[Path]:
        rows = "".join(f"{m},{task},{s}\n" for task, ss in scores.items() for m, s in zip(models, ss))
        s = self.write("scores.csv", "model,task,score\n" + rows)
        a = self.write("align.csv", "model,alignment\n" + "".join(f"{m},{0.1 * (i + 1)}\n" for i, m in
                                                                   enumerate(models)))
        return [s, a]

    @cached_property
    def toy(self) -> tuple[Path, Path]:
        """15 items (10 captions each; item 'v14' an unreadable video) and the toy encoders' features ('tv':
        n_f 2 and 4, 'tt': n_c 1, 2 and 10) in a cache, so that a command finds `tv` and `tt` by name."""
        from conftest import write_toy_manifest
        from toy_encoders import ToyText, ToyVision

        from vlgap.features.extract import extract

        man = write_toy_manifest(self.root / "toy", 14, n_captions=10, n_words=14, min_frames=5)
        rows = [json.loads(x) for x in man.read_text().splitlines()]
        self.write("toy/m/broken.mp4", b"\x00\x00\x00\x18ftypmp42 not a video at all" * 20)
        rows.append({"id": "v14", "video": "m/broken.mp4", "captions": rows[0]["captions"]})
        man.write_text("".join(json.dumps(r) + "\n" for r in rows))
        cache = self.root / "toy-cache"
        extract(man, "tv", n_frames=[2, 4], cache_dir=cache, loaded_encoder=ToyVision(), skip_bad=True,
                progress=False)
        extract(man, "tt", n_captions=[1, 2, 10], cache_dir=cache, loaded_encoder=ToyText(), skip_bad=True,
                progress=False)
        return man, cache

    def sweep(self, out, *extra) -> list:
        man, cache = self.toy
        return ["sweep", man, "--vision", "tv", "--text", "tt", "--n-frames", "2,4", "--n-captions", "1,2", "--k", 3,
                "--bootstrap", 0, "--permutations", 0, "--out", out, "--cache-dir", cache, *extra]


    def demo_toml(self, name: str, out, features: bool = True, **keys) -> Path:
        """A demo configuration over the toy encoders' features of the demo's shapes videos (made once)."""
        if features:
            self.demo_features
        keys = {**DEMO, "out": str(out), "cache_dir": str(self.root / "demo-cache"), **keys}
        return self.write(name, "[demo]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in keys.items()))

    @cached_property
    def demo_features(self) -> Path:
        """The demo's shapes videos (in its cache) and the toy encoders' features of them: `tv` n_f 1, 2 and
        4, `tt` n_c 1 and 2."""
        from toy_encoders import ToyText, ToyVision

        from vlgap.cli.config_file import load_config
        from vlgap.features.extract import extract
        from vlgap.probe.demo import shapes_manifest

        cfg = load_config(self.demo_toml("features.toml", self.root / "unused", features=False))
        man = shapes_manifest(cfg)
        extract(man, "tv", n_frames=[1, 2, 4], cache_dir=self.root / "demo-cache", image_size=cfg.image_size,
                loaded_encoder=ToyVision(), progress=False)
        extract(man, "tt", n_captions=[1, 2], cache_dir=self.root / "demo-cache", loaded_encoder=ToyText(),
                progress=False)
        return man
