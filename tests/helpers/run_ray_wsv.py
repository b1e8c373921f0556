"""Subprocess entry for the killed-driver test of WSV generation on Ray: joins the test's cluster and
generates the latents of the captions in a file (one per line) with the tiny CogVideoX twin."""
import sys

import ray
import torch

from vlgap.wsv.parts import build_parts, generated_latents

pipe, captions, cache, address = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
torch.set_num_threads(1)
ray.init(address=address, logging_level="WARNING")
parts = build_parts(f"diffusers:{pipe}", n_frames=9, size=16, generator_steps=1)
caps = open(captions).read().splitlines()
z = generated_latents(parts.generator, parts.encoder, caps, seed=0, cache_dir=cache, ray="auto", ray_workers=2,
                      log=print)
print("DONE", z.shape)
