"""Python API behind `vlgap wsv train | caption | eval | gap` (files in, files and dicts out)."""
from __future__ import annotations

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
    from vlgap.paths import read_text_utf8

    path = Path(path)
    lines = [ln.strip() for ln in read_text_utf8(path, "--corpus").splitlines()]
    caps = [ln for ln in lines if ln]
    if not caps:
        raise VlgapError(f"corpus {path} is empty: it needs at least one caption, one per line")
    return caps


def train_system(out: str | Path, *, system: str = "wsv", seed: int = 0, corpus: str | Path | list[str] | None = None,
                 n_train: int = 150, generator: str = "shapes", latents: str | None = None,
                 video_text: str = "latent-tower", lm: str = "scratch", lora_r: int | None = None,
                 n_frames: int | None = None, size: int = 64, generator_steps: int = 50, device: str = "cpu",
                 dtype: str = "float32", cache_dir=None, log: Callable[[str], None] = _quiet, force: bool = False,
                 ray: str | bool | None = None, ray_workers: int | None = None, **overrides) -> Path:
    """Captions -> synthetic latents (cached) -> train `system`; returns OUT/model.pt. OUT records the
    run's configuration and parts: another one is refused with the differences unless `force`.

    Parts (vlgap.wsv.parts): `generator` `shapes[:<style>]` | `diffusers:<hub id or folder>`; `latents`
    `mobilenet` | `vae:<hub id or folder>` (default: a diffusers generator's own VAE, else mobilenet);
    `video_text` `latent-tower` | `clip:<hub id or folder>`; `lm` `scratch` | `smollm2` | `hf:<hub id or folder>`
    (`lora_r` > 0: LoRA, default 0 for hf: = every weight trains). `device` / `dtype` apply to every model.
    `ray` ("auto" or a cluster address) / `ray_workers`: a diffusers generator's missing latents are made
    on Ray actors (vlgap.distributed.wsv), bit-identical to this process's.

    `system="oracle"` (the supervised ceiling) uses no generator: each default-corpus caption is paired
    with its own scene rendered in the "real" style, encoded by the latent encoder (a caption file or a
    non-shapes generator is refused: there are no paired videos for them)."""
    from vlgap.counts import check_count
    from vlgap.wsv.parts import build_parts, generated_latents, text_embeddings
    from vlgap.wsv.train import TrainData, WSVConfig, train

    n_train = check_count("n_train", n_train, 1, flag="--n-train", example=150)
    ray_workers = check_count("ray_workers", ray_workers, 1, flag="--ray-workers", example=2, allow_none=True)
    n_frames = check_count("n_frames", n_frames, 1, flag="--n-frames", example=16, allow_none=True)
    size = check_count("size", size, 16, flag="--size", example=64)
    kind = "latent-tower" if video_text == "latent-tower" else "clip"
    from vlgap.runtime import parse_dtype

    dtype = parse_dtype(dtype, device=device)  # auto: bfloat16 where the device computes it natively, else float32
    cfg = WSVConfig(system=system, seed=seed, lm=lm, lora_r=lora_r, video_text=kind, dtype=dtype,
                    **overrides)  # settings checked before any work
    if system == "oracle":
        if corpus is not None:
            raise VlgapError("--system oracle learns from paired videos and captions; a caption file has no videos: "
                             "leave out --corpus (the oracle renders each default-corpus caption's own scene)")
        if not generator.startswith("shapes") and generator not in _shapes_styles():
            raise VlgapError(f"--system oracle learns from the shapes world's paired real-style videos, not from a "
                             f"generator: with --generator {generator} it would need paired real videos of the corpus, "
                             "which train does not take; use --generator shapes (any --latents)")
    caps = read_corpus(corpus) if isinstance(corpus, (str, Path)) else (list(corpus) if corpus is not None
                                                                         else default_corpus(n_train))
    if not caps:
        raise VlgapError("the training corpus is empty: give at least one caption")
    parts = build_parts(generator, latents, video_text, n_frames=n_frames, size=size,
                        generator_steps=generator_steps, device=device, dtype=dtype)
    log(f"parts: generator {parts.generator.spec}, latents {parts.encoder.spec}, video-text {parts.video_text.spec}, "
        f"lm {lm}, device {device}, dtype {dtype}")
    record = parts.record()
    if system == "oracle":  # the supervised ceiling: each caption's own scene in the evaluation ("real") style
        z, record["generator"] = _paired_latents(parts.encoder, caps, n_train, size, cache_dir, log)
        if ray:
            log("oracle: --ray unused (no generator: the paired videos are rendered in this process)")
    else:
        z = generated_latents(parts.generator, parts.encoder, caps, seed=0, cache_dir=cache_dir, log=log, ray=ray,
                              ray_workers=ray_workers)
    e = text_embeddings(parts.video_text, caps, cache_dir=cache_dir, log=log)
    extra = {"parts": record, "n_captions": len(caps), "device": device}
    if system == "oracle":
        extra["generator"] = record["generator"]
    elif hasattr(parts.generator, "t2v"):  # the fields older readers look for
        extra["generator"] = parts.generator.t2v.record()
    train(TrainData(caps, z, e, parts=record), cfg, out, log=log, force=force, extra=extra,
          video_text=None if kind == "latent-tower" else parts.video_text, device=parts.encoder.device)
    return Path(out) / "model.pt"


