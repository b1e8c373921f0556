"""Scale-out on Ray: extraction, row-block k-NN and sweeps equal the single-process results exactly,
also when a worker process is SIGKILLed mid-run or the driver dies and the run is resumed.

One local Ray cluster (2 CPUs) serves the whole test session; Ray must be importable (`make`
installs the `ray` extra), so a missing Ray fails here instead of skipping silently."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from vlgap.errors import VlgapError

HELPERS = Path(__file__).parent / "helpers"
PROVENANCE = {"created", "command", "ray"}  # the only record keys allowed to differ


@pytest.fixture(scope="session")
def ray_cluster():
    try:
        import ray
    except ImportError as err:  # pragma: no cover
        pytest.fail(f"Ray is not importable ({err}); `make` installs it (pip install 'vlgap[ray]')")
    ray.init(num_cpus=2, include_dashboard=False, logging_level="WARNING", log_to_driver=False)
    yield ray
    ray.shutdown()


@pytest.fixture
def small_chunks(monkeypatch):
    from vlgap.features import chunk_steps

    monkeypatch.setattr(chunk_steps, "CHUNK_FRAMES", 6)   # 2 items per chunk at n_f = 3
    monkeypatch.setattr(chunk_steps, "CHUNK_TEXTS", 3)


def _vision(man, cache, **kw):
    from vlgap.features.extract import extract

    return extract(man, "mobilenet_v2", n_frames=[1, 3], image_size=64, cache_dir=cache, threads=1, progress=False,
                   **kw)


def _assert_same(a, b):
    assert sorted(a.features) == sorted(b.features)
    for v in a.features:
        fa, fb = a.features[v], b.features[v]
        assert fa.ids == fb.ids
        assert len(fa.layers) == len(fb.layers)
        for x, y in zip(fa.layers, fb.layers):
            assert x.dtype == y.dtype and np.array_equal(x, y)  # bit for bit, same encoder/dtype/device/threads
        ra = {k: x for k, x in fa.record.items() if k not in PROVENANCE}
        rb = {k: x for k, x in fb.record.items() if k not in PROVENANCE}
        assert ra == rb


def test_no_ray_import_without_the_flag(tiny_dataset):
    code = f"""
import sys
sys.path.insert(0, {str(HELPERS)!r})
import numpy as np, vlgap
from toy_encoders import ToyVision
from typer.testing import CliRunner
from vlgap.cli import app
rng = np.random.default_rng(0)
xs = [rng.normal(size=(40, 5)) for _ in range(2)]
vlgap.layer_search(xs, xs, k=3, n_bootstrap=5, n_permutations=5)
vlgap.align(xs[0], xs[1], k=3)
vlgap.extract({str(tiny_dataset)!r}, "toy", n_frames=[2], cache_dir={str(tiny_dataset.parent / 'c')!r},
              loaded_encoder=ToyVision(), progress=False)
assert CliRunner().invoke(app, ["extract", "--help"]).exit_code == 0
print("RAY_LOADED", "ray" in sys.modules)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert "RAY_LOADED False" in out.stdout, out.stderr[-2000:]


