"""The WSV protocol end to end: data with checked disjointness, cells (generator x system x seed), the
falsifier, tables and the demo report (orchestration; resumable cell by cell).

World: scenes of the shapes world drawn by seed. Training corpus: the ten captions of each training
scene (text only: the scenes' videos are never rendered for training). Each caption goes through the
text-to-video generator (caption reader + renderer in the generator's style) into a synthetic video and
its latent. Evaluation: other scenes (disjoint by id and by exact caption text, both checked and
reported) rendered in the "real" style, scored against their ten captions. Unlabelled real latents (a
third disjoint scene set) feed only the polisher's optional distribution term. The supervised oracle
ceiling learns from the corpus captions paired with their own scenes rendered in the evaluation style
(never an evaluation scene: checked in hygiene.json); the chance floor gives each evaluation video a
random training caption. Every cell is scored with the caption metrics and the grounded per-attribute
accuracy (each caption read back into a scene spec and checked against the video's true spec) and keeps
its per-stage loss curves; the summary places each text-only system between chance and the oracle.
Every cell's result is written atomically to cells/<generator>-<system>-s<seed>.json (the floor:
cells/chance-s<seed>.json); a re-run skips finished cells, and an unfinished cell resumes from its
checkpoint.
"""
from __future__ import annotations

import json
import math
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np

from vlgap.errors import VlgapError
from vlgap.io_utils import atomic_write_json, atomic_write_text
from vlgap.wsv.convergence import STILL_FALLING, late_fall, validation_curve
from vlgap.wsv.parts import LEGACY_MOBILENET_GRID, MOBILENET_GRID, PART_DEFAULTS, SETTING_DEFAULTS

DEFAULT_SYSTEMS = ("wsv", "wsv_mmd", "no_polisher", "frozen_lm", "text_only", "oracle", "wsv+smollm2")
SYSTEM_NAMES = {"wsv": "WSV-offline", "wsv_mmd": "WSV + MMD-to-real polisher", "no_polisher": "no polisher",
                "frozen_lm": "frozen LM", "text_only": "text-only (CapDec/DeCap)",
                "oracle": "oracle ceiling (supervised on paired real-style videos)",
                "chance": "chance (a random training caption)"}
#: the systems that learn from text only (the oracle is supervised; chance is the floor)
TEXT_ONLY_SYSTEMS = ("wsv", "wsv_mmd", "no_polisher", "frozen_lm", "text_only")


def split_system(name: str) -> tuple[str, dict[str, Any]]:
    """An experiment row's system name -> (training system, WSVConfig overrides): "wsv" or, with another
    LM, "wsv+smollm2" (the bundled SmolLM2-135M with LoRA) / "wsv+hf:<folder>"."""
    base, _, lm = name.partition("+")
    if not lm:
        return base, {}
    if lm == "smollm2":
        return base, {"lm": lm, **SMOLLM2_TRAIN}
    return base, {"lm": lm[3:] if lm.startswith("hf:") else lm}


#: the SmolLM2-135M + LoRA row's own caption-stage settings (they replace the experiment's `train` values for
#: that row and are recorded in its cell config and key). A pretrained 30-layer LM costs far more than the
#: scratch LM per caption: one step of 32 captions took ~11.5 s of CPU in float32 here. bfloat16 autocast
#: halves it (the CPU has avx512_bf16), the loss projects only caption positions onto the 49k vocabulary, and
#: 8 captions per step make a step ~1.4 s of CPU. A pretrained LM needs few steps: the held-out caption loss
#: falls 4.75 -> 2.08 -> 1.60 -> 1.41 -> 1.37 at 0/50/100/150/200 steps of the profile run; in the 0be5d04
#: experiment, 200 steps left the held-out loss still falling at the last step on 2 of 3 seeds, so at least 400
#: steps (about one pass over the 2,996-caption corpus) at lr 1e-3, then on until converged (at most 800), with
#: the lowest-validation-loss weights kept, as every other row (docs/results/wsv-experiment.md).
#: docs/wsv.md gives the profile. Checkpoints every 100 steps hold the adapters and the prompter, not the
#: 540 MB base LM (wsv.train.stored_state).
SMOLLM2_TRAIN: dict[str, Any] = {"batch_size": 8, "caption_steps": 400, "max_caption_steps": 800, "lr": 1e-3,
                                  "dtype": "bfloat16", "checkpoint_every": 100}


def system_label(name: str) -> str:
    base, over = split_system(name)
    label = SYSTEM_NAMES.get(base, base)
    return f"{label}, LM {over['lm']} + LoRA" if "lm" in over else label


#: caption-stage steps of the documented experiment: at least CAPTION_STEPS, then on until the held-out loss
#: converged (wsv.convergence) or MAX_CAPTION_STEPS. The minimum: WSV-offline's held-out loss sits on a
#: plateau from about 1,500 to 1,900 steps and then falls another 3 % (best at 2,450 of a 3,000-step run), so
#: any rule judged from 1,500 steps stopped it on the plateau (docs/results/wsv-experiment.md)
CAPTION_STEPS = 3000
MAX_CAPTION_STEPS = 6000

#: the experiment's caption-stage learning rate: at 2e-3 the oracle on 3,000 scenes reaches in 1,500 steps the
#: held-out loss 1e-3 reaches in 3,000 (1.046 both; docs/results/wsv-latent-diagnosis.md), at half the cost
CAPTION_STAGE_LR = 2e-3

#: the documented experiment: `vlgap wsv experiment` with no options (README "The experiment"); the demo is
#: its seed 0, so both read their settings from here
EXPERIMENT_DEFAULTS: dict[str, Any] = dict(
    n_train=3000, captions_per_scene=1, latent_grid=MOBILENET_GRID, n_eval=60, n_unlabelled=20, n_val=10,
    seeds=(0, 1, 2), systems=DEFAULT_SYSTEMS,
    generators=("synthetic", "real"), second_generator_systems=("wsv",), n_bootstrap=300, n_permutations=300,
    c2st_permutations=30,
    train=dict(caption_steps=CAPTION_STEPS, max_caption_steps=MAX_CAPTION_STEPS, lr=CAPTION_STAGE_LR,
               head_steps=150, polisher_steps=150,
               lm_pretrain_steps=200, lm_dim=64, lm_layers=2, prompter_dim=32, checkpoint_every=50))


