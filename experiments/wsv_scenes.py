"""The oracle ceiling with more distinct scenes and other latent poolings: which setting names what it sees?

Usage:
    PYTHONPATH=src python experiments/wsv_scenes.py throughput N_VIDEOS
    PYTHONPATH=src python experiments/wsv_scenes.py run OUT.json 'NAME:scenes=800,caps=1,pool=avgmax,seed=0,KEY=VALUE' ...
    PYTHONPATH=src python experiments/wsv_scenes.py table OUT.json ...

Data as `vlgap wsv experiment` makes them (world seed 0, its scene sampler, renderer and 60 evaluation
scenes, scene ids/specs and caption text disjoint from the corpus, checked below), except that the corpus
is `scenes` training scenes x `caps` of their captions, drawn at random per scene
(corpus_share below; the experiment: 80 x 10, all of them). The oracle trains on
each corpus caption paired with its own scene rendered in the evaluation style (fresh style seed per
caption, as prepare() does), with the experiment's training settings (1,000 caption steps, keep_best on
the validation loss) unless KEY=VALUE overrides a WSVConfig field.

Latents: every video goes once through the frozen MobileNetV2 (block 6, 64 px; the experiment's), and its
per-frame feature maps [16, 32, 8, 8] are kept (float16) under $VLGAP_CACHE/scenes-features/, so each
pooling is a cheap reduction of the same pass:
    avg     adaptive average pool to 8x4x4 (the experiment's latent, [32, 8, 4, 4])
    max     adaptive max pool to 8x4x4 ([32, 8, 4, 4])
    avgmax  both, concatenated on channels ([64, 8, 4, 4])
`system=wsv` runs a WSV-offline cell instead (text-only training through the synthetic-style generator's
latents of the corpus captions; needs those latents too).
"""
from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

BLOCK, IMAGE_SIZE, GRID = 6, 64, (8, 4, 4)


def cache_folder() -> Path:
    from vlgap.io_utils import cache_root

    folder = cache_root() / "scenes-features"  # $VLGAP_CACHE, else ~/.cache/vlgap
    folder.mkdir(parents=True, exist_ok=True)
    return folder


class FeatureEncoder:
    """MobileNetLatents' own network and preprocessing, stopping before the pooling."""

    def __init__(self):
        from vlgap.wsv.latents import MobileNetLatents

        self.enc = MobileNetLatents(block=BLOCK, grid=GRID, image_size=IMAGE_SIZE)

    @torch.inference_mode()
    def features(self, video: np.ndarray) -> np.ndarray:
        from vlgap.wsv.latents import IMAGENET_MEAN, IMAGENET_STD

        mean = torch.tensor(IMAGENET_MEAN).view(1, 3, 1, 1)
        std = torch.tensor(IMAGENET_STD).view(1, 3, 1, 1)
        x = torch.from_numpy(np.asarray(video)).permute(0, 3, 1, 2).float() / 255.0
        x = F.interpolate(x, size=(IMAGE_SIZE, IMAGE_SIZE), mode="bilinear", align_corners=False, antialias=True)
        return self.enc.net((x - mean) / std).numpy().astype(np.float16)  # [T, C, h, w]


def pooled(feats: np.ndarray, pool: str) -> np.ndarray:
    """[N, T, C, h, w] features -> [N, C', 8, 4, 4] latents; avg equals MobileNetLatents.encode (checked)."""
    x = torch.from_numpy(feats.astype(np.float32)).permute(0, 2, 1, 3, 4)  # [N, C, T, h, w]
    avg = lambda: F.adaptive_avg_pool3d(x, GRID)
    mx = lambda: F.adaptive_max_pool3d(x, GRID)
    z = {"avg": avg, "max": mx, "avgmax": lambda: torch.cat([avg(), mx()], 1)}[pool]()
    return z.numpy().astype(np.float32)


def cached_features(name: str, videos_fn, n: int, log=print) -> np.ndarray:
    """Features of n videos, made in chunks (a killed run keeps finished chunks)."""
    folder = cache_folder() / name
    folder.mkdir(exist_ok=True)
    chunk = 100
    out = []
    enc = None
    for start in range(0, n, chunk):
        path = folder / f"{start:06d}-{min(n, start + chunk):06d}.npy"
        if not path.exists():
            enc = enc or FeatureEncoder()
            t0 = time.perf_counter()
            f = np.stack([enc.features(v) for v in videos_fn(start, min(n, start + chunk))])
            np.save(str(path) + ".tmp.npy", f)
            os.replace(str(path) + ".tmp.npy", path)
            log(f"{name}: videos {start}-{start + len(f)} in {time.perf_counter() - t0:.1f} s")
        out.append(np.load(path))
    return np.concatenate(out)