def _shapes_styles() -> tuple[str, ...]:
    from vlgap.wsv.generate import available_styles

    return available_styles()


def _paired_latents(encoder, caps: list[str], n_train: int, size: int, cache_dir, log) -> tuple[np.ndarray, dict]:
    """The oracle's supervision: latents of each default-corpus caption's own scene rendered in the "real"
    style (a fresh style seed per caption), through `encoder`, cached; and the record of that video source.
    The key is the one the documented experiment's oracle used (MobileNet latents at float32 keep it)."""
    import hashlib

    from vlgap.wsv.experiment import render_set
    from vlgap.wsv.latents import cached_latents

    n_frames = encoder.n_frames or 16  # a video VAE's own frame count (k*m+1), else 16
    specs = [sp for _, sp in default_corpus_with_specs(n_train)]
    h = hashlib.sha256("\n".join(caps).encode()).hexdigest()[:16]
    video_source = {"generator": "none: paired videos of the captions' own scenes", "style": "real",
                    "n_frames": n_frames, "size": size}
    z = cached_latents({"what": "train_system_paired", **video_source, "encoder": encoder.record(), "captions": h},
                       # the experiment's paired set: its style seeds, in the "real" style
                       lambda: {"z": encoder.encode(list(render_set("paired", specs, n_frames, size, "real")))},
                       cache_dir=cache_dir, log=log)["z"]
    return z, video_source


def manifest_latents(manifest: str | Path, n_frames: int = 16, size: int = 64,
                     log: Callable[[str], None] = _quiet,
                     encoder=None) -> tuple[list[str], list[list[str]], np.ndarray]:
    """(ids, captions, latents) of a manifest's videos (decoded with the project's video reader):
    evenly spaced frames (the encoder's own count where it has one, else n_frames) through `encoder`
    (default: MobileNet latents at `size`)."""
    from vlgap.data.manifest import read_manifest
    from vlgap.data.video import count_frames, read_frames
    from vlgap.wsv.parts import build_latent_encoder

    m = read_manifest(manifest)
    if len(m) == 0:
        raise VlgapError(f"manifest {manifest} has no items")
    no_video = [it.id for it in m.items if it.kind != "video"]
    if no_video:
        raise VlgapError(f"manifest {manifest}: items {no_video[:5]} are not videos; WSV captions videos")
    enc = encoder if encoder is not None else build_latent_encoder("mobilenet", n_frames=n_frames, size=size)
    n = getattr(enc, "n_frames", None) or n_frames
    side = getattr(enc, "size", None) or getattr(enc, "image_size", None) or size
    videos = []
    for it in m.items:
        total = count_frames(it)
        idx = np.linspace(0, total - 1, n).round().astype(int)
        frames, _ = read_frames(it, idx, max_side=max(side * 2, 128))
        videos.append(frames)
    log(f"{len(videos)} videos read from {manifest} ({n} frames each)")
    return m.ids, [list(it.captions) for it in m.items], enc.encode(videos)