@dataclass
class ExperimentConfig:
    n_train: int = 150  # training scenes (x captions_per_scene captions = the corpus)
    # captions of each training scene in the corpus, drawn at random from its ten; fewer captions of more
    # scenes give the oracle (and a reader of the latent) more distinct scenes at the same corpus size
    captions_per_scene: int = 10
    # MobileNet latents' pooling grid (frames, height, width); (8, 8, 8) at 64 px keeps block 6's whole
    # 8 x 8 map (the objects of the shapes world are 1-2 cells wide), (8, 4, 4) averaged them away
    latent_grid: tuple[int, int, int] = MOBILENET_GRID
    n_eval: int = 60  # held-out real-style scenes
    n_unlabelled: int = 60  # unlabelled real-style scenes (distribution term only)
    n_val: int = 10  # validation scenes: their captions (never trained on) give the held-out caption loss
    world_seed: int = 0
    seeds: tuple[int, ...] = (0, 1, 2)
    systems: tuple[str, ...] = DEFAULT_SYSTEMS
    generators: tuple[str, ...] = ("synthetic", "real")  # render styles of the T2V generator
    second_generator_systems: tuple[str, ...] = ("wsv",)  # systems also run with generators[1:]
    eval_style: str = "real"
    n_frames: int = SETTING_DEFAULTS["n_frames"]
    size: int = SETTING_DEFAULTS["size"]
    n_bootstrap: int = 500
    n_permutations: int = 500
    c2st_permutations: int = 50
    train: dict[str, Any] = field(default_factory=dict)  # WSVConfig overrides (steps, sizes, lm, lora_r, dtype)
    # the parts (vlgap.wsv.parts), by spec: generator, latents, video_text, generator_steps; empty = the
    # offline defaults (shapes renderer in the `generators` styles, MobileNet latents, trained latent tower)
    parts: dict[str, Any] = field(default_factory=dict)
    metrics: tuple[str, ...] | None = None  # caption metrics (vlgap.captions names); None: all coco-caption ones

    def __post_init__(self):
        from vlgap.counts import check_count

        self.latent_grid = tuple(self.latent_grid)
        if len(self.latent_grid) != 3 or any(int(g) < 1 for g in self.latent_grid):
            raise VlgapError(f"--latent-grid: give frames x height x width, e.g. 8x8x8; got {self.latent_grid}")
        if not 1 <= int(self.captions_per_scene) <= 10:
            raise VlgapError(f"--captions-per-scene must lie in 1..10 (each scene has ten captions), "
                             f"got {self.captions_per_scene}")
        for name, minimum in (("n_train", 1), ("n_eval", 2), ("n_unlabelled", 0), ("n_val", 0), ("n_frames", 1), ("size", 16),
                              ("n_bootstrap", 0), ("n_permutations", 0), ("c2st_permutations", 0)):
            setattr(self, name, check_count(name, getattr(self, name), minimum,
                                            flag="--bootstrap" if name == "n_bootstrap" else
                                            "--permutations" if name == "n_permutations" else
                                            "--" + name.replace("_", "-")))
        self.seeds = tuple(check_count("seed", s, 0, flag="--seeds", example=0) for s in self.seeds)
        if not self.seeds:
            raise VlgapError("--seeds: give at least one training seed, e.g. 0,1,2")
        for name in ("systems", "generators"):
            if not tuple(getattr(self, name)):
                raise VlgapError(f"--{name}: give at least one, e.g. {DEFAULT_SYSTEMS[0] if name == 'systems' else 'synthetic'}")
        from vlgap.wsv.train import SYSTEMS, WSVConfig

        unknown = [s for s in self.systems if split_system(s)[0] not in SYSTEMS]
        if unknown:
            raise VlgapError(f"--systems: unknown {unknown}; valid: {', '.join(SYSTEMS)}, each optionally with "
                             "another LM as SYSTEM+smollm2")
        unknown_parts = sorted(set(self.parts) - set(PART_DEFAULTS))
        if unknown_parts:
            raise VlgapError(f"experiment parts {unknown_parts} unknown; valid: {', '.join(PART_DEFAULTS)}")
        if not self.part("generator").startswith("shapes") and len(self.generators) != 1:
            raise VlgapError(f"--generators {','.join(self.generators)}: render styles belong to the shapes generator; "
                             f"with --generator {self.part('generator')} give one name (e.g. diffusers)")
        for s in self.systems:  # every training setting checked now, not after hours of other cells
            base, over = split_system(s)
            w = WSVConfig(system=base, **{**self.wsv_overrides(), **over})
            if w.max_caption_steps and not self.n_val:
                raise VlgapError(f"--n-val 0 leaves no held-out caption loss, which {s}'s training until converged "
                                 "(--max-caption-steps) is judged on: give --n-val 10, or --max-caption-steps 0")

    def part(self, name: str):
        return self.parts.get(name, PART_DEFAULTS[name])

    def wsv_overrides(self) -> dict[str, Any]:
        kind = "latent-tower" if self.part("video_text") == "latent-tower" else "clip"
        return {"video_text": kind, **self.train}

    def record(self) -> dict[str, Any]:
        """The configuration as keys hold it: without `parts` when it is empty (the offline defaults), so
        results computed before parts were selectable keep their keys."""
        d = asdict(self)
        if not d["parts"]:
            del d["parts"]
        # settings added later, left out at the value results were computed with before, so those keep their keys
        if d["captions_per_scene"] == 10:
            del d["captions_per_scene"]
        if d["train"].get("max_caption_steps") == 0:  # exactly caption_steps, as before the setting existed
            d["train"] = {k: v for k, v in d["train"].items() if k != "max_caption_steps"}
        d["latent_grid"] = list(d["latent_grid"])
        if d["latent_grid"] == list(LEGACY_MOBILENET_GRID):
            del d["latent_grid"]
        return d

    def cells(self) -> list[tuple[str, str, int]]:
        """Seed-major order: a run cut short still has every system for its first seeds."""
        out = []
        for seed in self.seeds:
            for gi, g in enumerate(self.generators):
                systems = self.systems if gi == 0 else tuple(s for s in self.systems
                                                             if s in self.second_generator_systems)
                out += [(g, s, seed) for s in systems]
        return out


@dataclass
class Prepared:
    corpus: list[str]
    corpus_ids: list[str]
    # "corpus" (and "val" with validation captions): the captions' embeddings, computed on first use, so the
    # demo can encode videos in one process while another embeds the captions
    caption_embeddings: dict[str, np.ndarray]
    synth: dict[str, np.ndarray]  # generator style -> corpus latents
    heldout_captions: list[str]
    heldout_synth: dict[str, np.ndarray]  # generator style -> latents of held-out captions
    eval_ids: list[str]
    eval_refs: dict[str, list[str]]
    eval_specs: list[Any]
    real: np.ndarray
    unlabelled: np.ndarray
    hygiene: dict[str, Any]
    video_text: Any = None  # the frozen video-text model when it is a pretrained one (clip)
    parts: dict[str, Any] | None = None  # records of the parts used
    device: str = "cpu"
    paired: dict[str, np.ndarray] = field(default_factory=dict)  # "real": latents of each caption's own video
    # validation pairs (never trained on): captions of the validation scenes, their caption embeddings, their
    # latents through each generator, and (the oracle's) their own scenes rendered in the evaluation style
    val_captions: list[str] = field(default_factory=list)
    val_synth: dict[str, np.ndarray] = field(default_factory=dict)
    val_paired: dict[str, np.ndarray] = field(default_factory=dict)

    @property
    def text_emb(self) -> np.ndarray:
        return self.caption_embeddings["corpus"]

    @property
    def val_text_emb(self) -> np.ndarray | None:
        return self.caption_embeddings["val"] if "val" in self.caption_embeddings else None

    def val_pairs(self, system: str, generator: str) -> dict[str, Any]:
        """TrainData's validation fields for a cell: the latents of the kind the system trains on."""
        if not self.val_captions:
            return {}
        lat = self.val_paired["real"] if split_system(system)[0] == "oracle" else self.val_synth[generator]
        return {"val_captions": self.val_captions, "val_latents": lat, "val_text_emb": self.val_text_emb}


def _log_default(msg: str) -> None:
    import sys

    print(f"wsv: {msg}", file=sys.stderr, flush=True)


def embed_captions(captions: list[str], batch_size: int = 128) -> np.ndarray:
    """Frozen MiniLM (bundled) sentence embeddings, mean-pooled last layer, L2-normalised (the latent
    tower's text side: vlgap.wsv.parts.minilm_embeddings)."""
    from vlgap.wsv.parts import minilm_embeddings

    return minilm_embeddings(captions, batch_size)


#: the scene sets of an experiment: prefix -> (offset of their scene seeds, cfg.world_seed * 1000 + offset;
#: the ExperimentConfig field giving their number)
SCENE_SETS = {"train": (0, "n_train"), "eval": (1, "n_eval"), "unl": (2, "n_unlabelled"), "val": (3, "n_val")}


def experiment_scenes(cfg: ExperimentConfig, prefix: str) -> list[tuple[str, Any, list[str]]]:
    """One of the experiment's scene sets (`SCENE_SETS`) as `prepare` draws it: (scene id, spec, its ten
    captions) per scene. Benchmarks that need, say, the evaluation scenes call this instead of `prepare`."""
    from vlgap.data.shapes import item_rng, sample_spec, write_captions

    offset, count = SCENE_SETS[prefix]
    out = []
    for i in range(getattr(cfg, count)):
        rng = item_rng(cfg.world_seed * 1000 + offset, i)
        spec = sample_spec(rng)
        out.append((f"{prefix}_{i:05d}", spec, write_captions(spec, int(rng.integers(2**31 - 1)))))
    return out


#: first style seed of each video set `prepare` renders in the evaluation style; the k-th video of a set gets
#: first + k, so no two videos of a run share a style seed (api._paired_latents renders "paired" too)
VIDEO_SET_STYLE_SEEDS = {"eval": 10**6, "unlabelled": 2 * 10**6, "paired": 3 * 10**6, "val_paired": 4 * 10**6}


def render_set(video_set: str, specs, n_frames: int, size: int, style: str) -> Iterator[np.ndarray]:
    """The videos of `specs` in the set `video_set`'s style seeds (`VIDEO_SET_STYLE_SEEDS`: video k gets seed
    first + k), one at a time."""
    from vlgap.wsv.generate import render_styled

    first = VIDEO_SET_STYLE_SEEDS[video_set]
    return (render_styled(s, n_frames, size, style, first + k) for k, s in enumerate(specs))


def render_video_set(cfg: ExperimentConfig, video_set: str, specs, size: int | None = None) -> Iterator[np.ndarray]:
    """The videos of `specs` exactly as `prepare` renders the set `video_set`, one at a time; `size` renders
    them at another resolution (same scenes, same style seeds)."""
    return render_set(video_set, specs, cfg.n_frames, size or cfg.size, cfg.eval_style)


