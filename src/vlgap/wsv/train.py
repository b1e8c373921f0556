"""Training WSV and its baselines: stages, checkpoints every N steps, exact resumption (orchestration).

A system is a list of stages run in order, each a loop of optimizer steps over its own seeded batch
stream:  head (the contrastive video tower, the CLIP4Clip stand-in: latent -> caption-embedding space),
polisher (InfoNCE of head(polisher(latent)) against the frozen caption embeddings, head frozen; plus an
optional MMD term towards unlabelled real latents), lm_pretrain (frozen-LM baseline only: the LM learns
the caption corpus behind a learned constant prefix, then is frozen), caption (prompter + LM, next-token
loss). The checkpoint holds every module, the optimizer, all RNG states (torch, numpy, python, the batch
stream), the stage and the step, written atomically; a resumed run continues bit-for-bit where the
checkpoint left off, so kill + resume equals an uninterrupted run on the same machine.

Reuse (vlgap.reuse): the output folder records the run's configuration and data fingerprint (a rerun
with others is refused with the differences unless `force`); checkpoint.pt and model.pt are sealed
with that key and a checksum. A checkpoint whose bytes changed (a flipped byte, a truncated write) is
reported in one line and training starts again from step 0 (so the result still equals an
uninterrupted run); a model whose bytes changed is refused by `load_model`.

Systems: "wsv" (polished synthetic latents -> prompter -> LM), "wsv_mmd" (polisher also matched to
unlabelled real latents), "no_polisher" (raw synthetic latents), "frozen_lm" (LM pretrained on the
corpus, then frozen), "text_only" (caption embedding + Gaussian noise -> prefix MLP -> LM, CapDec-style;
at inference the video tower maps a video into caption-embedding space and DeCap's memory projection
replaces it by a softmax-weighted mix of training-caption embeddings), "oracle" (the supervised
ceiling: TrainData.latents are the latents of each caption's own video in the evaluation domain, paired
data WSV never sees; otherwise the no-polisher captioner).
"""
from __future__ import annotations

import hashlib
import io
import random
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch

from vlgap.counts import check_count
from vlgap.errors import VlgapError
from vlgap.wsv.convergence import converged
from vlgap.wsv.parts import CAPTION_LR, PART_DEFAULTS, SETTING_DEFAULTS

#: version of checkpoint.pt / model.pt keys: a change makes older checkpoints start over
WSV_FORMAT = 2

SYSTEMS = ("wsv", "wsv_mmd", "no_polisher", "frozen_lm", "text_only", "oracle")
STAGES = {"wsv": ("head", "polisher", "caption"), "wsv_mmd": ("head", "polisher", "caption"),
          "no_polisher": ("caption",), "frozen_lm": ("head", "polisher", "lm_pretrain", "caption"),
          "text_only": ("head", "caption"),
          # supervised ceiling: the same prompter + LM on latents of the captions' own real-style videos
          "oracle": ("caption",)}


