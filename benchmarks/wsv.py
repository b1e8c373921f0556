"""Benchmark: WSV captioner training throughput and batched vs one-at-a-time caption generation.

Training: samples/s of the caption stage (prompter + LM, forward + backward + AdamW) at the
experiment's model size, on real shapes captions and random latents of the experiment's shape.
Generation: greedy decoding of N captions with the key/value cache, all in one batch (every row has the
same prompt length, so no padding) vs one caption at a time; the captions must be identical, and the
ratio of captions/s is printed.

    OMP_NUM_THREADS=2 python benchmarks/wsv.py            # defaults: batch 32, 20 steps, 64 captions
    python benchmarks/wsv.py --steps 5 --n 16             # quick
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
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--n", type=int, default=64, help="captions to generate")
    ap.add_argument("--lm-dim", type=int, default=64)
    ap.add_argument("--lm-layers", type=int, default=2)
    ap.add_argument("--prompter-dim", type=int, default=32)
    args = ap.parse_args()

    from vlgap.data.shapes import item_rng, sample_spec, write_captions
    from vlgap.wsv.lm import encode_batch
    from vlgap.wsv.train import Bundle, TrainData, WSVConfig, _freeze_for, _step_loss

    caps = []
    for i in range(100):
        rng = item_rng(0, i)
        caps += write_captions(sample_spec(rng), i)
    rng = np.random.default_rng(0)
    lat = rng.normal(size=(len(caps), 32, 8, 4, 4)).astype(np.float32)
    emb = rng.normal(size=(len(caps), 384)).astype(np.float32)
    emb /= np.linalg.norm(emb, axis=1, keepdims=True)
    data = TrainData(caps, lat, emb)
    cfg = WSVConfig(system="no_polisher", lm_dim=args.lm_dim, lm_layers=args.lm_layers, prompter_dim=args.prompter_dim,
                    batch_size=args.batch)
    b = Bundle(cfg, data)
    tok = encode_batch(b.lm.tokenizer, caps, cfg.max_len)
    _freeze_for(b, "caption")
    params = [p for p in b.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=1e-3)
    g = torch.Generator().manual_seed(0)
    n_params = sum(p.numel() for p in params)

    def step():
        idx = torch.randperm(len(caps), generator=g)[: args.batch]
        loss = _step_loss(b, "caption", data, idx, tok, g)
        opt.zero_grad()
        loss.backward()
        opt.step()

    step()  # warm-up
    t0 = time.perf_counter()
    for _ in range(args.steps):
        step()
    t_train = time.perf_counter() - t0
    sps = args.steps * args.batch / t_train

    b.eval()
    z = lat[: args.n]
    b.caption(z[:2])  # warm-up
    t0 = time.perf_counter()
    batched = b.caption(z, batch_size=args.n)
    t_batched = time.perf_counter() - t0
    t0 = time.perf_counter()
    single = [b.caption(z[i:i + 1], batch_size=1)[0] for i in range(args.n)]
    t_single = time.perf_counter() - t0
    same = batched == single

    print(f"machine: {platform.processor() or platform.machine()}, torch threads {torch.get_num_threads()}, "
          f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS')}, load average {os.getloadavg()[0]:.1f}")
    print(f"training (caption stage, {n_params / 1e6:.2f}M trainable parameters, batch {args.batch}): "
          f"{sps:.1f} samples/s ({t_train / args.steps:.3f} s per step over {args.steps} steps)")
    print(f"generation, {args.n} greedy captions (note: an untrained model's captions run to max length):")
    print(f"  one at a time: {args.n / t_single:.2f} captions/s")
    print(f"  batched:       {args.n / t_batched:.2f} captions/s")
    print(f"  ratio batched / one-at-a-time: {t_single / t_batched:.1f}x; identical captions: {same}")


if __name__ == "__main__":
    main()