def corpus_share(usable: list[int], captions_per_scene: int | None, world_seed: int, scene_id: str) -> list[int]:
    """The caption indices of one training scene that enter the corpus: all usable ones, or K of them drawn
    at random per scene, in their order. Drawn, not the first K: a scene's captions come in a fixed order of
    templates (the first one is always a background-and-object sentence), so the first K would give a corpus
    of one template (tried: the oracle then collapses to it, validation loss rising from step 50)."""
    if captions_per_scene is None or len(usable) <= captions_per_scene:
        return list(usable)
    rng = np.random.default_rng([world_seed, 5, int(scene_id.rsplit("_", 1)[-1])])
    return sorted(int(k) for k in rng.choice(usable, size=captions_per_scene, replace=False))


def build(n_scenes: int, caps_per_scene: int, log=print):
    """Scenes, corpus and disjointness checks as prepare() makes them, with caps_per_scene captions per scene."""
    from vlgap.data.shapes import item_rng, sample_spec, write_captions
    from vlgap.wsv.experiment import EXPERIMENT_DEFAULTS

    ws, n_eval, n_val = 0, EXPERIMENT_DEFAULTS["n_eval"], EXPERIMENT_DEFAULTS["n_val"]

    def scenes(offset, n, prefix):
        out = []
        for i in range(n):
            rng = item_rng(ws * 1000 + offset, i)
            spec = sample_spec(rng)
            out.append((f"{prefix}_{i:05d}", spec, write_captions(spec, int(rng.integers(2**31 - 1)))))
        return out

    train, evals, vals = scenes(0, n_scenes, "train"), scenes(1, n_eval, "eval"), scenes(3, n_val, "val")
    key = lambda s: json.dumps(s.to_dict(), sort_keys=True)
    eval_specs, eval_text = {key(s) for _, s, _ in evals}, {c for _, _, caps in evals for c in caps}
    corpus, corpus_specs, dup, dropped = [], [], 0, 0
    for i, s, caps in train:
        if key(s) in eval_specs:
            dup += 1
            continue
        usable = [k for k, c in enumerate(caps) if c not in eval_text]
        dropped += len(caps) - len(usable)
        for k in corpus_share(usable, None if caps_per_scene >= 10 else caps_per_scene, ws, i):
            corpus.append(caps[k])
            corpus_specs.append((i, s))
    corpus_text = set(corpus)
    val_pairs = [(s, c) for _, s, caps in vals for c in caps if c not in eval_text and c not in corpus_text]
    hygiene = {"scenes": n_scenes, "captions_per_scene": caps_per_scene, "corpus_captions": len(corpus),
               "distinct_corpus_scenes": len({i for i, _ in corpus_specs}),
               "train_scenes_equal_to_eval_removed": dup, "captions_equal_to_eval_refs_removed": dropped,
               "corpus_eval_text_overlap": len(corpus_text & eval_text),
               "corpus_scene_specs_equal_to_eval": len({key(s) for _, s in corpus_specs} & eval_specs),
               "val_captions": len(val_pairs)}
    assert hygiene["corpus_eval_text_overlap"] == 0 and hygiene["corpus_scene_specs_equal_to_eval"] == 0
    return {"corpus": corpus, "corpus_specs": [s for _, s in corpus_specs], "evals": evals, "val_pairs": val_pairs,
            "hygiene": hygiene}


def data_features(d, n_scenes, caps, log=print):
    from vlgap.wsv.generate import render_styled

    style, nf, size = "real", 16, 64
    tag = f"s{n_scenes}-c{caps}-drawn"
    specs = d["corpus_specs"]
    paired = cached_features(f"paired-{tag}", lambda a, b: [render_styled(specs[k], nf, size, style, 3 * 10**6 + k)
                                                            for k in range(a, b)], len(specs), log)
    ev = cached_features("eval", lambda a, b: [render_styled(d["evals"][j][1], nf, size, style, 10**6 + j)
                                               for j in range(a, b)], len(d["evals"]), log)
    vp = d["val_pairs"]
    val = cached_features(f"valpaired-{tag}", lambda a, b: [render_styled(vp[k][0], nf, size, style, 4 * 10**6 + k)
                                                            for k in range(a, b)], len(vp), log)
    return paired, ev, val