def prepare(cfg: ExperimentConfig, cache_dir=None, log: Callable[[str], None] = _log_default,
            device: str = "cpu", ray: str | bool | None = None, ray_workers: int | None = None) -> Prepared:
    """Scenes, corpus, latents (cached atomically under <cache>/wsv/latents, keyed by everything that
    makes them; a diffusers generator's on Ray actors with `ray`) and the disjointness report."""
    from vlgap.wsv.generate import available_styles
    from vlgap.wsv.latents import cached_latents
    from vlgap.wsv.parts import ShapesGenerator, build_parts, generated_latents, text_embeddings

    styles = available_styles()
    shapes = cfg.part("generator").startswith("shapes")
    for s in ((*cfg.generators, cfg.eval_style) if shapes else (cfg.eval_style,)):
        if s not in styles:
            raise VlgapError(f"render style {s!r} is not available; valid: {list(styles)}")
    if cfg.n_train < 1:
        raise VlgapError("the training corpus is empty: n_train must be at least 1")

    train, evals = experiment_scenes(cfg, "train"), experiment_scenes(cfg, "eval")
    unl, vals = experiment_scenes(cfg, "unl"), experiment_scenes(cfg, "val")
    eval_specs = {json.dumps(s.to_dict(), sort_keys=True) for _, s, _ in evals}
    eval_text = {c for _, _, caps in evals for c in caps}
    dup_specs = [i for i, s, _ in train if json.dumps(s.to_dict(), sort_keys=True) in eval_specs]
    corpus, corpus_ids, dropped = [], [], 0
    for n, (i, s, caps) in enumerate(train):
        if i in dup_specs:
            continue
        kept = range(len(caps)) if cfg.captions_per_scene >= len(caps) else sorted(
            np.random.default_rng([cfg.world_seed, 88, n]).choice(len(caps), cfg.captions_per_scene, replace=False))
        for k in kept:
            c = caps[k]
            if c in eval_text:  # exact-text overlap with an evaluation reference: left out, and counted
                dropped += 1
                continue
            corpus.append(c)
            corpus_ids.append(f"{i}_c{k}")
    if not corpus:
        raise VlgapError("the training corpus is empty after removing captions that overlap the evaluation set")
    id_overlap = len({i for i, _, _ in train} & {i for i, _, _ in evals})
    # validation captions: the validation scenes' captions that are neither an evaluation reference nor a
    # training caption (so the validation loss is on text never trained on)
    corpus_text = set(corpus)
    val_pairs = [(s, c) for _, s, caps in vals for c in caps if c not in eval_text and c not in corpus_text]
    val_dropped = sum(len(caps) for _, _, caps in vals) - len(val_pairs)
    corpus_scene_ids = {c.rsplit("_c", 1)[0] for c in corpus_ids}
    corpus_specs = {json.dumps(s.to_dict(), sort_keys=True) for i, s, _ in train if i in corpus_scene_ids}
    hygiene = {"n_train_scenes": cfg.n_train, "n_eval_scenes": cfg.n_eval, "n_unlabelled_scenes": cfg.n_unlabelled,
               "captions_per_scene": cfg.captions_per_scene, "corpus_captions": len(corpus),
               "train_scenes_equal_to_eval_scenes_removed": len(dup_specs),
               "train_captions_identical_to_eval_references_removed": dropped, "id_overlap": id_overlap,
               "exact_text_overlap_after_removal": len(set(corpus) & eval_text),
               "unlabelled_scene_captions_in_corpus": len(set(corpus) & {c for _, _, caps in unl for c in caps}),
               # the oracle's paired videos are the corpus scenes rendered in the evaluation style: never an
               # evaluation scene (by id or by spec)
               "oracle_video_scenes": len(corpus_scene_ids),
               "oracle_video_scene_id_overlap_with_eval": len(corpus_scene_ids & {i for i, _, _ in evals}),
               "oracle_video_scene_specs_equal_to_eval_specs": len(corpus_specs & eval_specs),
               "n_val_scenes": cfg.n_val, "val_captions": len(val_pairs),
               "val_captions_identical_to_eval_or_corpus_removed": val_dropped}
    parts = build_parts(cfg.part("generator") if not shapes else f"shapes:{cfg.generators[0]}", cfg.part("latents"),
                        cfg.part("video_text"), n_frames=cfg.n_frames, size=cfg.size,
                        generator_steps=cfg.part("generator_steps"), device=device,
                        dtype=cfg.train.get("dtype", "float32"), mobilenet_grid=cfg.latent_grid)
    enc = parts.encoder
    base = {"world_seed": cfg.world_seed, "n_frames": cfg.n_frames, "size": cfg.size, "encoder": enc.record(),
            "version": 1}

    def latents_of(name: str, key: dict, videos: Callable[[], list[np.ndarray]]):
        def compute():
            t0 = time.perf_counter()
            v = videos()
            z = enc.encode(v)
            log(f"{name}: {len(v)} videos -> latents {list(z.shape[1:])} in {time.perf_counter() - t0:.0f} s")
            return {"z": z}
        return cached_latents({**base, **key}, compute, cache_dir=cache_dir, log=log)["z"]

    heldout_rng = np.random.default_rng([cfg.world_seed, 77])
    heldout = [caps[int(heldout_rng.integers(len(caps)))] for _, _, caps in evals]
    val_captions = [c for _, c in val_pairs]
    synth, heldout_synth, val_synth = _Lazy(), {}, {}
    for g in cfg.generators:
        if not shapes:  # a costly generator: latents cached one file per caption
            gen = parts.generator
            synth[g] = (lambda gen=gen, g=g: generated_latents(gen, enc, corpus, seed=cfg.world_seed,
                                                              cache_dir=cache_dir, log=log, ray=ray,
                                                              ray_workers=ray_workers,
                                                              what=f"corpus via generator {g}"))
            heldout_synth[g] = generated_latents(gen, enc, heldout, seed=cfg.world_seed + 1, cache_dir=cache_dir,
                                                 log=log, what=f"held-out captions via generator {g}", ray=ray,
                                                 ray_workers=ray_workers)
            if val_captions:
                val_synth[g] = generated_latents(gen, enc, val_captions, seed=cfg.world_seed + 2, cache_dir=cache_dir,
                                                 log=log, what=f"validation captions via generator {g}", ray=ray,
                                                 ray_workers=ray_workers)
            continue
        t2v = ShapesGenerator(g, n_frames=cfg.n_frames, size=cfg.size).t2v
        # the corpus latents of a generator are made when a cell first needs them, so other workers can
        # train cells of the first generator meanwhile
        synth[g] = (lambda t2v=t2v, g=g: latents_of(
            f"corpus via generator {g}", {"what": "corpus", "generator": t2v.record(), "n_train": cfg.n_train,
                                          "captions": _hash(corpus)},
            lambda: t2v.generate(corpus, seed=cfg.world_seed)))
        heldout_synth[g] = latents_of(f"held-out captions via generator {g}",
                                      {"what": "heldout", "generator": t2v.record(), "captions": _hash(heldout)},
                                      lambda t2v=t2v: t2v.generate(heldout, seed=cfg.world_seed + 1))
        if val_captions:
            val_synth[g] = latents_of(f"validation captions via generator {g}",
                                      {"what": "val", "generator": t2v.record(), "captions": _hash(val_captions)},
                                      lambda t2v=t2v: t2v.generate(val_captions, seed=cfg.world_seed + 2))
    real = latents_of("evaluation videos (real style)", {"what": "eval", "style": cfg.eval_style, "n": cfg.n_eval},
                      lambda: list(render_video_set(cfg, "eval", [s for _, s, _ in evals])))
    unlabelled = latents_of("unlabelled real-style videos", {"what": "unlabelled", "style": cfg.eval_style,
                                                            "n": cfg.n_unlabelled},
                            lambda: list(render_video_set(cfg, "unlabelled", [s for _, s, _ in unl])))
    spec_of = {i: s for i, s, _ in train}
    paired = _Lazy()
    # the oracle's supervision: each corpus caption with its own scene rendered in the evaluation style (a
    # fresh style seed per caption, as the generator's videos have one per caption)
    paired["real"] = lambda: latents_of(
        "paired real-style videos of the corpus scenes (oracle only)",
        {"what": "paired", "style": cfg.eval_style, "n_train": cfg.n_train, "captions": _hash(corpus)},
        lambda: list(render_video_set(cfg, "paired", [spec_of[cid.rsplit("_c", 1)[0]] for cid in corpus_ids])))
    val_paired = _Lazy()
    if val_captions:  # the oracle's validation pairs: each validation caption with its own scene, real style
        val_paired["real"] = lambda: latents_of(
            "paired real-style videos of the validation scenes (oracle only)",
            {"what": "val_paired", "style": cfg.eval_style, "captions": _hash(val_captions)},
            lambda: list(render_video_set(cfg, "val_paired", [s for s, _ in val_pairs])))
    embeddings = _Lazy(corpus=lambda: text_embeddings(parts.video_text, corpus, cache_dir=cache_dir, log=log))
    if val_captions:
        embeddings["val"] = lambda: text_embeddings(parts.video_text, val_captions, cache_dir=cache_dir, log=log)
    return Prepared(corpus=corpus, corpus_ids=corpus_ids, caption_embeddings=embeddings, synth=synth,
                    heldout_captions=heldout,
                    heldout_synth=heldout_synth, eval_ids=[i for i, _, _ in evals],
                    eval_refs={i: list(caps) for i, _, caps in evals}, eval_specs=[s for _, s, _ in evals],
                    real=real, unlabelled=unlabelled, hygiene=hygiene,
                    video_text=None if parts.video_text.kind == "latent-tower" else parts.video_text,
                    parts=parts.record() if cfg.parts else None, device=parts.encoder.device,
                    paired=paired, val_captions=val_captions, val_synth=val_synth,
                    val_paired=val_paired)


class _Lazy(dict):
    """A dict whose values are computed (once) from the zero-argument functions stored in it."""

    def __getitem__(self, key):
        v = super().__getitem__(key)
        if callable(v):
            v = v()
            super().__setitem__(key, v)
        return v


