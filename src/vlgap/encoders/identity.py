"""A model's identity: what its weights are, told from its spec without loading it, for the feature cache key.

Features are reused only for the same weights (docs/cache.md): `weights_id(spec)` is a short string that
changes whenever the weights do, and `features.extract.encoder_key` keys entries with it.

- hf: / hf-video: folder: "sha256:<hex>" over its weight files and the files that define the model around
  them (config.json, the processor's and tokenizer's files: `DEFINITION_FILES`), name and content sha256
  of each; the content hashes are memoised per (path, size, mtime_ns) in this process and in a small
  index in the cache (gguf_cache.file_sha256), so an unchanged folder is not re-hashed on every run.
- hf: hub id: "revision:<commit>", the snapshot the local Hugging Face cache resolves the revision to
  (refs/<revision> -> snapshots/<commit>), read offline; a 40-hex revision is its own commit.
- gguf:<file>, tv:<arch>@<file>, timm:<arch>@<file>: "sha256:<hex>" of the file.
- tv:<arch>: the sha256 of torchvision's DEFAULT weights file in the torch hub cache.
- timm:<arch>: the hub commit of timm's pretrained repository in the Hugging Face cache (or the sha256 of
  a URL-only model's file in the torch hub cache).
- bundled names (mobilenet_v2, minilm, ...), config: specs and random weights: None (their name says it;
  their keys are unchanged).

When the identity cannot be told before loading (a hub id or tv:/timm: weights not cached yet, to be
downloaded), `weights_id` returns UNRESOLVED; `extract` then loads the model first and asks again.
`identity_from_record` tells the same from a loaded encoder's record, for the record and the console.
"""
from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any

UNRESOLVED = "unresolved"
_COMMIT = re.compile(r"^[0-9a-f]{40}$")
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".ckpt", ".gguf")


def weight_files(folder: Path) -> list[Path]:
    """The files of a model folder that hold weights (any format, shards and their index included)."""
    return sorted(p for p in folder.iterdir() if p.is_file() and
                  (p.suffix in WEIGHT_SUFFIXES or p.name.endswith((".safetensors.index.json", ".bin.index.json"))))


#: files of an hf folder that define the model besides its weights: the architecture (config.json: the
#: layer count, activation, norm epsilon...), the preprocessing (image / video processor) and the tokenizer.
#: Editing one changes the features as surely as new weights, so each is part of the folder's identity.
DEFINITION_FILES = ("config.json", "generation_config.json", "preprocessor_config.json", "processor_config.json",
                    "image_processor_config.json", "video_preprocessor_config.json", "feature_extractor_config.json",
                    "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "added_tokens.json",
                    "vocab.txt", "vocab.json", "merges.txt", "tokenizer.model", "spiece.model",
                    "sentencepiece.bpe.model", "chat_template.jinja", "chat_template.json")


def identity_files(folder: Path) -> list[Path]:
    """The files whose names and contents are a folder model's identity: its weight files and the files
    that define the model around them (DEFINITION_FILES)."""
    defining = [folder / name for name in DEFINITION_FILES if (folder / name).is_file()]
    return sorted(set(weight_files(folder)) | set(defining))


def folder_sha256(folder: Path) -> str:
    """One sha256 over a folder's weight and definition files (`identity_files`): their names and
    contents (content hashes memoised per path, size and mtime_ns)."""
    from vlgap.encoders.gguf_cache import file_sha256

    h = hashlib.sha256()
    for p in identity_files(folder):
        h.update(f"{p.name}\0{file_sha256(p)}\n".encode())
    return h.hexdigest()


def hub_commit(repo_id: str, revision: str | None = None, *, kind: str = "models") -> str | None:
    """The commit the local Hugging Face cache resolves `revision` (default main) of `repo_id` to, read
    from its refs without network; None when the cache has no such ref."""
    if revision and _COMMIT.match(revision):
        return revision
    try:
        from huggingface_hub import constants
    except ImportError:
        return None
    repo = Path(constants.HF_HUB_CACHE) / f"{kind}--{repo_id.replace('/', '--')}"
    ref = repo / "refs" / (revision or "main")
    try:
        commit = ref.read_text().strip()
    except OSError:
        return None
    return commit if _COMMIT.match(commit) and (repo / "snapshots" / commit).is_dir() else None