@dataclass
class WSVConfig:
    system: str = "wsv"
    seed: int = 0
    head_steps: int = 300
    polisher_steps: int = 300
    lm_pretrain_steps: int = 400
    caption_steps: int = 800
    batch_size: int = 32
    lr: float = CAPTION_LR
    head_lr: float = 1e-3
    polisher_lr: float = 5e-4
    n_prompts: int = 8
    prompter_dim: int = 64
    prompter_layers: int = 2
    polisher_hidden: int = 32
    polisher_blocks: int = 2
    lm: str = SETTING_DEFAULTS["lm"]  # scratch | smollm2 | hf:<hub id or folder> (a bare folder: the older spelling)
    lm_layers: int = 3
    lm_dim: int = 128
    lm_heads: int = 4
    lora_r: int | None = SETTING_DEFAULTS["lora_r"]  # pretrained LMs: LoRA rank, 0 trains every weight (default: 0 for hf:, 8 otherwise)
    video_text: str = PART_DEFAULTS["video_text"]  # the polisher's frozen video-text model: latent-tower (stage head) | clip
    dtype: str = SETTING_DEFAULTS["dtype"]  # compute dtype of every model (trained modules: autocast over float32 weights)
    mmd_weight: float = 0.0  # wsv_mmd: weight of the distribution term
    noise_std: float = 0.025  # text_only: per-dimension noise on unit caption embeddings (noise norm ~0.5)
    decap_temperature: float = 0.01
    temperature: float = 0.07
    max_len: int = 48
    checkpoint_every: int = 100
    # caption stage: the loss on held-out pairs (TrainData.val_*) every val_every steps, recorded in the
    # history as ("val", step, loss); 0: never (nothing is recorded without held-out pairs either)
    val_every: int = 50
    # with validation pairs: the caption stage ends with the weights of its validation step of lowest loss
    # (early stopping by the best checkpoint; the history keeps every step)
    keep_best: bool = True
    # caption stage, with validation pairs: above caption_steps, train on past caption_steps until the held-out
    # loss has converged (its lowest point improved by at most STILL_FALLING over the last fifth of the steps
    # so far, checked at each validation: vlgap.wsv.convergence), at most this many steps; 0: exactly
    # caption_steps
    max_caption_steps: int = 0

    def __post_init__(self):
        if self.system not in SYSTEMS:
            raise VlgapError(f"unknown system {self.system!r}; valid: {', '.join(SYSTEMS)}")
        # a stage of this system with no steps would write an untrained model; unused stages may be 0
        from vlgap.runtime import parse_dtype
        from vlgap.wsv.lm import check_lm_spec

        check_lm_spec(self.lm)
        self.dtype = parse_dtype(self.dtype)  # canonical: bf16 and bfloat16 train (and key) one model
        if self.video_text not in ("latent-tower", "clip"):
            raise VlgapError(f"video_text {self.video_text!r} is not valid; valid: latent-tower, clip")
        if self.lora_r is None:  # the paper fine-tunes GPT-2 fully; the bundled SmolLM2 keeps its LoRA default
            self.lora_r = 0 if self.lm.startswith("hf:") else 8
        for stage in ("head", "polisher", "lm_pretrain", "caption"):
            name = f"{stage}_steps"
            used = stage in self.stages()
            setattr(self, name, check_count(name, getattr(self, name), 1 if used else 0,
                                            flag="--" + name.replace("_", "-"), example=300))
        for name, minimum, example in (("batch_size", 1, 32), ("checkpoint_every", 1, 100), ("n_prompts", 1, 8),
                                       ("prompter_dim", 1, 64), ("prompter_layers", 1, 2),
                                       ("polisher_hidden", 1, 32), ("polisher_blocks", 0, 2), ("lm_layers", 1, 3),
                                       ("lm_dim", 1, 128), ("lm_heads", 1, 4), ("lora_r", 0, 8), ("max_len", 4, 48),
                                       ("val_every", 0, 50), ("max_caption_steps", 0, 6000)):
            setattr(self, name, check_count(name, getattr(self, name), minimum,
                                            flag="--" + name.replace("_", "-"), example=example))
        if self.max_caption_steps and self.max_caption_steps < self.caption_steps:
            raise VlgapError(f"max_caption_steps {self.max_caption_steps} is below caption_steps {self.caption_steps}: "
                             "give at least caption_steps (training goes on past it until converged), or 0")
        if self.max_caption_steps and not self.val_every:
            raise VlgapError("max_caption_steps needs val_every > 0: convergence is judged on the held-out loss")
        if self.system == "wsv_mmd" and self.mmd_weight <= 0:
            self.mmd_weight = 1.0

    def stages(self) -> tuple[str, ...]:
        """The system's stages; a pretrained video-text model (clip) replaces the trained tower (head)."""
        if self.video_text != "latent-tower":
            return tuple(s for s in STAGES[self.system] if s != "head")
        return STAGES[self.system]

    def steps_of(self, stage: str) -> int:
        return {"head": self.head_steps, "polisher": self.polisher_steps, "lm_pretrain": self.lm_pretrain_steps,
                "caption": self.caption_steps}[stage]


