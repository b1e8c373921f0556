"""Can a trained non-linear reader get the objects out of the oracle's latents?  (latent + data vs LM limit)

Usage:  PYTHONPATH=src VLGAP_CACHE=... python experiments/wsv_attribute_readout.py [LATENTS.npz | N_SCENES [pixels:FxHxW] | pixels:FxHxW]

The oracle's training data (the experiment's 798 corpus captions' own scenes rendered in the real style,
80 distinct scenes) and its 60 evaluation videos; instead of a caption, the prompter's own 3D-CNN stem +
mean/max pooling + a linear layer is trained (multi-label BCE, 400 AdamW steps, batch 32) to say which of
the 8 shapes and which of the 11 colours are in the scene. Reported: balanced accuracy per shape / colour on
the 60 evaluation videos (chance 0.5) and on the training videos. LATENTS.npz (paired, eval arrays, as the
oracle sweep writes them): another latent; default: the experiment's cached latents. N_SCENES: instead of
the oracle's data, N distinct fresh scenes (one real-style rendering each, the experiment's latent).
pixels:FxHxW: the same videos (the oracle's paired renderings and the evaluation videos, rendered as
`prepare` renders them) as raw pixels, ImageNet-normalised and area-pooled to [3, F, H, W]: a latent that
keeps colour and layout, as a video VAE's does, with no learned features; after N_SCENES: the fresh
scenes and the evaluation videos as pixel latents.
"""
from __future__ import annotations

import json
import sys

import numpy as np
import torch
from torch import nn


def labels(specs):
    from vlgap.data.shapes.spec import COLOURS, SHAPES

    y = np.zeros((len(specs), len(SHAPES) + len(COLOURS)), np.float32)
    for i, s in enumerate(specs):
        for o in s.objects:
            y[i, SHAPES.index(o.shape)] = 1
            y[i, len(SHAPES) + list(COLOURS).index(o.colour)] = 1
    return y


def balanced(y, p):
    out = []
    for j in range(y.shape[1]):
        pos, neg = y[:, j] == 1, y[:, j] == 0
        if pos.sum() == 0 or neg.sum() == 0:
            continue
        out.append(0.5 * ((p[pos, j] > 0).mean() + (p[neg, j] <= 0).mean()))
    return float(np.mean(out))


def pixel_encoder(grid):
    """uint8 video [T, H, W, 3] -> ImageNet-normalised pixels area-pooled to [3, *grid]."""
    import torch.nn.functional as F

    from vlgap.wsv.latents import IMAGENET_MEAN, IMAGENET_STD

    mean = torch.tensor(IMAGENET_MEAN).view(3, 1, 1, 1)
    std = torch.tensor(IMAGENET_STD).view(3, 1, 1, 1)

    def encode(video):
        x = (torch.from_numpy(video).permute(3, 0, 1, 2).float() / 255.0 - mean) / std
        return F.adaptive_avg_pool3d(x[None], grid)[0].numpy()
    return encode


def make_reader(channels: int, n_labels: int, width: int = 64):
    """The reader: the prompter's 3D-CNN stem + mean/max pooling + a linear layer. Returns (fwd, step):
    fwd(latents) -> logits; step(x, y, generator) draws a batch of 32, takes one AdamW step, returns the loss."""
    from vlgap.wsv.models import _groups

    net = nn.Sequential(nn.GroupNorm(_groups(channels), channels), nn.Conv3d(channels, width, 3, padding=1),
                        nn.GELU(), nn.Conv3d(width, width, 3, padding=1), nn.GELU())
    head = nn.Linear(2 * width, n_labels)

    def fwd(x):
        h = net(torch.from_numpy(x))
        return head(torch.cat([h.mean(dim=(2, 3, 4)), h.amax(dim=(2, 3, 4))], 1))

    opt = torch.optim.AdamW([*net.parameters(), *head.parameters()], lr=1e-3, weight_decay=0.01)

    def step(x, y, generator):
        idx = torch.randperm(len(x), generator=generator)[:32].numpy()
        loss = nn.functional.binary_cross_entropy_with_logits(fwd(x[idx]), torch.from_numpy(y[idx]))
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    return fwd, step


