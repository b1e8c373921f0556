"""Is the oracle ceiling limited by its 80 training scenes? The experiment's oracle (seed 0, same settings,
same 60 evaluation videos) trained on the captions of N_TRAIN scenes instead of 80, each caption paired with
its own scene rendered in the real style; captions equal to an evaluation reference and scenes equal to an
evaluation scene are left out (counted). Usage: python experiments/wsv_oracle_scenes.py N_TRAIN OUT_DIR (VLGAP_CACHE as the
experiment's)."""
import json
import sys
import time

import numpy as np
import torch

from vlgap.wsv.api import default_corpus_with_specs
from vlgap.wsv.evaluate import grounded_score, score_captions
from vlgap.wsv.experiment import EXPERIMENT_DEFAULTS, ExperimentConfig, embed_captions, prepare
from vlgap.wsv.generate import render_styled
from vlgap.wsv.latents import MobileNetLatents
from vlgap.wsv.train import TrainData, WSVConfig, train

torch.set_num_threads(1)
n_train, out = int(sys.argv[1]), sys.argv[2]
t0 = time.time()
cfg = ExperimentConfig(**EXPERIMENT_DEFAULTS)
prep = prepare(cfg, log=lambda m: None)
eval_text = {c for caps in prep.eval_refs.values() for c in caps}
eval_specs = {json.dumps(s.to_dict(), sort_keys=True) for s in prep.eval_specs}
pairs = default_corpus_with_specs(n_train, cfg.world_seed)
kept = [(c, s) for c, s in pairs if c not in eval_text and json.dumps(s.to_dict(), sort_keys=True) not in eval_specs]
caps = [c for c, _ in kept]
videos = [render_styled(s, cfg.n_frames, cfg.size, cfg.eval_style, 5 * 10**6 + k) for k, (_, s) in enumerate(kept)]
z = MobileNetLatents(image_size=cfg.size).encode(videos)
del videos
emb = embed_captions(caps)
print(f"{len(caps)} captions ({len(pairs) - len(kept)} left out), latents in {time.time() - t0:.0f} s", flush=True)
bundle = train(TrainData(caps, z, emb), WSVConfig(system="oracle", seed=0, **cfg.train), out + "/model",
               log=lambda m: print(f"{time.time() - t0:.0f} {m}", flush=True))
pred = dict(zip(prep.eval_ids, bundle.caption(prep.real)))
res = {"n_train_scenes": n_train, "n_captions": len(caps), "left_out": len(pairs) - len(kept), "seed": 0,
       "config": cfg.train, "predictions": pred,
       "scores": score_captions(pred, prep.eval_refs, n_bootstrap=cfg.n_bootstrap, seed=0, keep_empty=True),
       "attributes": grounded_score(pred, dict(zip(prep.eval_ids, prep.eval_specs)), n_bootstrap=cfg.n_bootstrap, seed=0),
       "final_loss": float(np.mean([h[2] for h in bundle_history[-50:]])) if (bundle_history := torch.load(
           out + "/model/model.pt", weights_only=False)["history"]) else None,
       "seconds": round(time.time() - t0, 1)}
json.dump(res, open(out + "/result.json", "w"), indent=1, default=str)
a = res["attributes"]
print("CIDEr", res["scores"]["CIDEr"]["score"], "attributes", {k: a[k]["accuracy"] for k in ("shape", "colour", "background", "events", "mean")})
