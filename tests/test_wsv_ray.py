"""WSV latent generation on Ray (`--ray`): two generator actors (1 CPU each) on a local cluster, each
loading the tiny CogVideoX twin (tests/helpers/tiny_wsv_parts.py) once, make exactly the single-process
latents, also when an actor is SIGKILLed mid-clip; a driver killed mid-run leaves its written clips,
and the rerun generates only the missing captions; a worker whose pipeline files differ from the
driver's is refused with the difference named. The rerun goes through `vlgap wsv train --ray`."""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

pytest.importorskip("ray", reason="--ray needs Ray: pip install 'vlgap[ray]'")
pytest.importorskip("diffusers", reason="the tiny CogVideoX twin needs diffusers")

from tiny_wsv_parts import make_tiny_cogvideox  # noqa: E402
from vlgap.cli import app  # noqa: E402
from vlgap.errors import VlgapError  # noqa: E402
from vlgap.reuse import seal_path  # noqa: E402

HELPERS = Path(__file__).parent / "helpers"
CAPTIONS = ["a red circle moves left", "a blue square grows", "a green star on a black background",
            "a yellow heart moves up", "a big white square shrinks", "a small red star moves right"]
SEED = 0  # the seed `vlgap wsv train` generates its corpus with


@pytest.fixture(scope="module")
def ray_cluster():
    import ray

    mine = not ray.is_initialized()
    if mine:
        ray.init(num_cpus=2, include_dashboard=False, logging_level="WARNING", log_to_driver=False)
    yield ray
    if mine:
        ray.shutdown()


@pytest.fixture(scope="module")
def pipe(tmp_path_factory):
    return make_tiny_cogvideox(tmp_path_factory.mktemp("wsv_ray") / "cogvideox")


@pytest.fixture(scope="module")
def reference(pipe, tmp_path_factory):
    """The single-process latents (one torch thread, as each 1-CPU actor)."""
    import torch

    from vlgap.wsv.parts import build_parts, generated_latents

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        parts = build_parts(f"diffusers:{pipe}", n_frames=9, size=16, generator_steps=1)
        z = generated_latents(parts.generator, parts.encoder, CAPTIONS, seed=SEED,
                              cache_dir=tmp_path_factory.mktemp("single"))
    finally:
        torch.set_num_threads(before)
    return parts, z


def _npy(cache: Path) -> list[Path]:
    return sorted((cache / "wsv" / "generated").glob("*/*.npy"))


@pytest.mark.serial  # starts Ray: make test runs it alone
@pytest.mark.slow  # > 5 s on 2 cores: make test-slow (the fast suite keeps a cheaper test of the same module)
def test_ray_latents_equal_single_process_also_when_an_actor_is_killed(ray_cluster, reference, tmp_path,
                                                                       monkeypatch):
    from vlgap.wsv.parts import generated_latents

    parts, want = reference
    marker = tmp_path / "generate-killed"
    # the actor making caption 2 SIGKILLs itself after making it, before returning it: Ray restarts the
    # actor (which reloads the pipeline) and re-runs that call; every other clip is made once
    monkeypatch.setenv("VLGAP_RAY_FAULT", f"generate:2:{marker}")
    lines: list[str] = []
    got = generated_latents(parts.generator, parts.encoder, CAPTIONS, seed=SEED, cache_dir=tmp_path / "ray",
                            log=lines.append, ray="auto", ray_workers=2)
    assert marker.is_file(), "the fault did not fire"
    pid = int(marker.read_text().split("pid=")[1].split()[0])
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # that actor process is really gone
    assert got.dtype == want.dtype and np.array_equal(got, want)  # bit for bit
    assert any("6 clips on 2 Ray actors" in ln for ln in lines), lines
    assert any(ln.startswith("corpus: 6/6 latents (6 generated,") and "clips/s)" in ln for ln in lines), lines
    # the driver wrote ordinary cache files: a single-process call finds them all
    lines.clear()
    again = generated_latents(parts.generator, parts.encoder, CAPTIONS, seed=SEED, cache_dir=tmp_path / "ray",
                              log=lines.append)
    assert np.array_equal(again, want) and not any("generated" in ln for ln in lines), lines


