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
from typing import Any, Callable

import numpy as np

from vlgap.errors import VlgapError
from vlgap.io_utils import atomic_write_json, atomic_write_text

DEFAULT_SYSTEMS = ("wsv", "wsv_mmd", "no_polisher", "frozen_lm", "text_only", "oracle")
PART_DEFAULTS = {"generator": "shapes", "latents": None, "video_text": "latent-tower", "generator_steps": 50}
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
    return base, {"lm": lm[3:] if lm.startswith("hf:") else lm}


def system_label(name: str) -> str:
    base, over = split_system(name)
    label = SYSTEM_NAMES.get(base, base)
    return f"{label}, LM {over['lm']} + LoRA" if "lm" in over else label


#: caption-stage steps of the documented experiment, chosen from the loss curve (README "The experiment")
CAPTION_STEPS = 1000

#: the documented experiment: `vlgap wsv experiment` with no options (README "The experiment"); the demo is
#: its seed 0, so both read their settings from here
EXPERIMENT_DEFAULTS: dict[str, Any] = dict(
    n_train=80, n_eval=60, n_unlabelled=20, seeds=(0, 1, 2), systems=DEFAULT_SYSTEMS,
    generators=("synthetic", "real"), second_generator_systems=("wsv",), n_bootstrap=300, n_permutations=300,
    c2st_permutations=30,
    train=dict(caption_steps=CAPTION_STEPS, head_steps=150, polisher_steps=150, lm_pretrain_steps=200, lm_dim=64,
               lm_layers=2, prompter_dim=32, checkpoint_every=50))