def load_with_parts(model: str | Path, *, generator: str | None = None, latents: str | None = None,
                    device: str = "cpu", dtype: str | None = None, with_generator: bool = False):
    """(bundle, latent encoder, generator or None) of a model file, each part rebuilt from the spec the
    model recorded (or the one given, whose weights and settings must equal the recorded ones: a moved
    folder is fine, another model is refused). `dtype` (default: the model's) applies to every model."""
    from vlgap.wsv.parts import (DiffusersGenerator, build_generator, build_latent_encoder, build_video_text,
                                 matching_record, parts_of_model)
    from vlgap.runtime import parse_device, parse_dtype
    from vlgap.wsv.train import load_model

    device = parse_device(device)
    bundle = load_model(model, device=device)
    if dtype is not None:
        bundle.cfg.dtype = parse_dtype(dtype, device=device)
    dtype = bundle.cfg.dtype
    rec = parts_of_model(getattr(bundle, "extra", {}) or {})
    lat, grec = rec["latents"], rec.get("generator") or {}
    n_frames, size = lat.get("n_frames"), lat.get("size") or lat.get("image_size") or 64
    gen = None
    if with_generator:
        if "spec" not in grec and generator is None:  # the oracle: trained on paired videos, no generator
            raise VlgapError(f"{model} was trained without a generator ({grec.get('generator', 'no record')}); the "
                             "falsifier needs a model trained from generated latents (e.g. --system wsv), or name "
                             "one with --generator")
        steps = (grec.get("call") or {}).get("num_inference_steps", 50)
        gen = build_generator(generator or grec["spec"], n_frames=grec.get("n_frames") or n_frames,
                              size=grec.get("size") or size, steps=steps, device=device, dtype=dtype)
        if "spec" in grec:  # the model's own generator: it must be the one it was trained with
            matching_record(grec, gen.record(), "the generator", "--generator")
    spec = latents or lat["spec"]
    if isinstance(gen, DiffusersGenerator) and spec == gen.own_encoder.spec:
        enc = gen.own_encoder
    else:
        enc = build_latent_encoder(spec, n_frames=n_frames, size=size, device=device, dtype=dtype,
                                   mobilenet_grid=lat.get("grid") if spec == lat["spec"] else None)
    matching_record(lat, {"spec": enc.spec, **enc.record(), "n_frames": enc.n_frames}, "the latent encoder",
                    "--latents")
    if bundle.head is None and bundle.cfg.system == "text_only":  # reads videos through the frozen model
        vt = build_video_text(rec["video_text"]["spec"], enc, device=device, dtype=dtype)
        matching_record(rec["video_text"], vt.record(), "the video-text model", "--video-text")
        bundle.__dict__["video_text"] = vt
    return bundle, enc, gen


def caption_manifest(model: str | Path, manifest: str | Path, out: str | Path | None = None, *, polish: bool = False,
                     batch_size: int = 64, beam: int = 1, latents: str | None = None, device: str = "cpu",
                     dtype: str | None = None, log: Callable[[str], None] = _quiet) -> list[dict[str, Any]]:
    """Captions for every video of a manifest (e.g. one written by `vlgap import msrvtt|msvd|vatex`),
    encoded through the latent encoder the model was trained with, as coco results
    [{"image_id", "caption"}] (written to `out`)."""
    from vlgap.counts import check_count

    batch_size = check_count("batch_size", batch_size, 1, flag="--batch-size", example=64)
    beam = check_count("beam", beam, 1, flag="--beam", example=3)
    bundle, enc, _ = load_with_parts(model, latents=latents, device=device, dtype=dtype)
    ids, _, z = manifest_latents(manifest, log=log, encoder=enc)
    caps = bundle.caption(z, polish=polish, batch_size=batch_size, beam=beam)
    preds = [{"image_id": i, "caption": c} for i, c in zip(ids, caps)]
    if out is not None:
        atomic_write_json(out, preds)
    return preds


