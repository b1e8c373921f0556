"""Shared fixtures (tiny real media files written with PyAV, a cheap deterministic encoder) and the set-up
that lets several test processes share one machine (`make test` runs the fast suite on every core with
pytest-xdist; docs/getting-started.md, "The test suite"): each process its own vlgap cache, its share of
the cores, and a guard that fails a test not marked `serial` which starts Ray or a Java VM, binds a fixed
port or writes into a folder every process shares (tests/helpers/shared_machine.py)."""
from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent / "helpers"))

REPOSITORY = Path(__file__).resolve().parents[1]
_GUARD = None  # shared_machine.Guard of this process, installed by pytest_configure
_OWN_CACHE: Path | None = None


def pytest_configure(config):
    global _GUARD
    if _xdist_controller(config):
        return  # it runs no test: its workers each do what follows
    from shared_machine import Guard

    from vlgap.encoders.gguf_cache import models_dir
    from vlgap.io_utils import cache_root

    user_cache, models = cache_root(), models_dir()
    _own_cache(models)
    _threads_of_a_worker()
    temp = Path(tempfile.gettempdir()).resolve()  # a cache set to the temporary folder itself would flag tmp_path
    shared = [p for p in (REPOSITORY, user_cache, models) if not temp.is_relative_to(p.resolve())]
    _GUARD = Guard(shared=shared,
                   private=[REPOSITORY / ".pytest_cache"],
                   private_executables=[tempfile.gettempdir()])
    sys.addaudithook(_GUARD)
    _report_the_shared_jvm(_GUARD)


