"""The `auto` number format (vlgap.runtime.resolve_dtype): bfloat16 where the device computes it natively,
else float32. The hardware probe forced both ways (VLGAP_NATIVE_BF16, and torch's probe monkeypatched), the
defaults resolving per device, the one line a run prints, the value its run folder records and its cache
keys hold (never the word auto), a folder resumed where auto resolves otherwise, the one warning line of an
explicit bfloat16 the device emulates, and the command-line options."""
from __future__ import annotations

import json

import pytest
import torch

from vlgap import runtime as R
from vlgap.errors import VlgapError

X86_AVX2 = {"cpu_name": "AMD EPYC", "avx2": True, "avx512_bf16": False, "amx_bf16": False}
X86_AVX512_BF16 = {"cpu_name": "AMD EPYC", "avx2": True, "avx512_bf16": True, "amx_bf16": False}
X86_AMX = {"cpu_name": "Intel Xeon", "avx2": True, "avx512_bf16": True, "amx_bf16": True}


@pytest.fixture
def probe(monkeypatch):
    """Set what torch reports of the CPU (None: torch has no such report); the environment override unset,
    and the process's slow-bfloat16 warning not yet said."""
    monkeypatch.delenv(R.NATIVE_BF16_ENV, raising=False)
    monkeypatch.setattr(R, "_warned", [])

    def set_cpu(capability):
        def report():
            if capability is None:
                raise AttributeError("module 'torch._C._cpu' has no attribute '_get_cpu_capability'")
            return dict(capability)

        monkeypatch.setattr(torch._C._cpu, "_get_cpu_capability", report, raising=False)

    return set_cpu


@pytest.fixture
def native(monkeypatch):
    """Force the probe through the environment variable the docs name: native(True) / native(False)."""
    monkeypatch.setattr(R, "_warned", [])
    return lambda on: monkeypatch.setenv(R.NATIVE_BF16_ENV, "1" if on else "0")


# -- the probe ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("capability, dtype, why", [
    (X86_AMX, "bfloat16", "this CPU computes bfloat16 natively: AMX-BF16, AVX512-BF16"),
    (X86_AVX512_BF16, "bfloat16", "this CPU computes bfloat16 natively: AVX512-BF16"),
    (X86_AVX2, "float32", "this CPU has no native bfloat16 (no AMX-BF16 or AVX512-BF16; torch's kernels use"),
    ({"cpu_name": "", "architecture": "aarch64", "asimd": True}, "float32", "torch does not report bfloat16 support"),
    ({}, "float32", "torch does not report bfloat16 support"),
    (None, "float32", "torch does not report whether this CPU computes bfloat16 natively"),
])
def test_auto_on_the_cpu_follows_torchs_report_of_it(probe, capability, dtype, why):
    probe(capability)
    choice = R.resolve_dtype("auto", "cpu")
    assert (choice.dtype, choice.auto, choice.native) == (dtype, True, dtype == "bfloat16")
    assert choice.why.startswith(why)
    assert R.parse_dtype("auto") == R.parse_dtype("AUTO", device="cpu") == dtype  # None: the CPU
    assert R.runtime("cpu", "auto") == R.Runtime("cpu", dtype)


def test_the_environment_variable_forces_the_probe_both_ways(probe, monkeypatch):
    probe(X86_AVX2)
    monkeypatch.setenv(R.NATIVE_BF16_ENV, "1")
    on = R.resolve_dtype("auto")
    assert (on.dtype, on.why) == ("bfloat16", "VLGAP_NATIVE_BF16=1 says this device computes bfloat16 natively")
    probe(X86_AMX)
    monkeypatch.setenv(R.NATIVE_BF16_ENV, "0")
    off = R.resolve_dtype("auto")
    assert (off.dtype, off.why) == ("float32", "VLGAP_NATIVE_BF16=0 says this device has no native bfloat16")
    monkeypatch.setenv(R.NATIVE_BF16_ENV, "")  # empty: unset, the hardware answers
    assert R.resolve_dtype("auto").dtype == "bfloat16"
    monkeypatch.setenv(R.NATIVE_BF16_ENV, "maybe")
    with pytest.raises(VlgapError, match=r"VLGAP_NATIVE_BF16='maybe' is not valid; valid: 1 .*, 0 .*, or unset"):
        R.resolve_dtype("auto")


