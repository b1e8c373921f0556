"""Does a linear probe's accuracy on shape / colour grow with the number of scenes?  (data vs latent limit)

Usage:  PYTHONPATH=src python experiments/wsv_latent_probe_scale.py [N_MAX] [OUT.json]

The probes of wsv_latent_probe.py (5-fold cross-validated ridge classifier, balanced accuracy for the
presence targets) on the first 300 and on all N_MAX real-style scenes (one rendering each), for a few
MobileNetV2 latents: the experiment's (64 px, block 6, average-pooled to 8x4x4) and candidates.
"""
from __future__ import annotations

import json
import sys

import numpy as np
import torch

sys.path.insert(0, str(__import__("pathlib").Path(__file__).parent))
import wsv_latent_probe as p  # noqa: E402


def main() -> None:
    from vlgap.wsv.generate import render_styled
    from vlgap.wsv.latents import MobileNetLatents

    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1500
    dest = sys.argv[2] if len(sys.argv) > 2 else None
    torch.set_num_threads(1)
    specs = p.scenes(n)
    videos = [render_styled(s, 16, 64, "real", 10**7 + i) for i, s in enumerate(specs)]
    t = p.targets(specs)
    rows = []
    for name, kw in (("64px block 6 avg 8x4x4 (experiment)", dict(block=6, grid=(8, 4, 4), image_size=64)),
                     ("64px block 6 max 8x4x4", dict(block=6, grid=(8, 4, 4), image_size=64, pooling="max")),
                     ("64px block 3 avg 4x8x8", dict(block=3, grid=(4, 8, 8), image_size=64)),
                     ("128px block 6 avg 4x8x8", dict(block=6, grid=(4, 8, 8), image_size=128))):
        z = MobileNetLatents(**kw).encode(videos).reshape(n, -1)
        for m in (300, n):
            tm = {k: v[:m] for k, v in t.items()}
            r = {"variant": name, "n_videos": m, "first_shape": p.probe(z[:m], tm["first_shape"], False),
                 "first_colour": p.probe(z[:m], tm["first_colour"], False),
                 "has_shape": float(np.mean([p.probe(z[:m], tm[k], True) for k in tm if k.startswith("has_shape:")])),
                 "has_colour": float(np.mean([p.probe(z[:m], tm[k], True) for k in tm
                                              if k.startswith("has_colour:") and 0.08 < tm[k].mean() < 0.92]))}
            rows.append(r)
            print(json.dumps(r), flush=True)
    if dest:
        with open(dest, "w") as f:
            json.dump({"rows": rows, "chance": p.chance(t)}, f, indent=1)


if __name__ == "__main__":
    main()