@pytest.mark.serial  # starts Ray: make test runs it alone
@pytest.mark.slow  # > 5 s on 2 cores: make test-slow (the fast suite keeps a cheaper test of the same module)
def test_killed_driver_rerun_generates_only_the_missing_captions(ray_cluster, reference, pipe, tmp_path):
    from vlgap.wsv.parts import generated_latents

    parts, want = reference
    cache, marker = tmp_path / "cache", tmp_path / "driver-killed"
    (tmp_path / "captions.txt").write_text("\n".join(CAPTIONS) + "\n")
    env = dict(os.environ, VLGAP_RAY_FAULT=f"driver:3:{marker}",
               PYTHONPATH=os.pathsep.join([str(HELPERS), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, str(HELPERS / "run_ray_wsv.py"), str(pipe), str(tmp_path / "captions.txt"),
                           str(cache), ray_cluster.get_runtime_context().gcs_address],
                          env=env, capture_output=True, text=True, timeout=900)  # a hang guard (minutes under load)
    # an actor killed the driver right after making its 3rd clip (before returning it), then itself
    assert proc.returncode == -signal.SIGKILL, (proc.stdout[-2000:], proc.stderr[-3000:])
    assert marker.is_file() and "DONE" not in proc.stdout
    # the clips the driver received before the kill are on disk, sealed (how many: a race with the kill).
    # A kill between a clip's atomic write and its seal leaves an unsealed file, which the rerun must
    # treat as missing and make again; only the sealed ones must survive untouched.
    on_disk = _npy(cache)
    before = {p: p.stat().st_mtime_ns for p in on_disk if seal_path(p).is_file()}
    assert len(on_disk) < len(CAPTIONS), on_disk
    # the rerun, through the CLI: training on the corpus needs every caption's latent
    r = CliRunner().invoke(app, ["wsv", "train", "--out", str(tmp_path / "model"), "--corpus",
                                 str(tmp_path / "captions.txt"), "--generator", f"diffusers:{pipe}", "--n-frames", "9",
                                 "--size", "16", "--generator-steps", "1", "--system", "no_polisher", "--caption-steps",
                                 "1", "--batch-size", "3", "--cache-dir", str(cache), "--threads", "1",
                                 "--ray", "auto", "--ray-workers", "2"])
    assert r.exit_code == 0, (r.output[-3000:], r.exception)
    assert (tmp_path / "model" / "model.pt").is_file()
    after = {p: p.stat().st_mtime_ns for p in _npy(cache)}
    # only the missing captions were generated: every file sealed before the kill is untouched
    assert len(after) == len(CAPTIONS) and all(after[p] == t for p, t in before.items())
    assert all(seal_path(p).is_file() for p in after)
    lines: list[str] = []
    got = generated_latents(parts.generator, parts.encoder, CAPTIONS, seed=SEED, cache_dir=cache, log=lines.append)
    assert np.array_equal(got, want) and not any("generated" in ln for ln in lines), lines

@pytest.mark.slow  # 15-17 s (a Ray worker started and refused): make test-slow
@pytest.mark.serial  # starts Ray: make test runs it alone
def test_a_worker_with_other_pipeline_weights_is_refused(ray_cluster, pipe, tmp_path):
    """The driver fingerprints the pipeline folder it loaded; a worker that finds other files under the
    same spec (here: the folder re-saved with another seed after the driver loaded it, as a node whose
    copy differs) refuses to generate, with the difference named, and nothing is written."""
    from tiny_wsv_parts import make_tiny_cogvideox as remake

    from vlgap.wsv.parts import build_parts, folder_fingerprint, generated_latents

    folder = tmp_path / "pipe"
    shutil.copytree(pipe, folder)
    parts = build_parts(f"diffusers:{folder}", n_frames=9, size=16, generator_steps=1)
    before = folder_fingerprint(folder)
    shutil.rmtree(folder)
    remake(folder, seed=1)
    after = folder_fingerprint(folder)
    assert before != after
    with pytest.raises(VlgapError) as err:
        generated_latents(parts.generator, parts.encoder, CAPTIONS[:2], seed=SEED, cache_dir=tmp_path / "c",
                          ray="auto", ray_workers=2)
    msg = str(err.value)
    assert type(err.value) is VlgapError and "\n" not in msg
    assert msg.startswith("Ray worker ") and (f"its generator differs from the driver's (weights: driver {before!r} "
                                              f"vs worker {after!r}") in msg, msg
    assert msg.endswith(f"every worker needs the same files as the driver (diffusers:{folder})"), msg
    assert _npy(tmp_path / "c") == []