def evaluate_predictions(predictions: str | Path | Any, references: str | Path | Any, *, n_bootstrap: int = 1000,
                         seed: int = 0, metrics: list[str] | None = None, confidence: float = 0.95) -> dict[str, Any]:
    """Caption metrics with intervals (`metrics`: vlgap.captions names, default all coco-caption ones);
    references may be a manifest (its captions; with scene specs in meta.spec, as shapes-world manifests
    have, also the grounded per-attribute accuracy under "attributes")."""
    from vlgap.counts import check_count
    from vlgap.wsv.evaluate import score_captions

    n_bootstrap = check_count("n_bootstrap", n_bootstrap, 0, flag="--bootstrap", example=1000)
    pred = predictions
    if isinstance(predictions, (str, Path, list)):
        # caption-eval's reader: the same forms, and the same refusal of an id predicted twice (no silent "last wins")
        from vlgap.captions.io import load_predictions
        from vlgap.paths import input_file

        if isinstance(predictions, (str, Path)):
            input_file(predictions, "PREDICTIONS")
        if isinstance(references, (str, Path)):
            input_file(references, "REFERENCES")
        data = load_predictions(predictions, on_empty="keep")  # empty captions: score_captions' rule
        pred = {str(i): c for i, c in zip(data.ids, data.predictions)}
    refs, specs = references, None
    if isinstance(references, (str, Path)) and str(references).endswith(".jsonl"):
        from vlgap.data.manifest import read_manifest

        try:
            m = read_manifest(references)
            refs = {it.id: list(it.captions) for it in m.items}
            specs = scene_specs(m)
        except VlgapError:
            refs = references  # a JSONL references file, read by the caption metrics
    res = score_captions(pred, refs, n_bootstrap=n_bootstrap, seed=seed, metrics=metrics, confidence=confidence)
    if specs is not None:  # shapes-world videos: also the grounded per-attribute accuracy
        from vlgap.wsv.evaluate import grounded_score

        res["attributes"] = grounded_score(pred, specs, n_bootstrap=n_bootstrap, seed=seed, confidence=confidence)
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
                  seed: int = 0, generator: str | None = None, latents: str | None = None, device: str = "cpu",
                  dtype: str | None = None, cache_dir=None, log: Callable[[str], None] = _quiet,
                  ray: str | bool | None = None, ray_workers: int | None = None) -> dict[str, Any]:
    """The falsifier for a trained model in its own latent space: real latents of the manifest's videos
    vs synthetic latents that the model's generator makes from the manifest's first captions (raw, and
    polished by the model). Generated latents are cached (per caption for a diffusers generator) and, with
    `ray`, made on Ray actors as in train_system."""
    import torch

    from vlgap.counts import check_count
    from vlgap.wsv.evaluate import latent_gap
    from vlgap.wsv.parts import generated_latents

    n_permutations = check_count("n_permutations", n_permutations, 0, flag="--permutations", example=500)
    n_bootstrap = check_count("n_bootstrap", n_bootstrap, 0, flag="--bootstrap", example=500)
    ray_workers = check_count("ray_workers", ray_workers, 1, flag="--ray-workers", example=2, allow_none=True)
    bundle, enc, gen = load_with_parts(model, generator=generator, latents=latents, device=device, dtype=dtype,
                                       with_generator=True)
    ids, caps, real = manifest_latents(manifest, log=log, encoder=enc)
    if any(not c for c in caps):
        raise VlgapError(f"manifest {manifest}: every item needs a caption for the synthetic side")
    raw = generated_latents(gen, enc, [c[0] for c in caps], seed=seed, cache_dir=cache_dir, log=log,
                            what="held-out captions", ray=ray, ray_workers=ray_workers)
    polished = None
    if bundle.polisher is not None:
        with torch.no_grad(), bundle.autocast():
            polished = bundle.polisher(torch.from_numpy(raw).to(bundle.device)).float().cpu().numpy()
    res = latent_gap(real, raw, polished, n_permutations=n_permutations, n_bootstrap=n_bootstrap, seed=seed)
    res["latent_space"] = enc.record()
    return res