@dataclass
class TrainData:
    """Training pairs: caption i with its synthetic latent i and caption embedding i (unit norm)."""

    captions: list[str]
    latents: np.ndarray  # [N, C, F, H, W] float32
    text_emb: np.ndarray  # [N, D] float32, L2-normalised
    real_unlabelled: np.ndarray | None = None  # [M, C, F, H, W], only for the distribution term
    meta: dict[str, Any] = field(default_factory=dict)
    parts: dict[str, Any] | None = None  # records of the generator, latent encoder and video-text model used
    # held-out pairs never trained on (the validation loss): captions, the latents the system reads for
    # them (the same kind as `latents`) and their caption embeddings
    val_captions: list[str] | None = None
    val_latents: np.ndarray | None = None
    val_text_emb: np.ndarray | None = None

    def check(self) -> None:
        n = len(self.captions)
        if n == 0:
            raise VlgapError("the training corpus is empty: give at least one caption")
        if self.latents.ndim != 5 or len(self.latents) != n:
            raise VlgapError(f"latents must be [N={n}, C, F, H, W], got {list(self.latents.shape)}")
        if self.text_emb.ndim != 2 or len(self.text_emb) != n:
            raise VlgapError(f"caption embeddings must be [N={n}, D], got {list(self.text_emb.shape)}")
        if self.real_unlabelled is not None and self.real_unlabelled.shape[1:] != self.latents.shape[1:]:
            raise VlgapError(f"unlabelled real latents {list(self.real_unlabelled.shape[1:])} and synthetic latents "
                             f"{list(self.latents.shape[1:])} differ in shape; encode both with one latent encoder")
        if self.val_captions is not None:
            m = len(self.val_captions)
            if m == 0 or self.val_latents is None or self.val_text_emb is None:
                raise VlgapError("validation pairs need captions, latents and caption embeddings (at least one)")
            if self.val_latents.shape != (m, *self.latents.shape[1:]):
                raise VlgapError(f"validation latents must be [N={m}, {', '.join(map(str, self.latents.shape[1:]))}] "
                                 f"(the training latents' shape), got {list(self.val_latents.shape)}")
            if self.val_text_emb.shape != (m, self.text_emb.shape[1]):
                raise VlgapError(f"validation caption embeddings must be [N={m}, {self.text_emb.shape[1]}], got "
                                 f"{list(self.val_text_emb.shape)}")

    def fingerprint(self) -> str:
        import hashlib

        h = hashlib.sha256()
        h.update("\n".join(self.captions).encode())
        arrays = [self.latents, self.text_emb, self.real_unlabelled]
        if self.val_captions is not None:  # only then: data without validation pairs keep their fingerprint
            h.update(("\nval\n" + "\n".join(self.val_captions)).encode())
            arrays += [self.val_latents, self.val_text_emb]
        for arr in arrays:  # every number that training reads
            if arr is None:
                h.update(b"none")
                continue
            arr = np.ascontiguousarray(arr, np.float32)
            h.update(f"{arr.shape}".encode())
            h.update(arr.tobytes())
        return h.hexdigest()[:16]


