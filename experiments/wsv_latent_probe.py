"""Does a WSV latent carry what the captions name?  Linear probes from latents of real-style shapes videos.

Usage:  PYTHONPATH=src python experiments/wsv_latent_probe.py [N_VIDEOS] [OUT.json]

Renders N real-style scenes (the experiment's renderer and scene sampler, scene seeds disjoint from the
experiment's), encodes every frame with the frozen MobileNetV2 once per input size, cuts the feature maps
after several blocks, pools each to several [F, H, W] grids, and fits cross-validated (5-fold) linear
probes (standardised features, ridge classifier, strength by GCV inside each fold) from each latent variant to:
background (18 classes), number of objects (1-4), the first object's shape (8) and colour (11), and the
presence of each shape / each colour (binary, mean balanced accuracy over shapes / colours). Chance of
each multi-class target is its majority share; of the presence targets 0.5. A pixel baseline (the video
itself average-pooled to [8, 8, 8] x RGB) shows what a linear probe gets from the raw frames.
"""
from __future__ import annotations

import json
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F


def scenes(n: int):
    from vlgap.data.shapes import item_rng, sample_spec

    return [sample_spec(item_rng(9000, i)) for i in range(n)]


def targets(specs) -> dict[str, np.ndarray]:
    from vlgap.data.shapes.spec import COLOURS, SHAPES

    t = {"background": np.array([s.background for s in specs]),
         "n_objects": np.array([len(s.objects) for s in specs]),
         "first_shape": np.array([s.objects[0].shape for s in specs]),
         "first_colour": np.array([s.objects[0].colour for s in specs])}
    for sh in SHAPES:
        t[f"has_shape:{sh}"] = np.array([any(o.shape == sh for o in s.objects) for s in specs])
    for c in COLOURS:
        t[f"has_colour:{c}"] = np.array([any(o.colour == c for o in s.objects) for s in specs])
    return t


def probe(x: np.ndarray, y: np.ndarray, balanced: bool) -> float:
    """5-fold cross-validated accuracy (balanced for the binary presence targets) of a linear classifier:
    ridge-regularised least squares on one-vs-rest targets, its strength chosen inside each training fold by
    generalised cross-validation (a logistic regression took 100 s per target at 8,192 dims on this machine;
    this is a linear probe of the same family at 1/100 of the cost)."""
    from sklearn.linear_model import RidgeClassifierCV
    from sklearn.metrics import balanced_accuracy_score
    from sklearn.model_selection import KFold, cross_val_predict
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    model = make_pipeline(StandardScaler(), RidgeClassifierCV(alphas=np.logspace(0, 5, 6)))
    pred = cross_val_predict(model, x, y, cv=KFold(5, shuffle=True, random_state=0))
    return float(balanced_accuracy_score(y, pred) if balanced else np.mean(pred == y))


def score_all(x: np.ndarray, t: dict[str, np.ndarray]) -> dict[str, float]:
    out = {k: probe(x, t[k], False) for k in ("background", "n_objects", "first_shape", "first_colour")}
    out["has_shape"] = float(np.mean([probe(x, t[k], True) for k in t if k.startswith("has_shape:")]))
    colours = [k for k in t if k.startswith("has_colour:") and 0.08 < t[k].mean() < 0.92]
    out["has_colour"] = float(np.mean([probe(x, t[k], True) for k in colours]))
    return out


def chance(t: dict[str, np.ndarray]) -> dict[str, float]:
    out = {}
    for k in ("background", "n_objects", "first_shape", "first_colour"):
        _, counts = np.unique(t[k], return_counts=True)
        out[k] = float(counts.max() / counts.sum())
    out["has_shape"] = out["has_colour"] = 0.5
    return out


@torch.inference_mode()
def block_features(videos, image_size: int, blocks: tuple[int, ...], grids) -> dict[tuple, np.ndarray]:
    """{(block, grid): [N, C*F*H*W]} from one pass of MobileNetV2 per frame batch."""
    from vlgap.wsv.latents import IMAGENET_MEAN, IMAGENET_STD, MobileNetLatents

    net = MobileNetLatents(block=max(blocks), image_size=image_size).net
    mean = torch.tensor(IMAGENET_MEAN).view(1, 3, 1, 1)
    std = torch.tensor(IMAGENET_STD).view(1, 3, 1, 1)
    out: dict[tuple, list] = {(b, g): [] for b in blocks for g in grids}
    for v in videos:
        x = torch.from_numpy(v).permute(0, 3, 1, 2).float() / 255.0
        x = F.interpolate(x, size=(image_size, image_size), mode="bilinear", align_corners=False, antialias=True)
        h = (x - mean) / std
        for i, layer in enumerate(net):
            h = layer(h)
            if i in blocks:
                vol = h.permute(1, 0, 2, 3)[None]
                for g in grids:
                    out[(i, g)].append(F.adaptive_avg_pool3d(vol, g)[0].flatten().numpy())
    return {k: np.stack(v) for k, v in out.items()}


def main() -> None:
    from vlgap.wsv.generate import render_styled

    n = int(sys.argv[1]) if len(sys.argv) > 1 else 300
    dest = sys.argv[2] if len(sys.argv) > 2 else None
    torch.set_num_threads(1)
    specs = scenes(n)
    t0 = time.perf_counter()
    videos = [render_styled(s, 16, 64, "real", 10**7 + i) for i, s in enumerate(specs)]
    print(f"rendered {n} videos in {time.perf_counter() - t0:.0f} s", flush=True)
    t = targets(specs)
    rows = [{"variant": "chance", **chance(t)}]
    pix = np.stack([F.adaptive_avg_pool3d(torch.from_numpy(v).permute(3, 0, 1, 2).float()[None], (8, 8, 8))[0]
                    .flatten().numpy() for v in videos])
    rows.append({"variant": "pixels [3, 8, 8, 8]", "dims": pix.shape[1], **score_all(pix, t)})
    print(rows[-1], flush=True)
    plan = {64: ((3, 6, 10, 13), ((8, 4, 4), (4, 8, 8), (2, 4, 4))),  # 64 px: the experiment's input size
            128: ((6, 10, 13), ((8, 4, 4), (4, 8, 8), (2, 8, 8)))}
    for size, (blocks, grids) in plan.items():
        t1 = time.perf_counter()
        feats = block_features(videos, size, blocks, grids)
        print(f"encoded at {size} px in {time.perf_counter() - t1:.0f} s", flush=True)
        for (b, g), x in feats.items():
            if x.shape[1] > 30000:
                continue
            rows.append({"variant": f"mobilenet {size}px block {b} grid {'x'.join(map(str, g))}", "dims": x.shape[1],
                         **score_all(x, t)})
            print(rows[-1], flush=True)
    if dest:
        with open(dest, "w") as f:
            json.dump({"n_videos": n, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
