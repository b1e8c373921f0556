"""What WSV checkpoint.pt and model.pt hold, sealed under the run's key (vlgap.reuse): the trained
weights (a pretrained LM's fixed base weights left out and fingerprinted), RNG states for exact
resumption, and how a model file is verified and loaded back into a Bundle."""
from __future__ import annotations

import hashlib
import io
import random
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import torch

from vlgap.errors import VlgapError
from vlgap.wsv.bundle import Bundle
from vlgap.wsv.train_config import WSV_FORMAT, WSVConfig
from vlgap.wsv.train_data import TrainData


def rng_state(batch_gen: torch.Generator) -> dict[str, Any]:
    s = {"torch": torch.get_rng_state(), "numpy": np.random.get_state(), "python": random.getstate(),
         "batch": batch_gen.get_state()}
    if torch.cuda.is_available() and torch.cuda.is_initialized():  # dropout on a GPU draws from its own RNG
        s["cuda"] = torch.cuda.get_rng_state_all()
    return s


def set_rng_state(s: dict[str, Any], batch_gen: torch.Generator) -> None:
    if "cuda" in s and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(s["cuda"])
    torch.set_rng_state(s["torch"])
    np.random.set_state(s["numpy"])
    random.setstate(s["python"])
    batch_gen.set_state(s["batch"])


def save_sealed(path: Path, obj: dict[str, Any], key: dict[str, Any]) -> None:
    """torch.save to bytes, written atomically and sealed under `key` (vlgap.reuse)."""
    from vlgap.reuse import write_artefact

    buf = io.BytesIO()
    torch.save(obj, buf)
    write_artefact(path, buf.getvalue(), key)


def fixed_lm_keys(bundle: Bundle, state: dict[str, torch.Tensor]) -> list[str]:
    """Keys of `state` (the bundle's state dict) that training never changes: under LoRA, a pretrained
    LM's base weights (the rule `lm_trainable` applies: only the adapters train). They are rebuilt from
    the LM's source when a checkpoint or model is read, so those files hold only what trains (SmolLM2 +
    LoRA: a few MB instead of 540 MB). Full fine-tuning keeps all."""
    if bundle.lm.kind == "scratch" or bundle.cfg.lora_r == 0:
        return []
    return [k for k in state if k.startswith("lm.") and "lora_" not in k]


def fixed_lm_fingerprint(bundle: Bundle, state: dict[str, torch.Tensor], keys: list[str]) -> str:
    """sha256 of the fixed LM weights (names, shapes, dtypes, bytes): a model file records it, and loading
    refuses base weights that differ from those it was trained on. Computed once per bundle."""
    cached = getattr(bundle, "_fixed_fingerprint", None)
    if cached is None:
        h = hashlib.sha256()
        for k in sorted(keys):
            t = state[k].detach().cpu().contiguous()
            h.update(f"{k}|{list(t.shape)}|{t.dtype}|".encode())
            h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
        cached = bundle.__dict__["_fixed_fingerprint"] = h.hexdigest()
    return cached


def stored_state(bundle: Bundle) -> dict[str, Any]:
    """What a checkpoint or model file keeps of the bundle: its state dict without the fixed LM weights,
    and, when some are left out, how many and their fingerprint."""
    state = bundle.state_dict()
    fixed = fixed_lm_keys(bundle, state)
    if not fixed:
        return {"modules": state}
    drop = set(fixed)
    return {"modules": {k: v for k, v in state.items() if k not in drop},
            "fixed_lm": {"n_tensors": len(fixed), "sha256": fixed_lm_fingerprint(bundle, state, fixed)}}


def load_stored_state(bundle: Bundle, obj: dict[str, Any], where: str) -> None:
    """Load what `stored_state` kept into a freshly built bundle (whose LM was rebuilt from its source);
    refuses a file missing any weight that trains, and fixed LM weights that differ from the file's."""
    fixed_rec = obj.get("fixed_lm")
    if fixed_rec is None:  # every weight stored (scratch LM, full fine-tuning, files of earlier versions)
        bundle.load_state_dict(obj["modules"])
        return
    missing, unexpected = bundle.load_state_dict(obj["modules"], strict=False)
    state = bundle.state_dict()
    fixed = fixed_lm_keys(bundle, state)
    lost = sorted(set(missing) - set(fixed))
    if lost or unexpected:
        raise VlgapError(f"{where}: weights do not fit the recorded config (missing {lost[:3]}, unexpected "
                         f"{sorted(unexpected)[:3]})")
    if fixed_lm_fingerprint(bundle, state, fixed) != fixed_rec["sha256"]:
        raise VlgapError(f"{where}: the pretrained LM {bundle.lm.record.get('source')!r} now has other weights than "
                         "the ones this file was trained with (its files changed); retrain, or restore that LM")