def _inversion_captions(captions) -> tuple[list[str], list[str], dict[str, Any] | None, Path | None]:
    """(ids, one caption per item, scene specs or None, the manifest path when the items are videos) of the
    inversion check's captions: a list of strings, a text file (one caption per line), a manifest
    (.jsonl: each item's first caption; its videos are the real side) or a coco annotations / JSONL
    references file (each item's first caption, in file order)."""
    if isinstance(captions, (list, tuple)):
        caps = [str(c).strip() for c in captions]
        if not caps or not all(caps):
            raise VlgapError("inversion: give at least one caption, none empty")
        return [f"caption_{i:05d}" for i in range(len(caps))], caps, None, None
    path = Path(captions)
    if not path.is_file():
        raise VlgapError(f"captions file {path} not found; give a text file (one caption per line), a manifest "
                         "(.jsonl) or a coco annotations file (.json)")
    if path.suffix.lower() == ".txt":
        caps = read_corpus(path)
        return [f"caption_{i:05d}" for i in range(len(caps))], caps, None, None
    if path.suffix.lower() not in (".json", ".jsonl"):
        raise VlgapError(f"captions file {path}: unknown kind {path.suffix or '(no suffix)'}; give a .txt (one "
                         "caption per line), a manifest .jsonl or a coco annotations .json")
    if path.suffix.lower() == ".jsonl":
        from vlgap.data.manifest import read_manifest

        try:
            m = read_manifest(path)
        except VlgapError:
            m = None
        if m is not None:
            empty = [it.id for it in m.items if not it.captions]
            if empty or not m.items:
                raise VlgapError(f"manifest {path}: items {empty[:5]} have no caption; the inversion check "
                                 "generates each item's first caption" if empty else f"manifest {path} has no items")
            videos = all(it.kind == "video" for it in m.items)
            return ([str(i) for i in m.ids], [it.captions[0] for it in m.items], scene_specs(m),
                    path if videos else None)
    from vlgap.captions.io import _load_path, reference_rows

    first: dict[str, str] = {}
    for item, cap in reference_rows(_load_path(path), str(path)):
        if cap is None or not str(cap).strip():
            raise VlgapError(f"{path}: item {item!r} has no caption; every item needs one")
        first.setdefault(str(item), str(cap))
    if not first:
        raise VlgapError(f"{path} holds no captions")
    return list(first), list(first.values()), None, None


