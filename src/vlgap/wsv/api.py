"""Python API behind `vlgap wsv train | caption | eval | gap` (files in, files and dicts out)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

import numpy as np

from vlgap.errors import VlgapError
from vlgap.io_utils import atomic_write_json


def _quiet(msg: str) -> None:
    pass


def default_corpus(n_train: int = 150, world_seed: int = 0) -> list[str]:
    """The shapes world's ten captions of each of n_train scenes (the experiment's training scenes)."""
    return [c for c, _ in default_corpus_with_specs(n_train, world_seed)]


def default_corpus_with_specs(n_train: int = 150, world_seed: int = 0) -> list[tuple[str, Any]]:
    """(caption, its scene's spec) for the default corpus: the pairs the supervised oracle learns from."""
    from vlgap.data.shapes import item_rng, sample_spec, write_captions

    out = []
    for i in range(n_train):
        rng = item_rng(world_seed * 1000, i)
        spec = sample_spec(rng)
        out += [(c, spec) for c in write_captions(spec, int(rng.integers(2**31 - 1)))]
    return out


def read_corpus(path: str | Path) -> list[str]:
    path = Path(path)
    if not path.is_file():
        raise VlgapError(f"corpus file {path} not found (one caption per line)")
    lines = [ln.strip() for ln in path.read_text(encoding="utf-8").splitlines()]
    caps = [ln for ln in lines if ln]
    if not caps:
        raise VlgapError(f"corpus {path} is empty: it needs at least one caption, one per line")
    return caps


def train_system(out: str | Path, *, system: str = "wsv", seed: int = 0, corpus: str | Path | list[str] | None = None,
                 n_train: int = 150, generator: str = "synthetic", lm: str = "scratch", n_frames: int = 16,
                 size: int = 64, cache_dir=None, log: Callable[[str], None] = _quiet, force: bool = False,
                 **overrides) -> Path:
    """Captions -> synthetic latents (cached) -> train `system`; returns OUT/model.pt. OUT records the
    run's configuration: another one is refused with the differences unless `force`."""
    from vlgap.wsv.experiment import embed_captions
    from vlgap.wsv.generate import ShapesT2V
    from vlgap.wsv.latents import MobileNetLatents, cached_latents
    from vlgap.wsv.train import TrainData, WSVConfig, train

    from vlgap.counts import check_count

    n_train = check_count("n_train", n_train, 1, flag="--n-train", example=150)
    n_frames = check_count("n_frames", n_frames, 1, example=16)
    size = check_count("size", size, 16, example=64)
    cfg = WSVConfig(system=system, seed=seed, lm=lm, **overrides)  # settings checked before any work
    caps = read_corpus(corpus) if isinstance(corpus, (str, Path)) else (list(corpus) if corpus is not None
                                                                         else default_corpus(n_train))
    if not caps:
        raise VlgapError("the training corpus is empty: give at least one caption")
    if system == "oracle" and corpus is not None:
        raise VlgapError("--system oracle learns from paired videos and captions; a caption file has no videos: "
                         "leave out --corpus (the oracle renders each default-corpus caption's own scene)")
    t2v = ShapesT2V(style=generator, n_frames=n_frames, size=size)
    enc = MobileNetLatents(image_size=size)
    import hashlib

    h = hashlib.sha256("\n".join(caps).encode()).hexdigest()[:16]
    if system == "oracle":  # the supervised ceiling: each caption's own scene in the evaluation ("real") style
        from vlgap.wsv.generate import render_styled

        specs = [sp for _, sp in default_corpus_with_specs(n_train)]
        video_source = {"generator": "none: paired videos of the captions' own scenes", "style": "real",
                        "n_frames": n_frames, "size": size}
        z = cached_latents({"what": "train_system_paired", **video_source, "encoder": enc.record(), "captions": h},
                           lambda: {"z": enc.encode([render_styled(sp, n_frames, size, "real", 3 * 10**6 + k)
                                                     for k, sp in enumerate(specs)])},
                           cache_dir=cache_dir, log=log)["z"]
    else:
        video_source = t2v.record()
        z = cached_latents({"what": "train_system", "generator": t2v.record(), "encoder": enc.record(), "captions": h},
                           lambda: {"z": enc.encode(t2v.generate(caps, seed=0))}, cache_dir=cache_dir, log=log)["z"]
    e = cached_latents({"what": "minilm", "captions": h}, lambda: {"e": embed_captions(caps)}, cache_dir=cache_dir,
                       log=log)["e"]
    train(TrainData(caps, z, e), cfg, out, log=log, force=force,
          extra={"generator": video_source, "latent_encoder": enc.record(),
                 "n_captions": len(caps)})
    return Path(out) / "model.pt"


def manifest_latents(manifest: str | Path, n_frames: int = 16, size: int = 64,
                     log: Callable[[str], None] = _quiet) -> tuple[list[str], list[list[str]], np.ndarray]:
    """(ids, captions, latents) of a manifest's videos: n_frames evenly spaced frames, MobileNet latents."""
    from vlgap.data.manifest import read_manifest
    from vlgap.data.video import count_frames, read_frames
    from vlgap.wsv.latents import MobileNetLatents

    m = read_manifest(manifest)
    if len(m) == 0:
        raise VlgapError(f"manifest {manifest} has no items")
    no_video = [it.id for it in m.items if it.kind != "video"]
    if no_video:
        raise VlgapError(f"manifest {manifest}: items {no_video[:5]} are not videos; WSV captions videos")
    enc = MobileNetLatents(image_size=size)
    videos = []
    for it in m.items:
        total = count_frames(it)
        idx = np.linspace(0, total - 1, n_frames).round().astype(int)
        frames, _ = read_frames(it, idx, max_side=max(size * 2, 128))
        videos.append(frames)
    log(f"{len(videos)} videos read from {manifest}")
    return m.ids, [list(it.captions) for it in m.items], enc.encode(videos)


def caption_manifest(model: str | Path, manifest: str | Path, out: str | Path | None = None, *, polish: bool = False,
                     batch_size: int = 64, beam: int = 1, log: Callable[[str], None] = _quiet) -> list[dict[str, Any]]:
    """Captions for every video of a manifest, as coco results [{"image_id", "caption"}] (written to `out`)."""
    from vlgap.counts import check_count
    from vlgap.wsv.train import load_model

    batch_size = check_count("batch_size", batch_size, 1, flag="--batch-size", example=64)
    beam = check_count("beam", beam, 1, flag="--beam", example=3)
    bundle = load_model(model)
    ids, _, z = manifest_latents(manifest, log=log)
    caps = bundle.caption(z, polish=polish, batch_size=batch_size, beam=beam)
    preds = [{"image_id": i, "caption": c} for i, c in zip(ids, caps)]
    if out is not None:
        atomic_write_json(out, preds)
    return preds


def evaluate_predictions(predictions: str | Path | Any, references: str | Path | Any, *, n_bootstrap: int = 1000,
                         seed: int = 0, metrics: list[str] | None = None) -> dict[str, Any]:
    """Caption metrics with intervals (`metrics`: vlgap.captions names, default all coco-caption ones);
    references may be a manifest (its captions; with scene specs in meta.spec, as shapes-world manifests
    have, also the grounded per-attribute accuracy under "attributes")."""
    from vlgap.counts import check_count
    from vlgap.wsv.evaluate import score_captions

    n_bootstrap = check_count("n_bootstrap", n_bootstrap, 0, flag="--bootstrap", example=1000)
    pred = predictions
    if isinstance(predictions, (str, Path)):
        p = Path(predictions)
        if not p.is_file():
            raise VlgapError(f"predictions file {p} not found")
        pred = json.loads(p.read_text())
    if isinstance(pred, list):
        pred = {str(r["image_id"]): r["caption"] for r in pred}
    refs, specs = references, None
    if isinstance(references, (str, Path)) and str(references).endswith(".jsonl"):
        from vlgap.data.manifest import read_manifest

        try:
            m = read_manifest(references)
            refs = {it.id: list(it.captions) for it in m.items}
            specs = scene_specs(m)
        except VlgapError:
            refs = references  # a JSONL references file, read by the caption metrics
    res = score_captions(pred, refs, n_bootstrap=n_bootstrap, seed=seed, metrics=metrics)
    if specs is not None:  # shapes-world videos: also the grounded per-attribute accuracy
        from vlgap.wsv.evaluate import grounded_score

        res["attributes"] = grounded_score(pred, specs, n_bootstrap=n_bootstrap, seed=seed)
    return res


def scene_specs(manifest) -> dict[str, Any] | None:
    """{item id: SceneSpec} when every item of a manifest carries its scene spec (meta.spec, as shapes-world
    manifests do), else None (real videos: no grounded score)."""
    from vlgap.data.shapes import SceneSpec

    if not manifest.items or any("spec" not in it.meta for it in manifest.items):
        return None
    try:
        return {it.id: SceneSpec.from_dict(it.meta["spec"]) for it in manifest.items}
    except (KeyError, TypeError, ValueError, VlgapError) as exc:
        raise VlgapError(f"manifest: an item's meta.spec is not a shapes-world scene spec ({exc})") from None


def gap_for_model(model: str | Path, manifest: str | Path, *, n_permutations: int = 500, n_bootstrap: int = 500,
                  seed: int = 0, log: Callable[[str], None] = _quiet) -> dict[str, Any]:
    """The falsifier for a trained model: real latents of the manifest's videos vs synthetic latents that the
    model's generator makes from the manifest's first captions (raw, and polished by the model)."""
    import torch

    from vlgap.wsv.evaluate import latent_gap
    from vlgap.wsv.generate import ShapesT2V
    from vlgap.wsv.latents import MobileNetLatents
    from vlgap.counts import check_count
    from vlgap.wsv.train import load_model

    n_permutations = check_count("n_permutations", n_permutations, 0, flag="--permutations", example=500)
    n_bootstrap = check_count("n_bootstrap", n_bootstrap, 0, flag="--bootstrap", example=500)
    bundle = load_model(model)
    ids, caps, real = manifest_latents(manifest, log=log)
    if any(not c for c in caps):
        raise VlgapError(f"manifest {manifest}: every item needs a caption for the synthetic side")
    gen = (getattr(bundle, "extra", {}) or {}).get("generator") or {"style": "synthetic", "n_frames": 16, "size": 64}
    t2v = ShapesT2V(style=gen.get("style", "synthetic"), n_frames=gen.get("n_frames", 16), size=gen.get("size", 64))
    raw = MobileNetLatents(image_size=t2v.size).encode(t2v.generate([c[0] for c in caps], seed=seed))
    polished = None
    if bundle.polisher is not None:
        with torch.no_grad():
            polished = bundle.polisher(torch.from_numpy(raw)).numpy()
    return latent_gap(real, raw, polished, n_permutations=n_permutations, n_bootstrap=n_bootstrap, seed=seed)
