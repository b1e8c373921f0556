"""The CAPE experiment's LM lanes (vlgap.cape.lanes) in worker processes give the one-process run's outputs.

A tiny random-init Qwen2 (2 layers, hidden 32) and a byte-level BPE tokenizer trained here are saved into a
folder, so the spawned workers load them as any LM (no stand-ins: a monkeypatch does not reach a worker).
The same tiny experiment runs with VLGAP_WORKERS=1 (the lanes one after another here) and =2: the rewrite
caches, MMD and generator cells byte for byte, the SFT adapters, and every number of results.json but the
timings are equal; the workers' progress lines reach the caller's log with their lane's name. A lane that
fails stops the run with its error, the other lanes' finished stages are kept and the rerun resumes them."""
from __future__ import annotations

import json
import shutil

import pytest

from vlgap.errors import VlgapError

torch = pytest.importorskip("torch")
pytest.importorskip("peft")

#: what differs between two runs of the same configuration: the clocks, and how many workers ran the lanes
TIMING_KEYS = {"timings_s", "cpu_s", "seconds_this_run", "lane_workers"}
SFT_TIMING_KEYS = {"seconds", "samples_per_second"}


@pytest.fixture(scope="module")
def lm_folder(tmp_path_factory):
    from tiny_lm import save_tiny_qwen2  # tests/helpers

    return save_tiny_qwen2(tmp_path_factory.mktemp("lm") / "tiny-qwen2", max_positions=1024)


def _config(base: str, rewriter: str):
    from vlgap.cape.experiment import CapeConfig

    return CapeConfig(base=f"hf:{base}", rewriter_model=f"hf:{rewriter}", n_sft_videos=3, sft_steps=2, sft_batch=4,
                      sft_lr=0.05, lora_r=4, n_train_videos=8, n_test=6, generator_seeds=(0,), max_retries=1,
                      n_bootstrap=20, n_permutations=20, gap_permutations=10, gap_bootstrap=10)


def _numbers(results: dict) -> dict:
    out = {k: v for k, v in results.items() if k not in TIMING_KEYS}
    out["sft"] = {k: {kk: vv for kk, vv in v.items() if kk not in SFT_TIMING_KEYS} for k, v in results["sft"].items()}
    return out


def _files(run, pattern: str) -> dict[str, bytes]:
    return {str(p.relative_to(run)): p.read_bytes() for p in sorted(run.glob(pattern)) if p.is_file()}


@pytest.mark.slow  # ~1 min on 2 cores: three tiny experiments, two of them spawning workers
def test_two_workers_give_the_one_process_outputs_and_resume(lm_folder, tmp_path, monkeypatch):
    from vlgap.cape.experiment import run_experiment

    torch.set_num_threads(1)  # restored by the fixture below
    cfg = _config(str(lm_folder), str(lm_folder))
    monkeypatch.setenv("VLGAP_WORKERS", "1")
    one = run_experiment(tmp_path / "one", cfg, log=lambda m: None)
    monkeypatch.setenv("VLGAP_WORKERS", "2")
    lines: list[str] = []
    two = run_experiment(tmp_path / "two", cfg, log=lines.append)
    assert (one["lane_workers"], two["lane_workers"]) == (1, 2)
    assert _numbers(two) == _numbers(one)
    assert set(two["timings_s"]) >= {"sft_pe", "sft_third", "rewrite_pe", "rewrite_third", "rewrite_rewriter",
                                     "lm_lanes"} and set(two["cpu_s"]) >= {"sft_pe", "rewrite_rewriter"}
    # the adapters' weights (their adapter_config.json lists the LoRA modules in the set order of the
    # process that saved it, which differs between any two processes; training_args.bin holds the path)
    for pattern in ("rewrites/*.json", "cells/*.json", "mmd.json", "embeddings.npz",
                    "sft/*/adapter/adapter_model.safetensors"):
        a, b = _files(tmp_path / "one", pattern), _files(tmp_path / "two", pattern)
        assert a and a == b, pattern
    for name in ("pe", "third"):  # the SFT stage file: its record but the clock
        a, b = (json.loads((tmp_path / run / "sft" / name / "sft.json").read_text()) for run in ("one", "two"))
        assert {k: v for k, v in a.items() if k not in SFT_TIMING_KEYS} == \
               {k: v for k, v in b.items() if k not in SFT_TIMING_KEYS}
    assert (tmp_path / "two" / "report.md").read_text().count("2 processes side by side") == 1
    # the workers' progress lines, with their lane's name
    assert any(x.startswith("[pe] SFT pe:") for x in lines) and any(x.startswith("[third] SFT step") for x in lines)
    assert any(x.startswith("[rewriter] rewriting 6 test texts") for x in lines)
    # rerun: every lane's stages are read back (no SFT, no rewriting), the same numbers
    again = run_experiment(tmp_path / "two", cfg, log=lambda m: None)
    assert not {"sft_pe", "sft_third"} & set(again["timings_s"]) and _numbers(again) == _numbers(one)