def test_the_driver_unpickles_an_actors_answer_without_torch():
    """A Ray driver never needs torch: the encoder actor's answer (record versions, preprocessor) must
    unpickle without importing it (torch.__version__ is a TorchVersion; the preprocessor's module
    imports torch), else the driver pays torch's import between the actor's answer and its first chunk."""
    import pickle

    import torch
    from ray import cloudpickle

    from vlgap.encoders.vision import FramePreprocess
    from vlgap.features.extract import _versions

    versions = _versions()
    assert versions["torch"] == torch.__version__ and all(type(v) is str for v in versions.values())
    code = f"""
import pickle, sys
versions = pickle.loads({pickle.dumps(versions)!r})
packed = pickle.loads({pickle.dumps(cloudpickle.dumps(FramePreprocess.make(32)))!r})
print("TORCH_LOADED", "torch" in sys.modules, type(packed).__name__)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert "TORCH_LOADED False bytes" in out.stdout, out.stderr[-2000:]


def test_a_ray_driver_reaches_its_cluster_without_importing_torch(tiny_dataset, tmp_path):
    """Everything extract() does in a Ray driver before it connects (arguments, device and dtype, manifest,
    cache keys, locks) runs without torch: its import (1-4 s on 2 cores) came before the encoder actor
    was even requested, on the critical path of every --ray run (docs/cluster.md, overhead on a small
    machine). The rest of the driver's way is checked end to end by the slow test below."""
    code = f"""
import sys
import vlgap.distributed.extract as dx
def reached(job, result, **kw):
    print("TORCH_BEFORE_RAY", "torch" in sys.modules, flush=True)
    raise SystemExit(0)
dx.run_ray = reached
from vlgap.features.extract import extract
extract({str(tiny_dataset)!r}, "mobilenet_v2", n_frames=[2], cache_dir={str(tmp_path / 'c')!r}, ray="auto",
        device="cpu", dtype="float32", progress=False)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert "TORCH_BEFORE_RAY False" in out.stdout, out.stdout[-2000:] + out.stderr[-3000:]


def test_devices_parse_without_torch_where_nothing_is_checked():
    code = """
import sys
from vlgap.runtime import parse_device
print(parse_device("cpu"), parse_device(" CPU "), parse_device("cuda", check=False),
      parse_device("cuda:3", check=False), parse_device("mps", check=False), "torch" in sys.modules)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stdout.split() == ["cpu", "cpu", "cuda:0", "cuda:3", "mps", "False"], out.stderr[-2000:]


def test_a_local_cluster_started_by_vlgap_runs_its_workers_at_the_callers_niceness(monkeypatch):
    """--ray auto without a running cluster, and --ray local, start one with LOCAL_CLUSTER's settings
    (workers at niceness 0, no dashboard); a running cluster or an address is joined as it is (Ray refuses
    settings for a cluster it joins)."""
    import ray

    from vlgap.distributed import cluster

    calls = []
    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", lambda **kw: calls.append(kw))
    for running in (False, True):
        monkeypatch.setattr(cluster, "_existing_cluster", lambda _ray, running=running: running)
        cluster.connect("auto")
    cluster.connect("local")
    cluster.connect("head:6379")
    started, joined, local, address = calls
    assert started["address"] == local["address"] == "local"
    for kw in (started, local):
        assert kw["_system_config"] == {"worker_niceness": 0} and kw["include_dashboard"] is False
    assert "_system_config" not in joined and "address" not in joined  # Ray's own rule finds the cluster
    assert address["address"] == "head:6379" and "_system_config" not in address


def test_existing_cluster_follows_rays_own_rule(monkeypatch, tmp_path):
    """RAY_ADDRESS means join; with neither it nor a `ray start` cluster on this machine, start one."""
    from vlgap.distributed.cluster import _existing_cluster

    monkeypatch.setenv("RAY_ADDRESS", "127.0.0.1:6379")
    assert _existing_cluster(None) is True
    monkeypatch.delenv("RAY_ADDRESS")
    from ray._private import services

    monkeypatch.setattr(services, "find_bootstrap_address", lambda temp_dir=None: None)
    monkeypatch.setattr(services, "find_gcs_addresses", lambda: {"127.0.0.1:1234"})  # another process's cluster
    assert _existing_cluster(None) is False


def test_decoding_tasks_use_one_codec_thread(tiny_dataset, monkeypatch):
    """A decoding task holds one CPU: it decodes with one codec and one colour-conversion thread, as the
    single process's decoding threads do (FFmpeg's default, a thread per core, took the encoder actor's)."""
    from vlgap.data import video
    from vlgap.distributed import extract as ray_extract
    from vlgap.features.chunk_steps import VisionSteps

    seen = []
    real = VisionSteps.decode_one

    def spy(self, item, preprocess=None):
        seen.append(getattr(video._local, "threads", None))
        return real(self, item, preprocess)

    monkeypatch.setattr(VisionSteps, "decode_one", spy)
    from vlgap.data.manifest import read_manifest

    items = read_manifest(tiny_dataset).items[:2]
    part = ray_extract._decode._function(VisionSteps([2], 1, False), items, -1, None, None)
    assert seen == [1, 1] and part.ids[2] == [it.id for it in items]
    assert getattr(video._local, "threads", None) is None  # the worker's later tasks decide for themselves