def paired_videos(cfg, prep, train_specs):
    """The oracle's paired videos as `prepare` renders them: each corpus caption's scene (`train_specs` by
    scene id), real style, its own style seed."""
    from vlgap.wsv.experiment import render_video_set

    return render_video_set(cfg, "paired", [train_specs[c.rsplit("_c", 1)[0]] for c in prep.corpus_ids])


def eval_videos(cfg, prep):
    """The evaluation videos as `prepare` renders them."""
    from vlgap.wsv.experiment import render_video_set

    return render_video_set(cfg, "eval", prep.eval_specs)


def pixel_latents(videos, grid) -> np.ndarray:
    encode = pixel_encoder(grid)
    return np.stack([encode(v) for v in videos]).astype(np.float32)


def parse_grid(arg):
    return tuple(int(v) for v in arg.split(":", 1)[1].split("x"))


def main() -> None:
    from vlgap.data.shapes import item_rng, sample_spec
    from vlgap.wsv.experiment import EXPERIMENT_DEFAULTS, ExperimentConfig, experiment_scenes, prepare
    torch.set_num_threads(1)
    torch.manual_seed(0)
    cfg = ExperimentConfig(**EXPERIMENT_DEFAULTS)
    prep = prepare(cfg, log=lambda m: None)
    train_specs = {i: spec for i, spec, _ in experiment_scenes(cfg, "train")}
    ytr = labels([train_specs[c.rsplit("_c", 1)[0]] for c in prep.corpus_ids])
    yev = labels(prep.eval_specs)
    if len(sys.argv) > 1 and sys.argv[1].isdigit():
        from vlgap.wsv.generate import render_styled
        from vlgap.wsv.latents import MobileNetLatents

        n = int(sys.argv[1])
        specs = [sample_spec(item_rng(777, i)) for i in range(n)]
        videos = (render_styled(s, cfg.n_frames, cfg.size, "real", 8 * 10**6 + i) for i, s in enumerate(specs))
        if len(sys.argv) > 2 and sys.argv[2].startswith("pixels:"):  # fresh scenes as pixel latents
            grid = parse_grid(sys.argv[2])
            xtr, xev = pixel_latents(videos, grid), pixel_latents(eval_videos(cfg, prep), grid)
        else:
            xtr = MobileNetLatents(image_size=cfg.size).encode(list(videos))
            xev = prep.real
        ytr = labels(specs)
    elif len(sys.argv) > 1 and sys.argv[1].startswith("pixels:"):
        grid = parse_grid(sys.argv[1])
        xtr = pixel_latents(paired_videos(cfg, prep, train_specs), grid)
        xev = pixel_latents(eval_videos(cfg, prep), grid)
    elif len(sys.argv) > 1:
        with np.load(sys.argv[1]) as z:
            xtr, xev = z["paired"], z["eval"]
    else:
        xtr, xev = prep.paired["real"], prep.real
    fwd, step = make_reader(xtr.shape[1], ytr.shape[1])
    g = torch.Generator().manual_seed(0)
    for _ in range(400):
        loss = step(xtr, ytr, g)
    with torch.no_grad():
        ptr, pev = fwd(xtr).numpy(), fwd(xev).numpy()
    n_sh = 8
    res = {"latent": " ".join(sys.argv[1:]) or "experiment default", "final_bce": float(loss.detach()),
           "train_shape": balanced(ytr[:, :n_sh], ptr[:, :n_sh]), "train_colour": balanced(ytr[:, n_sh:], ptr[:, n_sh:]),
           "eval_shape": balanced(yev[:, :n_sh], pev[:, :n_sh]), "eval_colour": balanced(yev[:, n_sh:], pev[:, n_sh:])}
    print(json.dumps(res), flush=True)


if __name__ == "__main__":
    main()
