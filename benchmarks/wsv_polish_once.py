"""Benchmark: the WSV caption stage with the frozen polisher applied to every batch (as before) vs the
corpus polished once before the stage (vlgap.wsv.train.polished_latents, what training does now).

Same bundle, same batches: the losses must be identical; prints ms per caption step of each, the one-time
polishing cost, and the ratio over a whole caption stage of --stage-steps steps. Latents are random at the
documented experiment's shape [32, 8, 8, 8] (the cost does not depend on their values), captions are real
shapes-world captions, model sizes are the experiment's (EXPERIMENT_DEFAULTS["train"]).

    python benchmarks/wsv_polish_once.py --threads 1            # as one experiment worker
    python benchmarks/wsv_polish_once.py --steps 10 --n 640     # quick
"""
from __future__ import annotations

import argparse
import os
import platform
import time

import numpy as np
import torch


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=40, help="timed caption steps per variant")
    ap.add_argument("--n", type=int, default=3000, help="corpus size (the experiment's: 3,000 captions)")
    ap.add_argument("--stage-steps", type=int, default=3000, help="caption-stage length for the whole-stage ratio")
    ap.add_argument("--threads", type=int, default=None)
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    from vlgap.data.shapes import item_rng, sample_spec, write_captions
    from vlgap.wsv.experiment import EXPERIMENT_DEFAULTS
    from vlgap.wsv.lm import encode_batch
    from vlgap.wsv.train import Bundle, TrainData, WSVConfig, _freeze_for, _params, _step_loss, polished_latents

    caps = [write_captions(sample_spec(item_rng(0, i)), i)[0] for i in range(args.n)]
    rng = np.random.default_rng(0)
    lat = rng.normal(size=(args.n, 32, 8, 8, 8)).astype(np.float32)
    emb = rng.normal(size=(args.n, 384)).astype(np.float32)
    emb /= np.linalg.norm(emb, axis=1, keepdims=True)
    data = TrainData(caps, lat, emb)
    train = {k: v for k, v in EXPERIMENT_DEFAULTS["train"].items() if k not in ("max_caption_steps",)}
    cfg = WSVConfig(system="wsv", **train)
    bundle = Bundle(cfg, data)
    with torch.no_grad():  # a trained polisher is not the identity: give its last convolutions weights
        for blk in bundle.polisher.blocks:
            torch.nn.init.normal_(blk.conv2.weight, std=0.02)
    tok = encode_batch(bundle.lm.tokenizer, caps, cfg.max_len)
    _freeze_for(bundle, "caption")
    params = _params(bundle, "caption")

    def run(polished):
        torch.manual_seed(0)
        gen = torch.Generator().manual_seed(0)
        state = {k: v.clone() for k, v in bundle.state_dict().items()}
        opt = torch.optim.AdamW(params, lr=cfg.lr, weight_decay=0.01)
        losses, t = [], None
        for i in range(args.steps + 2):
            if i == 2:  # two warm-up steps
                t = time.perf_counter()
            idx = torch.randperm(len(caps), generator=gen)[:cfg.batch_size]
            loss = _step_loss(bundle, "caption", data, idx, tok, gen, polished)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            opt.step()
            losses.append(float(loss.detach()))
        per_step = (time.perf_counter() - t) / args.steps
        bundle.load_state_dict(state)
        return per_step, losses

    each, losses_each = run(None)
    t0 = time.perf_counter()
    polished = polished_latents(bundle, data.latents)
    t_polish = time.perf_counter() - t0
    once, losses_once = run(polished)
    print(f"machine: {platform.processor() or platform.machine()}, torch threads {torch.get_num_threads()}, "
          f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS')}, load average {os.getloadavg()[0]:.1f}")
    print(f"WSV caption step, batch {cfg.batch_size}, latents [32, 8, 8, 8], corpus {args.n}:")
    print(f"  polisher on every batch: {each * 1e3:.1f} ms/step")
    print(f"  corpus polished once:    {once * 1e3:.1f} ms/step, plus {t_polish:.1f} s once")
    print(f"  ratio per step: {each / once:.2f}x; over a {args.stage_steps}-step stage: "
          f"{args.stage_steps * each / (args.stage_steps * once + t_polish):.2f}x; identical losses: "
          f"{losses_each == losses_once}")


if __name__ == "__main__":
    main()
