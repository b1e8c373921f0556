"""WSV's exchangeable parts, chosen by spec strings (adapters: diffusers, transformers, huggingface_hub).

    generator   shapes[:<style>] | diffusers:<hub id or folder>   captions -> latents [N, C, F, H, W]
    latents     mobilenet | vae:<hub id or folder>                  videos -> latents (default with a
                                                                    diffusers generator: its own VAE)
    video_text  latent-tower | clip:<hub id or folder>              the polisher's frozen video-text model
    lm          scratch | smollm2 | hf:<hub id or folder>           (built in wsv.lm)

Each part has `record()`: its spec plus a fingerprint of its weights (file sha256s for a folder, the
snapshot commit for a hub id), and the settings that change its numbers (frames, size, dtype). Training
keys, latent caches and model files hold these records, so a rerun with other parts is refused or
recomputed (vlgap.reuse) and `wsv caption` / `wsv gap` rebuild the parts a model was trained with.
Hub ids resolve through huggingface_hub's snapshot cache (HF_HUB_OFFLINE=1 works with a populated cache).
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from vlgap.errors import VlgapError
from vlgap.runtime import parse_device, parse_dtype, runtime, torch_dtype  # noqa: F401  (torch_dtype re-exported)
from vlgap.wsv.latent_grid import LEGACY_MOBILENET_GRID, MOBILENET_GRID  # noqa: F401  (re-exported)
from vlgap.wsv.sources import _WEIGHT_SUFFIXES, _prefix, folder_fingerprint, resolve_source  # noqa: F401
from vlgap.wsv.video_text import (VIDEO_TEXT_SPECS, ClipVideoText, LatentTower, build_video_text,  # noqa: F401
                                  minilm_embeddings)

GENERATOR_SPECS = "shapes | shapes:<render style> | diffusers:<hub id or folder>"
LATENT_SPECS = "mobilenet | vae:<hub id or folder>"
#: WSVConfig.lr (caption stage, LM pretraining), here so the CLI reads it without importing torch
CAPTION_LR = 1e-3

#: the offline parts every WSV entry point defaults to (the experiment's `parts` keys; the CLI's option defaults)
PART_DEFAULTS: dict[str, Any] = {"generator": "shapes", "latents": None, "video_text": "latent-tower",
                                 "generator_steps": 50}
#: the other settings a run defaults to (WSVConfig, ExperimentConfig and the CLI read them from here, torch-free,
#: so `vlgap wsv train` and `vlgap wsv experiment` cannot drift apart); lora_r None: 0 for hf:, 8 for smollm2
SETTING_DEFAULTS: dict[str, Any] = {"lm": "scratch", "lora_r": None, "dtype": "float32", "device": "cpu",
                                    "n_frames": 16, "size": 64}


# ----------------------------------------------------------------------------------------------
# Latent encoders: videos -> latents


def load_vae(src: str, device: str = "cpu", dtype: str = "float32"):
    """A diffusers video VAE from a VAE folder, a pipeline folder (its vae/), or a hub id of either."""
    import diffusers

    folder, rec = resolve_source(src, "--latents vae:")
    if (folder / "vae" / "config.json").is_file():
        folder = folder / "vae"
        rec["weights"] = folder_fingerprint(folder)  # the VAE's own weights, not the whole pipeline's
        rec["subfolder"] = "vae"
    cfg_path = folder / "config.json"
    if not cfg_path.is_file():
        raise VlgapError(f"--latents vae:{src}: no config.json in {folder} (nor in {folder}/vae); give a diffusers "
                         "VAE folder (save_pretrained) or a text-to-video pipeline folder")
    cls_name = json.loads(cfg_path.read_text()).get("_class_name", "")
    cls = getattr(diffusers, cls_name, None)
    if cls is None or not cls_name.startswith("Autoencoder"):
        raise VlgapError(f"--latents vae:{src}: {cls_name or 'no _class_name'} is not a diffusers autoencoder "
                         "(e.g. AutoencoderKLCogVideoX, AutoencoderKLWan)")
    vae = _from_pretrained(cls, folder, dtype)
    return vae, {"spec": f"vae:{src}", "class": cls_name, **rec}


def _from_pretrained(cls, folder: Path, dtype: str):
    """diffusers' from_pretrained in `dtype`: `torch_dtype=` works in every diffusers this project allows
    (>= 0.31; newer ones renamed it `dtype` and warn about the old name, which is not the user's doing)."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        return cls.from_pretrained(folder, torch_dtype=torch_dtype(dtype))


def vae_frames(vae, n_frames: int | None) -> int:
    """The frame count given, or the smallest one >= 16 that the VAE takes (k*m + 1 for temporal factor k)."""
    from vlgap.wsv.latents import _vae_factors

    if n_frames is not None:
        return n_frames
    k = _vae_factors(vae)[0]
    return 16 + (-(16 - 1)) % k


def build_latent_encoder(spec: str, *, n_frames: int | None, size: int, device: str = "cpu",
                         dtype: str = "float32", vae=None, vae_record: dict | None = None,
                         mobilenet_grid: Sequence[int] | None = None):
    """The latent encoder of a spec; `vae` (+ its record): an already loaded VAE (a pipeline's own).
    `mobilenet_grid`: MobileNet's pooling grid (default MOBILENET_GRID; a VAE's latent has its own shape)."""
    from vlgap.wsv.latents import MobileNetLatents, VaeLatents

    head, rest = _prefix(spec, LATENT_SPECS, "--latents")
    if spec == "mobilenet":
        return MobileNetLatents(image_size=size, device=device, dtype=dtype, n_frames=n_frames or 16,
                                grid=tuple(mobilenet_grid or MOBILENET_GRID))
    if head == "vae":
        if vae is None:
            vae, vae_record = load_vae(rest, device, dtype)
        return VaeLatents(vae, n_frames=vae_frames(vae, n_frames), size=size, device=device, dtype=dtype,
                          source=vae_record)
    raise VlgapError(f"--latents {spec!r} is not valid; valid: {LATENT_SPECS}")


# ----------------------------------------------------------------------------------------------
# Generators: captions -> latents (through the latent encoder)


class ShapesGenerator:
    """The offline text-to-video (caption reader + shapes renderer in a style), encoded by any latent
    encoder. Cheap: its latents are cached as one file per corpus."""

    per_caption_cache = False

    def __init__(self, style: str = "synthetic", n_frames: int = 16, size: int = 64):
        from vlgap.wsv.generate import ShapesT2V, available_styles

        if style not in available_styles():
            raise VlgapError(f"--generator shapes:{style}: unknown render style; valid: "
                             f"{', '.join('shapes:' + s for s in available_styles())}")
        self.t2v = ShapesT2V(style=style, n_frames=n_frames, size=size)
        self.spec = "shapes" if style == "synthetic" else f"shapes:{style}"

    def record(self) -> dict[str, Any]:
        return {"spec": self.spec, **self.t2v.record()}

    def videos(self, captions: Sequence[str], seed: int = 0) -> list[np.ndarray]:
        return self.t2v.generate(captions, seed=seed)

    def latents(self, captions: Sequence[str], encoder, seed: int = 0) -> np.ndarray:
        return encoder.encode(self.videos(captions, seed))


class DiffusersGenerator:
    """A diffusers text-to-video pipeline with a VAE (CogVideoX, Wan...). With its own VAE as the latent
    encoder it is called with output_type="latent" and its latents are used directly (the paper); with
    another encoder its decoded frames are encoded. Costly: latents are cached one file per caption."""

    per_caption_cache = True

    def __init__(self, src: str, *, n_frames: int | None, size: int, steps: int = 50, device: str = "cpu",
                 dtype: str = "float32", guidance_scale: float | None = None):
        import diffusers

        from vlgap.counts import check_count

        self.steps = check_count("generator_steps", steps, 1, flag="--generator-steps", example=50)
        folder, rec = resolve_source(src, "--generator diffusers:")
        if not (folder / "model_index.json").is_file():
            raise VlgapError(f"--generator diffusers:{src}: no model_index.json in {folder}; give a diffusers "
                             "text-to-video pipeline folder or hub id (e.g. THUDM/CogVideoX-2b)")
        try:
            pipe = _from_pretrained(diffusers.DiffusionPipeline, folder, dtype)
        except (OSError, ValueError, TypeError) as err:
            raise VlgapError(f"--generator diffusers:{src}: could not load the pipeline "
                             f"({(str(err).splitlines() or [''])[0][:160]})") from None
        if getattr(pipe, "vae", None) is None:
            raise VlgapError(f"--generator diffusers:{src}: {type(pipe).__name__} exposes no .vae; WSV needs a "
                             "latent-space text-to-video pipeline such as CogVideoXPipeline or WanPipeline")
        pipe.set_progress_bar_config(disable=True)
        self.pipe = pipe.to(device)
        self.src, self.device, self.dtype = src, device, dtype
        vae_rec = {"spec": f"vae:{src}", "class": type(pipe.vae).__name__, "source": rec["source"],
                   "weights": folder_fingerprint(folder / "vae") if (folder / "vae").is_dir() else rec["weights"],
                   "subfolder": "vae"}
        from vlgap.wsv.latents import VaeLatents

        self.own_encoder = VaeLatents(pipe.vae, n_frames=vae_frames(pipe.vae, n_frames), size=size, device=device,
                                      dtype=dtype, source=vae_rec)
        self.n_frames, self.size = self.own_encoder.n_frames, self.own_encoder.size
        patch = getattr(getattr(getattr(pipe, "transformer", None), "config", None), "patch_size", 1) or 1
        patch = int(patch[-1] if isinstance(patch, (list, tuple)) else patch)  # Wan: (t, h, w)
        step = self.own_encoder.spatial * patch
        if self.size % step:
            raise VlgapError(f"--size {self.size}: {type(pipe).__name__} needs a multiple of {step} (VAE spatial "
                             f"factor {self.own_encoder.spatial} x transformer patch {patch}), e.g. "
                             f"{max(step, self.size // step * step)}")
        self.call_kwargs: dict[str, Any] = {"num_frames": self.n_frames, "height": self.size, "width": self.size,
                                            "num_inference_steps": self.steps}
        if guidance_scale is not None:
            self.call_kwargs["guidance_scale"] = guidance_scale
        self.spec = f"diffusers:{src}"
        self._record = {"spec": self.spec, "pipeline": type(pipe).__name__, **rec, "call": self.call_kwargs,
                        "dtype": dtype, "seeds": "torch.Generator (CPU) seeded seed * 100003 + caption index"}

    def record(self) -> dict[str, Any]:
        return dict(self._record)

    def uses_own_latents(self, encoder) -> bool:
        r, own = encoder.record(), self.own_encoder.record()
        keys = ("encoder", "weights", "n_frames", "size", "normalisation")
        return all(r.get(k) == own.get(k) for k in keys)

    def one(self, caption: str, index: int, encoder, seed: int = 0) -> np.ndarray:
        """The latent [C, F, H, W] of one caption (its own seeded generator: independent of its batch)."""
        import torch

        from vlgap.wsv.generate import DiffusersT2V

        t2v = DiffusersT2V(self.pipe, self.call_kwargs)
        if self.uses_own_latents(encoder):
            return t2v.generate_latents([caption], seed=seed, first_index=index)[0]
        g = torch.Generator().manual_seed(seed * 100003 + index)
        frames = self.pipe(prompt=caption, generator=g, output_type="np", **self.call_kwargs).frames
        video = np.asarray(frames[0] if isinstance(frames, (list, tuple)) or np.ndim(frames) == 5 else frames)
        video = (np.clip(video, 0, 1) * 255).round().astype(np.uint8)  # [T, H, W, 3]
        return encoder.encode([video])[0]

    def latents(self, captions: Sequence[str], encoder, seed: int = 0) -> np.ndarray:
        return np.stack([self.one(c, i, encoder, seed) for i, c in enumerate(captions)])


def build_generator(spec: str, *, n_frames: int | None, size: int, steps: int = 50, device: str = "cpu",
                    dtype: str = "float32"):
    head, rest = _prefix(spec, GENERATOR_SPECS, "--generator")
    from vlgap.wsv.generate import available_styles

    if spec == "shapes":
        return ShapesGenerator("synthetic", n_frames or 16, size)
    if head == "shapes":
        return ShapesGenerator(rest, n_frames or 16, size)
    if spec in available_styles():  # the render style alone: the older spelling of shapes:<style>
        return ShapesGenerator(spec, n_frames or 16, size)
    if head == "diffusers":
        return DiffusersGenerator(rest, n_frames=n_frames, size=size, steps=steps, device=device, dtype=dtype)
    raise VlgapError(f"--generator {spec!r} is not valid; valid: {GENERATOR_SPECS}")


# ----------------------------------------------------------------------------------------------
# All parts together


@dataclass
class Parts:
    generator: Any
    encoder: Any
    video_text: Any

    def record(self) -> dict[str, Any]:
        return {"generator": self.generator.record() if self.generator is not None else None,
                "latents": {"spec": self.encoder.spec, **self.encoder.record(), "n_frames": self.encoder.n_frames},
                "video_text": self.video_text.record()}


def build_parts(generator: str = "shapes", latents: str | None = None, video_text: str = "latent-tower", *,
                n_frames: int | None = None, size: int = 64, generator_steps: int = 50, device: str = "cpu",
                dtype: str = "float32", mobilenet_grid: Sequence[int] | None = None) -> Parts:
    """Every part, each checked before any is used: a diffusers generator's own VAE is the default latent
    space (loaded once, shared). `mobilenet_grid`: see build_latent_encoder."""
    rt = runtime(device, dtype)  # auto resolved on the device; an emulated bfloat16 said once per process
    device, dtype = rt.device, rt.dtype
    gen = build_generator(generator, n_frames=n_frames, size=size, steps=generator_steps, device=device,
                          dtype=dtype)
    if latents is None:
        enc = gen.own_encoder if isinstance(gen, DiffusersGenerator) else \
            build_latent_encoder("mobilenet", n_frames=n_frames, size=size, device=device, dtype=dtype,
                                 mobilenet_grid=mobilenet_grid)
    elif isinstance(gen, DiffusersGenerator) and latents == gen.own_encoder.record()["spec"]:
        enc = gen.own_encoder
    else:
        enc = build_latent_encoder(latents, n_frames=n_frames if n_frames is not None else
                                   (gen.n_frames if isinstance(gen, DiffusersGenerator) else None),
                                   size=size, device=device, dtype=dtype, mobilenet_grid=mobilenet_grid)
    vt = build_video_text(video_text, enc, device=device, dtype=dtype)
    return Parts(gen, enc, vt)


def parts_of_model(extra: dict[str, Any]) -> dict[str, Any]:
    """The part specs and settings a model file recorded; models from before parts were recorded used
    the shapes generator and MobileNet latents."""
    parts = extra.get("parts")
    if parts:
        return parts
    gen = extra.get("generator") or {}
    style = gen.get("style", "synthetic")
    le = extra.get("latent_encoder") or {}
    return {"generator": {"spec": "shapes" if style == "synthetic" else f"shapes:{style}",
                          "n_frames": gen.get("n_frames", 16), "size": gen.get("size", 64)},
            "latents": {"spec": "mobilenet", "n_frames": 16, "image_size": le.get("image_size", gen.get("size", 64)),
                        "grid": le.get("grid", list(LEGACY_MOBILENET_GRID))},
            "video_text": {"spec": "latent-tower"}}


def matching_record(recorded: dict[str, Any], rebuilt: dict[str, Any], what: str, flag: str) -> None:
    """Refuse a part whose weights or settings differ from the ones a model was trained with (its folder
    may have moved: the path is not compared, the fingerprint is)."""
    skip = {"source", "spec", "device", "dtype"}  # where it lives and its precision are not another part
    diffs = sorted((k for k in recorded if k not in skip and recorded.get(k) != rebuilt.get(k)),
                   key=lambda k: (rebuilt.get(k) is None, k))  # a value against a value first: the telling one
    if diffs:
        shown = ", ".join(f"{k}: trained {recorded.get(k)!r} vs given {rebuilt.get(k)!r}" for k in diffs[:3])
        raise VlgapError(f"{flag}: {what} differs from the one the model was trained with ({shown}); give the "
                         f"same part ({recorded.get('spec')})")


# ----------------------------------------------------------------------------------------------
# Generated latents, cached


def generation_recipe(generator, encoder) -> dict[str, Any]:
    """The spec strings and settings that rebuild `generator` and `encoder` in another process (a Ray
    actor): latents None when the encoder is the generator's own VAE."""
    own = getattr(generator, "own_encoder", None)
    return {"generator": generator.spec, "latents": None if encoder is own else encoder.spec,
            "mobilenet_grid": list(encoder.grid) if encoder.spec == "mobilenet" else None,
            "n_frames": generator.n_frames, "size": generator.size, "steps": generator.steps,
            "device": generator.device, "dtype": generator.dtype}


def _differences(driver: dict[str, Any], worker: dict[str, Any]) -> str:
    keys = sorted(set(driver) | set(worker), key=lambda k: (k != "weights", k))  # the weights first: the telling one
    return ", ".join(f"{k}: driver {driver.get(k)!r} vs worker {worker.get(k)!r}" for k in keys
                     if driver.get(k) != worker.get(k))


@dataclass
class GenerationJob:
    """What a Ray actor needs to make generated latents equal to the driver's: the parts' recipe, the
    driver's records of them (fingerprints of the weights, settings), and the run's seed."""

    recipe: dict[str, Any]
    records: dict[str, Any]
    seed: int

    @property
    def device(self) -> str:
        return self.recipe["device"]

    def load(self):
        """(generator, encoder) rebuilt here from the recipe; refused when their records differ from the
        driver's (other weights on this worker, another library version's settings)."""
        r = self.recipe
        device = "cuda" if str(r["device"]).startswith("cuda") else r["device"]  # Ray shows an actor its GPU as cuda:0
        gen = build_generator(r["generator"], n_frames=r["n_frames"], size=r["size"], steps=r["steps"],
                              device=device, dtype=r["dtype"])
        enc = gen.own_encoder if r["latents"] is None else build_latent_encoder(
            r["latents"], n_frames=r["n_frames"], size=r["size"], device=device, dtype=r["dtype"],
            mobilenet_grid=r.get("mobilenet_grid"))
        for what, mine in (("generator", gen.record()), ("encoder", enc.record())):
            diff = _differences(self.records[what], mine)
            if diff:
                raise VlgapError(f"its {what} differs from the driver's ({diff}); every worker needs the same "
                                 f"files as the driver ({self.records[what].get('spec')})")
        return gen, enc

    def generate(self, loaded, index: int, caption: str) -> np.ndarray:
        gen, enc = loaded
        return np.ascontiguousarray(gen.one(caption, index, enc, seed=self.seed), np.float32)


def generated_latents(generator, encoder, captions: Sequence[str], *, seed: int = 0, cache_dir=None,
                      log: Callable[[str], None] | None = None, what: str = "corpus",
                      ray: str | bool | None = None, ray_workers: int | None = None) -> np.ndarray:
    """Latents of `captions` through `generator` and `encoder`, cached under <cache>/wsv/. A cheap
    generator: one sealed file per caption list. A costly one (diffusers): one sealed file per caption
    (key: parts, seed, caption index and text), written atomically as soon as it is made, so a killed
    run loses at most the clips in flight and a rerun generates only what is missing.

    ray: None (this process), "auto" or a cluster address (vlgap.distributed.cluster.connect): the
    missing captions are generated on `ray_workers` actors (default one per GPU), each loading the parts
    once and refused if their fingerprints differ from this process's; the latents are the same bits
    (caption i's seed depends on `seed` and i only)."""
    from vlgap.wsv.latents import cache_key, cached_latents

    say = log or (lambda line: None)
    base = {"generator": generator.record(), "encoder": encoder.record(), "seed": seed}
    if not getattr(generator, "per_caption_cache", False):
        if ray:
            say(f"{what}: --ray spreads a costly generator's clips; {generator.spec} is cheap and runs here")
        h = hashlib.sha256("\n".join(captions).encode()).hexdigest()[:16]
        return cached_latents({"what": "generated", **base, "captions": h},
                              lambda: {"z": generator.latents(captions, encoder, seed=seed)},
                              cache_dir=cache_dir, log=log)["z"]
    import io
    import time

    from vlgap.io_utils import atomic_write_json, cache_root, make_folder
    from vlgap.reuse import discard, read_verified, remove_stale_temporaries, write_artefact
    from vlgap.wsv.latents import LATENTS_FORMAT

    folder = cache_root(cache_dir) / "wsv" / "generated" / cache_key({"format": LATENTS_FORMAT, **base})
    make_folder(folder)
    atomic_write_json(folder / "parts.json", base)  # for people: what made these files
    remove_stale_temporaries(folder, older_than=time.time() - 3600)
    keys = [{"format": LATENTS_FORMAT, **base, "index": i, "caption": c} for i, c in enumerate(captions)]
    paths = [folder / f"{cache_key(k)}.npy" for k in keys]
    out: list[np.ndarray | None] = [None] * len(captions)
    for i, (path, key) in enumerate(zip(paths, keys)):
        raw = read_verified(path, key, what="generated latent", report=say)
        if raw is not None:
            try:
                out[i] = np.load(io.BytesIO(raw), allow_pickle=False)
            except Exception:  # noqa: BLE001 - sealed but unreadable: regenerate
                discard(path)
    todo = [(i, c) for i, c in enumerate(captions) if out[i] is None]
    n_cached = len(captions) - len(todo)

    def keep(i: int, z: np.ndarray) -> None:  # sealed and on disk as soon as it is made
        buf = io.BytesIO()
        np.save(buf, z)
        write_artefact(paths[i], buf.getvalue(), keys[i])
        out[i] = z

    last = [0.0]

    def show(made: int, seconds: float) -> None:
        if made in (1, len(todo)) or made % 10 == 0 or seconds - last[0] >= 30:
            last[0] = seconds
            say(f"{what}: {n_cached + made}/{len(captions)} latents ({made} generated, "
                f"{made / max(seconds, 1e-9):.2f} clips/s)")

    if todo and ray:
        from vlgap.distributed.wsv import generate_on_ray

        job = GenerationJob(generation_recipe(generator, encoder), {"generator": base["generator"],
                                                                     "encoder": base["encoder"]}, seed)
        ran = generate_on_ray(job, todo, keep, ray=ray, n_workers=ray_workers, progress=show)
        say(f"{what}: {ran['made']} clips on {ran['actors']} Ray actors ({', '.join(ran['hosts'])}) in "
            f"{ran['seconds']:.1f} s")
    elif todo:
        t0 = time.perf_counter()
        for made, (i, c) in enumerate(todo, 1):
            keep(i, np.ascontiguousarray(generator.one(c, i, encoder, seed=seed), np.float32))
            show(made, time.perf_counter() - t0)
    if todo:
        say(f"{what}: {len(todo)} of {len(captions)} latents generated, {n_cached} from the cache")
    return np.stack(out)


def text_embeddings(video_text, captions: Sequence[str], cache_dir=None,
                    log: Callable[[str], None] | None = None) -> np.ndarray:
    """Caption embeddings of the video-text model's text side, cached."""
    from vlgap.wsv.latents import cached_latents

    h = hashlib.sha256("\n".join(captions).encode()).hexdigest()[:16]
    key = {"what": "minilm", "captions": h} if video_text.kind == "latent-tower" else \
        {"what": "text_embeddings", "video_text": video_text.record(), "captions": h}
    return cached_latents(key, lambda: {"e": video_text.embed_texts(captions)}, cache_dir=cache_dir, log=log)["e"]