def test_explicit_formats_are_kept_whatever_the_device_computes(native):
    for on in (True, False):
        native(on)
        for asked in ("float32", "bf16", "fp16"):
            choice = R.resolve_dtype(asked, "cpu")
            assert choice.dtype == R.parse_dtype(asked) and not choice.auto and choice.native is on
    assert R.dtype_setting("Auto") == "auto" and R.dtype_setting("bf16") == "bfloat16"
    with pytest.raises(VlgapError, match=r"'int7' \(--text-dtype\).*auto \(bfloat16 where the device computes"):
        R.dtype_setting("int7", option="--text-dtype")


def test_auto_per_device_cuda_mps_and_spread(probe, monkeypatch):
    probe(X86_AVX2)  # the CPU is no: what follows is the GPU's own answer
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda i=0: f"GPU{i}")
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: True)
    gpu = R.resolve_dtype("auto", "cuda:1")
    assert (gpu.dtype, gpu.device, gpu.why) == ("bfloat16", "cuda:1", "this GPU (GPU1) computes bfloat16 natively")
    # the defaults follow the run's device: the demo's text encoders, the CAPE demo's LMs, WSV's LM rows
    from vlgap.cape.experiment import preset
    from vlgap.probe.demo import DemoConfig, resolve_formats
    from vlgap.wsv.experiment import ExperimentConfig

    for device, dtype in (("cuda", "bfloat16"), ("cpu", "float32")):
        assert resolve_formats(DemoConfig(device=device), log=lambda line: None)[0].text_dtype == dtype
        assert preset("demo").resolved(device)[0].dtype == dtype
        assert ExperimentConfig(systems=("wsv+smollm2",), n_val=2).resolved(device)[0].lm_dtype == dtype
    assert R.resolve_dtype("auto", "spread").dtype == "bfloat16"  # a spread model: its first GPU answers
    assert R.runtime("auto", "auto") == R.Runtime("cuda:0", "bfloat16")  # the device first, then its format
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: False)
    old = R.resolve_dtype("auto", "cuda")
    assert (old.dtype, old.why) == ("float32", "this GPU (GPU0) has no native bfloat16")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert R.resolve_dtype("auto", "spread").device == "cpu"  # spread without a GPU is the CPU
    monkeypatch.setattr(R, "_mps_available", lambda: True)
    mps = R.resolve_dtype("auto", "mps")
    assert mps.dtype == "float32" and "Apple GPUs" in mps.why
    assert not R.resolve_dtype("bfloat16", "mps").slow  # nothing measured there to warn about
    probe(X86_AMX)
    assert R.resolve_dtype("auto", "mps").dtype == "float32"  # the CPU's bfloat16 is not the GPU's


# -- what a run says, records and keys -------------------------------------------------------------------

def test_the_demos_formats_are_resolved_said_once_and_canonical_below(native):
    from vlgap.probe.demo import DemoConfig, resolve_formats
    from vlgap.probe.sweep import SweepConfig

    for on, dtype in ((True, "bfloat16"), (False, "float32")):
        native(on)
        lines: list[str] = []
        cfg, formats = resolve_formats(DemoConfig(), log=lines.append)
        assert (cfg.dtype, cfg.text_dtype) == ("float32", dtype) and formats["text_dtype"].auto
        assert lines == [f"vision encoders: float32; text encoders: {dtype} (auto: VLGAP_NATIVE_BF16={int(on)} says "
                         f"this device {'computes bfloat16 natively' if on else 'has no native bfloat16'})"]
        sweep = SweepConfig("m.jsonl", ["a"], ["b"], [1], [1], dtype=cfg.dtype, text_dtype=cfg.text_dtype)
        assert sweep.text_encoder_dtype == dtype
    # a format set by hand is said as set; text_dtype None is the vision encoders' format
    lines = []
    resolve_formats(DemoConfig(text_dtype=None), log=lines.append)
    assert lines == ["encoders: float32"]


