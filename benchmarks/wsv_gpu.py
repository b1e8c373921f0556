"""Benchmark: video latents per second through WSV's VAE adapter (vlgap.wsv.latents.VaeLatents) with a
CogVideoX-sized VAE: AutoencoderKLCogVideoX at its default config (4 blocks of 128/256/256/512 channels,
16 latent channels, 4x temporal / 8x spatial compression) with random weights (no weights ship here;
speed does not depend on their values), in bfloat16 on CUDA by default.

Clips are uint8 [T, H, W, 3] as the video reader gives them (default 49 frames at 480 x 480: CogVideoX's
frame count; the adapter takes square frames); each is resampled / resized / encoded exactly as
`vlgap wsv caption` encodes a real video. The first `--warmup` clips are not timed; the timed ones are
synchronised. Prints one JSON line: latents/s, seconds per clip, peak GPU memory, the latent shape.

    python benchmarks/wsv_gpu.py                                   # cuda, bfloat16, CogVideoX-sized
    python benchmarks/wsv_gpu.py --device cpu --tiny               # a tiny config on CPU (a smoke test)
    python benchmarks/wsv_gpu.py --frames 17 --size 256 --n 20     # a smaller clip
"""
from __future__ import annotations

import argparse
import json
import platform
import time

import numpy as np
import torch

TINY = dict(in_channels=3, out_channels=3, down_block_types=("CogVideoXDownBlock3D",) * 3,
            up_block_types=("CogVideoXUpBlock3D",) * 3, block_out_channels=(8, 8, 8), latent_channels=4,
            layers_per_block=1, norm_num_groups=2, temporal_compression_ratio=4, sample_height=16, sample_width=16)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--dtype", default="bfloat16", choices=("float32", "bfloat16", "float16"))
    ap.add_argument("--tiny", action="store_true", help="a tiny VAE config and clip (9 frames, 16 px)")
    ap.add_argument("--frames", type=int, default=None, help="frames per clip (4k+1; default 49, tiny 9)")
    ap.add_argument("--size", type=int, default=None, help="frame side (multiple of 8; default 480, tiny 16)")
    ap.add_argument("--n", type=int, default=None, help="timed clips (default 10, tiny 3)")
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--tiling", action="store_true", help="vae.enable_tiling() (less memory, as pipelines do)")
    args = ap.parse_args()

    from diffusers import AutoencoderKLCogVideoX

    from vlgap.wsv.latents import VaeLatents

    frames = args.frames or (9 if args.tiny else 49)
    size = args.size or (16 if args.tiny else 480)
    n = args.n or (3 if args.tiny else 10)
    torch.manual_seed(0)
    vae = AutoencoderKLCogVideoX(**TINY) if args.tiny else AutoencoderKLCogVideoX()
    if args.tiling:
        vae.enable_tiling()
    enc = VaeLatents(vae, n_frames=frames, size=size, device=args.device, dtype=args.dtype,
                     source={"spec": "vae:<random CogVideoX config>", "class": "AutoencoderKLCogVideoX"})
    rng = np.random.default_rng(0)
    clip = rng.integers(0, 256, (frames, size, size, 3), dtype=np.uint8)
    cuda = torch.device(args.device).type == "cuda"

    def sync():
        if cuda:
            torch.cuda.synchronize()

    for _ in range(args.warmup):
        z = enc.encode([clip])
    sync()
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    t0 = time.perf_counter()
    for _ in range(n):
        z = enc.encode([clip])
    sync()
    dt = time.perf_counter() - t0
    out = {"benchmark": "wsv_gpu VAE latents", "config": "tiny" if args.tiny else "AutoencoderKLCogVideoX default",
           "parameters_M": round(sum(p.numel() for p in vae.parameters()) / 1e6, 2), "device": args.device,
           "device_name": torch.cuda.get_device_name() if cuda else platform.processor() or platform.machine(),
           "dtype": args.dtype, "frames": frames, "size": size, "tiling": args.tiling, "clips_timed": n,
           "latent_shape": list(z.shape[1:]), "latents_per_s": round(n / dt, 3), "seconds_per_clip": round(dt / n, 4),
           "peak_gpu_memory_GiB": round(torch.cuda.max_memory_allocated() / 2**30, 2) if cuda else None,
           "torch": torch.__version__}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
