"""How many distinct scenes, and which MobileNet grid, does a trained reader need to name the objects?

Usage:  PYTHONPATH=src VLGAP_CACHE=... python experiments/wsv_readout_scaling.py N LATENT STEPS
        LATENT = mnet:RENDER_PX:INPUT_PX:BLOCK:FxHxW:avg|max   (e.g. mnet:64:64:6:8x8x8:avg)
              | pix:RENDER_PX:FxHxW                           (raw pixels, area-pooled)

N fresh real-style scenes of the shapes world (one rendering each, scene seeds disjoint from the
experiment's), encoded by LATENT; the reader of `wsv_attribute_readout.py` (the prompter's 3D-CNN stem +
mean/max pooling + a linear layer, multi-label BCE, AdamW, batch 32) trained STEPS steps to say which of the
8 shapes and 11 colours are in the scene. Every 250 steps: balanced accuracy per shape / colour (chance 0.5)
on 300 of the training videos and on the experiment's 60 evaluation videos (rendered at RENDER_PX).
One JSON line per report, then the latent's shape and encoding time.
"""
from __future__ import annotations

import json
import sys
import time

import numpy as np
import torch
from wsv_attribute_readout import balanced, labels, make_reader, pixel_encoder


def main() -> None:
    from vlgap.data.shapes import item_rng, sample_spec
    from vlgap.wsv.experiment import EXPERIMENT_DEFAULTS, ExperimentConfig, experiment_scenes, render_video_set
    from vlgap.wsv.generate import render_styled
    from vlgap.wsv.latents import MobileNetLatents

    torch.set_num_threads(1)
    torch.manual_seed(0)
    n, latent, steps = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    cfg = ExperimentConfig(**EXPERIMENT_DEFAULTS)
    eval_specs = [spec for _, spec, _ in experiment_scenes(cfg, "eval")]
    parts = latent.split(":")
    render_size = int(parts[1])
    specs = [sample_spec(item_rng(777, i)) for i in range(n)]
    t0 = time.time()
    train_videos = [render_styled(s, cfg.n_frames, render_size, "real", 8 * 10**6 + i) for i, s in enumerate(specs)]
    eval_videos = list(render_video_set(cfg, "eval", eval_specs, size=render_size))
    if parts[0] == "mnet":
        enc = MobileNetLatents(block=int(parts[3]), grid=tuple(int(v) for v in parts[4].split("x")),
                               image_size=int(parts[2]), pooling=parts[5])
        xtr, xev = enc.encode(train_videos), enc.encode(eval_videos)
    elif parts[0] == "pix":
        encode = pixel_encoder(tuple(int(v) for v in parts[2].split("x")))
        xtr = np.stack([encode(v) for v in train_videos]).astype(np.float32)
        xev = np.stack([encode(v) for v in eval_videos]).astype(np.float32)
    else:
        raise SystemExit(f"LATENT must start with mnet: or pix:, got {latent!r}")
    t_enc = time.time() - t0
    ytr, yev = labels(specs), labels(eval_specs)
    fwd, train_step = make_reader(xtr.shape[1], ytr.shape[1])
    g = torch.Generator().manual_seed(0)
    for step in range(1, steps + 1):
        train_step(xtr, ytr, g)
        if step % 250 == 0:
            with torch.no_grad():
                pev, ptr = fwd(xev).numpy(), fwd(xtr[:300]).numpy()
            print(json.dumps({"step": step, "train_shape": balanced(ytr[:300, :8], ptr[:, :8]),
                              "train_colour": balanced(ytr[:300, 8:], ptr[:, 8:]),
                              "eval_shape": balanced(yev[:, :8], pev[:, :8]),
                              "eval_colour": balanced(yev[:, 8:], pev[:, 8:]), "seconds": round(time.time() - t0)}),
                  flush=True)
    print(json.dumps({"latent": latent, "n": n, "shape": list(xtr.shape), "encode_seconds": round(t_enc, 1)}),
          flush=True)


if __name__ == "__main__":
    main()