def synth_features(d, n_scenes, caps, log=print):
    from vlgap.wsv.parts import ShapesGenerator

    t2v = ShapesGenerator("synthetic", n_frames=16, size=64).t2v
    tag = f"s{n_scenes}-c{caps}-drawn"
    corpus, valc = d["corpus"], [c for _, c in d["val_pairs"]]
    synth = cached_features(f"synth-{tag}", lambda a, b: _generate_slice(t2v, corpus, 0, a, b), len(corpus), log)
    vsynth = cached_features(f"valsynth-{tag}", lambda a, b: _generate_slice(t2v, valc, 2, a, b), len(valc), log)
    return synth, vsynth


def _generate_slice(t2v, captions, seed, a, b):
    """ShapesT2V.generate(captions, seed)[a:b] without rendering the rest (same readings, same style seeds)."""
    from vlgap.wsv.generate import render_styled

    readings = t2v.read(captions, seed)
    return [render_styled(readings[i].spec, t2v.n_frames, t2v.size, t2v.style, style_seed=seed * 100003 + i)
            for i in range(a, b)]


def throughput(n: int) -> None:
    """videos/s of render + MobileNet (64 px, block 6) and of render alone, and the 128 px encode."""
    from vlgap.wsv.generate import render_styled
    from vlgap.wsv.latents import MobileNetLatents

    torch.set_num_threads(1)
    d = build(n, 1)
    specs = d["corpus_specs"][:n]
    t0 = time.perf_counter()
    vids = [render_styled(s, 16, 64, "real", 3 * 10**6 + k) for k, s in enumerate(specs)]
    t_render = time.perf_counter() - t0
    enc = FeatureEncoder()
    t0 = time.perf_counter()
    feats = np.stack([enc.features(v) for v in vids])
    t_enc = time.perf_counter() - t0
    ref = enc.enc.encode(vids[:3])
    assert np.allclose(pooled(feats[:3], "avg"), ref, atol=2e-2), "pooled avg differs from MobileNetLatents"
    enc128 = MobileNetLatents(block=BLOCK, grid=(4, 8, 8), image_size=128)
    t0 = time.perf_counter()
    enc128.encode(vids)
    t_128 = time.perf_counter() - t0
    print(json.dumps({"videos": n, "render_videos_per_s": n / t_render, "encode64_videos_per_s": n / t_enc,
                      "render+encode64_videos_per_s": n / (t_render + t_enc),
                      "encode128_videos_per_s": n / t_128, "load": os.getloadavg()}))


def parse(arg: str):
    name, _, rest = arg.partition(":")
    kv = dict(p.split("=", 1) for p in rest.split(",") if p)
    opts = {"scenes": int(kv.pop("scenes", 80)), "caps": int(kv.pop("caps", 10)), "pool": kv.pop("pool", "avg"),
            "seed": int(kv.pop("seed", 0)), "system": kv.pop("system", "oracle")}
    train = {k: (float(v) if "." in v or "e-" in v else int(v)) for k, v in kv.items()}
    return name, opts, train


