"""The caption stage's training loss over 2,000 steps, seed 0, with the settings of the run at commit dc56c8b
(80 training scenes, 1,000-step default then). Usage: python experiments/wsv_loss_curve.py SYSTEM STEPS OUT_DIR
(SYSTEM: wsv or text_only; the cache: $VLGAP_CACHE). Its output at 2,000 steps was docs/wsv-loss-2000/
(in git history: commit b225f34), superseded by the held-out loss every cell now records."""
import sys, time, json
import torch
torch.set_num_threads(1)
from vlgap.wsv.experiment import ExperimentConfig, prepare
from vlgap.wsv.train import TrainData, WSVConfig, train
system, steps, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
T = dict(head_steps=150, polisher_steps=150, lm_pretrain_steps=200, caption_steps=steps, lm_dim=64, lm_layers=2,
         prompter_dim=32, checkpoint_every=50)
cfg = ExperimentConfig(n_train=80, n_eval=60, n_unlabelled=20, n_bootstrap=300, n_permutations=300, c2st_permutations=30, train=T)
t0 = time.time()
prep = prepare(cfg)  # cache: $VLGAP_CACHE, else ~/.cache/vlgap
print("prep", time.time() - t0, flush=True)
times = {}
def log(m):
    print(f"{time.time()-t0:.0f} {m}", flush=True)
lat = prep.paired["real"] if system == "oracle" else prep.synth["synthetic"]
b = train(TrainData(prep.corpus, lat, prep.text_emb), WSVConfig(system=system, seed=0, **T), out, log=log)
import torch, io
from vlgap.wsv.experiment import bundle_history
h = bundle_history(out)
json.dump(h, open(out + "/history.json", "w"))
print("done", time.time() - t0, flush=True)