def _file_id(path: str | Path) -> str:
    from vlgap.encoders.gguf_cache import file_sha256

    p = Path(path).expanduser()
    return f"sha256:{file_sha256(p)}" if p.is_file() else UNRESOLVED


def _hf_id(rest: str) -> str:
    from vlgap.encoders.hub import parse_hf_spec

    src, revision, _ = parse_hf_spec(rest)
    folder = Path(src).expanduser()
    if folder.is_dir():  # with a revision: the loader refuses it (a folder has none)
        return UNRESOLVED if revision else f"sha256:{folder_sha256(folder)}"
    commit = hub_commit(src, revision)
    return f"revision:{commit}" if commit else UNRESOLVED


def _tv_id(arch: str) -> str:
    import torchvision.models as tvm

    from vlgap.encoders.vision import torchvision_hub_file

    try:
        weights = tvm.get_model_weights(arch).DEFAULT
    except (ValueError, KeyError, AttributeError):
        return UNRESOLVED  # the loader refuses it in one line
    return _file_id(torchvision_hub_file(weights))


def _timm_id(arch: str) -> str:
    try:
        import timm
        from timm.models import get_pretrained_cfg
    except ImportError:
        return UNRESOLVED
    if not timm.is_model(arch):
        return UNRESOLVED
    cfg = get_pretrained_cfg(arch)
    hub_id = getattr(cfg, "hf_hub_id", None)
    if hub_id:
        repo, _, rev = hub_id.partition("@")
        commit = hub_commit(repo, rev or None)
        return f"revision:{commit}" if commit else UNRESOLVED
    from vlgap.encoders.timm_models import _timm_cached_file

    found = _timm_cached_file(cfg) if cfg is not None else None
    return _file_id(found) if found is not None else UNRESOLVED


def weights_id(spec: str, *, random_weights: bool = False) -> str | None:
    """The identity of `spec`'s weights (module doc): `"sha256:<hex>"`, `"revision:<commit>"`, UNRESOLVED
    (only loading can tell), or None where the name alone says it."""
    from vlgap.encoders.registry import NAMED, _split_at

    spec = spec.strip() if isinstance(spec, str) else ""
    if random_weights or spec in NAMED:
        return None
    prefix, _, rest = spec.partition(":")
    if not rest:
        return None
    try:
        if prefix in ("hf", "hf-video"):
            return _hf_id(rest)
        if prefix == "gguf":
            return _file_id(rest)
        if prefix in ("tv", "timm"):
            arch, path = _split_at(rest)
            if path:
                return _file_id(path)
            return _tv_id(arch) if prefix == "tv" else _timm_id(arch)
    except Exception:  # a malformed spec: the loader refuses it in one line
        return UNRESOLVED
    return None


def identity_from_record(record: dict[str, Any] | None) -> str | None:
    """The same identity told from a loaded encoder's record (Encoder.record()); None for random weights
    or a record that holds none."""
    rec = record or {}
    if rec.get("random_weights"):
        return None
    if rec.get("gguf_sha256"):
        return f"sha256:{rec['gguf_sha256']}"
    if rec.get("weights_files"):
        h = hashlib.sha256()
        for name, digest in sorted(rec["weights_files"].items()):
            h.update(f"{name}\0{digest}\n".encode())
        return f"sha256:{h.hexdigest()}"
    if rec.get("revision"):
        return f"revision:{rec['revision']}"
    if rec.get("weights_sha256"):
        return f"sha256:{rec['weights_sha256']}"
    return None


def short(identity: str | None) -> str:
    """"sha256 a1b2c3d4e5f6…" / "revision 0123abcd4567…" for one line."""
    if not identity:
        return "none (before weights were part of the key)"
    kind, _, value = identity.partition(":")
    return f"{kind} {value[:12]}…" if value else kind
