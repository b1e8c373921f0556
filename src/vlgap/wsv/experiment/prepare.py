"""The experiment's data: its scene sets (disjoint by id and by exact caption text, checked and reported in
the hygiene record), the training corpus, and every latent the cells read (cached, keyed by all that makes
them; the costly ones made on first use, so other workers may train meanwhile)."""
from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

import numpy as np

from vlgap.errors import VlgapError
from vlgap.wsv.experiment.config import ExperimentConfig, _log_default, split_system

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