@pytest.mark.slow  # > 5 s on 2 cores: make test-slow (the fast suite keeps a cheaper test of the same module)
@pytest.mark.serial  # a Ray cluster
def test_a_ray_drivers_whole_extraction_never_imports_torch(ray_cluster, tiny_dataset, tmp_path):
    """The driver of a Ray extraction, from its arguments to the finished store, runs without torch (its
    import would sit on the way to the encoder actor's start, or between the actor's answer and its
    first chunk); a process of its own joins the session's cluster, as `vlgap extract --ray ADDRESS` does."""
    address = ray_cluster.get_runtime_context().gcs_address
    code = f"""
import sys
from vlgap.features.extract import extract
res = extract({str(tiny_dataset)!r}, "mobilenet_v2", n_frames=[2], image_size=64, cache_dir={str(tmp_path / 'c')!r},
              ray={address!r}, ray_workers=1, threads=1, progress=False)
print("COMPUTED", res.chunks_computed, "TORCH_LOADED", "torch" in sys.modules, "torchvision" in sys.modules)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert "TORCH_LOADED False False" in out.stdout and "COMPUTED 0" not in out.stdout, out.stderr[-3000:]


@pytest.mark.serial  # starts Ray: make test runs it alone
@pytest.mark.slow  # > 5 s on 2 cores: make test-slow (the fast suite keeps a cheaper test of the same module)
def test_extraction_on_ray_equals_single_process_bitwise(ray_cluster, tiny_dataset, tmp_path, one_thread,
                                                         small_chunks, monkeypatch):
    from typer.testing import CliRunner

    from vlgap.cli import app
    from vlgap.distributed import extract as ray_extract
    from vlgap.features.extract import extract

    monkeypatch.setattr(ray_extract, "DECODE_ITEMS", 1)  # every chunk decoded in parts by several tasks

    single = _vision(tiny_dataset, tmp_path / "single")
    dist = _vision(tiny_dataset, tmp_path / "ray", ray="auto", ray_workers=2)
    assert dist.chunks_computed == dist.chunks_total == single.chunks_total == 4
    _assert_same(single, dist)
    assert dist.features[3].record["ray"]["encoder_actors"] == 2
    # each actor's first chunk was decoded while the actors loaded the model
    assert dist.features[3].record["ray"]["chunks_decoded_while_encoder_loaded"] == 2
    rec = dist.features[3].record["ray"]
    assert 0 < rec["encoder_cpu_s"] and 0 < rec["encoder_busy_s"]  # what the actors' calls cost
    # a Ray-written store is an ordinary store: a single-process call finds it complete
    again = _vision(tiny_dataset, tmp_path / "ray")
    assert again.computed == [] and again.chunks_computed == 0
    # text, through the CLI flag
    res = CliRunner().invoke(app, ["extract", str(tiny_dataset), "-e", "minilm", "--n-captions", "1,3",
                                   "--cache-dir", str(tmp_path / "ray"), "--threads", "1", "--ray", "auto",
                                   "--ray-workers", "1"])
    assert res.exit_code == 0, res.output
    # a bad item met inside a decoding task comes back as our one-line error (the CLI's exit code 2)
    bad = CliRunner().invoke(app, ["extract", str(tiny_dataset), "-e", "minilm", "--n-captions", "4", "--cache-dir",
                                   str(tmp_path / "ray"), "--ray", "auto", "--ray-workers", "1"])
    assert type(bad.exception) is VlgapError
    assert str(bad.exception) == ("item 'v0' has 3 captions but n_c=4 were requested "
                                  "(pass --skip-bad to skip and report such items)")
    from vlgap.features.extract import load_features

    text_single = extract(tiny_dataset, "minilm", n_captions=[1, 3], cache_dir=tmp_path / "single", threads=1,
                          progress=False)
    for v in (1, 3):
        fs = load_features(tiny_dataset, "minilm", "n_c", v, cache_dir=tmp_path / "ray")
        assert fs.ids == text_single.features[v].ids
        for x, y in zip(fs.layers, text_single.features[v].layers):
            assert np.array_equal(x, y)


@pytest.mark.slow  # 13 s (Ray tasks decoding on a wrong frame-count guess): make test-slow
@pytest.mark.serial  # starts Ray: make test runs it alone
def test_frames_decoded_on_a_wrong_guess_are_thrown_away(ray_cluster, tiny_dataset, tmp_path, one_thread,
                                                         small_chunks, monkeypatch):
    """If the encoder's name misleads the early decoding (here: claims a video model with 1-frame clips),
    nothing decoded early is used and the arrays are still the single-process ones."""
    from vlgap.distributed.extract import _same_sampling
    from vlgap.encoders import registry
    from vlgap.features.chunk_steps import VisionSteps

    image = VisionSteps([1, 3], 1, False)
    assert _same_sampling(image, VisionSteps([1, 3], 1, False))
    assert not _same_sampling(image, VisionSteps([1, 3], 1, True))
    assert not _same_sampling(image, VisionSteps([1, 3], 1, False, frame_order="shuffled"))
    assert not _same_sampling(VisionSteps([16], 1, False), VisionSteps([16], 32, True))  # other chunk size
    single = _vision(tiny_dataset, tmp_path / "single")
    monkeypatch.setattr(registry, "expected_shape", lambda name: {"modality": "vision", "kind": "video", "n0": 1})
    dist = _vision(tiny_dataset, tmp_path / "ray", ray="auto", ray_workers=1)
    assert dist.features[3].record["ray"]["chunks_decoded_while_encoder_loaded"] == 0
    assert dist.chunks_computed == dist.chunks_total == 4
    _assert_same(single, dist)


@pytest.mark.serial  # starts Ray: make test runs it alone
@pytest.mark.slow  # > 5 s on 2 cores: make test-slow (the fast suite keeps a cheaper test of the same module)
def test_bad_video_in_an_early_decoded_chunk_is_our_error_or_a_reported_skip(ray_cluster, tiny_dataset, tmp_path,
                                                                             one_thread, small_chunks):
    """A missing video in the first chunk (decoded while the actor loads, preprocessed after): the same
    one-line error as a single process, and with skip_bad the same features and bad-item list."""
    rows = [json.loads(line) for line in tiny_dataset.read_text().splitlines()]
    rows.insert(1, {"id": "ghost", "video": "media/ghost.mp4", "captions": ["x"]})
    man = tiny_dataset.parent / "bad.jsonl"
    man.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(VlgapError) as single_err:
        _vision(man, tmp_path / "single")
    with pytest.raises(VlgapError) as ray_err:
        _vision(man, tmp_path / "ray", ray="auto", ray_workers=1)
    assert type(ray_err.value) is VlgapError and str(ray_err.value) == str(single_err.value)
    assert "item 'ghost': media file not found" in str(ray_err.value)
    single = _vision(man, tmp_path / "single", skip_bad=True)
    dist = _vision(man, tmp_path / "ray", ray="auto", ray_workers=1, skip_bad=True)
    assert dist.features[3].record["ray"]["chunks_decoded_while_encoder_loaded"] == 1
    assert [b["id"] for b in dist.bad_items] == [b["id"] for b in single.bad_items] == ["ghost"]
    _assert_same(single, dist)


@pytest.mark.serial  # starts Ray: make test runs it alone
@pytest.mark.slow  # > 5 s on 2 cores: make test-slow (the fast suite keeps a cheaper test of the same module)
def test_worker_killed_mid_extraction_run_completes_identically(ray_cluster, tiny_dataset, tmp_path, one_thread,
                                                                small_chunks, monkeypatch):
    single = _vision(tiny_dataset, tmp_path / "single")
    enc_marker, dec_marker = tmp_path / "encode-killed", tmp_path / "decode-killed"
    # the encoder actor SIGKILLs itself after encoding chunk 1 (before writing it), and the task
    # decoding chunk 2 SIGKILLs its worker: Ray restarts the actor and re-runs both
    monkeypatch.setenv("VLGAP_RAY_FAULT", f"encode:1:{enc_marker};decode:2:{dec_marker}")
    dist = _vision(tiny_dataset, tmp_path / "ray", ray="auto", ray_workers=1)
    assert enc_marker.is_file() and dec_marker.is_file(), "the faults did not fire"
    pids = {int(m.read_text().split("pid=")[1].split()[0]) for m in (enc_marker, dec_marker)}
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)  # those processes are really gone
    assert dist.chunks_computed == dist.chunks_total == 4
    _assert_same(single, dist)


@pytest.mark.serial  # starts Ray: make test runs it alone
@pytest.mark.slow  # > 5 s on 2 cores: make test-slow (the fast suite keeps a cheaper test of the same module)
def test_killed_driver_resumes_from_the_store(ray_cluster, tiny_dataset, tmp_path, one_thread, small_chunks):
    address = ray_cluster.get_runtime_context().gcs_address
    cache = tmp_path / "ray"
    marker = tmp_path / "driver-killed"
    env = dict(os.environ, VLGAP_RAY_FAULT=f"driver:2:{marker}",
               PYTHONPATH=os.pathsep.join([str(HELPERS), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, str(HELPERS / "run_ray_extract.py"), str(tiny_dataset), str(cache),
                           address], env=env, capture_output=True, text=True, timeout=300)
    # the single encoder actor killed the driver right after writing its 2nd chunk, then itself
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-3000:]
    assert marker.is_file()
    assert not list(cache.glob("features/*/*/*/.features.safetensors.seal.json"))  # no entry finished
    chunk_dirs = sorted(cache.glob("features/*/*/*/chunks"))
    assert len(chunk_dirs) == 2  # n_f = 1 and 3
    done = [sorted(p.name for p in d.glob("*.npz")) for d in chunk_dirs]
    assert done[0] == done[1] and len(done[0]) == 2
    # a flipped byte in one of them: reported and recomputed with the missing ones, never read
    flipped = chunk_dirs[0] / done[0][0]
    data = bytearray(flipped.read_bytes())
    data[len(data) // 2] ^= 0xFF
    flipped.write_bytes(bytes(data))
    resumed = _vision(tiny_dataset, cache, ray="auto", ray_workers=1)
    assert (resumed.chunks_total, resumed.chunks_computed) == (4, 3)  # the missing chunks and the flipped one
    _assert_same(_vision(tiny_dataset, tmp_path / "single"), resumed)
    # the record lists every item's frames, also those of the chunks written before the crash
    assert len(resumed.features[3].record["sampling"]["frame_indices"]) == 8


def _exact_tie_data(rng, n, d, layers):
    # small integers in float64: every similarity is exact, so ties are real ties on any BLAS
    return [rng.integers(-2, 3, size=(n, d)).astype(np.float64) for _ in range(layers)]


@pytest.mark.serial  # starts Ray: make test runs it alone
def test_row_block_knn_equals_single_process_lists(ray_cluster, tmp_path, monkeypatch):
    from vlgap.distributed.knn import topk_neighbours as ray_topk
    from vlgap.metrics.knn import row_blocks, topk_neighbours
    from vlgap.metrics.prepare import prepare

    rng = np.random.default_rng(3)
    n = 300
    x = torch.from_numpy(_exact_tie_data(rng, n, 4, 1)[0])
    chunk = 12 * n * 40  # 40 rows per block: 8 blocks, so 8 tasks
    assert len(row_blocks(n, chunk)) == 8
    ref_ids, ref_vals = topk_neighbours(x, 15, chunk_bytes=chunk)
    sims = (x @ x.T).numpy()
    assert (np.sort(sims, axis=1)[:, -3] == np.sort(sims, axis=1)[:, -2]).sum() > 100  # ties are everywhere
    marker = tmp_path / "knn-killed"
    monkeypatch.setenv("VLGAP_RAY_FAULT", f"knn:3:{marker}")  # block 3's worker dies once
    ids, vals = ray_topk(x, 15, chunk_bytes=chunk)
    assert marker.is_file()
    assert torch.equal(ids, ref_ids) and torch.equal(vals, ref_vals)
    # random float32 features (no near-ties), another block size
    y = prepare(torch.from_numpy(rng.normal(size=(257, 16)).astype(np.float32)), None)
    monkeypatch.delenv("VLGAP_RAY_FAULT")
    a = topk_neighbours(y, 7, chunk_bytes=12 * 257 * 50)
    b = ray_topk(y, 7, chunk_bytes=12 * 257 * 50)
    assert torch.equal(a[0], b[0])


@pytest.mark.serial  # starts Ray: make test runs it alone
def test_layer_search_on_ray_equals_single_process(ray_cluster, tmp_path, monkeypatch):
    from vlgap.metrics.layer_search import layer_search

    rng = np.random.default_rng(5)
    base = rng.integers(-2, 3, size=(200, 6)).astype(np.float64)
    xs = [base + rng.integers(-1, 2, size=base.shape) * (i % 2) for i in range(3)]
    ys = [np.concatenate([base, rng.integers(-2, 3, size=(200, 2 + i))], axis=1).astype(np.float64) for i in range(2)]
    kw = dict(k=8, n_bootstrap=20, n_permutations=20, seed=1, chunk_bytes=12 * 200 * 30)
    ref = layer_search(xs, ys, **kw)
    marker = tmp_path / "knn-killed"
    monkeypatch.setenv("VLGAP_RAY_FAULT", f"knn:2:{marker}")
    got = layer_search(xs, ys, ray="auto", **kw)
    assert marker.is_file()
    assert np.array_equal(ref.scores, got.scores)
    assert ref.to_dict() == got.to_dict()
    monkeypatch.delenv("VLGAP_RAY_FAULT")
    cka_ref = layer_search(xs, ys, metric="cka")
    cka = layer_search(xs, ys, metric="cka", ray="auto")
    np.testing.assert_allclose(cka.scores, cka_ref.scores, rtol=1e-12)


@pytest.mark.serial  # starts Ray: make test runs it alone
def test_sweep_cells_on_ray_equal_serial_sweep(ray_cluster, tmp_path, one_thread):
    from conftest import write_toy_manifest

    from toy_encoders import ToyText, ToyVision
    from vlgap.probe.sweep import SweepConfig, run_sweep

    man = write_toy_manifest(tmp_path, 24)
    cfg = SweepConfig(str(man), ["tv"], ["tt"], [1, 2], [1, 3], k=3, n_bootstrap=15, n_permutations=15,
                      cache_dir=str(tmp_path / "cache"), fit=False)
    serial = run_sweep(cfg, tmp_path / "serial", progress=False, encoders={"tv": ToyVision(), "tt": ToyText()})
    # features come from the cache (no model); each of the 4 cells is a Ray task with its own seed
    dist = run_sweep(cfg, tmp_path / "ray", progress=False, ray="auto")
    assert json.dumps(dist.rows, sort_keys=True) == json.dumps(serial.rows, sort_keys=True)
    assert (tmp_path / "ray" / "sweep.csv").read_text() == (tmp_path / "serial" / "sweep.csv").read_text()
    for f in (tmp_path / "serial" / "matrices").glob("*.npy"):
        # n_f = 1 cells are n/a (NaN): the first frames of these videos are identical, so features are constant
        assert np.array_equal(np.load(f), np.load(tmp_path / "ray" / "matrices" / f.name), equal_nan=True)


def test_chunks_on_another_nodes_disk_fail_with_their_names(tiny_dataset, tmp_path, small_chunks, monkeypatch):
    """On node-local disks, chunks written by other nodes are absent here: the join names them."""
    from vlgap.features import store

    from toy_encoders import ToyVision
    from vlgap.features.extract import extract

    real_write = store.Entry.write_chunk

    def elsewhere(self, start, end, *a, **kw):  # chunk 2-4 went to another node's disk
        if (start, end) != (2, 4):
            real_write(self, start, end, *a, **kw)

    monkeypatch.setattr(store.Entry, "write_chunk", elsewhere)
    with pytest.raises(VlgapError, match=r"lacks chunks \['2-4'\] \(1 of 4.*shares"):
        extract(tiny_dataset, "toy", n_frames=[3], cache_dir=tmp_path, loaded_encoder=ToyVision(), progress=False)
