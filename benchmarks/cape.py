"""CAPE-T2V prompt enhancer speed: label-forced rewriting batched vs one prompt at a time, and LoRA SFT
samples/s (top-N layers vs all layers), same model, same inputs, same run.

    OMP_NUM_THREADS=1 python benchmarks/cape.py [--model smollm2] [--prompts 16] [--batch 16] [--steps 2]

Prints tokens/s and seconds per prompt for both ways and their ratio, and SFT samples/s. Batched and
one-at-a-time greedy outputs are compared (they may differ in rare near-ties: padding changes float
summation order), and the agreement is printed.
"""
from __future__ import annotations

import argparse
import platform
import tempfile
import time

import torch

from vlgap.cape import world as W
from vlgap.cape.lm import generate_six, load_lm, sft_prompt, train_lora


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="smollm2")
    ap.add_argument("--prompts", type=int, default=16)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--sft-batch", type=int, default=8)
    args = ap.parse_args()
    print(f"{platform.processor() or platform.machine()}, torch {torch.__version__}, threads {torch.get_num_threads()}")
    lm = load_lm(args.model)
    from vlgap.cape.operators import prompted_prefix

    prefix = prompted_prefix(2)  # the prompted rewriter: instruction + two shots
    prompts = [prefix + sft_prompt(W.user_prompt(v)) for v in W.sample_videos(args.prompts, seed=77)]
    generate_six(lm, prompts[:1], batch_size=1, max_retries=0)  # warm-up (token classes, first call)

    def run(bs: int) -> tuple[float, int, list[str]]:
        t0 = time.perf_counter()
        out = generate_six(lm, prompts, batch_size=bs, max_retries=0)
        dt = time.perf_counter() - t0
        n_tok = sum(len(lm.tokenizer.encode(d.text, add_special_tokens=False)) for d in out)
        return dt, n_tok, [d.text for d in out]

    t1, n1, o1 = run(1)
    tb, nb, ob = run(args.batch)
    same = sum(a == b for a, b in zip(o1, ob))
    print(f"rewrite, one at a time: {t1:.1f} s, {n1 / t1:.1f} tok/s, {t1 / len(prompts):.2f} s/prompt")
    print(f"rewrite, batch {args.batch}: {tb:.1f} s, {nb / tb:.1f} tok/s, {tb / len(prompts):.2f} s/prompt")
    print(f"batched speed-up: {t1 / tb:.2f}x  (identical outputs: {same}/{len(prompts)})")

    pairs = W.sft_pairs(W.sample_videos(8, seed=78))
    res = {}
    for top in (8, None):
        lm = load_lm(args.model)
        with tempfile.TemporaryDirectory() as d:
            info = train_lora(lm.model, lm.tokenizer, pairs, d, steps=args.steps, batch_size=args.sft_batch,
                              seed=0, top_layers=top, save_every=10**6)
        res[top] = info["samples_per_second"]
        print(f"SFT LoRA r=16, {'top 8 layers' if top else 'all layers'}: {info['samples_per_second']:.3f} samples/s "
              f"({info['seconds'] / args.steps:.1f} s per step of {args.sft_batch})")
    print(f"SFT top-8 vs all layers: {res[8] / res[None]:.2f}x")


if __name__ == "__main__":
    main()