def _report_the_shared_jvm(guard) -> None:
    """METEOR's JVM is one per process (vlgap.captions.meteor.shared_meteor) and outlives the test that
    started it, so a later test that scores METEOR starts no process: each exchange with a JVM is reported
    to the guard as if it started one, and which test ran first does not decide which test it flags."""
    from vlgap.captions.meteor import MeteorJar

    exchange = MeteorJar._exchange

    def reported(self, *args, **kwargs):
        guard.uses(self.java, [self.java, "-jar", str(self.jar)])
        return exchange(self, *args, **kwargs)

    MeteorJar._exchange = reported


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config):
    """`-n auto` (make test): one worker per core this process may run on, counting only the cores of its CPU
    set (a container's or taskset's) and no hyperthread twins, where pytest-xdist counts the host's
    physical cores; PYTEST_XDIST_AUTO_NUM_WORKERS, when set, decides."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None
    import psutil

    from vlgap.runs.claims import available_cores

    return max(1, min(available_cores(), psutil.cpu_count(logical=False) or available_cores()))


def _xdist_controller(config) -> bool:
    return not hasattr(config, "workerinput") and getattr(config.option, "dist", "no") != "no" \
        and bool(getattr(config.option, "tx", None))


def _own_cache(user_models: Path) -> None:
    """The suite writes nothing into the user's vlgap cache: this process gets a fresh one ($VLGAP_CACHE, a
    temporary folder removed at the end; subprocesses inherit it), so two test processes never share cached
    features, runs, the tokenizer's pattern store or the models folder's hash index. The user's converted
    models ($VLGAP_MODELS, else the cache's models/; `make setup` converts the bundled SmolLM2 there) are
    linked into its models/ folder, read only, or each process would convert them again; $VLGAP_MODELS is
    unset, so the models folder is the cache's, as tests that set $VLGAP_CACHE expect, and a conversion a
    test makes stays in its own folder."""
    global _OWN_CACHE
    _OWN_CACHE = Path(tempfile.mkdtemp(prefix="vlgap-test-cache-"))
    models = _OWN_CACHE / "models"
    models.mkdir()
    if user_models.is_dir():
        for entry in user_models.iterdir():
            if entry.name.startswith("."):
                continue  # a conversion or an index being written
            if entry.is_dir():
                (models / entry.name).symlink_to(entry, target_is_directory=True)
            elif entry.is_file():
                shutil.copyfile(entry, models / entry.name)  # the hash index: copied, as this process adds to it
    os.environ["VLGAP_CACHE"] = str(_OWN_CACHE)
    os.environ.pop("VLGAP_MODELS", None)


def _threads_of_a_worker() -> None:
    """A pytest-xdist worker computes with its share of the cores (torch's intra-op threads and the BLAS
    pools: one each with 2 workers on 2 cores), not all of them: several workers each with every core
    oversubscribe the machine and run slower. A single process keeps the defaults. Tests that set threads
    restore the value they found, which is this one."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "0") or 0)
    if not os.environ.get("PYTEST_XDIST_WORKER") or workers < 2:
        return
    import torch
    from threadpoolctl import threadpool_limits

    from vlgap.runs.claims import available_cores

    share = max(1, available_cores() // workers)
    torch.set_num_threads(share)
    threadpool_limits(share)


def pytest_unconfigure(config):
    if _OWN_CACHE is not None:
        shutil.rmtree(_OWN_CACHE, ignore_errors=True)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_setup(item):
    """The guard watches a test's whole life (set-up of the fixtures it is the first to use, the call, the
    teardown of those it is the last to use), unless it is `serial` or `slow` (`make test-slow` runs one test
    at a time)."""
    if _GUARD is not None and not (item.get_closest_marker("serial") or item.get_closest_marker("slow")):
        _GUARD.start(item.nodeid)
    return (yield)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_teardown(item, nextitem):
    try:
        result = yield
    finally:
        found = _GUARD.stop() if _GUARD is not None else None
    if found:
        pytest.fail(f"{item.nodeid} {found}, so it cannot run beside other tests: mark it "
                    "@pytest.mark.serial (make test runs those alone: docs/getting-started.md, 'The test suite')",
                    pytrace=False)
    return result


def write_video(path: Path, n_frames: int, size: int = 32, fps: int = 10) -> Path:
    """An mp4 whose frame t is a flat colour encoding t, so decoded frames identify their index."""
    import av

    path.parent.mkdir(parents=True, exist_ok=True)
    with av.open(str(path), "w") as c:
        s = c.add_stream("mpeg4", rate=fps)
        s.width = s.height = size
        s.pix_fmt = "yuv420p"
        s.options = {"qscale": "2"}  # near-lossless so flat colours survive
        for t in range(n_frames):
            img = np.full((size, size, 3), min(255, 8 * t), np.uint8)  # grey level 8t: luma survives yuv420
            for p in s.encode(av.VideoFrame.from_ndarray(img, format="rgb24")):
                c.mux(p)
        for p in s.encode():
            c.mux(p)
    return path


def write_toy_manifest(root: Path, n: int, *, seed: int = 0, min_frames: int = 4, length_mod: int = 7,
                       vocab: int = 40, n_words: int = 8, n_captions: int = 3, caption_words: int = 3) -> Path:
    """`root/man.jsonl` over n tiny videos `root/m/v{i}.mp4` (min_frames + i % length_mod frames, 16 px),
    each with n_captions overlapping windows of caption_words random words "w0".."w{vocab-1}" (seeded)."""
    rows = []
    rng = np.random.default_rng(seed)
    for i in range(n):
        write_video(root / "m" / f"v{i}.mp4", min_frames + i % length_mod, size=16)
        words = [f"w{x}" for x in rng.integers(0, vocab, n_words)]
        rows.append({"id": f"v{i}", "video": f"m/v{i}.mp4",
                     "captions": [" ".join(words[j:j + caption_words]) for j in range(n_captions)]})
    man = root / "man.jsonl"
    man.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return man


@pytest.fixture
def tiny_dataset(tmp_path):
    """Six videos of different lengths, one image, one frame folder; 3 captions each."""
    from PIL import Image

    rows = []
    for i, n in enumerate([5, 12, 20, 31, 8, 16]):
        write_video(tmp_path / "media" / f"v{i}.mp4", n)
        rows.append({"id": f"v{i}", "video": f"media/v{i}.mp4",
                     "captions": [f"video {i} caption {j}" for j in range(3)]})
    Image.fromarray(np.full((40, 30, 3), 200, np.uint8)).save(tmp_path / "media" / "img.png")
    rows.append({"id": "img", "image": "media/img.png", "captions": ["a grey image", "flat grey", "nothing"]})
    frames = tmp_path / "media" / "frames"
    frames.mkdir()
    for t in range(4):
        Image.fromarray(np.full((24, 24, 3), 60 * t, np.uint8)).save(frames / f"{t:04d}.png")
    rows.append({"id": "folder", "video": "media/frames", "captions": ["dark to light", "fading", "a ramp"]})
    man = tmp_path / "manifest.jsonl"
    man.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return man


@pytest.fixture
def one_thread():
    """Compared paths encode with one torch thread (Ray's workers get one per CPU), so arrays match bit
    for bit."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
