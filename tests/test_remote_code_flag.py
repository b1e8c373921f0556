"""--trust-remote-code reaches the loaders of the cape and wsv commands (issue 32): off by default, and
when given, every causal LM the command loads (transformers' AutoConfig / AutoTokenizer / model) gets
trust_remote_code=True. Before, these commands had no such flag, so a hub model with its own code could
not be loaded (transformers' interactive prompt, or a refusal)."""
from __future__ import annotations

import json

import pytest

from in_process_cli import run_cli


class _Stop(Exception):
    pass


@pytest.fixture
def seen(monkeypatch):
    """Every AutoConfig.from_pretrained call's trust_remote_code; the first call stops the command."""
    import transformers

    calls: list = []

    def fake(*args, **kwargs):
        calls.append(kwargs.get("trust_remote_code", False))
        raise _Stop

    monkeypatch.setattr(transformers.AutoConfig, "from_pretrained", fake)
    return calls


def _folder(tmp_path):
    folder = tmp_path / "lm"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": "llama"}))
    (folder / "model.safetensors").write_bytes(b"not read: the config load stops first")
    return folder


@pytest.mark.parametrize("flag", [False, True])
def test_cape_train_and_rewrite_pass_the_flag_to_the_lm_loader(tmp_path, monkeypatch, capsys, seen, flag):
    folder = _folder(tmp_path)
    extra = ["--trust-remote-code"] if flag else []
    with pytest.raises(_Stop):
        run_cli(monkeypatch, capsys, "cape", "train", "--out", tmp_path / "run", "--lm", f"hf:{folder}",
                "--steps", "1", *extra)
    prompts = tmp_path / "p.txt"
    prompts.write_text("a red ball rolls\n")
    with pytest.raises(_Stop):
        run_cli(monkeypatch, capsys, "cape", "rewrite", prompts, "--operator", "rewriter", "--rewriter-lm",
                f"hf:{folder}", *extra)
    assert seen == [flag, flag]


@pytest.mark.parametrize("flag", [False, True])
def test_wsv_commands_set_it_for_the_lm_they_build(tmp_path, monkeypatch, capsys, seen, flag):
    import vlgap.wsv.api as api
    from vlgap.encoders.causal_lm import remote_code_allowed

    said = []
    monkeypatch.setattr(api, "train_system", lambda *a, **k: said.append(remote_code_allowed()) or tmp_path)
    code, out, err = run_cli(monkeypatch, capsys, "wsv", "train", "--out", tmp_path / "w",
                             *(["--trust-remote-code"] if flag else []))
    assert code == 0, err
    assert said == [flag] and not remote_code_allowed()  # the setting ends with the command
    # the WSV caption LM (built from a spec or rebuilt from a checkpoint's record) loads with it
    from vlgap.encoders.causal_lm import remote_code
    from vlgap.wsv.lm import build_pretrained_lm

    with remote_code(flag), pytest.raises(_Stop):
        build_pretrained_lm(f"hf:{_folder(tmp_path)}")
    assert seen == [flag]