def run(dest: Path, args: list[str]) -> None:
    from vlgap.wsv.evaluate import grounded_score, score_captions
    from vlgap.wsv.experiment import EXPERIMENT_DEFAULTS, embed_captions
    from vlgap.wsv.train import TrainData, WSVConfig, load_model, train

    torch.set_num_threads(1)
    results = json.loads(dest.read_text()) if dest.exists() else {}
    tr = dict(EXPERIMENT_DEFAULTS["train"])
    for arg in args:
        name, o, over = parse(arg)
        if name in results:
            continue
        t0 = time.perf_counter()
        d = build(o["scenes"], o["caps"])
        paired, ev, val = data_features(d, o["scenes"], o["caps"])
        t_lat = time.perf_counter() - t0
        eval_ids = [i for i, _, _ in d["evals"]]
        specs = dict(zip(eval_ids, [s for _, s, _ in d["evals"]]))
        refs = {i: list(c) for i, _, c in d["evals"]}
        valc = [c for _, c in d["val_pairs"]]
        emb_path = cache_folder() / f"emb-s{o['scenes']}-c{o['caps']}-drawn.npz"
        if not emb_path.exists():
            np.savez(emb_path, corpus=embed_captions(d["corpus"]), val=embed_captions(valc))
        with np.load(emb_path) as z:
            text_emb, val_emb = z["corpus"], z["val"]
        # chance: a random corpus caption per evaluation video (as the experiment's chance cell)
        rng = np.random.default_rng([0, o["seed"], 99])
        chance = {i: d["corpus"][int(rng.integers(len(d["corpus"])))] for i in eval_ids}
        gc = grounded_score(chance, specs, n_bootstrap=300, seed=o["seed"])
        cc = score_captions(chance, refs, n_bootstrap=0, seed=0, keep_empty=True, metrics=["CIDEr"])
        if o["system"] == "oracle":
            lat, vlat = pooled(paired, o["pool"]), pooled(val, o["pool"])
        else:
            synth, vsynth = synth_features(d, o["scenes"], o["caps"])
            lat, vlat = pooled(synth, o["pool"]), pooled(vsynth, o["pool"])
        wcfg = WSVConfig(system=o["system"], seed=o["seed"], **{**tr, "checkpoint_every": 10**6, **over})
        data = TrainData(d["corpus"], lat, text_emb, val_captions=valc, val_latents=vlat, val_text_emb=val_emb)
        t1 = time.perf_counter()
        folder = cache_folder().parent / "runs" / name
        bundle = train(data, wcfg, folder, log=lambda m: None, force=True)
        secs = time.perf_counter() - t1
        caps = bundle.caption(pooled(ev, o["pool"]))
        pred = dict(zip(eval_ids, caps))
        g = grounded_score(pred, specs, n_bootstrap=300, seed=o["seed"])
        sc = score_captions(pred, refs, n_bootstrap=300, seed=o["seed"], keep_empty=True, metrics=["CIDEr"])
        history = load_model(folder / "model.pt").history
        att = ("shape", "colour", "background", "events", "mean")
        res = {"options": o, "train": over, "hygiene": d["hygiene"], "latent_shape": list(lat.shape[1:]),
               "latents_seconds": round(t_lat, 1), "train_seconds": round(secs, 1),
               "selected": getattr(bundle, "selected", None), "load": os.getloadavg(),
               "CIDEr": sc["CIDEr"]["score"], "CIDEr_ci": sc["CIDEr"].get("ci"),
               "distinct": sc["distinct"]["share"],
               **{a: g[a]["accuracy"] for a in att}, **{f"{a}_ci": g[a]["ci"] for a in att},
               "chance": {**{a: gc[a]["accuracy"] for a in att}, "CIDEr": cc["CIDEr"]["score"]},
               **{f"{a}_unread_share": g[a]["unread_share"] for a in att if a != "mean"},
               "examples": caps[:4], "predictions": pred, "val": [h for h in history if h[0] == "val"]}
        results[name] = res
        print(name, json.dumps({k: v for k, v in res.items() if k not in ("examples", "predictions", "val", "hygiene")}), flush=True)
        dest.write_text(json.dumps(results, indent=1))


def table(paths: list[str]) -> None:
    """The runs of the given result files as a Markdown table."""
    def ci(r, a):
        lo, hi = r[f"{a}_ci"] or (None, None)
        return f"{r[a]:.3f} [{lo:.3f}, {hi:.3f}]" if lo is not None else f"{r[a]:.3f}"

    print("| run | system | scenes x captions | pooling, latent | seed | shape | colour | background | events "
          "| CIDEr | chance shape / colour / bg / events / CIDEr | kept step | latents s | train s |")
    print("|" + "---|" * 14)
    for p in paths:
        for name, r in json.loads(Path(p).read_text()).items():
            o, c = r["options"], r["chance"]
            print(f"| {name} | {o['system']} | {o['scenes']} x {o['caps']} | {o['pool']}, {r['latent_shape']} | "
                  f"{o['seed']} | {ci(r, 'shape')} | {ci(r, 'colour')} | {ci(r, 'background')} | {ci(r, 'events')} | "
                  f"{r['CIDEr']:.3f} | {c['shape']:.3f} / {c['colour']:.3f} / {c['background']:.3f} / "
                  f"{c['events']:.3f} / {c['CIDEr']:.3f} | {(r['selected'] or {}).get('caption_step')} | "
                  f"{r['latents_seconds']} | {r['train_seconds']} |")


if __name__ == "__main__":
    if sys.argv[1] == "throughput":
        throughput(int(sys.argv[2]))
    elif sys.argv[1] == "table":
        table(sys.argv[2:])
    else:
        run(Path(sys.argv[2]), sys.argv[3:])
