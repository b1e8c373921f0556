"""Work side by side while no encoder runs (vlgap.side_work) and the demo's order of work: every forward pass
in the calling thread at its own thread count, the rest side by side afterwards, and the same files as
the sequential sweep and sections, bit for bit."""
from __future__ import annotations

import json
import threading

import pytest
import torch

from toy_encoders import ToyText, ToyVision
from vlgap.errors import VlgapError
from vlgap.side_work import in_side_lane, side_pool


def test_side_tasks_run_side_by_side_on_one_torch_thread_and_one_blas_thread():
    from threadpoolctl import threadpool_info

    both = threading.Barrier(2, timeout=10)

    def task():
        both.wait()  # both tasks at once: two workers
        blas = [p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"]
        return threading.get_ident(), in_side_lane(), torch.get_num_threads(), blas

    threads_before = torch.get_num_threads()
    with side_pool(2) as pool:
        seen = [f.result() for f in [pool.submit(task), pool.submit(task)]]
    assert len({s[0] for s in seen}) == 2 and threading.get_ident() not in {s[0] for s in seen}
    assert all(s[1] and s[2] == 1 and all(n == 1 for n in s[3]) for s in seen)
    assert not in_side_lane() and torch.get_num_threads() == threads_before
    with side_pool(1, torch_threads=2) as pool:
        assert pool.submit(torch.get_num_threads).result() == 2


def test_an_error_in_the_block_cancels_what_has_not_started():
    gate, ran = threading.Event(), []
    with pytest.raises(VlgapError, match="stop"):
        with side_pool(1) as pool:
            pool.submit(gate.wait, 5)
            pool.submit(ran.append, 1)
            gate.set()
            raise VlgapError("stop")
    assert len(ran) <= 1
    with side_pool(1) as pool:
        fut = pool.submit(int, "x")
    with pytest.raises(ValueError):
        fut.result()  # a task's error stays with its future


class CountingVision(ToyVision):
    """A toy image encoder that notes the thread and torch thread count of every forward call."""

    calls: list = []

    def forward_layers(self, x):
        CountingVision.calls.append((threading.get_ident(), torch.get_num_threads()))
        return super().forward_layers(x)


def _strip(obj):
    if isinstance(obj, dict):
        return {k: _strip(v) for k, v in obj.items() if k != "seconds"}
    if isinstance(obj, list):
        return [_strip(v) for v in obj]
    return obj


def test_the_demos_order_of_work_writes_what_the_sequential_probes_write(tmp_path):
    from vlgap.probe.demo import DemoConfig, shapes_manifest, sweep_and_sections
    from vlgap.probe.sweep import SweepConfig, run_sweep
    from vlgap.probe.temporal import run_temporal_sections

    def configs(name):
        cfg = DemoConfig(n_videos=24, n_frames_per_video=8, video_size=32, vision=["toy_img", "toy_vid"],
                         text=["toy_txt"], n_frames=[2, 8], n_captions=[1, 4], k=3, n_bootstrap=20, n_permutations=20,
                         out=str(tmp_path / name), cache_dir=str(tmp_path / "cache"))
        sweep = SweepConfig(str(shapes_manifest(cfg)), cfg.vision, cfg.text, cfg.n_frames, cfg.n_captions, k=3,
                            text_dtype=cfg.text_dtype, n_bootstrap=20, n_permutations=20, image_size=cfg.image_size,
                            cache_dir=cfg.cache_dir)
        return cfg, sweep

    def encoders():
        return {"toy_img": CountingVision("image"), "toy_vid": ToyVision("video", n0=4), "toy_txt": ToyText()}

    cfg, sweep = configs("sequential")
    run_sweep(sweep, cfg.out, progress=False, encoders=encoders())
    run_temporal_sections(cfg, progress=False, encoders=encoders())
    (tmp_path / "cache" / "features").rename(tmp_path / "features-of-the-first-run")  # extracted again
    CountingVision.calls = []
    cfg2, sweep2 = configs("demo")
    torch.set_num_threads(2)
    result = sweep_and_sections(cfg2, sweep2, encoders(), progress=False)
    # every forward pass in this thread, at this thread's count (a side pool never runs an encoder)
    assert CountingVision.calls and set(CountingVision.calls) == {(threading.get_ident(), 2)}
    assert result.run_dir == tmp_path / "demo"
    assert (tmp_path / "demo" / "sweep.csv").read_bytes() == (tmp_path / "sequential" / "sweep.csv").read_bytes()
    for name in ("scaling.json", "temporal/test_of_time.json", "temporal/reorder.json", "temporal/frame_order.json",
                 "temporal/cross_vision.json"):
        a, b = (json.loads((tmp_path / run / name).read_text()) for run in ("sequential", "demo"))
        assert _strip(a) == _strip(b), name


def test_inputs_are_prepared_with_the_encoders_loaded_at_this_threads_count(tmp_path):
    from vlgap.features.source import LazyEncoder
    from vlgap.probe.demo import DemoConfig, missing_encoders, prepare_inputs
    from vlgap.probe.sweep import SweepConfig

    loaded = []

    def loader(name):
        def load():
            loaded.append((name, threading.get_ident(), torch.get_num_threads()))
            return ToyText() if name == "toy_txt" else ToyVision("image")
        return load

    cfg = DemoConfig(n_videos=12, n_frames_per_video=8, video_size=32, vision=["toy_img"], text=["toy_txt"],
                     n_frames=[2], n_captions=[1], k=3, temporal=False, out=str(tmp_path / "run"),
                     cache_dir=str(tmp_path / "cache"))
    from vlgap.data.shapes.write import shapes_manifest_path

    path = shapes_manifest_path(12, 0, 8, 32, cfg.cache_dir)
    sweep = SweepConfig(str(path), cfg.vision, cfg.text, cfg.n_frames, cfg.n_captions, k=3, cache_dir=cfg.cache_dir)
    torch.set_num_threads(2)
    encoders = {n: LazyEncoder(loader(n), n) for n in ("toy_img", "toy_txt")}
    assert prepare_inputs(cfg, sweep, encoders) == path and path.is_file()  # rendered here
    assert sorted(n for n, _, _ in loaded) == ["toy_img", "toy_txt"]      # new videos: every encoder loaded
    assert {(t, n) for _, t, n in loaded} != set() and all(n == 2 for _, _, n in loaded)
    assert all(t != threading.get_ident() for _, t, _ in loaded)          # beside the rendering
    assert missing_encoders(sweep) == ["toy_img", "toy_txt"]
    loaded.clear()
    encoders["toy_img"].preload()  # loaded once, whoever asks first
    assert loaded == []