def test_a_sweeps_auto_is_resolved_on_its_device(native):
    from vlgap.features.source import FeatureOptions
    from vlgap.probe.sweep import SweepConfig

    native(False)
    cfg = SweepConfig("m.jsonl", ["a"], ["b"], [1], [1], dtype="float32", text_dtype="auto")
    assert cfg.text_dtype is None and "text_dtype" not in cfg.to_dict()  # auto -> float32 = dtype: no setting
    native(True)
    cfg = SweepConfig("m.jsonl", ["a"], ["b"], [1], [1], dtype="auto")
    assert (cfg.dtype, cfg.to_dict()["dtype"]) == ("bfloat16", "bfloat16")
    opts = FeatureOptions(dtype="float32", text_dtype="auto")
    assert (opts.dtype, opts.text_dtype) == ("float32", "bfloat16")


def test_the_feature_cache_key_holds_the_resolved_format(tiny_dataset, tmp_path, native):
    from toy_encoders import ToyText

    from vlgap.features.extract import extract

    for on, dtype in ((False, "float32"), (True, "bfloat16")):
        native(on)
        res = extract(tiny_dataset, "toyt", n_captions=[1], cache_dir=tmp_path, dtype="auto", loaded_encoder=ToyText(),
                      progress=False)
        assert res.computed == [1] and res.features[1].record["encoder_key"]["dtype"] == dtype
    keys = [json.loads(p.read_text())["encoder_key"]["dtype"] for p in tmp_path.rglob("record.json")]
    assert sorted(keys) == ["bfloat16", "float32"]  # one entry per resolved format, none keyed "auto"
    native(False)  # the same resolution reads its own entry
    assert extract(tiny_dataset, "toyt", n_captions=[1], cache_dir=tmp_path, dtype="auto", loaded_encoder=ToyText(),
                   progress=False).computed == []


class _Stop(Exception):
    pass


def _demo_up_to_the_sweep(monkeypatch, tiny_dataset):
    """run_demo with its rendered videos replaced by a tiny manifest and its sweep by a stop: what it
    says, records and hands the sweep."""
    import vlgap.probe.demo as D

    seen = []
    monkeypatch.setattr("vlgap.data.shapes.write.shapes_manifest_path", lambda *a, **k: tiny_dataset)
    monkeypatch.setattr(D, "prepare_inputs", lambda *a, **k: tiny_dataset)  # no rendering, no encoders loaded
    monkeypatch.setattr("vlgap.probe.items.check_sweep", lambda *a, **k: None)  # the demo's grid needs more items
    monkeypatch.setattr(D, "sweep_and_sections",
                        lambda cfg, sweep_cfg, *a, **k: (seen.append(sweep_cfg), (_ for _ in ()).throw(_Stop()))[1])
    return D, seen


def test_the_demo_records_the_resolved_format_and_refuses_another_resolution_in_words(tmp_path, tiny_dataset, native,
                                                                                     monkeypatch, capsys):
    D, seen = _demo_up_to_the_sweep(monkeypatch, tiny_dataset)
    out = tmp_path / "demo"
    native(False)
    with pytest.raises(_Stop):
        D.run_demo(D.DemoConfig(out=str(out), cache_dir=str(tmp_path / "c")), progress=False)
    err = capsys.readouterr().err
    assert err.count("text encoders: float32 (auto: VLGAP_NATIVE_BF16=0") == 1
    record = json.loads((out / "run_config.json").read_text())["config"]
    assert record["text_dtype"] == "float32" and "auto" not in json.dumps({**record, "formats": None})
    assert record["formats"]["text_dtype"] == {"dtype": "float32", "asked": "auto",
                                               "why": "VLGAP_NATIVE_BF16=0 says this device has no native bfloat16"}
    assert seen[-1].text_encoder_dtype == "float32" and seen[-1].dtype == "float32"
    with pytest.raises(_Stop):  # the same machine resumes
        D.run_demo(D.DemoConfig(out=str(out), cache_dir=str(tmp_path / "c")), progress=False)
    (out / "cells").mkdir()
    (out / "cells" / "a-cell.json").write_text("{}")  # the run computed something: a folder worth protecting
    native(True)  # another machine: auto is bfloat16 there
    with pytest.raises(VlgapError) as err:
        D.run_demo(D.DemoConfig(out=str(out), cache_dir=str(tmp_path / "c")), progress=False)
    assert str(err.value) == (
        f"{out} holds a demo run whose text encoders ran in float32, but auto resolves to bfloat16 on this machine "
        "(VLGAP_NATIVE_BF16=1 says this device computes bfloat16 natively). To resume that run here, set "
        "VLGAP_NATIVE_BF16=0 (auto then resolves as it did there) or pass --text-dtype float32; to start a "
        "bfloat16 run, choose another --out or pass --force")
    with pytest.raises(_Stop):  # either way out named there works
        D.run_demo(D.DemoConfig(out=str(out), cache_dir=str(tmp_path / "c"), text_dtype="float32"), progress=False)
    with pytest.raises(_Stop):
        D.run_demo(D.DemoConfig(out=str(out), cache_dir=str(tmp_path / "c")), progress=False, force=True)
    assert json.loads((out / "run_config.json").read_text())["config"]["text_dtype"] == "bfloat16"


