"""The oracle ceiling alone, short runs: which latent and training settings let it name what it sees?

Usage:  PYTHONPATH=src python experiments/wsv_oracle_sweep.py OUT.json 'NAME:KEY=VALUE,KEY=VALUE' ...

Each argument is one run: latent keys (block, grid like 4x8x8, image_size) pick the MobileNetV2 latent;
every other key is a WSVConfig field (caption_steps, prompter_dim, n_prompts, lr, ...) over the
experiment's defaults. The data are the experiment's (`vlgap wsv experiment` defaults, world seed 0): the
oracle trains on the 798 corpus captions paired with their own scenes rendered in the real style, and is
scored on the 60 evaluation videos (grounded attribute accuracy, CIDEr). Latents of each variant are kept
in CACHE/wsvprobe/oracle-latents-<variant>.npz (CACHE: $VLGAP_CACHE, else ~/.cache/vlgap).
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np
import torch


def variant_latents(prep, cfg, block: int, grid: tuple, image_size: int, folder: Path, pooling: str = "avg"):
    from vlgap.wsv.experiment import experiment_scenes, render_video_set
    from vlgap.wsv.latents import MobileNetLatents

    path = folder / (f"oracle-latents-b{block}-g{'x'.join(map(str, grid))}-s{image_size}-{pooling}"
                     f"-n{cfg.n_train}-v2.npz")
    if path.exists():
        with np.load(path) as z:
            return z["paired"], z["eval"], z["val"]
    enc = MobileNetLatents(block=block, grid=grid, image_size=image_size, pooling=pooling)
    train = {i: spec for i, spec, _ in experiment_scenes(cfg, "train")}
    t0 = time.perf_counter()
    paired = enc.encode(list(render_video_set(cfg, "paired", [train[c.rsplit("_c", 1)[0]] for c in prep.corpus_ids])))
    ev = enc.encode(list(render_video_set(cfg, "eval", prep.eval_specs)))
    # the validation pairs exactly as prepare() makes them (its validation scenes, captions and style seeds)
    eval_text = {c for caps in prep.eval_refs.values() for c in caps}
    corpus = set(prep.corpus)
    vals = [(spec, c) for _, spec, caps in experiment_scenes(cfg, "val") for c in caps
            if c not in eval_text and c not in corpus]
    assert [c for _, c in vals] == prep.val_captions
    val = enc.encode(list(render_video_set(cfg, "val_paired", [s for s, _ in vals])))
    print(f"latents b{block} {grid} {image_size}px: {paired.shape} in {time.perf_counter() - t0:.0f} s", flush=True)
    np.savez(path, paired=paired, eval=ev, val=val)
    return paired, ev, val


def parse(arg: str):
    name, _, rest = arg.partition(":")
    kv = dict(p.split("=", 1) for p in rest.split(",") if p)
    lat = {"block": int(kv.pop("block", 6)), "grid": tuple(int(v) for v in kv.pop("grid", "8x4x4").split("x")),
           "image_size": int(kv.pop("image_size", 64)), "pooling": kv.pop("pool", "avg"),
           "n_train": int(kv.pop("n_train", 80))}
    train = {k: (float(v) if "." in v or "e-" in v else int(v)) for k, v in kv.items()}
    return name, lat, train


def main() -> None:
    from vlgap.wsv.evaluate import grounded_score, score_captions
    from vlgap.wsv.experiment import EXPERIMENT_DEFAULTS, ExperimentConfig, prepare
    from vlgap.wsv.train import TrainData, WSVConfig, load_model, train

    torch.set_num_threads(1)
    dest = Path(sys.argv[1])
    from vlgap.io_utils import cache_root

    folder = cache_root() / "wsvprobe"
    folder.mkdir(parents=True, exist_ok=True)
    d = dict(EXPERIMENT_DEFAULTS)
    tr = d.pop("train")
    preps = {}
    results = json.loads(dest.read_text()) if dest.exists() else {}
    for arg in sys.argv[2:]:
        name, lat, over = parse(arg)
        if name in results:
            continue
        if lat["n_train"] not in preps:
            cfg = ExperimentConfig(**{**d, "n_train": lat["n_train"]}, train=tr)
            preps[lat["n_train"]] = (cfg, prepare(cfg, log=lambda m: None))
        cfg, prep = preps[lat["n_train"]]
        paired, ev, val = variant_latents(prep, cfg, lat["block"], lat["grid"], lat["image_size"], folder,
                                    lat["pooling"])
        wcfg = WSVConfig(system="oracle", seed=0, **{**tr, "checkpoint_every": 10**6, **over})
        data = TrainData(prep.corpus, paired, prep.text_emb, val_captions=prep.val_captions, val_latents=val,
                         val_text_emb=prep.val_text_emb)
        t0 = time.perf_counter()
        bundle = train(data, wcfg, folder / "runs" / name, log=lambda m: None, force=True)
        secs = time.perf_counter() - t0
        caps = bundle.caption(ev)
        pred = dict(zip(prep.eval_ids, caps))
        g = grounded_score(pred, dict(zip(prep.eval_ids, prep.eval_specs)), n_bootstrap=300, seed=0)
        sc = score_captions(pred, prep.eval_refs, n_bootstrap=0, seed=0, keep_empty=True, metrics=["CIDEr"])
        history = load_model(folder / "runs" / name / "model.pt").history
        hist = [h[2] for h in history if h[0] == "caption"]
        res = {"latent": lat, "train": over, "seconds": round(secs, 1), "CIDEr": sc["CIDEr"]["score"],
               "distinct": sc["distinct"]["share"],
               **{a: g[a]["accuracy"] for a in ("shape", "colour", "background", "events", "mean")},
               "shape_ci": g["shape"]["ci"], "colour_ci": g["colour"]["ci"],
               "final_train_loss": float(np.mean(hist[-50:])), "examples": caps[:3],
               "val": [h for h in history if h[0] == "val"]}
        results[name] = res
        print(name, json.dumps({k: v for k, v in res.items() if k not in ("examples", "val")}), flush=True)
        dest.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
