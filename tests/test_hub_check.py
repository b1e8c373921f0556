"""A hub model that is neither cached nor reachable is refused at once with the way to get it, and a cached one
loads from the cache when the hub cannot be reached (vlgap.encoders.hub; issue 43, item 6). No network is used:
the "hub" is a loopback port that refuses connections or a loopback socket that accepts them."""
from __future__ import annotations

import socket
import time

import pytest
from huggingface_hub import constants

from vlgap.encoders import hub
from vlgap.errors import VlgapError


@pytest.fixture
def no_hub(monkeypatch, tmp_path):
    """An empty Hugging Face cache and a hub endpoint on a loopback port nobody listens on."""
    with socket.socket() as s:  # a free port, closed again: connecting to it is refused at once
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setattr(constants, "ENDPOINT", f"http://127.0.0.1:{port}")
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub-cache"))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    for var in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy", "HF_HUB_OFFLINE", "VLGAP_OFFLINE",
                "TRANSFORMERS_OFFLINE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(hub, "_REACHABLE", {})
    return tmp_path / "hub-cache"


def _no_download(monkeypatch):
    """Any transformers load of a hub id fails the test: the refusal must come before it."""
    import transformers

    def refuse(*args, **kwargs):
        raise AssertionError("transformers was asked to load: the hub check should have refused first")

    for cls in (transformers.AutoModel, transformers.AutoProcessor, transformers.AutoConfig, transformers.AutoTokenizer):
        monkeypatch.setattr(cls, "from_pretrained", refuse)


def test_uncached_and_unreachable_clip_is_refused_with_the_way_to_get_it(no_hub, monkeypatch):
    from vlgap.captions.clip_model import load_clip

    _no_download(monkeypatch)
    with pytest.raises(VlgapError) as err:
        load_clip("hf:openai/clip-vit-base-patch32")
    msg = str(err.value)
    assert msg.startswith("CLIP checkpoint 'hf:openai/clip-vit-base-patch32': 'openai/clip-vit-base-patch32' is not in "
                          "the Hugging Face cache")
    assert "the hub cannot be reached (127.0.0.1:" in msg
    assert "`hf download openai/clip-vit-base-patch32`" in msg and "--clip hf:FOLDER" in msg
    assert "\n" not in msg


def test_offline_switch_refuses_without_asking_the_network(no_hub, monkeypatch):
    from vlgap.encoders.text import load_hf_text

    _no_download(monkeypatch)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(hub, "hub_reachable", lambda *a, **k: pytest.fail("probed the hub while offline"))
    with pytest.raises(VlgapError, match=r"text model 'hf:org/missing': 'org/missing' is not in the Hugging Face cache "
                                         r".* downloads are switched off .*`hf download org/missing`"):
        load_hf_text("org/missing")


def test_cached_model_loads_from_the_cache_when_the_hub_is_unreachable(no_hub, monkeypatch):
    from vlgap.captions.clip_model import load_clip, write_random_clip

    commit = "0123456789abcdef0123456789abcdef01234567"
    repo = no_hub / "models--org--tiny-clip"
    write_random_clip(repo / "snapshots" / commit)
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(commit)
    assert hub.hub_cached("org/tiny-clip") and not hub.hub_cached("org/other")
    model = load_clip("hf:org/tiny-clip")
    assert model.family == "clip"
    assert constants.HF_HUB_OFFLINE  # the cache only, from then on: no retries against an unreachable hub


def test_reachable_hub_is_told_apart_and_asked_once(monkeypatch):
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(4)
        port = server.getsockname()[1]
        monkeypatch.setattr(constants, "ENDPOINT", f"http://127.0.0.1:{port}")
        for var in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"):
            monkeypatch.delenv(var, raising=False)
        monkeypatch.setattr(hub, "_REACHABLE", {})
        assert hub.hub_address() == ("127.0.0.1", port)
        assert hub.hub_reachable()
    # asked once per address: the answer is kept although the server is gone
    assert hub.hub_reachable()
    monkeypatch.setattr(hub, "_REACHABLE", {})
    assert not hub.hub_reachable()
    # a proxy is what a download would reach first
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:3128")
    assert hub.hub_address() == ("127.0.0.1", 3128)


def test_probe_gives_up_after_its_timeout(monkeypatch):
    # a resolver that hangs: the probe answers "unreachable" after its timeout instead of waiting
    monkeypatch.setattr(hub, "_REACHABLE", {})
    def hang(*args, **kwargs):
        time.sleep(2)
        raise OSError("timed out")

    monkeypatch.setattr(hub.socket, "create_connection", hang)
    assert hub.hub_reachable(timeout=0.2) is False


@pytest.mark.parametrize("call, expected", [
    ("from vlgap.encoders.registry import get_encoder; get_encoder('hf:facebook/dinov2-small')",
     "encoder 'hf:facebook/dinov2-small': 'facebook/dinov2-small' is not in the Hugging Face cache"),
    ("from vlgap.encoders.registry import get_encoder; get_encoder('hf-video:MCG-NJU/videomae-base@main')",
     "encoder 'hf-video:MCG-NJU/videomae-base': 'MCG-NJU/videomae-base' at revision 'main' is not in the"),
    ("from vlgap.captions.clip_model import load_clip; load_clip('hf:openai/clip-vit-base-patch32')",
     "CLIP checkpoint 'hf:openai/clip-vit-base-patch32': 'openai/clip-vit-base-patch32' is not in the"),
])
def test_a_hub_model_from_nowhere_is_refused_before_torch_loads(call, expected, tmp_path):
    """The refusal comes before torch and transformers are imported (seconds on a small machine), so a user
    hears in about a second that the model cannot come: checked in a fresh process, with downloads off."""
    import os
    import subprocess
    import sys

    code = ("import sys\nfrom vlgap.errors import VlgapError\ntry:\n    " + call + "\nexcept VlgapError as e:\n"
            "    print(e)\nelse:\n    print('no refusal')\n"
            "print('torch imported' if 'torch' in sys.modules else 'torch not imported')\n"
            "print('transformers imported' if 'transformers' in sys.modules else 'transformers not imported')")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf"), "VLGAP_CACHE": str(tmp_path / "c")}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    lines = out.stdout.splitlines()
    assert out.returncode == 0, out.stderr
    assert lines[0].startswith(expected) and "downloads are switched off" in lines[0], lines
    assert lines[1:] == ["torch not imported", "transformers not imported"], lines


def test_a_folder_spec_is_left_to_the_loader(tmp_path, monkeypatch):
    """Folders and path-like spellings never reach the hub check (the loader says what is wrong with them)."""
    called = []
    monkeypatch.setattr(hub, "check_hub_model", lambda *a, **k: called.append(a))
    (tmp_path / "m").mkdir()
    for spec in (f"hf:{tmp_path / 'm'}", "hf:./nowhere", "hf:a/b/c", "tv:resnet50", f"hf:{tmp_path / 'm'}#vision"):
        hub.precheck_spec(spec)
    assert called == []
    hub.precheck_spec("hf:org/name@v1#text")
    assert called == [("org/name",)]
