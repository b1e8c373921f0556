"""An offline Hugging Face cache laid out as huggingface_hub writes it, for tests that load models by hub id."""
from __future__ import annotations

import hashlib
import shutil
from pathlib import Path


def lay_out_hub_cache(hub: Path, hub_id: str, folder: Path) -> str:
    """$HF_HOME/hub/models--ORG--NAME/{refs/main, snapshots/<40-hex>/<files>}, as huggingface_hub writes it.
    Returns the snapshot's commit (sha1 of the hub id)."""
    commit = hashlib.sha1(hub_id.encode()).hexdigest()
    repo = hub / ("models--" + hub_id.replace("/", "--"))
    snap = repo / "snapshots" / commit
    shutil.copytree(folder, snap)
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(commit)
    return commit


def use_offline_hub(monkeypatch, hf_home: Path) -> Path:
    """HF_HOME and HF_HUB_OFFLINE as a user sets them; huggingface_hub read its constants at import, so
    the test points them at the fake cache too (a fresh process reads the environment)."""
    from huggingface_hub import constants

    monkeypatch.setenv("HF_HOME", str(hf_home))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(constants, "HF_HOME", str(hf_home))
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(hf_home / "hub"))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    return hf_home