@dataclass
class ExperimentConfig:
    n_train: int = 150  # training scenes (x 10 captions = the corpus)
    n_eval: int = 60  # held-out real-style scenes
    n_unlabelled: int = 60  # unlabelled real-style scenes (distribution term only)
    world_seed: int = 0
    seeds: tuple[int, ...] = (0, 1, 2)
    systems: tuple[str, ...] = DEFAULT_SYSTEMS
    generators: tuple[str, ...] = ("synthetic", "real")  # render styles of the T2V generator
    second_generator_systems: tuple[str, ...] = ("wsv",)  # systems also run with generators[1:]
    eval_style: str = "real"
    n_frames: int = 16
    size: int = 64
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

        for name, minimum in (("n_train", 1), ("n_eval", 2), ("n_unlabelled", 0), ("n_frames", 1), ("size", 16),
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
            WSVConfig(system=base, **{**self.wsv_overrides(), **over})

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
    text_emb: np.ndarray
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


def _log_default(msg: str) -> None:
    import sys

    print(f"wsv: {msg}", file=sys.stderr, flush=True)


def embed_captions(captions: list[str], batch_size: int = 128) -> np.ndarray:
    """Frozen MiniLM (bundled) sentence embeddings, mean-pooled last layer, L2-normalised (the latent
    tower's text side: vlgap.wsv.parts.minilm_embeddings)."""
    from vlgap.wsv.parts import minilm_embeddings

    return minilm_embeddings(captions, batch_size)


def prepare(cfg: ExperimentConfig, cache_dir=None, log: Callable[[str], None] = _log_default,
            device: str = "cpu", ray: str | bool | None = None, ray_workers: int | None = None) -> Prepared:
    """Scenes, corpus, latents (cached atomically under <cache>/wsv/latents, keyed by everything that
    makes them; a diffusers generator's on Ray actors with `ray`) and the disjointness report."""
    from vlgap.data.shapes import item_rng, sample_spec, write_captions
    from vlgap.wsv.generate import available_styles, render_styled
    from vlgap.wsv.latents import cached_latents
    from vlgap.wsv.parts import ShapesGenerator, build_parts, generated_latents, text_embeddings

    styles = available_styles()
    shapes = cfg.part("generator").startswith("shapes")
    for s in ((*cfg.generators, cfg.eval_style) if shapes else (cfg.eval_style,)):
        if s not in styles:
            raise VlgapError(f"render style {s!r} is not available; valid: {list(styles)}")
    if cfg.n_train < 1:
        raise VlgapError("the training corpus is empty: n_train must be at least 1")

    def scenes(offset: int, n: int, prefix: str):
        out = []
        for i in range(n):
            rng = item_rng(cfg.world_seed * 1000 + offset, i)
            spec = sample_spec(rng)
            out.append((f"{prefix}_{i:05d}", spec, write_captions(spec, int(rng.integers(2**31 - 1)))))
        return out

    train, evals, unl = scenes(0, cfg.n_train, "train"), scenes(1, cfg.n_eval, "eval"), scenes(2, cfg.n_unlabelled, "unl")
    eval_specs = {json.dumps(s.to_dict(), sort_keys=True) for _, s, _ in evals}
    eval_text = {c for _, _, caps in evals for c in caps}
    dup_specs = [i for i, s, _ in train if json.dumps(s.to_dict(), sort_keys=True) in eval_specs]
    corpus, corpus_ids, dropped = [], [], 0
    for i, s, caps in train:
        if i in dup_specs:
            continue
        for k, c in enumerate(caps):
            if c in eval_text:  # exact-text overlap with an evaluation reference: left out, and counted
                dropped += 1
                continue
            corpus.append(c)
            corpus_ids.append(f"{i}_c{k}")
    if not corpus:
        raise VlgapError("the training corpus is empty after removing captions that overlap the evaluation set")
    id_overlap = len({i for i, _, _ in train} & {i for i, _, _ in evals})
    corpus_scene_ids = {c.rsplit("_c", 1)[0] for c in corpus_ids}
    corpus_specs = {json.dumps(s.to_dict(), sort_keys=True) for i, s, _ in train if i in corpus_scene_ids}
    hygiene = {"n_train_scenes": cfg.n_train, "n_eval_scenes": cfg.n_eval, "n_unlabelled_scenes": cfg.n_unlabelled,
               "corpus_captions": len(corpus), "train_scenes_equal_to_eval_scenes_removed": len(dup_specs),
               "train_captions_identical_to_eval_references_removed": dropped, "id_overlap": id_overlap,
               "exact_text_overlap_after_removal": len(set(corpus) & eval_text),
               "unlabelled_scene_captions_in_corpus": len(set(corpus) & {c for _, _, caps in unl for c in caps}),
               # the oracle's paired videos are the corpus scenes rendered in the evaluation style: never an
               # evaluation scene (by id or by spec)
               "oracle_video_scenes": len(corpus_scene_ids),
               "oracle_video_scene_id_overlap_with_eval": len(corpus_scene_ids & {i for i, _, _ in evals}),
               "oracle_video_scene_specs_equal_to_eval_specs": len(corpus_specs & eval_specs)}
    parts = build_parts(cfg.part("generator") if not shapes else f"shapes:{cfg.generators[0]}", cfg.part("latents"),
                        cfg.part("video_text"), n_frames=cfg.n_frames, size=cfg.size,
                        generator_steps=cfg.part("generator_steps"), device=device,
                        dtype=cfg.train.get("dtype", "float32"))
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
    synth, heldout_synth = _Lazy(), {}
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
    real = latents_of("evaluation videos (real style)", {"what": "eval", "style": cfg.eval_style, "n": cfg.n_eval},
                      lambda: [render_styled(s, cfg.n_frames, cfg.size, cfg.eval_style, 10**6 + j)
                               for j, (_, s, _) in enumerate(evals)])
    unlabelled = latents_of("unlabelled real-style videos", {"what": "unlabelled", "style": cfg.eval_style,
                                                            "n": cfg.n_unlabelled},
                            lambda: [render_styled(s, cfg.n_frames, cfg.size, cfg.eval_style, 2 * 10**6 + j)
                                     for j, (_, s, _) in enumerate(unl)])
    spec_of = {i: s for i, s, _ in train}
    paired = _Lazy()
    # the oracle's supervision: each corpus caption with its own scene rendered in the evaluation style (a
    # fresh style seed per caption, as the generator's videos have one per caption)
    paired["real"] = lambda: latents_of(
        "paired real-style videos of the corpus scenes (oracle only)",
        {"what": "paired", "style": cfg.eval_style, "n_train": cfg.n_train, "captions": _hash(corpus)},
        lambda: [render_styled(spec_of[cid.rsplit("_c", 1)[0]], cfg.n_frames, cfg.size, cfg.eval_style, 3 * 10**6 + k)
                 for k, cid in enumerate(corpus_ids)])
    text_emb = text_embeddings(parts.video_text, corpus, cache_dir=cache_dir, log=log)
    return Prepared(corpus=corpus, corpus_ids=corpus_ids, text_emb=text_emb, synth=synth, heldout_captions=heldout,
                    heldout_synth=heldout_synth, eval_ids=[i for i, _, _ in evals],
                    eval_refs={i: list(caps) for i, _, caps in evals}, eval_specs=[s for _, s, _ in evals],
                    real=real, unlabelled=unlabelled, hygiene=hygiene,
                    video_text=None if parts.video_text.kind == "latent-tower" else parts.video_text,
                    parts=parts.record() if cfg.parts else None, device=parts.encoder.device,
                    paired=paired)


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
    from vlgap.wsv.evaluate import score_captions, two_sample
    from vlgap.wsv.train import TrainData, WSVConfig, train

    base, over = split_system(system)
    wcfg = WSVConfig(system=base, seed=seed, **{**cfg.wsv_overrides(), **over})
    latents = prep.paired["real"] if base == "oracle" else prep.synth[generator]
    data = TrainData(prep.corpus, latents, prep.text_emb,
                     real_unlabelled=prep.unlabelled if base == "wsv_mmd" else None,
                     parts=_oracle_parts(prep.parts, cfg) if base == "oracle" else prep.parts)
    t0 = time.perf_counter()
    bundle = train(data, wcfg, cell_dir, log=log, force=force, video_text=prep.video_text, device=prep.device)
    t_train = time.perf_counter() - t0
    caps = bundle.caption(prep.real)
    pred = dict(zip(prep.eval_ids, caps))
    history = bundle_history(cell_dir)
    res: dict[str, Any] = {"generator": generator, "system": system, "seed": seed, "config": asdict(wcfg),
                           "train_seconds": round(t_train, 1), "predictions": pred,
                           "final_loss": float(np.mean([h[2] for h in history[-50:]])),
                           "loss_curves": loss_curves(history),
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
    for j, (g, s, seed) in enumerate(cells):
        name = f"{g}-{s}-s{seed}"
        path = out / "cells" / f"{name}.json"
        key = _cell_key(cfg, "cell", generator=g, system=s, seed=seed)
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
        res = run_cell(prep, cfg, g, s, seed, out / "work" / name, log=log, force=force)
        done[name] = _write_cell(path, res, key)
        lock.unlink(missing_ok=True)
        sc = res["scores"]
        log(f"cell {name}: CIDEr {sc['CIDEr']['score']:.3f} BLEU-4 {sc['BLEU-4']['score']:.3f} distinct "
            f"{sc['distinct']['share']:.2f} ({res['seconds']:.0f} s)")
    # cells other workers finished meanwhile are read (verified) too
    for g, s, seed in cells:
        name = f"{g}-{s}-s{seed}"
        if name not in done:
            res = _read_cell(out / "cells" / f"{name}.json", _cell_key(cfg, "cell", generator=g, system=s, seed=seed),
                             log)
            if res is not None:
                done[name] = res
    chance = []
    for seed in cfg.seeds:  # the floor: cheap (no training), so every worker may write it (same bytes)
        path, key = out / "cells" / f"chance-s{seed}.json", _cell_key(cfg, "chance", seed=seed)
        res = _read_cell(path, key, log)
        chance.append(res if res is not None else _write_cell(path, chance_cell(prep, cfg, seed), key))
    summary = summarise(out, cfg, prep.hygiene, raw_gap, cells=[done[f"{g}-{s}-s{seed}"] for g, s, seed in cells
                                                              if f"{g}-{s}-s{seed}" in done], chance=chance)
    summary["wall_seconds_this_run"] = round(time.perf_counter() - t0, 1)
    atomic_write_json(out / "summary.json", summary)
    atomic_write_text(out / "summary.md", summary_markdown(summary))
    return summary


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
            try:
                pid = int(lock.read_text() or "0")
                os.kill(pid, 0)
                return False  # alive: its cell
            except (ValueError, ProcessLookupError, FileNotFoundError):
                lock.unlink(missing_ok=True)  # stale: the worker died; take over (the cell resumes)
            except PermissionError:
                return False
    return False


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
    if all("loss_curves" in c for c in mine):
        stages = list(mine[0]["loss_curves"])
        row["loss"] = {st: {"final": t_interval([c["loss_curves"][st][-1][1] for c in mine]),
                            "curve_mean_over_seeds": [[p[0], float(np.mean([c["loss_curves"][st][k][1] for c in mine]))]
                                                      for k, p in enumerate(mine[0]["loss_curves"][st])]}
                       for st in stages}
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
              cells: list[dict[str, Any]] | None = None, chance: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """Tables over the finished cells (`cells`: as verified by run_experiment; default: read them,
    verified, from out/cells; `chance` likewise)."""
    if cells is None:
        cells = [c for c in (_read_cell(out / "cells" / f"{g}-{s}-s{seed}.json",
                                        _cell_key(cfg, "cell", generator=g, system=s, seed=seed), _log_default)
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
    return {"config": cfg.record(), "hygiene": hygiene, "rows": rows, "chance": floor, "falsifier": falsifier,
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
    loss = {"title": "Training loss (mean over seeds of each stage's loss averaged over 20 equal windows of its "
                     "steps): the caption stage's curve, and each stage's final window (mean [t-interval])",
            "header": ["generator", "system", "caption-stage loss at step (curve)", "final loss per stage"], "rows": []}
    for r in rows:
        if "loss" not in r:
            continue
        curve = r["loss"].get("caption", {}).get("curve_mean_over_seeds", [])
        picks = sorted({0, len(curve) // 4, len(curve) // 2, (3 * len(curve)) // 4, len(curve) - 1}) if curve else []
        loss["rows"].append([_generator_label(r), r.get("label") or system_label(r["system"]),
                             ", ".join(f"{curve[k][0]}: {curve[k][1]:.2f}" for k in picks),
                             "; ".join(f"{st} {_ci(v['final'], 2)}" for st, v in r["loss"].items())])
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
    return [t for t in (scores, attributes, loss, fals) if t["rows"]]


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