def test_the_cape_demo_resolves_its_lms_format_says_it_and_records_it(tmp_path, native, monkeypatch):
    import vlgap.cape.experiment as E

    ran = []
    monkeypatch.setattr(E, "_run_claimed", lambda out, cfg, log, device: ran.append(cfg) or {})
    out = tmp_path / "cape"
    for on, dtype in ((False, "float32"), (False, "float32"), (True, "bfloat16")):
        native(on)
        lines: list[str] = []
        run = lambda: E.run_experiment(out, E.preset("demo"), log=lines.append)  # noqa: E731
        if on:
            (out / "results.json").write_text("{}")  # the run computed something: a folder worth protecting
            with pytest.raises(VlgapError, match=r"whose LMs ran in float32, but auto resolves to bfloat16 .*set "
                                                 r"VLGAP_NATIVE_BF16=0 .*or pass --dtype float32"):
                run()
            continue
        run()
        assert lines[0] == f"LMs: {dtype} (auto: VLGAP_NATIVE_BF16=0 says this device has no native bfloat16)"
        assert ran[-1].dtype == dtype and ran[-1].record() == E.replace(E.PRESETS["demo"], dtype=dtype).record()
    record = json.loads((out / "run_config.json").read_text())["config"]
    assert "dtype" not in record  # float32 is the record of the runs before dtype existed
    assert record["formats"]["dtype"]["dtype"] == "float32" and record["formats"]["dtype"]["asked"] == "auto"
    with pytest.raises(VlgapError, match=r"dtype='auto'.*CapeConfig.resolved\(device\)"):
        E.preset("demo").record()  # keys never hold the word auto


def test_the_wsv_experiment_says_and_records_its_formats(tmp_path, native, monkeypatch):
    import vlgap.wsv.experiment.runner as W
    from vlgap.wsv.experiment import ExperimentConfig

    monkeypatch.setattr(W, "prepare", lambda *a, **k: (_ for _ in ()).throw(_Stop()))
    native(False)
    lines: list[str] = []
    cfg = ExperimentConfig(n_train=4, n_eval=2, n_unlabelled=0, n_val=2, seeds=(0,), systems=("wsv", "wsv+smollm2"),
                           generators=("synthetic",), train={"caption_steps": 2})
    with pytest.raises(_Stop):
        W.run_experiment(tmp_path / "w", cfg, log=lines.append)
    assert lines[0] == ("models: float32; LM rows (wsv+smollm2): float32 (auto: VLGAP_NATIVE_BF16=0 says this device "
                        "has no native bfloat16)")
    record = json.loads((tmp_path / "w" / "run_config.json").read_text())["config"]
    assert record["formats"]["lm_dtype"]["dtype"] == "float32" and "lm_dtype" not in record
    (tmp_path / "w" / "summary.json").write_text("{}")  # the run computed something: a folder worth protecting
    native(True)
    with pytest.raises(VlgapError, match=r"whose LM rows \(wsv\+smollm2\) ran in float32, but auto resolves to "
                                         r"bfloat16 .*set VLGAP_NATIVE_BF16=0"):
        W.run_experiment(tmp_path / "w", cfg, log=lines.append)
    # --dtype auto for the models resolves too; to float32 it is the default's record (and keys)
    native(False)
    auto = ExperimentConfig(n_train=4, n_eval=2, n_unlabelled=0, n_val=2, seeds=(0,), systems=("wsv",),
                            generators=("synthetic",), train={"caption_steps": 2, "dtype": "auto"})
    plain = ExperimentConfig(n_train=4, n_eval=2, n_unlabelled=0, n_val=2, seeds=(0,), systems=("wsv",),
                             generators=("synthetic",), train={"caption_steps": 2})
    assert auto.resolved("cpu")[0].record() == plain.record()
    native(True)
    assert auto.resolved("cpu")[0].train["dtype"] == "bfloat16"