def _hash(texts: list[str]) -> str:
    import hashlib

    return hashlib.sha256("\n".join(texts).encode()).hexdigest()[:16]


def run_cell(prep: Prepared, cfg: ExperimentConfig, generator: str, system: str, seed: int, cell_dir: Path,
             log: Callable[[str], None] = _log_default, force: bool = False) -> dict[str, Any]:
    """Train one (generator, system, seed) and score it on the held-out real-style videos."""
    from vlgap.platform_info import numeric_platform
    from vlgap.wsv.evaluate import score_captions, two_sample

    t0 = time.perf_counter()
    bundle, wcfg = _trained(prep, cfg, generator, system, seed, cell_dir, log=log, force=force)
    t_train = time.perf_counter() - t0
    caps = bundle.caption(prep.real)
    pred = dict(zip(prep.eval_ids, caps))
    history = bundle_history(cell_dir)
    res: dict[str, Any] = {"generator": generator, "system": system, "seed": seed, "config": asdict(wcfg),
                           "train_seconds": round(t_train, 1), "predictions": pred,
                           # float32 cells are bit-exact on one machine kind only (vlgap.platform_info)
                           "platform": numeric_platform(),
                           "final_loss": float(np.mean([h[2] for h in history if h[0] != "val"][-50:])),
                           "loss_curves": loss_curves(history),
                           # the caption step whose weights were kept (lowest validation loss), if any
                           "selected": getattr(bundle, "selected", None),
                           # how long the caption stage ran (with max_caption_steps: until the held-out loss
                           # converged) and how much that loss still fell over its last fifth (every validation)
                           "caption_steps_run": max((h[1] for h in history if h[0] == "caption"), default=0),
                           "val_late_fall": late_fall(validation_curve(history)),
                           "scores": score_captions(pred, prep.eval_refs, n_bootstrap=cfg.n_bootstrap, seed=seed,
                                                    keep_empty=True, metrics=cfg.metrics)}
    res["scores"]["attributes"] = _grounded(pred, prep, cfg, seed)
    if bundle.polisher is not None:
        caps_p = bundle.caption(prep.real, polish=True)
        pred_p = dict(zip(prep.eval_ids, caps_p))
        res["scores_polisher_at_inference"] = score_captions(pred_p, prep.eval_refs, n_bootstrap=cfg.n_bootstrap,
                                                             seed=seed, keep_empty=True, metrics=cfg.metrics)
        import torch

        with torch.no_grad():
            with bundle.autocast():
                pol = bundle.polisher(torch.from_numpy(prep.heldout_synth[generator]).to(bundle.device))
            pol = pol.float().cpu().numpy()
        res["gap"] = {"polished": two_sample(prep.real, pol, n_permutations=cfg.n_permutations,
                                             n_bootstrap=cfg.n_bootstrap, c2st_permutations=cfg.c2st_permutations,
                                             seed=seed)}
    res["seconds"] = round(time.perf_counter() - t0, 1)
    return res


def _trained(prep: Prepared, cfg: ExperimentConfig, generator: str, system: str, seed: int, cell_dir: Path,
             log: Callable[[str], None] = _log_default, force: bool = False):
    """(trained Bundle, its WSVConfig) of one cell: trains it, resumes it, or, when cell_dir holds its
    finished run (model.pt and the final checkpoint of this very configuration and data), loads it without
    a training step."""
    from vlgap.wsv.train import TrainData, WSVConfig, train

    base, over = split_system(system)
    wcfg = WSVConfig(system=base, seed=seed, **{**cfg.wsv_overrides(), **over})
    latents = prep.paired["real"] if base == "oracle" else prep.synth[generator]
    data = TrainData(prep.corpus, latents, prep.text_emb,
                     real_unlabelled=prep.unlabelled if base == "wsv_mmd" else None,
                     parts=_oracle_parts(prep.parts, cfg) if base == "oracle" else prep.parts,
                     **prep.val_pairs(system, generator))
    return train(data, wcfg, cell_dir, log=log, force=force, video_text=prep.video_text, device=prep.device), wcfg


def _oracle_parts(parts: dict[str, Any] | None, cfg: ExperimentConfig) -> dict[str, Any] | None:
    """The oracle's parts record: no generator (its videos are the corpus scenes rendered in the evaluation
    style). None (the offline defaults) stays None, so the documented cells keep their keys."""
    if parts is None:
        return None
    return {**parts, "generator": {"generator": "none: paired videos of the captions' own scenes",
                                   "style": cfg.eval_style, "n_frames": cfg.n_frames, "size": cfg.size}}


def _grounded(pred: dict[str, str], prep: Prepared, cfg: ExperimentConfig, seed: int) -> dict[str, Any]:
    from vlgap.wsv.evaluate import grounded_score

    return grounded_score(pred, dict(zip(prep.eval_ids, prep.eval_specs)), n_bootstrap=cfg.n_bootstrap, seed=seed)


def chance_cell(prep: Prepared, cfg: ExperimentConfig, seed: int) -> dict[str, Any]:
    """The floor: every evaluation video gets a caption drawn at random from the training corpus (what a
    captioner that ignores the video, but writes fluent in-domain captions, would score)."""
    from vlgap.wsv.evaluate import score_captions

    rng = np.random.default_rng([cfg.world_seed, seed, 99])
    pred = {i: prep.corpus[int(rng.integers(len(prep.corpus)))] for i in prep.eval_ids}
    scores = score_captions(pred, prep.eval_refs, n_bootstrap=cfg.n_bootstrap, seed=seed, keep_empty=True,
                          metrics=cfg.metrics)
    scores["attributes"] = _grounded(pred, prep, cfg, seed)
    return {"generator": "none", "system": "chance", "seed": seed, "predictions": pred, "scores": scores}


def check_heldout_pairing(prep: Prepared) -> None:
    """The inversion check pairs held-out caption i with evaluation scene i: verify that caption i is one
    of scene i's references (prepare() draws it from them) before any pairing is used."""
    if len(prep.heldout_captions) != len(prep.eval_ids):
        raise VlgapError(f"inversion: {len(prep.heldout_captions)} held-out captions for {len(prep.eval_ids)} "
                         "evaluation scenes; the paired check needs one per scene")
    bad = [sid for sid, c in zip(prep.eval_ids, prep.heldout_captions) if c not in prep.eval_refs[sid]]
    if bad:
        raise VlgapError(f"inversion: the held-out captions of scenes {bad[:3]} are not among their references; "
                         "caption i must describe evaluation scene i")


def heldout_synthetic_specs(prep: Prepared, cfg: ExperimentConfig, generator: str) -> tuple[list[Any], str]:
    """(spec per held-out caption, where it comes from) for the grounded score of captions of synthetic
    latents: with the shapes generator, the scene it rendered (the caption read back with the very open-
    fact draws the generator made: ShapesT2V.read with the held-out seed); with another generator (what it
    drew is unknown), the evaluation scene the caption belongs to."""
    from vlgap.wsv.generate import ShapesT2V

    if cfg.part("generator").startswith("shapes"):
        t2v = ShapesT2V(style=generator, n_frames=cfg.n_frames, size=cfg.size)
        return ([r.spec for r in t2v.read(prep.heldout_captions, seed=cfg.world_seed + 1)],
                "the scene the shapes generator rendered from the held-out caption")
    return list(prep.eval_specs), "the evaluation scene the held-out caption belongs to (the generator's own is unknown)"


def inversion_result(prep: Prepared, cfg: ExperimentConfig, generator: str, system: str, seed: int,
                     pred_synthetic: dict[str, str], pred_real: dict[str, str],
                     pred_polished: dict[str, str] | None = None) -> dict[str, Any]:
    """A cell's inversion file: its captions of the held-out synthetic latents and of the real videos, both
    scored against the held-out captions (one per scene), and their paired differences (see
    vlgap.wsv.evaluate.inversion_scores)."""
    from vlgap.wsv.evaluate import inversion_scores

    check_heldout_pairing(prep)
    specs, source = heldout_synthetic_specs(prep, cfg, cfg.generators[0] if system == "chance" else generator)
    ids = prep.eval_ids
    res = inversion_scores(pred_synthetic, dict(zip(ids, prep.heldout_captions)), pred_real=pred_real,
                           synthetic_specs=dict(zip(ids, specs)), real_specs=dict(zip(ids, prep.eval_specs)),
                           pred_polished=pred_polished, n_bootstrap=cfg.n_bootstrap, n_permutations=cfg.n_permutations, seed=seed,
                           metrics=cfg.metrics)
    return {"generator": generator, "system": system, "seed": seed, "predictions_synthetic": pred_synthetic,
            **({"predictions_synthetic_polished": pred_polished} if pred_polished is not None else {}),
            "held_out_captions": dict(zip(ids, prep.heldout_captions)), "synthetic_specs": source,
            "pairing": "paired: held-out caption i is one of evaluation scene i's captions (checked)", **res}