class Bundle(torch.nn.Module):
    """Every trainable part of one system (absent parts are None)."""

    def __init__(self, cfg: WSVConfig, data: TrainData, lm=None, video_text=None):
        super().__init__()
        from vlgap.wsv.lm import build_pretrained_lm, build_scratch_lm
        from vlgap.wsv.models import Polisher, PrefixMLP, Prompter, VideoHead

        c, f, h, w = data.latents.shape[1:]
        self.cfg, self.latent_shape, self.text_dim = cfg, (c, f, h, w), data.text_emb.shape[1]
        torch.manual_seed(cfg.seed)
        if lm is None:
            if cfg.lm == "scratch":
                lm = build_scratch_lm(data.captions, n_layer=cfg.lm_layers, n_embd=cfg.lm_dim, n_head=cfg.lm_heads,
                                      n_positions=cfg.max_len + cfg.n_prompts + 8)
            else:
                lm = build_pretrained_lm(cfg.lm, lora_r=cfg.lora_r)
        self.lm = lm
        self.__dict__["video_text"] = video_text  # frozen, loaded from its spec: not part of the state dict
        stages = cfg.stages()
        self.head = VideoHead(c, self.text_dim) if "head" in stages else None
        self.polisher = Polisher(c, cfg.polisher_hidden, cfg.polisher_blocks) if "polisher" in stages else None
        if cfg.system == "text_only":
            self.prompter = PrefixMLP(self.text_dim, lm.d_model, cfg.n_prompts)
        else:
            self.prompter = Prompter(c, (f, h, w), lm.d_model, cfg.n_prompts, cfg.prompter_dim, cfg.prompter_layers)
        self.null_prefix = torch.nn.Parameter(torch.zeros(1, cfg.n_prompts, lm.d_model)) \
            if "lm_pretrain" in stages else None
        self.register_buffer("memory", torch.from_numpy(np.ascontiguousarray(data.text_emb, np.float32))
                             if cfg.system == "text_only" else torch.zeros(0))

    def embed_video(self, z: torch.Tensor) -> torch.Tensor:
        """The frozen video-text model's embedding of latents: the trained tower, or CLIP over VAE frames."""
        if self.head is not None:
            return self.head(z)
        if self.video_text is None:
            raise VlgapError(f"system {self.cfg.system!r} with video_text {self.cfg.video_text!r} needs its video-text "
                             "model: build it with vlgap.wsv.parts.build_video_text and pass video_text=")
        return self.video_text.embed_latents(z)

    @property
    def device(self) -> torch.device:
        return next(self.parameters()).device

    def autocast(self):
        return autocast(self.cfg.dtype, self.device)

    # ---- inference -------------------------------------------------------------------------
    def prompts_from_latents(self, z: torch.Tensor, polish: bool = False) -> torch.Tensor:
        from vlgap.wsv.models import check_latents

        check_latents(z, self.latent_shape[0], "captioner", self.latent_shape[1:])
        if self.cfg.system == "text_only":
            e = self.embed_video(z).float()
            w = torch.softmax(e @ self.memory.T / self.cfg.decap_temperature, dim=-1)
            return self.prompter(torch.nn.functional.normalize(w @ self.memory, dim=-1))
        if polish:
            if self.polisher is None:
                raise VlgapError(f"system {self.cfg.system!r} has no polisher to apply at inference")
            z = self.polisher(z)
        return self.prompter(z)

    @torch.no_grad()
    def caption(self, latents: np.ndarray, polish: bool = False, batch_size: int = 64,
                max_new_tokens: int | None = None, beam: int = 1) -> list[str]:
        """Greedy (beam=1, with a key/value cache) or beam-search captions, batched."""
        batch_size = check_count("batch_size", batch_size, 1, flag="--batch-size", example=64)
        beam = check_count("beam", beam, 1, flag="--beam", example=3)
        max_new_tokens = check_count("max_new_tokens", max_new_tokens, 1, example=40, allow_none=True)
        self.eval()
        out: list[str] = []
        for i in range(0, len(latents), batch_size):
            z = torch.from_numpy(np.ascontiguousarray(latents[i:i + batch_size], np.float32)).to(self.device)
            n_new = max_new_tokens or self.cfg.max_len
            with self.autocast():
                prompts = self.prompts_from_latents(z, polish)
                ids = self.lm.generate(prompts, n_new) if beam <= 1 else self.lm.beam_search(prompts, beam, n_new)
            out.extend(self.lm.tokenizer.decode(r) for r in ids)
        return out


def autocast(dtype: str, device):
    """Mixed precision in `dtype` on the device (float32: off): weights stay float32, matmuls and
    convolutions run in bfloat16 / float16."""
    from vlgap.runtime import parse_dtype, torch_dtype

    dev = torch.device(device)
    return torch.autocast(device_type=dev.type, dtype=torch_dtype(dtype), enabled=parse_dtype(dtype) != "float32")