# -- an explicit bfloat16 the device emulates: one warning line ----------------------------------------

def test_an_explicit_bfloat16_on_a_cpu_without_it_runs_with_one_warning_line(native, capsys):
    from vlgap.probe.demo import DemoConfig, resolve_formats

    native(False)
    lines: list[str] = []
    cfg, _ = resolve_formats(DemoConfig(text_dtype="bf16"), log=lines.append)
    assert cfg.text_dtype == "bfloat16"  # it runs as asked
    assert lines == ["vision encoders: float32",
                     "warning: text encoders in bfloat16, though VLGAP_NATIVE_BF16=0 says this device has no native "
                     "bfloat16: emulated, several times slower than float32 here; --text-dtype auto (or float32) is "
                     "the faster choice"]
    # where the models then load, nothing more is said
    capsys.readouterr()
    assert R.runtime("cpu", "bfloat16").dtype == "bfloat16"
    assert capsys.readouterr().err == ""


def test_the_loaders_warn_once_per_process_and_not_where_bfloat16_is_native(native, capsys):
    native(True)
    R.runtime("cpu", "bf16")
    assert capsys.readouterr().err == ""
    native(False)
    R.runtime("cpu", "float32"), R.runtime("cpu", "auto")
    assert capsys.readouterr().err == ""
    R.runtime("cpu", "bf16"), R.runtime("cpu", "bfloat16")
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("warning: models in bfloat16") and "--dtype auto (or float32)" in err


# -- the command line ------------------------------------------------------------------------------------

def test_vlgap_demo_takes_text_dtype(monkeypatch, capsys):
    import vlgap.probe.demo as D
    from in_process_cli import refused, run_cli

    seen = []
    monkeypatch.setattr(D, "run_demo", lambda cfg, **k: (seen.append(cfg), (_ for _ in ()).throw(VlgapError("stop")))[1])
    for given, kept in ((None, "auto"), ("float32", "float32"), ("bf16", "bfloat16"), ("auto", "auto")):
        code, _, err = run_cli(monkeypatch, capsys, "demo", *(("--text-dtype", given) if given else ()))
        assert code == 2 and "stop" in err and seen[-1].text_dtype == kept
    line = refused(capsys, "demo", "--text-dtype", "int7")
    assert "(--text-dtype) is not valid here" in line and "auto" in line


def test_cape_and_wsv_dtype_options_take_auto(monkeypatch, tmp_path, capsys):
    import vlgap.cape.experiment as E
    import vlgap.wsv.experiment as X
    from in_process_cli import run_cli

    monkeypatch.setattr(torch, "set_num_threads", lambda n: None)  # the CAPE demo sets the process's threads
    seen = []

    def stop(*a, **k):
        seen.append(a[1] if len(a) > 1 else k.get("config"))
        raise VlgapError("stop")

    monkeypatch.setattr(E, "run_experiment", stop)
    monkeypatch.setattr(X, "run_experiment", stop)
    for args, dtype in ((["cape", "demo"], "auto"), (["cape", "demo", "--dtype", "auto"], "auto"),
                        (["cape", "demo", "--dtype", "fp32"], "float32"), (["cape", "experiment"], "float32"),
                        (["cape", "experiment", "--dtype", "auto"], "auto")):
        code, _, err = run_cli(monkeypatch, capsys, *args, "--out", tmp_path / "o")
        assert code == 2 and "stop" in err and seen[-1].dtype == dtype, (args, err)
    code, _, err = run_cli(monkeypatch, capsys, "wsv", "experiment", "--dtype", "auto", "--out", tmp_path / "w")
    assert code == 2 and "stop" in err and seen[-1].train["dtype"] == "auto" and seen[-1].lm_dtype == "auto"
