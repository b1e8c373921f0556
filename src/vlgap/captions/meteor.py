"""METEOR 1.5 through the jar in the pycocoevalcap wheel, driven robustly.

Same command and protocol as pycocoevalcap's Meteor (`java -jar -Xmx2G meteor-1.5.jar - - -stdio -l
en -norm`; one "SCORE ||| refs ||| hyp" line per item, then one "EVAL ||| stats ..." line), so the
numbers are identical. What differs is the driving: one JVM per jar is started on first use and
kept for the process (loading the paraphrase table is the slow part), all SCORE lines of a batch are
written by one thread while another reads the answers, stderr is drained so the JVM never blocks
on it, every wait has a timeout, and a missing Java, a missing jar, a crashed or silent JVM all end
in a VlgapError instead of a hang.

The jar's per-item output is a vector of sufficient statistics (lengths, function words, matches
per module, chunks); its corpus score is computed from their sum (chunks of perfectly matched
items excepted, see `parse_statistics`). `meteor_from_statistics`
reproduces that final formula (alpha 0.85, beta 0.2, gamma 0.6, delta 0.75, module weights 1.0,
0.6, 0.8, 0.6) so bootstrap replicates need no further Java calls.
"""
from __future__ import annotations

import atexit
import os
import queue
import shutil
import subprocess
import threading
from collections import deque
from importlib import util as importlib_util
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

from vlgap.captions.io import coco_pairs
from vlgap.captions.registry import Scoring, ScoringSettings, caption_metric
from vlgap.captions.tables import MetricTable
from vlgap.errors import VlgapError
from vlgap.stats.bounds import ScoreRange

#: Meteor 1.5, language "en", task "default"
ALPHA, BETA, GAMMA, DELTA = 0.85, 0.20, 0.60, 0.75
MODULE_WEIGHTS = (1.0, 0.6, 0.8, 0.6)  # exact, stem, synonym, paraphrase
N_STATS = 4 + 4 * len(MODULE_WEIGHTS) + 3

#: environment variable naming a meteor-1.5.jar to use instead of the one in pycocoevalcap
JAR_ENV = "VLGAP_METEOR_JAR"


def find_jar(jar: str | os.PathLike | None = None) -> Path:
    """The meteor-1.5.jar to run: the argument, $VLGAP_METEOR_JAR, or the one in pycocoevalcap."""
    if jar is None:
        jar = os.environ.get(JAR_ENV)
    if jar is None:
        spec = importlib_util.find_spec("pycocoevalcap")
        if spec is None or not spec.submodule_search_locations:
            raise VlgapError("METEOR needs meteor-1.5.jar, which ships in pycocoevalcap, the meteor extra: "
                             f"pip install \"vlgap[meteor]\" (or set {JAR_ENV}=/path/to/meteor-1.5.jar), or leave "
                             "'meteor' out of metrics")
        jar = Path(list(spec.submodule_search_locations)[0]) / "meteor" / "meteor-1.5.jar"
    jar = Path(jar)
    if not jar.is_file():
        raise VlgapError(f"METEOR jar not found at {jar}: pass an existing meteor-1.5.jar (its data/ folder "
                         "with paraphrase-en.gz must sit next to it) or leave 'meteor' out of metrics")
    return jar


def find_java(java: str | None = None) -> str:
    found = shutil.which(java or "java")
    if found is None:
        raise VlgapError("METEOR needs a Java runtime, but 'java' is not on PATH: install Java 8 or newer "
                         "(e.g. apt-get install default-jre-headless) or leave 'meteor' out of metrics")
    return found