def _rng_state(batch_gen: torch.Generator) -> dict[str, Any]:
    s = {"torch": torch.get_rng_state(), "numpy": np.random.get_state(), "python": random.getstate(),
         "batch": batch_gen.get_state()}
    if torch.cuda.is_available() and torch.cuda.is_initialized():  # dropout on a GPU draws from its own RNG
        s["cuda"] = torch.cuda.get_rng_state_all()
    return s


def _set_rng_state(s: dict[str, Any], batch_gen: torch.Generator) -> None:
    if "cuda" in s and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(s["cuda"])
    torch.set_rng_state(s["torch"])
    np.random.set_state(s["numpy"])
    random.setstate(s["python"])
    batch_gen.set_state(s["batch"])


def _save(path: Path, obj: dict[str, Any], key: dict[str, Any]) -> None:
    """torch.save to bytes, written atomically and sealed under `key` (vlgap.reuse)."""
    from vlgap.reuse import write_artefact

    buf = io.BytesIO()
    torch.save(obj, buf)
    write_artefact(path, buf.getvalue(), key)


def fixed_lm_keys(bundle: Bundle, state: dict[str, torch.Tensor]) -> list[str]:
    """Keys of `state` (the bundle's state dict) that training never changes: under LoRA, a pretrained
    LM's base weights (the rule `_lm_trainable` applies: only the adapters train). They are rebuilt from
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


def _params(bundle: Bundle, stage: str) -> list[torch.nn.Parameter]:
    if stage == "head":
        mods = [bundle.head]
    elif stage == "polisher":
        mods = [bundle.polisher]
    elif stage == "lm_pretrain":
        return [bundle.null_prefix, *[p for p in bundle.lm.parameters() if p.requires_grad]]
    else:
        mods = [bundle.prompter] + ([] if bundle.cfg.system == "frozen_lm" else [bundle.lm])
    return [p for m in mods for p in m.parameters() if p.requires_grad]


def _lr(cfg: WSVConfig, stage: str) -> float:
    return {"head": cfg.head_lr, "polisher": cfg.polisher_lr}.get(stage, cfg.lr)


#: the caption stage polishes the whole corpus once up front (the polisher is frozen there) when the
#: latents take at most this many bytes; bigger corpora (VAE latents of 10^4+ clips) polish each batch
POLISH_ONCE_BYTES = 2 * 1024 ** 3


@torch.no_grad()
def polished_latents(bundle: Bundle, latents: np.ndarray, batch_size: int = 64) -> np.ndarray:
    """The frozen polisher applied to every latent (eval mode, the bundle's dtype), as float32."""
    dev = bundle.device
    was = bundle.polisher.training
    bundle.polisher.eval()
    out = np.empty(latents.shape, np.float32)
    for i in range(0, len(latents), batch_size):
        z = torch.from_numpy(np.ascontiguousarray(latents[i:i + batch_size], np.float32)).to(dev)
        with bundle.autocast():
            out[i:i + batch_size] = bundle.polisher(z).float().cpu().numpy()
    bundle.polisher.train(was)
    return out


def _step_loss(bundle: Bundle, stage: str, data: TrainData, idx: torch.Tensor, tok: tuple, gen: torch.Generator,
               polished: np.ndarray | None = None):
    """One batch's loss. `polished`: the caption stage's latents already through the frozen polisher
    (polished_latents), read instead of polishing the batch."""
    from vlgap.wsv.models import mmd_rbf_loss, symmetric_infonce

    cfg = bundle.cfg
    dev = bundle.device
    if polished is not None:
        if stage != "caption":
            raise VlgapError(f"pre-polished latents are for the caption stage only, not {stage!r}")
        ids, mask = _caption_batch(tok, idx, dev)
        return bundle.lm.loss(bundle.prompter(torch.from_numpy(polished[idx.numpy()]).to(dev)), ids, mask)
    z = torch.from_numpy(data.latents[idx.numpy()]).to(dev)
    t = torch.from_numpy(data.text_emb[idx.numpy()]).to(dev)
    if stage == "head":
        return symmetric_infonce(bundle.head(z).float(), t, cfg.temperature)
    if stage == "polisher":
        zp = bundle.polisher(z)
        loss = symmetric_infonce(bundle.embed_video(zp).float(), t, cfg.temperature)
        if cfg.mmd_weight > 0 and data.real_unlabelled is not None:
            j = torch.randint(len(data.real_unlabelled), (len(idx),), generator=gen)
            real = torch.from_numpy(data.real_unlabelled[j.numpy()]).to(dev)
            loss = loss + cfg.mmd_weight * mmd_rbf_loss(zp.float(), real)
        return loss
    ids, mask = _caption_batch(tok, idx, dev)
    if stage == "lm_pretrain":
        return bundle.lm.loss(bundle.null_prefix.expand(len(idx), -1, -1), ids, mask)
    if cfg.system == "text_only":
        v = t + cfg.noise_std * torch.randn(t.shape, generator=gen).to(dev)
        prompts = bundle.prompter(torch.nn.functional.normalize(v, dim=-1))
    else:
        with torch.no_grad():
            zin = bundle.polisher(z) if bundle.polisher is not None else z
        prompts = bundle.prompter(zin)
    return bundle.lm.loss(prompts, ids, mask)


def _caption_batch(tok: tuple, rows, dev) -> tuple[torch.Tensor, torch.Tensor]:
    """(token ids, mask) of the tokenised captions `rows` on `dev`, cut to the batch's longest caption."""
    ids, mask = tok[0][rows].to(dev), tok[1][rows].to(dev)
    L = int(mask.sum(1).max())
    return ids[:, :L], mask[:, :L]


@torch.no_grad()
def validation_loss(bundle: Bundle, data: TrainData, tok: tuple, batch_size: int = 64) -> float:
    """Mean next-token loss per caption token on the held-out pairs, every part in eval mode (no dropout, no
    noise: the text-only prefix reads the clean caption embedding), drawing no random numbers, so training
    goes on bit-for-bit as without it."""
    dev = bundle.device
    was_training = {m: m.training for m in bundle.modules()}
    bundle.eval()
    total, n_tok = 0.0, 0
    for i in range(0, len(data.val_captions), batch_size):
        sl = slice(i, i + batch_size)
        ids, mask = _caption_batch(tok, sl, dev)
        with bundle.autocast():
            if bundle.cfg.system == "text_only":
                t = torch.from_numpy(np.ascontiguousarray(data.val_text_emb[sl], np.float32)).to(dev)
                prompts = bundle.prompter(torch.nn.functional.normalize(t, dim=-1))
            else:
                z = torch.from_numpy(np.ascontiguousarray(data.val_latents[sl], np.float32)).to(dev)
                prompts = bundle.prompter(bundle.polisher(z) if bundle.polisher is not None else z)
            loss = bundle.lm.loss(prompts, ids, mask)
        k = int(mask[:, 1:].sum())
        total, n_tok = total + float(loss) * k, n_tok + k
    for m, on in was_training.items():
        m.train(on)
    return total / max(n_tok, 1)


def _freeze_for(bundle: Bundle, stage: str) -> None:
    """Only the stage's own parts train; frozen parts stay in eval mode (no dropout)."""
    bundle.eval()
    bundle.requires_grad_(False)
    if stage == "head":
        bundle.head.train().requires_grad_(True)
    elif stage == "polisher":
        bundle.polisher.train().requires_grad_(True)
    elif stage == "lm_pretrain":
        bundle.lm.train()
        _lm_trainable(bundle, True)
        bundle.null_prefix.requires_grad_(True)
    else:
        bundle.prompter.train().requires_grad_(True)
        if bundle.cfg.system != "frozen_lm":
            bundle.lm.train()
            _lm_trainable(bundle, True)


def _lm_trainable(bundle: Bundle, on: bool) -> None:
    lm = bundle.lm
    if lm.kind == "scratch" or bundle.cfg.lora_r == 0:
        lm.requires_grad_(on)
    else:  # LoRA: only the adapters
        for n, p in lm.named_parameters():
            p.requires_grad_(on and "lora_" in n)


def _legacy_train_folder(out: Path) -> bool:
    from vlgap.reuse import RUN_RECORD

    return not (out / RUN_RECORD).exists() and ((out / "checkpoint.pt").exists() or (out / "model.pt").exists())


def train(data: TrainData, cfg: WSVConfig, out_dir: str | Path, *, log: Callable[[str], None] | None = None,
          stop_after: int | None = None, extra: dict[str, Any] | None = None, force: bool = False,
          video_text=None, device: str = "cpu") -> Bundle:
    """Train (or resume) one system; returns the trained Bundle and writes out_dir/model.pt.

    out_dir/checkpoint.pt is written every cfg.checkpoint_every steps and at each stage end; a run that
    finds it resumes. The folder records the config and the data's fingerprint: another config or data
    is refused with the differences (`force`: start over in it). A checkpoint whose bytes changed is
    reported and training starts from step 0. `stop_after`: stop after that many steps of this call
    (tests use it to simulate a kill). `video_text`: the frozen video-text model of cfg.video_text
    (vlgap.wsv.parts; None for the trained latent tower); `device`: where every module trains."""
    from vlgap.reuse import claim_run_folder, discard, read_verified, remove_stale_temporaries

    data.check()
    if cfg.max_caption_steps and "caption" in cfg.stages() and data.val_captions is None:
        raise VlgapError("max_caption_steps trains until the held-out loss converges: it needs validation pairs "
                         "(TrainData val_captions, val_latents, val_text_emb)")
    if stop_after is not None:
        check_count("stop_after", stop_after, 1)
    out = Path(out_dir)
    ckpt_path = out / "checkpoint.pt"
    fp = data.fingerprint()
    key = run_key(cfg, fp, data.parts)
    say = log or (lambda line: print(f"wsv: {line}", file=sys.stderr, flush=True))
    legacy = _legacy_train_folder(out)
    if legacy:
        say(f"{out}: written by an older vlgap (no run record); its checkpoint is unsealed and is not reused")
    resumed = claim_run_folder(out, "wsv-train", key, force=force or legacy)
    remove_stale_temporaries(out)  # leftovers of a killed run
    if not resumed:  # a new folder, or one taken over: nothing in it is this run's
        discard(ckpt_path)
        discard(out / "model.pt")
    bundle = Bundle(cfg, data, video_text=video_text).to(device)
    if cfg.video_text != "latent-tower" and video_text is None:
        raise VlgapError(f"training with video_text {cfg.video_text!r} needs the model itself (video_text=)")
    stage_i, step, history = 0, 0, []
    state, best = None, None  # best: the caption stage's lowest validation loss so far, its step and weights
    raw = read_verified(ckpt_path, key, what="WSV checkpoint", report=lambda line: say(line + " from step 0"))
    if raw is not None:
        state = torch.load(io.BytesIO(raw), weights_only=False, map_location="cpu")  # RNG states stay CPU tensors
        load_stored_state(bundle, state, str(ckpt_path))
        stage_i, step, history = state["stage_index"], state["step"], state["history"]
        best = state.get("best")
        if log:
            log(f"resuming {cfg.system} seed {cfg.seed} at stage {cfg.stages()[min(stage_i, len(cfg.stages()) - 1)]} "
                f"step {step}")
    from vlgap.wsv.lm import encode_batch

    tok = encode_batch(bundle.lm.tokenizer, data.captions, cfg.max_len)
    val_tok = encode_batch(bundle.lm.tokenizer, data.val_captions, cfg.max_len) if data.val_captions else None
    n_cut = sum(len(bundle.lm.tokenizer.encode(c)) > cfg.max_len - 2 for c in data.captions)
    done_steps = 0
    stages = cfg.stages()
    while stage_i < len(stages):
        stage = stages[stage_i]
        total = cfg.steps_of(stage)
        # the caption stage may go on past `total` (until converged), up to `limit`
        limit = max(total, cfg.max_caption_steps) if stage == "caption" else total
        _freeze_for(bundle, stage)
        params = _params(bundle, stage)
        opt = torch.optim.AdamW(params, lr=_lr(cfg, stage), weight_decay=0.01)
        gen = torch.Generator().manual_seed(cfg.seed * 1000 + stage_i)
        if state is not None and state.get("optimizer") is not None and state["stage_index"] == stage_i:
            opt.load_state_dict(state["optimizer"])
            _set_rng_state(state["rng"], gen)
        elif stage_i > 0 or state is None:
            torch.manual_seed(cfg.seed * 7919 + stage_i)
            np.random.seed(cfg.seed * 7919 + stage_i)
            random.seed(cfg.seed * 7919 + stage_i)
        state = None
        # the frozen polisher's output does not change during the caption stage: polish the corpus once
        polished = polished_latents(bundle, data.latents) if (
            stage == "caption" and bundle.polisher is not None and data.latents.nbytes <= POLISH_ONCE_BYTES) else None
        t0, s0 = time.perf_counter(), step
        bs = min(cfg.batch_size, len(data.captions))
        while step < limit:
            idx = torch.randperm(len(data.captions), generator=gen)[:bs]
            with bundle.autocast():
                loss = _step_loss(bundle, stage, data, idx, tok, gen, polished)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            opt.step()
            step += 1
            done_steps += 1
            history.append((stage, step, float(loss.detach())))
            validated = val_tok is not None and stage == "caption" and cfg.val_every and (
                step % cfg.val_every == 0 or step in (total, limit))
            if validated:
                v = validation_loss(bundle, data, val_tok)
                history.append(("val", step, v))
                if cfg.keep_best and (best is None or v < best["val_loss"]):
                    best = {"step": step, "val_loss": v, "params": {n: p.detach().clone() for n, p
                                                                    in bundle.named_parameters() if p.requires_grad}}
            # past `total`, the caption stage ends at the first validation that finds the held-out loss converged
            finished = step >= limit or (step >= total and validated and converged(history))
            if finished and stage == "caption" and best is not None:
                bundle.load_state_dict(best["params"], strict=False)  # the trained parts only
            if log and (step % max(1, total // 10) == 0 or finished):
                rate = (step - s0) / max(time.perf_counter() - t0, 1e-9)
                recent = np.mean([h[2] for h in history[-20:] if h[0] == stage])
                goal = f"{total}" if limit == total else f"{total} (up to {limit} until converged)"
                log(f"{cfg.system} seed {cfg.seed} {stage}: step {step}/{goal} loss {recent:.3f} "
                    f"({rate:.1f} steps/s, ETA {max(total - step, 0) / max(rate, 1e-9):.0f} s)")
            stopping = stop_after is not None and done_steps >= stop_after
            if step % cfg.checkpoint_every == 0 or finished or stopping:
                _save(ckpt_path, {"config": asdict(cfg), "data": fp, **stored_state(bundle),
                                  "stage_index": stage_i + 1 if finished else stage_i, "step": 0 if finished else step,
                                  "optimizer": None if finished else opt.state_dict(),
                                  "rng": _rng_state(gen), "history": history, "best": best}, key)
            if stopping:
                return bundle
            if finished:
                break
        stage_i, step = stage_i + 1, 0
    bundle.selected = None if best is None else {"caption_step": best["step"], "val_loss": best["val_loss"]}
    save_model(bundle, out / "model.pt", history, {"captions_cut": int(n_cut), "selected": bundle.selected,
                                                   **(extra or {})}, key=key)
    return bundle


def save_model(bundle: Bundle, path: Path, history: list, extra: dict[str, Any],
               key: dict[str, Any] | None = None) -> None:
    tok = bundle.lm.tokenizer
    _save(path, {"format": "vlgap-wsv-1", "config": asdict(bundle.cfg), **stored_state(bundle),
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