def invert_model(model: str | Path, captions, out: str | Path | None = None, *, generator: str | None = None,
                 latents: str | None = None, synthetic_only: bool = False, seed: int = 0, n_bootstrap: int = 1000,
                 n_permutations: int = 1000, metrics: list[str] | None = None, batch_size: int = 64, beam: int = 1,
                 device: str = "cpu", dtype: str | None = None, cache_dir=None, log: Callable[[str], None] = _quiet,
                 ray: str | bool | None = None, ray_workers: int | None = None) -> dict[str, Any]:
    """The T2V-inversion check for a trained model: its generator (the one it was trained with, as
    recorded; `generator`: where it lives now, or any generator for a model trained without one, e.g.
    the oracle) turns `captions` (held-out captions: a list, a text file, a coco annotations / references
    file, or a video manifest whose items' first captions are used) into raw synthetic latents, the model
    captions them (polisher bypassed, as at inference; a model with a polisher also captions them polished,
    its training input, under "synthetic_polished") and the captions are scored against the captions
    they were generated from (BLEU-1..4, METEOR, ROUGE-L, CIDEr with per-item bootstrap intervals; for
    the shapes generator also the grounded attribute accuracy against the scene it rendered).

    With a video manifest (unless `synthetic_only`), the model also captions the real videos, scored
    against the same first captions (and, where the manifest has scene specs, their attribute accuracy),
    and the result holds their paired differences (synthetic - real). High on synthetic and low on real:
    the model inverts its generator and the synthetic-to-real gap is the bottleneck; low on both: the
    captioner itself is weak. Returns (and writes to `out`) the scores of
    vlgap.wsv.evaluate.inversion_scores plus the predictions and what made them."""
    from vlgap.counts import check_count
    from vlgap.wsv.evaluate import inversion_scores
    from vlgap.wsv.parts import ShapesGenerator, generated_latents

    n_bootstrap = check_count("n_bootstrap", n_bootstrap, 0, flag="--bootstrap", example=1000)
    n_permutations = check_count("n_permutations", n_permutations, 0, flag="--permutations", example=1000)
    batch_size = check_count("batch_size", batch_size, 1, flag="--batch-size", example=64)
    beam = check_count("beam", beam, 1, flag="--beam", example=3)
    ray_workers = check_count("ray_workers", ray_workers, 1, flag="--ray-workers", example=2, allow_none=True)
    ids, caps, specs, manifest = _inversion_captions(captions)
    bundle, enc, gen = load_with_parts(model, generator=generator, latents=latents, device=device, dtype=dtype,
                                       with_generator=True)
    z = generated_latents(gen, enc, caps, seed=seed, cache_dir=cache_dir, log=log, what="inversion captions",
                          ray=ray, ray_workers=ray_workers)
    pred_synthetic = dict(zip(ids, bundle.caption(z, batch_size=batch_size, beam=beam)))
    pred_polished = (dict(zip(ids, bundle.caption(z, polish=True, batch_size=batch_size, beam=beam)))
                     if bundle.polisher is not None else None)
    if isinstance(gen, ShapesGenerator):  # what each synthetic video shows: the caption read as it was rendered
        synthetic_specs = dict(zip(ids, (r.spec for r in gen.t2v.read(caps, seed=seed))))
        specs_source = "the scene the shapes generator rendered from each caption"
    else:
        synthetic_specs = specs
        specs_source = "the manifest's scene spec of each item" if specs is not None else None
    pred_real = None
    if manifest is not None and not synthetic_only:
        real_ids, _, real = manifest_latents(manifest, log=log, encoder=enc)
        pred_real = dict(zip([str(i) for i in real_ids], bundle.caption(real, batch_size=batch_size, beam=beam)))
    res = inversion_scores(pred_synthetic, dict(zip(ids, caps)), pred_real=pred_real,
                           synthetic_specs=synthetic_specs, real_specs=specs if pred_real is not None else None,
                           pred_polished=pred_polished,
                           n_bootstrap=n_bootstrap, n_permutations=n_permutations, seed=seed, metrics=metrics)
    res.update({"model": str(model), "generator": gen.record(), "latent_space": enc.record(),
                "captions_source": str(captions) if isinstance(captions, (str, Path)) else "list",
                "synthetic_specs": specs_source, "generation_seed": seed,
                "predictions": {"synthetic": pred_synthetic, "synthetic_polished": pred_polished, "real": pred_real}})
    log(f"inversion: {len(ids)} captions, CIDEr on synthetic latents {res['synthetic']['CIDEr']['score']:.3f}"
        + (f", on real videos {res['real']['CIDEr']['score']:.3f}" if res["real"] else ""))
    if out is not None:
        from vlgap.io_utils import atomic_write_text, to_json

        atomic_write_text(out, to_json(res) + "\n")
    return res