def inversion_cell(prep: Prepared, cfg: ExperimentConfig, generator: str, system: str, seed: int, cell_dir: Path,
                   cell: dict[str, Any], log: Callable[[str], None] = _log_default,
                   force: bool = False) -> dict[str, Any]:
    """The T2V-inversion check of a finished cell: its trained model (loaded from cell_dir; retrained,
    bit-exact, if the folder is gone) captions the raw generator latents of the held-out captions (the
    polisher bypassed, as for the real latents) next to its stored captions of the real videos, and, with
    a polisher, the same latents polished (the input its captioner was trained on). The
    oracle's synthetic latents are the first generator's (it was trained on paired real-style videos)."""
    if not (Path(cell_dir) / "model.pt").is_file():
        log(f"inversion {generator}-{system}-s{seed}: no saved model in {cell_dir}; retraining it (same result)")
    bundle, _ = _trained(prep, cfg, generator, system, seed, cell_dir, log=log, force=force)
    pred = dict(zip(prep.eval_ids, bundle.caption(prep.heldout_synth[generator])))
    polished = (dict(zip(prep.eval_ids, bundle.caption(prep.heldout_synth[generator], polish=True)))
                if bundle.polisher is not None else None)
    return inversion_result(prep, cfg, generator, system, seed, pred, cell["predictions"], polished)


#: version of the inversion files' keys (a change recomputes them, never the cells); 2: the attribute
#: difference is a sign-flip test with its inverted interval (was a percentile bootstrap beside the test)
INVERSION_FORMAT = 2


def _inversion_key(cfg: ExperimentConfig, cell_path: Path, what: str, **names: Any) -> dict[str, Any]:
    """An inversion file's key: the experiment's, plus the bytes of the cell it was computed from (a
    recomputed cell makes its inversion stale)."""
    import hashlib

    return {**_cell_key(cfg, what, **names), "inversion_format": INVERSION_FORMAT,
            "cell_sha256": hashlib.sha256(cell_path.read_bytes()).hexdigest()}


def _inversion_file(out: Path, name: str, key: dict[str, Any], compute: Callable[[], dict[str, Any]] | None,
                    log: Callable[[str], None], lock: bool) -> dict[str, Any] | None:
    """out/inversion/<name>.json: read when its key is valid, else `compute()`d and sealed (None: not
    computed here). With `lock`, only the worker that claims the lock file computes it."""
    path = out / "inversion" / f"{name}.json"
    res = _read_cell(path, key, log)
    if res is not None or compute is None:
        return res
    claim = out / "inversion" / f"{name}.lock"
    if lock and not _claim(claim):
        return None
    try:
        return _write_cell(path, compute(), key)
    finally:
        if lock:
            claim.unlink(missing_ok=True)


def _inversions(out: Path, cfg: ExperimentConfig, cells: list[tuple[str, str, int]], prep: Prepared | None,
                done: dict[str, dict[str, Any]], log: Callable[[str], None], compute: bool,
                force: bool = False) -> list[dict[str, Any]]:
    """The inversion file of every finished cell (out/inversion/<cell>.json, sealed, keyed by the cell's
    bytes): read when valid, else computed from the cell's saved model when `compute` (cells of other
    workers are left to them by the same lock files as the cells)."""
    found = []
    for g, s, seed in cells:
        name = f"{g}-{s}-s{seed}"
        cell_path = out / "cells" / f"{name}.json"
        if name not in done or not cell_path.is_file():
            continue

        def run(g=g, s=s, seed=seed, name=name):
            log(f"inversion {name}: captioning the held-out synthetic latents")
            res = inversion_cell(prep, cfg, g, s, seed, out / "work" / name, done[name], log=log, force=force)
            d = res["difference"]["CIDEr"]
            log(f"inversion {name}: CIDEr synthetic {res['synthetic']['CIDEr']['score']:.3f} real "
                f"{res['real']['CIDEr']['score']:.3f} (difference {d['difference']:+.3f})")
            return res

        key = _inversion_key(cfg, cell_path, "inversion", generator=g, system=s, seed=seed)
        res = _inversion_file(out, name, key, run if compute and prep is not None else None, log, lock=True)
        if res is not None:
            found.append(res)
    return found


def _chance_inversions(out: Path, cfg: ExperimentConfig, prep: Prepared | None, log: Callable[[str], None],
                       compute: bool) -> list[dict[str, Any]]:
    """The floor of the inversion table: each seed's chance captions (a random training caption per scene,
    the same for both inputs) scored on both sides exactly as the systems' captions are."""
    found = []
    for seed in cfg.seeds:
        cell_path = out / "cells" / f"chance-s{seed}.json"
        if not cell_path.is_file():
            continue

        def run(seed=seed, cell_path=cell_path):
            pred = json.loads(cell_path.read_text())["predictions"]
            return inversion_result(prep, cfg, "none", "chance", seed, pred, pred)

        key = _inversion_key(cfg, cell_path, "chance_inversion", seed=seed)
        res = _inversion_file(out, f"chance-s{seed}", key, run if compute and prep is not None else None, log,
                              lock=False)
        if res is not None:
            found.append(res)
    return found


def loss_curves(history: list, n_points: int = 20) -> dict[str, list[list[float]]]:
    """{stage: [[last step of the window, mean loss over the window], ...]}: each stage's per-step
    training loss averaged over n_points equal windows (the full per-step history stays in model.pt)."""
    out: dict[str, list[list[float]]] = {}
    for stage in dict.fromkeys(h[0] for h in history):
        vals = [(h[1], h[2]) for h in history if h[0] == stage]
        width = max(1, math.ceil(len(vals) / n_points))
        out[stage] = [[int(vals[min(k + width, len(vals)) - 1][0]), float(np.mean([v for _, v in vals[k:k + width]]))]
                      for k in range(0, len(vals), width)]
    return out


def mean_curve(curves: list[list[list[float]]]) -> list[list[float]]:
    """The mean over seeds of [[step, loss], ...] curves. Seeds trained until converged stop at different
    steps, so their windows end at different steps: each curve is then interpolated linearly onto the steps
    of the one that ended first, and the mean covers only steps every seed reached."""
    grid = min(curves, key=lambda c: c[-1][0])
    if all([p[0] for p in c] == [p[0] for p in grid] for c in curves):
        return [[p[0], float(np.mean([c[k][1] for c in curves]))] for k, p in enumerate(grid)]
    steps = np.array([p[0] for p in grid], dtype=float)
    vals = [np.interp(steps, [p[0] for p in c], [p[1] for p in c]) for c in curves]
    return [[p[0], float(np.mean([v[k] for v in vals]))] for k, p in enumerate(grid)]


def bundle_history(cell_dir: Path) -> list:
    import io

    import torch

    from vlgap.wsv.train import read_model_bytes

    return torch.load(io.BytesIO(read_model_bytes(Path(cell_dir) / "model.pt")), weights_only=False)["history"]


def t_interval(values: list[float], confidence: float = 0.95) -> tuple[float, list[float] | None]:
    """Mean and Student-t interval over seeds (None with fewer than two values)."""
    from scipy import stats

    v = np.asarray(values, float)
    if len(v) < 2:
        return float(v.mean()), None
    half = stats.t.ppf(0.5 + confidence / 2, len(v) - 1) * v.std(ddof=1) / math.sqrt(len(v))
    return float(v.mean()), [float(v.mean() - half), float(v.mean() + half)]


#: version of the cell and gap files' keys: a change recomputes every older cell (3: grounded attribute
#: accuracy and loss curves in every cell)
CELL_FORMAT = 3


def _cell_key(cfg: ExperimentConfig, what: str, **names: Any) -> dict[str, Any]:
    """Everything that determines one result file of the experiment (the whole config: data, steps and
    evaluation all enter every cell)."""
    return {"format": CELL_FORMAT, "what": what, **names, "experiment": cfg.record()}


def _row_cell_key(cfg: ExperimentConfig, g: str, s: str, seed: int) -> dict[str, Any]:
    """A cell's key; a row with its own settings (wsv+smollm2: SMOLLM2_TRAIN) carries them, so changing
    them recomputes that row's cells instead of reading stale ones (rows without keep their keys)."""
    over = split_system(s)[1]
    return _cell_key(cfg, "cell", generator=g, system=s, seed=seed, **({"row_settings": over} if over else {}))


def _read_cell(path: Path, key: dict[str, Any], log: Callable[[str], None]) -> dict[str, Any] | None:
    from vlgap.reuse import read_verified

    raw = read_verified(path, key, what="WSV result", report=log)
    return None if raw is None else json.loads(raw)


def _write_cell(path: Path, value: dict[str, Any], key: dict[str, Any]) -> dict[str, Any]:
    from vlgap.io_utils import to_json
    from vlgap.reuse import write_artefact

    text = to_json(value) + "\n"
    write_artefact(path, text.encode(), key)
    return json.loads(text)


