"""Long steps speak: what they do and, where countable, how far they are (stderr; plain lines off a
terminal). No timing is asserted, only the messages."""
from __future__ import annotations

import io

import pytest
from rich.console import Console

from vlgap import progress
from vlgap.encoders import gguf_cache


@pytest.fixture
def stderr_lines(monkeypatch):
    """Capture what vlgap.progress prints (as in a log file: not a terminal)."""
    buf = io.StringIO()
    monkeypatch.setattr(progress, "stderr_console", Console(file=buf, force_terminal=False, width=200))
    return buf


def test_step_says_what_and_when_done(stderr_lines):
    with progress.step("fitting the law"):
        pass
    out = stderr_lines.getvalue()
    assert "fitting the law ..." in out and "fitting the law: done in" in out
    with pytest.raises(RuntimeError), progress.step("failing step"):
        raise RuntimeError("boom")
    assert "failing step ..." in stderr_lines.getvalue() and "failing step: done" not in stderr_lines.getvalue()
    with progress.step("silent", enabled=False):
        pass
    assert "silent" not in stderr_lines.getvalue()


def test_stages_report_countable_progress(stderr_lines):
    with progress.Stages(unit="tensors") as stages:
        stages("reading")
        for i in range(0, 31):
            stages("dequantising", i, 30)
        stages("writing")
    out = stderr_lines.getvalue()
    assert "reading: done in" in out and "writing: done in" in out
    assert "dequantising: 30/30" in out and "tensors/s" in out
    assert out.count("dequantising: ") >= 5     # intermediate progress lines, about every 10 %


def test_nested_displays_fall_back_to_lines(monkeypatch):
    """On a terminal only one Rich live display is shown; a step inside a bar prints lines."""
    buf = io.StringIO()
    monkeypatch.setattr(progress, "stderr_console", Console(file=buf, force_terminal=True, width=200))
    with progress.progress_bar() as prog:
        prog.add_task("outer", total=2)
        with progress.step("inner step"):
            pass
    assert "inner step ..." in buf.getvalue() and "inner step: done in" in buf.getvalue()
    assert progress._live_depth == 0


def test_gguf_conversion_speaks(tmp_path, monkeypatch, stderr_lines):
    """The one-time GGUF conversion names the file and each stage, and counts tensors dequantised."""
    monkeypatch.setenv("VLGAP_CACHE", str(tmp_path / "cache"))
    gguf = tmp_path / "tiny.gguf"
    gguf.write_bytes(b"GGUF fake bytes" * 100)

    def fake_convert(src, out, progress):
        progress("reading the tokenizer from the GGUF")
        for i in range(12):
            progress("dequantising GGUF tensors", i + 1, 12)
        progress("writing float32 safetensors (1 MB)")
        (out / "model.safetensors").write_bytes(b"w")
        return {"architecture": "Fake"}

    folder = gguf_cache.ensure_converted(gguf, convert=fake_convert)
    out = stderr_lines.getvalue()
    assert f"converting tiny.gguf (0 MB) to safetensors in {folder}" in out
    assert "reading the tokenizer from the GGUF: done in" in out
    assert "dequantising GGUF tensors: 12/12" in out and "tensors/s" in out
    assert "writing float32 safetensors (1 MB): done in" in out
    assert "converted tiny.gguf in" in out
    # converted once: a second call is silent
    n = len(out)
    assert gguf_cache.ensure_converted(gguf, convert=fake_convert) == folder
    assert stderr_lines.getvalue()[n:] == ""


def test_tensor_loop_of_transformers_is_routed_to_progress():
    """The hook that counts tensors replaces the bare tqdm of transformers' GGUF loader, then restores it."""
    loader = pytest.importorskip("transformers.modeling_gguf_pytorch_utils")
    original = loader.tqdm
    seen = []
    with gguf_cache._tensor_progress(lambda stage, done=None, total=None: seen.append((stage, done, total))):
        assert list(loader.tqdm(["a", "b", "c"], desc="x")) == ["a", "b", "c"]
    assert loader.tqdm is original
    assert seen == [("dequantising GGUF tensors", i, 3) for i in range(4)]


def test_law_fit_reports_bootstrap_refits():
    import numpy as np

    from vlgap.scaling import fit_scaling

    f, c = (a.ravel().astype(float) for a in np.meshgrid([1, 2, 4], [1, 2, 4], indexing="ij"))
    y = 0.4 - 0.1 * f ** -0.7 - 0.1 * c ** -0.9 + np.random.default_rng(0).normal(0, 0.002, f.size)
    seen = []
    fit_scaling({"n_f": f, "n_c": c, "score": y}, n_bootstrap=7, progress=lambda d, n: seen.append((d, n)))
    assert seen == [(i, 7) for i in range(8)]
