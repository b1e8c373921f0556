"""One training stage of a WSV system: which parts train (freeze_for, stage_params, stage_lr), one
batch's loss (step_loss), the frozen polisher applied once (polished_latents) and the held-out loss
(validation_loss)."""
from __future__ import annotations

import numpy as np
import torch

from vlgap.errors import VlgapError
from vlgap.wsv.bundle import Bundle
from vlgap.wsv.train_config import WSVConfig
from vlgap.wsv.train_data import TrainData


def stage_params(bundle: Bundle, stage: str) -> list[torch.nn.Parameter]:
    if stage == "head":
        mods = [bundle.head]
    elif stage == "polisher":
        mods = [bundle.polisher]
    elif stage == "lm_pretrain":
        return [bundle.null_prefix, *[p for p in bundle.lm.parameters() if p.requires_grad]]
    else:
        mods = [bundle.prompter] + ([] if bundle.cfg.system == "frozen_lm" else [bundle.lm])
    return [p for m in mods for p in m.parameters() if p.requires_grad]


def stage_lr(cfg: WSVConfig, stage: str) -> float:
    return {"head": cfg.head_lr, "polisher": cfg.polisher_lr}.get(stage, cfg.lr)


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


def step_loss(bundle: Bundle, stage: str, data: TrainData, idx: torch.Tensor, tok: tuple, gen: torch.Generator,
               polished: np.ndarray | None = None):
    """One batch's loss. `polished`: the caption stage's latents already through the frozen polisher
    (polished_latents), read instead of polishing the batch."""
    from vlgap.wsv.models import mmd_rbf_loss, symmetric_infonce

    cfg = bundle.cfg
    dev = bundle.device
    if polished is not None:
        if stage != "caption":
            raise VlgapError(f"pre-polished latents are for the caption stage only, not {stage!r}")
        ids, mask = caption_batch(tok, idx, dev)
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
    ids, mask = caption_batch(tok, idx, dev)
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


def caption_batch(tok: tuple, rows, dev) -> tuple[torch.Tensor, torch.Tensor]:
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
        ids, mask = caption_batch(tok, sl, dev)
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


def freeze_for(bundle: Bundle, stage: str) -> None:
    """Only the stage's own parts train; frozen parts stay in eval mode (no dropout)."""
    bundle.eval()
    bundle.requires_grad_(False)
    if stage == "head":
        bundle.head.train().requires_grad_(True)
    elif stage == "polisher":
        bundle.polisher.train().requires_grad_(True)
    elif stage == "lm_pretrain":
        bundle.lm.train()
        lm_trainable(bundle, True)
        bundle.null_prefix.requires_grad_(True)
    else:
        bundle.prompter.train().requires_grad_(True)
        if bundle.cfg.system != "frozen_lm":
            bundle.lm.train()
            lm_trainable(bundle, True)


def lm_trainable(bundle: Bundle, on: bool) -> None:
    lm = bundle.lm
    if lm.kind == "scratch" or bundle.cfg.lora_r == 0:
        lm.requires_grad_(on)
    else:  # LoRA: only the adapters
        for n, p in lm.named_parameters():
            p.requires_grad_(on and "lora_" in n)