def run_experiment(out_dir: str | Path, cfg: ExperimentConfig | None = None, *, cache_dir=None,
                   log: Callable[[str], None] = _log_default, summary_only: bool = False,
                   force: bool = False, device: str = "cpu", ray: str | bool | None = None,
                   ray_workers: int | None = None) -> dict[str, Any]:
    """All cells (skipping finished ones), then summary.json and summary.md. summary_only: tabulate the
    cells finished so far without training any (the summary says how many of the planned cells it has).
    The folder records the configuration: another one is refused with the differences (`force`: take
    it over; every result is keyed by the configuration, so nothing of the old run is reused). `ray` /
    `ray_workers`: a diffusers generator's latents are made on Ray actors (the same bits; not part of
    the configuration)."""
    from vlgap.reuse import claim_run_folder, remove_stale_temporaries

    cfg = cfg or ExperimentConfig()
    out = Path(out_dir)
    legacy = (out / "experiment_config.json").is_file() and not (out / "run_config.json").exists()
    if legacy:
        log(f"{out}: an experiment folder of an older vlgap (no run record): its results are unsealed and "
            "are recomputed")
    claim_run_folder(out, "wsv-experiment", cfg.record(), force=force or legacy)
    # other workers may share this folder: only temporaries older than any write in progress are leftovers
    remove_stale_temporaries(out, older_than=time.time() - 120)
    atomic_write_json(out / "experiment_config.json", cfg.record())
    t0 = time.perf_counter()
    prep = prepare(cfg, cache_dir=cache_dir, log=log, device=device, ray=ray, ray_workers=ray_workers)
    atomic_write_json(out / "hygiene.json", prep.hygiene)
    raw_gap = {}
    for g in cfg.generators:  # raw synthetic vs real does not depend on the training seed: once per generator
        path = out / "gap" / f"raw-{g}.json"
        key = _cell_key(cfg, "raw_gap", generator=g)
        raw_gap[g] = _read_cell(path, key, log)
        if raw_gap[g] is None:
            from vlgap.wsv.evaluate import two_sample

            raw_gap[g] = _write_cell(path, two_sample(prep.real, prep.heldout_synth[g],
                                                      n_permutations=cfg.n_permutations, n_bootstrap=cfg.n_bootstrap,
                                                      c2st_permutations=cfg.c2st_permutations, seed=cfg.world_seed),
                                     key)
        log(f"gap raw {g} vs real: MMD2 {raw_gap[g]['mmd2_unbiased']:.4f} (p {raw_gap[g]['p_value']:.3g}), "
            f"C2ST {raw_gap[g]['c2st']['accuracy']:.2f}, FD {raw_gap[g]['fd']:.2f}")
    cells = cfg.cells()
    done: dict[str, dict[str, Any]] = {}
    warned: str | None = None  # said once per run: workers x torch threads above the cores
    for j, (g, s, seed) in enumerate(cells):
        name = f"{g}-{s}-s{seed}"
        path = out / "cells" / f"{name}.json"
        key = _row_cell_key(cfg, g, s, seed)
        res = _read_cell(path, key, log)
        if res is not None:
            done[name] = res
            log(f"cell {j + 1}/{len(cells)} {name}: done earlier, skipped")
            continue
        if summary_only:
            continue
        lock = out / "cells" / f"{name}.lock"
        if not _claim(lock):
            log(f"cell {j + 1}/{len(cells)} {name}: another worker is on it, skipped")
            continue
        log(f"cell {j + 1}/{len(cells)} {name}: training ({time.perf_counter() - t0:.0f} s elapsed)")
        if not warned:
            import os

            import torch

            cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
            warned = oversubscription_warning(out, torch.get_num_threads(), cores)
            if warned:
                log(warned)
        res = run_cell(prep, cfg, g, s, seed, out / "work" / name, log=log, force=force)
        done[name] = _write_cell(path, res, key)
        lock.unlink(missing_ok=True)
        sc = res["scores"]
        log(f"cell {name}: CIDEr {sc['CIDEr']['score']:.3f} BLEU-4 {sc['BLEU-4']['score']:.3f} distinct "
            f"{sc['distinct']['share']:.2f} ({res['seconds']:.0f} s)")
        # its inversion now, from the model just trained: a finished cell is then only small sealed files, and
        # nothing of it is lost if the run stops before the end (work/ may be deleted or not carried over)
        _inversions(out, cfg, [(g, s, seed)], prep, done, log, compute=True, force=force)
    # cells other workers finished meanwhile are read (verified) too
    for g, s, seed in cells:
        name = f"{g}-{s}-s{seed}"
        if name not in done:
            res = _read_cell(out / "cells" / f"{name}.json", _row_cell_key(cfg, g, s, seed),
                             log)
            if res is not None:
                done[name] = res
    chance = []
    for seed in cfg.seeds:  # the floor: cheap (no training), so every worker may write it (same bytes)
        path, key = out / "cells" / f"chance-s{seed}.json", _cell_key(cfg, "chance", seed=seed)
        res = _read_cell(path, key, log)
        chance.append(res if res is not None else _write_cell(path, chance_cell(prep, cfg, seed), key))
    inversion = _inversions(out, cfg, cells, prep, done, log, compute=not summary_only, force=force)
    chance_inv = _chance_inversions(out, cfg, prep, log, compute=True)  # cheap, like the chance cells
    summary = summarise(out, cfg, prep.hygiene, raw_gap, cells=[done[f"{g}-{s}-s{seed}"] for g, s, seed in cells
                                                              if f"{g}-{s}-s{seed}" in done], chance=chance,
                        inversion=inversion, chance_inversion=chance_inv)
    summary["wall_seconds_this_run"] = round(time.perf_counter() - t0, 1)
    atomic_write_json(out / "summary.json", summary)
    atomic_write_text(out / "summary.md", summary_markdown(summary))
    return summary


def oversubscription_warning(out: Path, threads: int, cores: int) -> str | None:
    """A line when the workers now training in `out` (this one and every live process holding a cell or
    inversion lock there) ask for more torch threads than there are cores, else None. Measured here: two
    workers of 2 threads on 2 cores ran a caption step 3.5x slower than two of 1 thread."""
    import os

    pids = {os.getpid()}
    for lock in [*Path(out).glob("cells/*.lock"), *Path(out).glob("inversion/*.lock")]:
        if pid := _lock_holder(lock):  # 0: its pid not written yet; None: gone
            pids.add(pid)
    if len(pids) * threads <= cores:
        return None
    return (f"{len(pids)} experiment workers train in {out} with {threads} torch threads each on {cores} cores: "
            f"oversubscribed, which made each step about 3.5x slower here; start each worker with --threads "
            f"{max(1, cores // len(pids))}")


def _claim(lock: Path) -> bool:
    """Take a cell for this process (several `vlgap wsv experiment` workers may share one folder): create
    the lock file exclusively; a lock whose process is gone (killed worker) is taken over."""
    import os

    lock.parent.mkdir(parents=True, exist_ok=True)
    for _ in range(2):
        try:
            fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            os.write(fd, str(os.getpid()).encode())
            os.close(fd)
            return True
        except FileExistsError:
            if _lock_holder(lock) is not None:
                return False  # alive: its cell
            lock.unlink(missing_ok=True)  # stale: the worker died; take over (the cell resumes)
    return False


def _lock_holder(lock: Path) -> int | None:
    """The live process holding a lock file of `_claim`: its pid; 0 while the file is still empty (its creator
    has not written its pid yet, so it counts as held); None when that process is gone, the file vanished or
    does not hold a pid."""
    import os

    try:
        pid = int(lock.read_text() or "0")
        if pid:
            os.kill(pid, 0)
        return pid
    except (ValueError, ProcessLookupError, FileNotFoundError):
        return None
    except PermissionError:  # alive, another user's
        return pid


def _summary_row(g: str, s: str, mine: list[dict[str, Any]]) -> dict[str, Any]:
    """One table row: mean [t-interval over seeds] of every score of the cells `mine` (one per seed)."""
    from vlgap.wsv.evaluate import ATTRIBUTES, HEADLINE

    row: dict[str, Any] = {"generator": g, "system": s, "label": system_label(s), "n_seeds": len(mine),
                           "seeds": [c["seed"] for c in mine], "n_items": mine[0]["scores"]["n"]}
    for m in (*HEADLINE, "BLEU-1"):
        vals = [c["scores"][m]["score"] for c in mine if m in c["scores"]]
        if vals:
            mean, ci = t_interval(vals)
            row[m] = {"mean": mean, "t_ci": ci, "per_seed": vals,
                      "item_bootstrap_ci_per_seed": [c["scores"][m].get("ci") for c in mine]}
    if all("attributes" in c["scores"] for c in mine):
        att = {}
        for a in (*ATTRIBUTES, "mean"):
            vals = [c["scores"]["attributes"][a]["accuracy"] for c in mine]
            mean, ci = t_interval(vals)
            att[a] = {"mean": mean, "t_ci": ci, "per_seed": vals, "n": mine[0]["scores"]["attributes"][a]["n"],
                      "item_bootstrap_ci_per_seed": [c["scores"]["attributes"][a]["ci"] for c in mine]}
            if a != "mean":
                att[a]["unread_share"] = float(np.mean([c["scores"]["attributes"][a]["unread_share"] for c in mine]))
        row["attributes"] = att
    row["distinct_share"] = t_interval([c["scores"]["distinct"]["share"] for c in mine])[0]
    if all("train_seconds" in c for c in mine):
        row["train_seconds"] = float(np.mean([c["train_seconds"] for c in mine]))
    if any(c.get("selected") for c in mine):  # the caption step kept per seed (lowest validation loss)
        row["selected"] = [c.get("selected") for c in mine]
    if all("val" in c.get("loss_curves", {}) for c in mine):  # cells from before the record: their curve
        row["val_late_fall"] = [c["val_late_fall"] if "val_late_fall" in c else late_fall(c["loss_curves"]["val"])
                                for c in mine]
    if all("caption_steps_run" in c for c in mine):
        row["caption_steps_run"] = [c["caption_steps_run"] for c in mine]
        row["max_caption_steps"] = mine[0]["config"].get("max_caption_steps", 0)
    if all("loss_curves" in c for c in mine):
        stages = list(mine[0]["loss_curves"])
        row["loss"] = {st: {"final": t_interval([c["loss_curves"][st][-1][1] for c in mine]),
                            "curve_mean_over_seeds": mean_curve([c["loss_curves"][st] for c in mine])}
                       for st in stages}
    return row