def run_key(cfg: WSVConfig, fingerprint: str, parts: dict[str, Any] | None = None) -> dict[str, Any]:
    """Everything that determines a training run's checkpoints and model (the parts: their specs and
    weight fingerprints, so a run with another generator, latent space or video-text model is refused)."""
    config = asdict(cfg)
    if not config["max_caption_steps"]:  # added later: runs without it keep their keys
        del config["max_caption_steps"]
    key = {"format": WSV_FORMAT, "config": config, "data": fingerprint}
    if parts is not None:
        key["parts"] = parts
    return key


def save_model(bundle: Bundle, path: Path, history: list, extra: dict[str, Any],
               key: dict[str, Any] | None = None) -> None:
    tok = bundle.lm.tokenizer
    save_sealed(path, {"format": "vlgap-wsv-1", "config": asdict(bundle.cfg), **stored_state(bundle),
                 "lm_record": bundle.lm.record, "tokenizer": tok.to_json() if hasattr(tok, "to_json") else None,
                 "latent_shape": list(bundle.latent_shape), "text_dim": bundle.text_dim,
                 "n_memory": int(bundle.memory.shape[0]), "history": history, "extra": extra},
          key if key is not None else {"format": WSV_FORMAT, "config": asdict(bundle.cfg)})


def read_model_bytes(path: str | Path) -> bytes:
    """model.pt's bytes, checked against its seal: a model whose bytes changed since `train` wrote it is
    refused in one line; an unsealed one (an older vlgap) is read with a one-line warning."""
    from vlgap.reuse import check_artefact, read_seal

    path = Path(path)
    if not path.is_file():
        raise VlgapError(f"model file {path} not found; `vlgap wsv train --out DIR` writes DIR/model.pt")
    verdict = check_artefact(path, None, verify_bytes=False)
    raw = path.read_bytes()
    if verdict.status == "unsealed":
        print(f"wsv: {path} has no seal (written by an older vlgap): its bytes cannot be verified",
              file=sys.stderr, flush=True)
        return raw
    seal = read_seal(path) or {}
    if verdict.status == "corrupt" or hashlib.sha256(raw).hexdigest() != seal.get("sha256"):
        reason = verdict.reason if verdict.status == "corrupt" else "checksum mismatch"
        raise VlgapError(f"{path} changed after it was written ({reason}); retrain it with `vlgap wsv train "
                         f"--out {path.parent}`")
    return raw


def load_model(path: str | Path, *, device: str = "cpu", video_text=None) -> Bundle:
    """A trained system from model.pt, on `device`; errors name what is wrong with the file. `video_text`:
    the frozen video-text model a text-only system with a pretrained one (clip) needs at inference."""
    from vlgap.wsv.lm import lm_from_record

    path = Path(path)
    raw = read_model_bytes(path)
    try:
        obj = torch.load(io.BytesIO(raw), weights_only=False, map_location="cpu")
    except Exception as exc:  # noqa: BLE001 - torch raises many types for a damaged file
        raise VlgapError(f"{path} is not a readable WSV model ({type(exc).__name__})") from None
    if not isinstance(obj, dict) or obj.get("format") != "vlgap-wsv-1":
        raise VlgapError(f"{path} is not a WSV model file (format vlgap-wsv-1); a checkpoint.pt is resumed by "
                         "`vlgap wsv train`, not loaded for captioning")
    cfg = WSVConfig(**obj["config"])
    c, f, h, w = obj["latent_shape"]
    n_mem = obj["n_memory"]
    n = max(n_mem, 1)  # Bundle reads only shapes (and the text-only memory bank, loaded below)
    dummy = TrainData(captions=["x"], latents=np.zeros((1, c, f, h, w), np.float32),
                      text_emb=np.zeros((n, obj["text_dim"]), np.float32))
    lm = lm_from_record(obj["lm_record"], obj["tokenizer"])
    bundle = Bundle(cfg, dummy, lm=lm, video_text=video_text)
    try:
        load_stored_state(bundle, obj, str(path))
    except RuntimeError as exc:
        raise VlgapError(f"{path}: weights do not fit the recorded config ({str(exc).splitlines()[0]})") from None
    bundle.history = obj["history"]
    bundle.extra = obj["extra"]
    return bundle.to(device).eval()
