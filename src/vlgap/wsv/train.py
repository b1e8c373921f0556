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

The parts, one module each (all their names are importable from here too):
    train_config  WSVConfig, SYSTEMS, STAGES, WSV_FORMAT      train_data   TrainData
    bundle        Bundle (the trainable parts, captioning)     stages       one stage's parts, loss, validation
    model_files   checkpoint.pt / model.pt: stored state, RNG, sealing, load_model
"""
from __future__ import annotations

import io
import random
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch

from vlgap.counts import check_count
from vlgap.errors import VlgapError
from vlgap.wsv.bundle import Bundle, autocast  # noqa: F401 (re-exported: vlgap.wsv.train.Bundle)
from vlgap.wsv.convergence import converged
from vlgap.wsv.model_files import (fixed_lm_fingerprint, fixed_lm_keys, load_model, load_stored_state,  # noqa: F401
                                   read_model_bytes, rng_state, run_key, save_model, save_sealed, set_rng_state,
                                   stored_state)
from vlgap.wsv.stages import (caption_batch, freeze_for, lm_trainable, polished_latents, stage_lr,  # noqa: F401
                              stage_params, step_loss, validation_loss)
from vlgap.wsv.train_config import STAGES, SYSTEMS, WSV_FORMAT, WSVConfig  # noqa: F401
from vlgap.wsv.train_data import TrainData

# the names these had when they lived here (tests and benchmarks import them from vlgap.wsv.train)
_params, _lr, _step_loss, _caption_batch = stage_params, stage_lr, step_loss, caption_batch
_freeze_for, _lm_trainable, _rng_state, _set_rng_state, _save = (freeze_for, lm_trainable, rng_state, set_rng_state,
                                                                   save_sealed)

#: the caption stage polishes the whole corpus once up front (the polisher is frozen there) when the
#: latents take at most this many bytes; bigger corpora (VAE latents of 10^4+ clips) polish each batch
POLISH_ONCE_BYTES = 2 * 1024 ** 3


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
    from vlgap.reuse import read_verified, seal_path
    from vlgap.runs import open_run_folder

    data.check()
    if cfg.max_caption_steps and "caption" in cfg.stages() and data.val_captions is None:
        raise VlgapError("max_caption_steps trains until the held-out loss converges: it needs validation pairs "
                         "(TrainData val_captions, val_latents, val_text_emb)")
    if stop_after is not None:
        check_count("stop_after", stop_after, 1)
    if cfg.video_text != "latent-tower" and video_text is None:  # refused before the folder records the run
        raise VlgapError(f"training with video_text {cfg.video_text!r} needs the model itself (video_text=)")
    from vlgap.runtime import parse_device

    parse_device(device)
    out = Path(out_dir)
    ckpt_path = out / "checkpoint.pt"
    fp = data.fingerprint()
    key = run_key(cfg, fp, data.parts)
    say = log or (lambda line: print(f"wsv: {line}", file=sys.stderr, flush=True))
    legacy = _legacy_train_folder(out)
    if legacy:
        say(f"{out}: written by an older vlgap (no run record); its checkpoint is unsealed and is not reused")
    # a new folder, or one taken over, loses its checkpoint and model (nothing in it is this run's); the
    # leftovers of a killed run go too
    own = ("checkpoint.pt", "model.pt")
    if cfg.lm not in ("scratch", "smollm2"):  # a language model that cannot be found is refused before the
        from vlgap.wsv.sources import resolve_source  # run folder records this configuration

        resolve_source(cfg.lm.removeprefix("hf:"), "--lm hf:")
    open_run_folder(out, "wsv-train", key, force=force or legacy,
                    clear=own + tuple(seal_path(out / name).name for name in own), results=own)
    bundle = Bundle(cfg, data, video_text=video_text).to(device)
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
        freeze_for(bundle, stage)
        params = stage_params(bundle, stage)
        opt = torch.optim.AdamW(params, lr=stage_lr(cfg, stage), weight_decay=0.01)
        gen = torch.Generator().manual_seed(cfg.seed * 1000 + stage_i)
        if state is not None and state.get("optimizer") is not None and state["stage_index"] == stage_i:
            opt.load_state_dict(state["optimizer"])
            set_rng_state(state["rng"], gen)
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
                loss = step_loss(bundle, stage, data, idx, tok, gen, polished)
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
                save_sealed(ckpt_path, {"config": asdict(cfg), "data": fp, **stored_state(bundle),
                                  "stage_index": stage_i + 1 if finished else stage_i, "step": 0 if finished else step,
                                  "optimizer": None if finished else opt.state_dict(),
                                  "rng": rng_state(gen), "history": history, "best": best}, key)
            if stopping:
                return bundle
            if finished:
                break
        stage_i, step = stage_i + 1, 0
    bundle.selected = None if best is None else {"caption_step": best["step"], "val_loss": best["val_loss"]}
    save_model(bundle, out / "model.pt", history, {"captions_cut": int(n_cut), "selected": bundle.selected,
                                                   **(extra or {})}, key=key)
    return bundle