def _over_seeds(vals: list[float], **per_seed: list[Any]) -> dict[str, Any]:
    """{mean, t_ci, per_seed} of one number's per-seed values, plus per-seed extras (intervals, p-values)."""
    return {**dict(zip(("mean", "t_ci"), t_interval(vals))), "per_seed": vals, **per_seed}


def _inversion_row(g: str, s: str, mine: list[dict[str, Any]]) -> dict[str, Any]:
    """One row of the inversion table: per side (synthetic, real) CIDEr and the mean attribute accuracy, and
    their paired difference, each as mean [t-interval over seeds] with the per-seed intervals (item bootstrap
    for a side; for the difference: CIDEr's paired bootstrap, the attribute accuracy's inverted sign-flip
    test)."""
    mine = sorted(mine, key=lambda c: c["seed"])
    row: dict[str, Any] = {"generator": g, "system": s, "label": system_label(s), "n_seeds": len(mine),
                           "seeds": [c["seed"] for c in mine], "n_items": mine[0]["n"]}

    def side_scores(side: str, with_ci: bool) -> dict[str, Any]:
        cider = [c[side]["CIDEr"] for c in mine]
        out = {"CIDEr": _over_seeds([x["score"] for x in cider],
                                    **({"item_bootstrap_ci_per_seed": [x.get("ci") for x in cider]} if with_ci else {}))}
        if all("attributes" in c[side] for c in mine):
            att = [c[side]["attributes"]["mean"] for c in mine]
            out["attributes"] = _over_seeds([x["accuracy"] for x in att],
                                            **({"item_bootstrap_ci_per_seed": [x["ci"] for x in att]} if with_ci else {}))
        return out

    for side in ("synthetic", "real"):
        row[side] = side_scores(side, with_ci=True)
    if all("synthetic_polished" in c for c in mine):
        row["synthetic_polished"] = side_scores("synthetic_polished", with_ci=False)
    row["difference"] = {}
    for m in ("CIDEr", "attributes"):
        if all(m in c["difference"] for c in mine):
            d = [c["difference"][m] for c in mine]
            row["difference"][m] = _over_seeds([x["difference"] for x in d], ci_per_seed=[x["ci"] for x in d],
                                               p_value_per_seed=[x["p_value"] for x in d])
    return row


def _place(row: dict[str, Any], floor: dict[str, Any], ceiling: dict[str, Any]) -> dict[str, Any]:
    """Where a system stands between chance (0) and the oracle ceiling (1), per seed (the same seed's floor
    and ceiling) and as mean [t-interval over seeds], for CIDEr and the mean attribute accuracy."""
    out = {}
    for metric, get in (("CIDEr", lambda r: r["CIDEr"]["per_seed"]),
                        ("attributes", lambda r: r["attributes"]["mean"]["per_seed"])):
        try:
            vals = [(v - f) / (c - f) if c != f else float("nan")
                    for v, f, c in zip(get(row), get(floor), get(ceiling))]
        except KeyError:
            continue
        by_seed = dict(zip(row["seeds"], vals))
        common = [by_seed[s] for s in row["seeds"] if s in floor["seeds"] and s in ceiling["seeds"]]
        if common and row["seeds"] == floor["seeds"][:len(row["seeds"])] == ceiling["seeds"][:len(row["seeds"])]:
            out[metric] = {"per_seed": common, **dict(zip(("mean", "t_ci"), t_interval(common)))}
    return out