@pytest.mark.slow
def test_a_failing_lane_stops_the_run_and_the_rerun_resumes_the_others(lm_folder, tmp_path, monkeypatch):
    from vlgap.cape.experiment import run_experiment

    torch.set_num_threads(1)
    later = tmp_path / "rewriter-lm"  # not there yet: the rewriter lane fails in its worker
    cfg = _config(str(lm_folder), str(later))
    monkeypatch.setenv("VLGAP_WORKERS", "2")
    with pytest.raises(VlgapError, match="no such folder"):
        run_experiment(tmp_path / "run", cfg, log=lambda m: None)
    # the pe lane, started before the rewriter's failed, finished and kept its stages
    assert (tmp_path / "run" / "sft" / "pe" / "sft.json").is_file()
    assert (tmp_path / "run" / "rewrites" / "pe.json").is_file()
    shutil.copytree(lm_folder, later)
    done = run_experiment(tmp_path / "run", cfg, log=lambda m: None)
    assert "sft_pe" not in done["timings_s"] and "rewrite_rewriter" in done["timings_s"]
    assert done["validity"]["rewriter/test"]["n"] == 6


def test_lane_workers_reads_vlgap_workers_and_the_free_cores(monkeypatch):
    from vlgap.cape.lanes import PARTS, lane_workers

    monkeypatch.delenv("VLGAP_WORKERS", raising=False)
    monkeypatch.setattr("os.sched_getaffinity", lambda pid: set(range(2)), raising=False)
    assert lane_workers("cpu", threads=1) == 2 and lane_workers("cpu", threads=2) == 1
    assert lane_workers("cuda", threads=1) == 1
    monkeypatch.setattr("os.sched_getaffinity", lambda pid: set(range(16)), raising=False)
    assert lane_workers("cpu", threads=1) == len(PARTS)
    monkeypatch.setenv("VLGAP_WORKERS", "1")
    assert lane_workers("cpu", threads=1) == 1
    monkeypatch.setenv("VLGAP_WORKERS", "8")
    assert lane_workers("cpu", threads=4) == len(PARTS)
    for bad in ("0", "two", "-1"):
        monkeypatch.setenv("VLGAP_WORKERS", bad)
        with pytest.raises(VlgapError, match=r"VLGAP_WORKERS=.*whole number >= 1") as err:
            lane_workers()
        assert "\n" not in str(err.value)


@pytest.fixture(autouse=True)
def _restore_threads():
    n = torch.get_num_threads()
    yield
    torch.set_num_threads(n)


def test_lane_workers_reuse_freed_blocks():
    """A 64 MB block freed and asked for again: a fresh mmap (its pages faulted in again) by default, the
    heap's own pages after reuse_freed_memory, which every lane worker calls (in a subprocess: the
    setting lasts for the process)."""
    import subprocess
    import sys

    probe = ("import resource, sys\n"
             "from vlgap.memory import reuse_freed_memory\n"
             "applied = reuse_freed_memory() if sys.argv[1] == '1' else True\n"
             "b = bytearray(64 << 20); b[::4096] = b'x' * len(b[::4096]); del b\n"
             "f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt\n"
             "b = bytearray(64 << 20); b[::4096] = b'x' * len(b[::4096])\n"
             "print(int(applied), resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0)\n")
    faults = {}
    for mode in ("0", "1"):
        out = subprocess.run([sys.executable, "-c", probe, mode], capture_output=True, text=True, check=True)
        applied, n = map(int, out.stdout.split())
        if not applied:
            pytest.skip("no glibc malloc here")
        faults[mode] = n
    assert faults["0"] > 10_000 and faults["1"] < 1_000, faults  # 16384 pages of 4 KiB in 64 MB
