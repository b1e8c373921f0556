"""Where a WSV part's weights come from: a local folder or a hub id (through huggingface_hub's snapshot
cache), with the fingerprint that part records (file sha256s for a folder, the snapshot commit for a hub id).
"""
from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from vlgap.errors import VlgapError

_WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf", ".ckpt")


def resolve_source(src: str, what: str) -> tuple[Path, dict[str, Any]]:
    """(local folder, {"source", "weights"}) of a folder or hub id. A hub id is resolved to its snapshot
    folder through huggingface_hub (downloads when online; with HF_HUB_OFFLINE=1 the cache only); its
    fingerprint is the snapshot commit. A folder's is the sha256 of its weight files."""
    from vlgap.encoders._common import model_source

    where, folder = model_source(src, f"{what} {src!r}: folder does not exist; give a local folder or a hub id")
    if folder is not None:
        return folder, {"source": str(folder), "weights": folder_fingerprint(folder)}
    from huggingface_hub import snapshot_download

    try:
        snap = Path(snapshot_download(repo_id=where))
    except Exception as err:  # noqa: BLE001 - hub errors come in many types (offline, missing, auth)
        line = (str(err).splitlines() or [type(err).__name__])[0]
        raise VlgapError(f"{what} {src!r}: not a local folder and not found on the hub or in the Hugging Face "
                         f"cache ({line[:160]}); give a local folder, or populate the cache under HF_HOME") from None
    return snap, {"source": where, "weights": f"hub snapshot {snap.name}"}


def folder_fingerprint(folder: Path) -> str:
    """sha256 over (relative path, file sha256) of every weight file under `folder` (file hashes are
    memoised per path, size and mtime by vlgap's model cache, so large checkpoints are hashed once)."""
    from vlgap.encoders.gguf_cache import file_sha256

    files = sorted(p for p in Path(folder).rglob("*") if p.is_file() and p.suffix in _WEIGHT_SUFFIXES)
    if not files:
        raise VlgapError(f"{folder} holds no weight files ({', '.join(_WEIGHT_SUFFIXES)}); never random weights: "
                         "give a saved model folder")
    h = hashlib.sha256()
    for p in files:
        h.update(f"{p.relative_to(folder).as_posix()}={file_sha256(p)}\n".encode())
    return "sha256:" + h.hexdigest()[:32]


def _prefix(spec: str, valid: str, flag: str) -> tuple[str, str]:
    if not isinstance(spec, str) or not spec.strip():
        raise VlgapError(f"{flag}: empty spec; valid: {valid}")
    head, sep, rest = spec.partition(":")
    if sep and not rest:
        raise VlgapError(f"{flag} {spec!r}: nothing after {head + ':'!r}; valid: {valid}")
    return head, rest