def summarise(out: Path, cfg: ExperimentConfig, hygiene: dict[str, Any], raw_gap: dict[str, Any],
              cells: list[dict[str, Any]] | None = None, chance: list[dict[str, Any]] | None = None,
              inversion: list[dict[str, Any]] | None = None,
              chance_inversion: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """Tables over the finished cells (`cells`: as verified by run_experiment; default: read them,
    verified, from out/cells; `chance`, `inversion` (out/inversion) and `chance_inversion` likewise)."""
    if inversion is None:
        planned = cfg.cells()
        inversion = _inversions(out, cfg, planned, None, {f"{g}-{s}-s{seed}": {} for g, s, seed in planned},
                                _log_default, compute=False)
    if chance_inversion is None:
        chance_inversion = _chance_inversions(out, cfg, None, _log_default, compute=False)
    if cells is None:
        cells = [c for c in (_read_cell(out / "cells" / f"{g}-{s}-s{seed}.json",
                                        _row_cell_key(cfg, g, s, seed), _log_default)
                             for g, s, seed in cfg.cells()) if c is not None]
    if chance is None:
        chance = [c for c in (_read_cell(out / "cells" / f"chance-s{seed}.json", _cell_key(cfg, "chance", seed=seed),
                                         _log_default) for seed in cfg.seeds) if c is not None]
    rows, falsifier = [], []
    keys = sorted({(c["generator"], c["system"]) for c in cells},
                  key=lambda k: (cfg.generators.index(k[0]), cfg.systems.index(k[1]) if k[1] in cfg.systems else 99))
    for g, s in keys:
        mine = [c for c in cells if c["generator"] == g and c["system"] == s]
        row = _summary_row(g, s, mine)
        rows.append(row)
        if "gap" in mine[0]:
            f: dict[str, Any] = {"generator": g, "system": s, "n_seeds": len(mine)}
            for side in ("raw", "polished"):
                gs = [c["gap"][side] for c in mine] if side == "polished" else [raw_gap[g]]
                f[side] = {"mmd2_unbiased": t_interval([x["mmd2_unbiased"] for x in gs]),
                           "p_values": [x["p_value"] for x in gs], "mmd_ci_per_seed": [x["ci"] for x in gs],
                           "c2st": t_interval([x["c2st"]["accuracy"] for x in gs]),
                           "c2st_p_values": [x["c2st"]["p_value"] for x in gs],
                           "fd": t_interval([x["fd"] for x in gs]), "n_real": gs[0]["n_real"],
                           "n_synthetic": gs[0]["n_synthetic"]}
            for m in ("CIDEr", "BLEU-4"):
                f[f"{m}_bypassed"] = t_interval([c["scores"][m]["score"] for c in mine])
                f[f"{m}_polisher_applied"] = t_interval([c["scores_polisher_at_inference"][m]["score"] for c in mine])
            falsifier.append(f)
    floor = _summary_row("none", "chance", chance) if chance else None
    ceiling = next((r for r in rows if r["system"] == "oracle"), None)
    if floor is not None and ceiling is not None:
        for r in rows:
            if split_system(r["system"])[0] in TEXT_ONLY_SYSTEMS:
                r["between_chance_and_ceiling"] = _place(r, floor, ceiling)
    inv_rows = []
    for g, s in [(r["generator"], r["system"]) for r in rows]:
        mine = [c for c in inversion if c["generator"] == g and c["system"] == s]
        if mine:
            inv_rows.append(_inversion_row(g, s, mine))
    inv = {"rows": inv_rows, "chance": _inversion_row("none", "chance", chance_inversion) if chance_inversion else None,
           "n_cells": len(inversion), "n_cells_planned": len(cfg.cells()),
           "pairing": "paired over evaluation scenes: held-out caption i is one of scene i's captions (checked)",
           "references": "one per scene: the held-out caption (both the synthetic and the real captions)",
           "synthetic_specs": sorted({c["synthetic_specs"] for c in inversion})}
    return {"config": cfg.record(), "hygiene": hygiene, "rows": rows, "chance": floor, "falsifier": falsifier,
            "inversion": inv,
            "raw_gap": raw_gap, "n_cells": len(cells), "n_cells_planned": len(cfg.cells()),
            "cell_seconds": float(sum(c["seconds"] for c in cells))}


def _ci(mean_ci, nd: int = 3) -> str:
    mean, ci = mean_ci if isinstance(mean_ci, (tuple, list)) else (mean_ci["mean"], mean_ci["t_ci"])
    return f"{mean:.{nd}f}" + (f" [{ci[0]:.{nd}f}, {ci[1]:.{nd}f}]" if ci else "")


def _generator_label(row: dict[str, Any]) -> str:
    base = split_system(row["system"])[0]
    return {"oracle": "none (paired real-style videos)", "chance": "none"}.get(base, row["generator"])


def summary_tables(summary: dict[str, Any]) -> list[dict[str, Any]]:
    """The summary's tables as {"title", "header", "rows"} (rows of cell strings), rendered as Markdown by
    `summary_markdown` and as HTML by the demo: one source for both."""
    from vlgap.wsv.evaluate import ATTRIBUTES

    rows = list(summary["rows"]) + ([summary["chance"]] if summary.get("chance") else [])
    scores = {"title": "Scores on the held-out real-style videos: mean [95 % t-interval over seeds]; attribute "
                       "accuracy = mean of shape, colour, background, events (read back from the caption); place = "
                       "(system - chance) / (oracle - chance), per seed",
              "header": ["generator", "system", "seeds", "BLEU-4", "METEOR", "ROUGE-L", "CIDEr", "attribute accuracy",
                         "place between chance and ceiling, CIDEr", "place, attribute accuracy", "distinct captions"],
              "rows": []}
    for r in rows:
        place = r.get("between_chance_and_ceiling", {})
        scores["rows"].append(
            [_generator_label(r), r.get("label") or system_label(r["system"]), str(r["n_seeds"])]
            + [_ci(r[m]) if m in r else "n/a" for m in ("BLEU-4", "METEOR", "ROUGE-L", "CIDEr")]
            + [_ci(r["attributes"]["mean"]) if "attributes" in r else "n/a"]
            + [_ci(place[m], 2) if m in place else "" for m in ("CIDEr", "attributes")]
            + [f"{r['distinct_share']:.2f}"])
    attributes = {"title": "Grounded attribute accuracy (the caption read back into a scene spec, compared with the "
                           "video's true spec; an attribute the caption does not state counts as wrong): mean [t-interval "
                           "over seeds] (share of videos whose caption does not state it)",
                  "header": ["generator", "system", "N videos", *ATTRIBUTES], "rows": []}
    for r in rows:
        if "attributes" not in r:
            continue
        a = r["attributes"]
        attributes["rows"].append([_generator_label(r), r.get("label") or system_label(r["system"]),
                                   str(a["mean"]["n"])]
                                  + [f"{_ci(a[k])} (unread {a[k]['unread_share']:.2f})" for k in ATTRIBUTES])
    loss = {"title": "Training and validation loss (mean over seeds of each stage's loss averaged over 20 equal "
                     "windows of its steps, up to the step every seed reached, interpolated between windows where seeds ran "
                     "different numbers of steps; validation: the caption loss on the validation scenes' captions, never "
                     "trained on, every 50 steps): the caption stage's curves, the caption steps run per seed (with "
                     "a step limit: training went on until the validation loss converged, or stopped at the limit), "
                     "the step whose weights were kept (lowest validation loss) per seed, how much the lowest "
                     "validation loss still improved over the last fifth of the steps per seed (above "
                     f"{STILL_FALLING:.0%}: still falling, the row had not converged when training stopped), and each "
                     "stage's final window (mean [t-interval])",
            "header": ["generator", "system", "caption-stage training loss at step (curve)",
                       "validation loss at step (curve)", "caption steps run per seed",
                       "kept caption step per seed (its validation loss)",
                       "validation loss fall over the last fifth of steps, per seed", "final loss per stage"],
            "rows": []}

    def _fall(v):
        if v is None:
            return "n/a (too few validation points)"
        return f"{max(v, 0.0):.1%}" + (" (still falling)" if v > STILL_FALLING else "")

    def _run(r):
        if "caption_steps_run" not in r:
            return "n/a (not recorded)"
        limit = r.get("max_caption_steps") or 0
        return ", ".join(f"{n} (step limit)" if limit and n >= limit else str(n) for n in r["caption_steps_run"]) + (
            f" (until converged, at most {limit})" if limit else " (fixed)")

    def _picks(curve):
        picks = sorted({0, len(curve) // 4, len(curve) // 2, (3 * len(curve)) // 4, len(curve) - 1}) if curve else []
        return ", ".join(f"{curve[k][0]}: {curve[k][1]:.2f}" for k in picks)

    for r in rows:
        if "loss" not in r:
            continue
        kept = ", ".join(f"{x['caption_step']} ({x['val_loss']:.2f})" if x else "last"
                         for x in r.get("selected", [])) or "last"
        loss["rows"].append([_generator_label(r), r.get("label") or system_label(r["system"]),
                             _picks(r["loss"].get("caption", {}).get("curve_mean_over_seeds", [])),
                             _picks(r["loss"].get("val", {}).get("curve_mean_over_seeds", [])) or "n/a (no validation set)",
                             _run(r), kept, ", ".join(_fall(v) for v in r["val_late_fall"]) if "val_late_fall" in r
                             else "n/a (no validation set)",
                             "; ".join(f"{st} {_ci(v['final'], 2)}" for st, v in r["loss"].items() if st != "val")])
    fals = {"title": "The falsifier: real latents vs synthetic latents of held-out captions",
            "header": ["generator", "latents vs real", "MMD² (mean [t-CI])", "permutation p per seed",
                       "C2ST acc. (chance 0.5)", "FD (H,W-pooled)", "CIDEr, polisher bypassed",
                       "CIDEr, polisher applied"], "rows": []}
    for f in summary["falsifier"]:
        for side in ("raw", "polished"):
            x = f[side]
            q = (_ci(f["CIDEr_bypassed"]), _ci(f["CIDEr_polisher_applied"])) if side == "polished" else ("", "")
            fals["rows"].append([f"{f['generator']} ({system_label(f['system'])})", side, _ci(x["mmd2_unbiased"], 4),
                                 ", ".join(f"{p:.3g}" for p in x["p_values"]), _ci(x["c2st"]), _ci(x["fd"], 2),
                                 q[0], q[1]])
    inv = summary.get("inversion") or {}
    inversion = {"title": "T2V inversion: each system's captions of its generator's raw latents of held-out captions "
                          "(captions no system trained on) vs its captions of the real-style videos, both scored "
                          "against the held-out caption (one reference per scene: CIDEr here is not the scores "
                          "table's ten-reference CIDEr); attribute accuracy against what each video shows; "
                          "synthetic - real paired over scenes: mean [t-interval over seeds] {each seed's paired "
                          "interval: CIDEr paired bootstrap, attribute accuracy inverted sign-flip test}; the "
                          "polisher is bypassed on both inputs, as at inference; the last column: the polished "
                          "synthetic latents the captioner trained on. High on synthetic, low on real: the system "
                          "inverts its generator and the synthetic-to-real gap is the bottleneck; low on both: the "
                          "captioner is weak",
                 "header": ["latents captioned", "system", "seeds", "CIDEr, synthetic", "CIDEr, real",
                            "CIDEr, synthetic - real", "attribute accuracy, synthetic", "attribute accuracy, real",
                            "attribute accuracy, synthetic - real",
                            "synthetic polished (the captioner's training input): CIDEr; attribute accuracy"],
                 "rows": []}

    def per_seed(d):
        # summaries written before the attribute difference became a sign-flip inversion name the key differently
        cis = [c for c in d.get("ci_per_seed", d.get("paired_bootstrap_ci_per_seed", [])) if c]
        return _ci(d) + (" {" + "; ".join(f"[{c[0]:.3f}, {c[1]:.3f}]" for c in cis) + "}" if cis else "")

    for r in list(inv.get("rows") or []) + ([inv["chance"]] if inv.get("chance") else []):
        base = split_system(r["system"])[0]
        where = {"oracle": f"{r['generator']} (trained on paired real-style videos)",
                 "chance": "none (a random training caption for both)"}.get(base, r["generator"])
        cells = [where, r.get("label") or system_label(r["system"]), str(r["n_seeds"])]
        for m in ("CIDEr", "attributes"):
            cells += [_ci(r[side][m]) if m in r[side] else "n/a" for side in ("synthetic", "real")]
            cells.append(per_seed(r["difference"][m]) if m in r["difference"] else "n/a")
        pol = r.get("synthetic_polished")
        cells.append("; ".join(_ci(pol[m]) for m in ("CIDEr", "attributes") if m in pol) if pol else
                     "n/a" if base == "chance" else "no polisher")
        inversion["rows"].append(cells)
    return [t for t in (scores, attributes, loss, fals, inversion) if t["rows"]]


def summary_markdown(summary: dict[str, Any]) -> str:
    out = []
    for t in summary_tables(summary):
        out += [t["title"] + ":", "", "| " + " | ".join(t["header"]) + " |", "|" + "---|" * len(t["header"])]
        out += ["| " + " | ".join(r) + " |" for r in t["rows"]]
        out.append("")
    return "\n".join(out)


def summary_html(summary: dict[str, Any]) -> str:
    """The same tables as HTML (escaped cells, every column)."""
    import html

    parts = []
    for t in summary_tables(summary):
        head = "".join(f"<th>{html.escape(h)}</th>" for h in t["header"])
        body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>" for r in t["rows"])
        parts.append(f"<p>{html.escape(t['title'])}.</p><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>")
    return "".join(parts)