class MeteorJar:
    """A long-lived METEOR 1.5 process.

    timeout: seconds to wait for the next line of output before giving up (the first answer
    includes loading the paraphrase table, a few seconds)."""

    def __init__(self, jar: str | os.PathLike | None = None, java: str | None = None,
                 timeout: float = 120.0, memory: str = "2G"):
        self.jar = find_jar(jar)
        self.java = find_java(java)
        self.timeout = float(timeout)
        self.memory = memory
        self._lock = threading.Lock()
        self._proc: subprocess.Popen | None = None
        self._lines: queue.Queue = queue.Queue()
        self._stderr: deque = deque(maxlen=50)

    # -- process management --------------------------------------------------------------------

    def _start(self) -> None:
        cmd = [self.java, "-jar", f"-Xmx{self.memory}", self.jar.name, "-", "-", "-stdio", "-l", "en", "-norm"]
        try:
            self._proc = subprocess.Popen(cmd, cwd=self.jar.parent, stdin=subprocess.PIPE,
                                          stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        except OSError as err:
            raise VlgapError(f"could not start METEOR ({' '.join(cmd)}): {err}") from err
        self._lines = queue.Queue()
        threading.Thread(target=self._pump_stdout, args=(self._proc, self._lines), daemon=True).start()
        threading.Thread(target=self._pump_stderr, args=(self._proc,), daemon=True).start()

    @staticmethod
    def _pump_stdout(proc: subprocess.Popen, lines: queue.Queue) -> None:
        for raw in proc.stdout:
            lines.put(raw.decode("utf-8", errors="replace").strip())
        lines.put(None)  # end of output: the process died

    def _pump_stderr(self, proc: subprocess.Popen) -> None:
        for raw in proc.stderr:
            self._stderr.append(raw.decode("utf-8", errors="replace").rstrip())

    def _alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def close(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        try:
            proc.stdin.close()
        except OSError:
            pass
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def _fail(self, why: str) -> VlgapError:
        tail = "\n".join(list(self._stderr)[-5:])
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()
        return VlgapError(f"METEOR ({self.jar}) {why}" + (f"; its last messages:\n{tail}" if tail else ""))

    def _read(self) -> str:
        try:
            line = self._lines.get(timeout=self.timeout)
        except queue.Empty:
            raise self._fail(f"gave no answer within {self.timeout:g} s (raise timeout= for very long inputs)") from None
        if line is None:
            code = "?"
            if self._proc is not None:
                try:
                    code = self._proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    pass
            raise self._fail(f"stopped (exit code {code})")
        return line

    def _write_all(self, payload: bytes, errors: list) -> None:
        try:
            self._proc.stdin.write(payload)
            self._proc.stdin.flush()
        except (OSError, ValueError) as err:  # broken pipe: the reader will report the exit
            errors.append(err)

    def _exchange(self, lines: list[str], n_answers: int) -> list[str]:
        """Send lines (in a writer thread, so a full pipe cannot deadlock us) and read answers."""
        fresh = not self._alive()
        if fresh:
            self._start()
        payload = "".join(line + "\n" for line in lines).encode("utf-8")
        errors: list = []
        writer = threading.Thread(target=self._write_all, args=(payload, errors), daemon=True)
        writer.start()
        answers = []
        if fresh:  # the JVM loads its paraphrase tables before the first answer: 5-30 s of silence
            from vlgap.progress import step

            with step("starting METEOR 1.5 (Java, loads its paraphrase tables once per process)"):
                answers.append(self._read())
        answers += [self._read() for _ in range(n_answers - len(answers))]
        writer.join(timeout=self.timeout)
        return answers

    # -- scoring ---------------------------------------------------------------------------------

    @staticmethod
    def _score_line(hypothesis: str, references: Sequence[str]) -> str:
        # exactly what pycocoevalcap sends (it cleans the hypothesis, not the references)
        hypothesis = hypothesis.replace("|||", "").replace("  ", " ")
        return " ||| ".join(("SCORE", " ||| ".join(references), hypothesis))

    def statistics(self, hypotheses: Sequence[str], references: Sequence[Sequence[str]]) -> list[str]:
        """The jar's statistics line for each item (tokenised strings in)."""
        if len(hypotheses) != len(references):
            raise VlgapError(f"{len(hypotheses)} hypotheses but {len(references)} reference lists")
        for i, (h, refs) in enumerate(zip(hypotheses, references)):
            if not refs:
                raise VlgapError(f"item {i} has no reference: METEOR needs at least one")
            if any("\n" in r or "\r" in r for r in refs) or "\n" in h or "\r" in h:
                raise VlgapError(f"item {i}: METEOR input must not contain line breaks (tokenise first)")
        with self._lock:
            return self._exchange([self._score_line(h, r) for h, r in zip(hypotheses, references)], len(hypotheses))

    def evaluate(self, stats_lines: Sequence[str]) -> tuple[float, list[float]]:
        """The jar's EVAL: (corpus score from the summed statistics, per-item scores)."""
        if not stats_lines:
            raise VlgapError("METEOR needs at least one item")
        with self._lock:
            out = self._exchange(["EVAL ||| " + " ||| ".join(stats_lines)], len(stats_lines) + 1)
        try:
            values = [float(x) for x in out]
        except ValueError as err:
            raise self._fail(f"answered something that is not a score: {err}") from None
        return values[-1], values[:-1]

    def compute_score(self, gts: Mapping, res: Mapping):
        """Drop-in for pycocoevalcap.meteor.Meteor: (corpus score, per-item scores)."""
        keys, preds, refs = coco_pairs(gts, res, "METEOR")
        lines = self.statistics(preds, refs)
        return self.evaluate(lines)

    def method(self) -> str:
        return "METEOR"


_shared: dict[tuple, MeteorJar] = {}
_shared_lock = threading.Lock()


def shared_meteor(jar: str | os.PathLike | None = None, java: str | None = None, timeout: float = 120.0) -> MeteorJar:
    """The process-wide MeteorJar for this jar and java (started once, closed at exit)."""
    key = (str(find_jar(jar)), find_java(java))
    with _shared_lock:
        m = _shared.get(key)
        if m is None:
            m = _shared[key] = MeteorJar(key[0], key[1], timeout=timeout)
        m.timeout = float(timeout)
        return m


@atexit.register
def _close_shared() -> None:  # pragma: no cover - runs at interpreter exit
    for m in _shared.values():
        m.close()


def parse_statistics(stats_lines: Sequence[str]) -> np.ndarray:
    """The jar's statistics lines as a summable array (items, 23).

    The jar's aggregation (MeteorStats.addStats) skips the chunk count of an item whose words all
    match in one chunk; such items get 0 chunks here, which leaves their own score unchanged
    (fragmentation 0 either way) and makes plain column sums equal the jar's aggregate."""
    arr = np.array([[float(x) for x in line.split()] for line in stats_lines], dtype=float)
    if arr.ndim != 2 or arr.shape[1] != N_STATS:
        raise VlgapError(f"unexpected METEOR statistics: expected {N_STATS} numbers per item")
    k = len(MODULE_WEIGHTS)
    t_total = sum(arr[:, 4 + 4 * i] + arr[:, 6 + 4 * i] for i in range(k))
    r_total = sum(arr[:, 5 + 4 * i] + arr[:, 7 + 4 * i] for i in range(k))
    chunks = 4 + 4 * k
    perfect = (t_total == arr[:, 0]) & (r_total == arr[:, 1]) & (arr[:, chunks] == 1)
    arr[perfect, chunks] = 0.0
    return arr


def meteor_from_statistics(stats: np.ndarray) -> np.ndarray:
    """Meteor 1.5's score from statistics rows or summed rows (vectorised over leading axes),
    with the jar's operation order (MeteorScorer.computeMetrics)."""
    s = np.asarray(stats, dtype=float)
    tl, rl, tf, rf = s[..., 0], s[..., 1], s[..., 2], s[..., 3]
    k = len(MODULE_WEIGHTS)
    ct = [s[..., 4 + 4 * i] for i in range(k)]
    cr = [s[..., 5 + 4 * i] for i in range(k)]
    ft = [s[..., 6 + 4 * i] for i in range(k)]
    fr = [s[..., 7 + 4 * i] for i in range(k)]
    chunks, tw, rw = s[..., 4 + 4 * k], s[..., 5 + 4 * k], s[..., 6 + 4 * k]
    with np.errstate(divide="ignore", invalid="ignore"):
        twl = DELTA * (tl - tf) + (1 - DELTA) * tf
        rwl = DELTA * (rl - rf) + (1 - DELTA) * rf
        twm = np.zeros_like(tl)
        rwm = np.zeros_like(tl)
        for i, w in enumerate(MODULE_WEIGHTS):
            twm = twm + ct[i] * w * DELTA
        for i, w in enumerate(MODULE_WEIGHTS):
            rwm = rwm + cr[i] * w * DELTA
        for i, w in enumerate(MODULE_WEIGHTS):
            twm = twm + ft[i] * w * (1 - DELTA)
        for i, w in enumerate(MODULE_WEIGHTS):
            rwm = rwm + fr[i] * w * (1 - DELTA)
        precision = twm / twl
        recall = rwm / rwl
        f_mean = 1 / ((1 - ALPHA) / precision + ALPHA / recall)
        t_total = sum(ct[i] + ft[i] for i in range(k))
        r_total = sum(cr[i] + fr[i] for i in range(k))
        perfect = (t_total == tl) & (r_total == rl) & (chunks == 1)
        frag = np.where(perfect, 0.0, chunks / ((tw + rw) / 2))
        penalty = GAMMA * np.power(frag, BETA)
        score = f_mean * (1 - penalty)
    return np.where(np.isnan(score), 0.0, np.maximum(score, 0.0))


def _setup(settings: ScoringSettings) -> MeteorJar:
    return shared_meteor(settings.options.get("meteor_jar"), timeout=settings.options.get("meteor_timeout", 120.0))


@caption_metric("meteor", keys=("METEOR",), needs=("java",), setup=_setup, default=True, order=20,
                score_range=ScoreRange(0.0, 1.0, "an F-mean times one minus a fragmentation penalty"),
                summary="METEOR 1.5 through pycocoevalcap's jar (Java)")
def score_meteor(s: Scoring) -> MetricTable:
    meteor = s.resource("meteor")
    hyps, refs = s.tokens()
    lines = meteor.statistics(hyps, refs)
    corpus, per_item = meteor.evaluate(lines)
    stats = parse_statistics(lines)
    return MetricTable(["METEOR"], stats, lambda sums, m: meteor_from_statistics(sums)[..., None], [corpus],
                       {"METEOR": np.asarray(per_item)})
