"""`vlgap wsv ...`: the text-only video captioner after WSV (train, caption, eval, gap, demo, experiment)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console

from vlgap.cli._app import app
from vlgap.cli.captions import metrics_option
from vlgap.cli.group import VocabGroup
from vlgap.cli.options import (TRUST_REMOTE_CODE_HELP, confidence_option, device_option, dtype_option, encoding_option,
                               seed_list)
from vlgap.formatting import interval, number
from vlgap.wsv.parts import PART_DEFAULTS, SETTING_DEFAULTS

wsv_app = typer.Typer(help="Text-only video captioning after WSV: captions -> synthetic videos -> polisher -> "
                           "prompter -> LM, with the falsifier and baselines.", no_args_is_help=True,
                      cls=VocabGroup)
app.add_typer(wsv_app, name="wsv")
console = Console()


def _log(msg: str) -> None:
    Console(stderr=True).print(f"wsv: {msg}", highlight=False)


GENERATOR_HELP = ("Text-to-video part: shapes (offline, render style 'synthetic'), shapes:<style>, or "
                  "diffusers:<hub id or folder> (a diffusers text-to-video pipeline with a VAE: CogVideoX, Wan).")
LATENTS_HELP = ("Latent space: mobilenet (offline) or vae:<hub id or folder> (a diffusers video VAE or a pipeline "
                "folder holding one). Default: a diffusers generator's own VAE, else mobilenet.")
VIDEO_TEXT_HELP = ("The polisher's frozen video-text model: latent-tower (a tower over latents trained first, "
                   "MiniLM captions) or clip:<hub id or folder> (CLIP4Clip mean pooling over VAE-decoded frames; "
                   "needs a VAE latent space).")
LM_HELP = ("scratch (GPT-2 config, random init) | smollm2 (bundled, LoRA r=8) | hf:<hub id or folder> (a causal "
           "LM such as GPT-2, every weight fine-tuned unless --lora-r).")
DEVICE_WHAT = "where every model runs"
DTYPE_WHAT = "frozen models run in it, trained modules under autocast."
RAY_HELP = ("Make a diffusers generator's missing latents on Ray actors: auto (RAY_ADDRESS, a running cluster, "
            "else a local one) or a cluster address. Same latents as without it.")
RAY_WORKERS_HELP = "Generator actors (default: one per GPU, or one per 4 CPUs)."
RECORDED_LATENTS_HELP = "Where the model's latent encoder lives now."

# One declaration of each option that several commands take; defaults from vlgap.wsv.parts (torch-free), so
# train, experiment, caption, gap and invert cannot drift apart. `help` is a parameter where commands word it
# differently.


def _generator_option(help: str = GENERATOR_HELP):
    return typer.Option(PART_DEFAULTS["generator"], "--generator", help=help)


def _latents_option():
    return typer.Option(PART_DEFAULTS["latents"], "--latents", help=LATENTS_HELP)


def _video_text_option():
    return typer.Option(PART_DEFAULTS["video_text"], "--video-text", help=VIDEO_TEXT_HELP)


def _generator_steps_option():
    return typer.Option(PART_DEFAULTS["generator_steps"], "--generator-steps",
                        help="Denoising steps of a diffusers generator.")


def _lm_option():
    return typer.Option(SETTING_DEFAULTS["lm"], "--lm", help=LM_HELP)


def _lora_r_option(help: str):
    return typer.Option(SETTING_DEFAULTS["lora_r"], "--lora-r", help=help)


def _size_option(help: str = "Frame side in pixels."):
    return typer.Option(SETTING_DEFAULTS["size"], "--size", help=help)


def _device_option():
    return device_option(SETTING_DEFAULTS["device"], what=DEVICE_WHAT)


def _dtype_option():
    return dtype_option(SETTING_DEFAULTS["dtype"], what=DTYPE_WHAT)


def _recorded_option(flag: str, help: str):
    """A part or setting of a trained model: None = the one it recorded."""
    return typer.Option(None, flag, help=help)


def _recorded_dtype_option():
    return dtype_option(None, what=DTYPE_WHAT + " Default: the model's.")


def _ray_option():
    return typer.Option(None, "--ray", help=RAY_HELP)


def _ray_workers_option():
    return typer.Option(None, "--ray-workers", help=RAY_WORKERS_HELP)


def _threads(n: Optional[int]) -> None:
    if n is not None:
        import torch

        from vlgap.counts import check_count

        n = check_count("threads", n, 1, flag="--threads", example=2)
        torch.set_num_threads(n)


@wsv_app.command("train")
def train_cmd(
    out: Path = typer.Option(..., "--out", "-o", help="Folder for checkpoint.pt (resumed if present) and model.pt."),
    system: str = typer.Option("wsv", help="wsv | wsv_mmd | no_polisher | frozen_lm | text_only | oracle (the "
                                           "supervised ceiling: paired real-style videos of the default corpus)"),
    seed: int = typer.Option(0, help="Training seed."),
    corpus: Optional[Path] = typer.Option(None, help="Captions, one per line (default: the shapes world's "
                                                     "captions of --n-train scenes)."),
    n_train: int = typer.Option(150, help="Scenes whose captions form the default corpus."),
    generator: str = _generator_option(),
    latents: Optional[str] = _latents_option(),
    video_text: str = _video_text_option(),
    lm: str = _lm_option(),
    lora_r: Optional[int] = _lora_r_option("LoRA rank for a pretrained LM (0: train every weight; default 0 for "
                                           "hf:, 8 for smollm2)."),
    n_frames: Optional[int] = typer.Option(None, "--n-frames", help=f"Frames per clip (default "
                                           f"{SETTING_DEFAULTS['n_frames']}; a video VAE needs k*m+1, e.g. 17 for "
                                           "CogVideoX)."),
    size: int = _size_option("Frame side in pixels (a multiple of the VAE's spatial factor)."),
    generator_steps: int = _generator_steps_option(),
    device: str = _device_option(),
    dtype: str = _dtype_option(),
    caption_steps: int = typer.Option(800), head_steps: int = typer.Option(300),
    polisher_steps: int = typer.Option(300), lm_pretrain_steps: int = typer.Option(400),
    batch_size: int = typer.Option(32), checkpoint_every: int = typer.Option(100),
    threads: Optional[int] = typer.Option(None, help="torch threads."),
    cache_dir: Optional[Path] = typer.Option(None, help="Cache root (default $VLGAP_CACHE or ~/.cache/vlgap)."),
    force: bool = typer.Option(False, "--force", help="Start over in an --out folder that holds a run with "
                                                      "another configuration (refused otherwise)."),
    ray: Optional[str] = _ray_option(),
    ray_workers: Optional[int] = _ray_workers_option(),
    trust_remote_code: bool = typer.Option(False, "--trust-remote-code", help=TRUST_REMOTE_CODE_HELP),
    encoding: str = encoding_option(),
):
    """Train one system (resumes after a kill with identical results) and write OUT/model.pt."""
    from vlgap.encoders.causal_lm import allow_remote_code

    allow_remote_code(trust_remote_code)
    from vlgap.paths import output_folder
    from vlgap.wsv.api import train_system

    output_folder(out, "--out")
    if corpus is not None:
        from vlgap.wsv.api import read_corpus

        read_corpus(corpus)  # a folder, a missing file, non-UTF-8 bytes or no caption: refused before any file
    if cache_dir is not None:
        output_folder(cache_dir, "--cache-dir")
    _threads(threads)
    path = train_system(out, system=system, seed=seed, corpus=corpus, n_train=n_train, generator=generator,
                        latents=latents, video_text=video_text, lm=lm, lora_r=lora_r, n_frames=n_frames, size=size,
                        generator_steps=generator_steps, device=device, dtype=dtype, caption_steps=caption_steps, head_steps=head_steps, polisher_steps=polisher_steps,
                        lm_pretrain_steps=lm_pretrain_steps, batch_size=batch_size,
                        checkpoint_every=checkpoint_every, cache_dir=cache_dir, log=_log, force=force, ray=ray,
                        ray_workers=ray_workers)
    console.print(f"model: {path}")


@wsv_app.command("caption")
def caption_cmd(
    model: Path = typer.Argument(..., help="model.pt from `vlgap wsv train`."),
    manifest: Path = typer.Argument(..., help="Manifest of videos (JSONL)."),
    out: Path = typer.Option(..., "--out", "-o", help="File: the predictions, coco results JSON [{image_id, caption}]."),
    polish: bool = typer.Option(False, help="Apply the polisher to the real latents (the falsifier's check)."),
    batch_size: int = typer.Option(64), beam: int = typer.Option(1, help="Beam width (1: greedy)."),
    latents: Optional[str] = _recorded_option("--latents", RECORDED_LATENTS_HELP[:-1] + " (default: the spec it "
                                              "recorded; its weights must be the same)."),
    device: str = _device_option(),
    dtype: Optional[str] = _recorded_dtype_option(),
    threads: Optional[int] = typer.Option(None),
    trust_remote_code: bool = typer.Option(False, "--trust-remote-code", help=TRUST_REMOTE_CODE_HELP),
):
    """Batched greedy (or beam-search) captions for every video of a manifest (e.g. from `vlgap import
    msrvtt|msvd|vatex`), encoded through the latent encoder the model was trained with."""
    from vlgap.encoders.causal_lm import allow_remote_code

    allow_remote_code(trust_remote_code)
    from vlgap.paths import input_file, output_file
    from vlgap.wsv.api import caption_manifest

    input_file(model, "MODEL")
    input_file(manifest, "MANIFEST")
    output_file(out, "--out")
    _threads(threads)
    preds = caption_manifest(model, manifest, out, polish=polish, batch_size=batch_size, beam=beam, latents=latents,
                             device=device, dtype=dtype, log=_log)
    console.print(f"{len(preds)} captions -> {out}")


@wsv_app.command("eval")
def eval_cmd(
    predictions: Path = typer.Argument(..., help="coco results JSON from `vlgap wsv caption`."),
    references: Path = typer.Argument(..., help="The manifest (its captions are the references) or a coco "
                                                "annotations / JSONL references file."),
    bootstrap: int = typer.Option(1000, "--bootstrap", help="Bootstrap resamples over items."),
    confidence: float = confidence_option("wsv eval"),
    metrics: Optional[str] = metrics_option(),
    seed: int = typer.Option(0), as_json: bool = typer.Option(False, "--json"),
    encoding: str = encoding_option(),
):
    """BLEU-1..4, METEOR, ROUGE-L, CIDEr with bootstrap intervals, and the share of distinct captions; for
    shapes-world manifests (scene specs in meta.spec) also the per-attribute accuracy of the captions read
    back into scene specs (shape, colour, background, events; unstated = wrong)."""
    from vlgap.wsv.api import evaluate_predictions

    res = evaluate_predictions(predictions, references, n_bootstrap=bootstrap, seed=seed, confidence=confidence,
                               metrics=metrics.split(",") if metrics else None)
    if as_json:
        print(json.dumps(res, indent=2, default=str))
        return
    for k in ("BLEU-4", "METEOR", "ROUGE-L", "CIDEr"):
        if k in res:
            console.print(f"{k:8s} {number(res[k]['score'])}  {interval(res[k].get('ci'))}")
    console.print(f"n = {res['n']}, distinct captions {res['distinct']['share']:.2f}")
    if "attributes" in res:  # shapes-world references: the captions read back and checked against the true specs
        att = res["attributes"]
        console.print(f"attribute accuracy (caption read back into a scene spec, vs the video's true spec; "
                      f"unstated = wrong), n = {att['n']}:")
        for k in ("shape", "colour", "background", "events", "mean"):
            unread = f"  unread {att[k]['unread_share']:.2f}" if "unread_share" in att[k] else ""
            console.print(f"  {k:10s} {number(att[k]['accuracy'])}  {interval(att[k].get('ci'))}{unread}")


@wsv_app.command("gap")
def gap_cmd(
    model: Path = typer.Argument(..., help="model.pt with a polisher."),
    manifest: Path = typer.Argument(..., help="Real videos; their captions (first of each) are the held-out "
                                              "captions the generator turns into synthetic latents."),
    permutations: int = typer.Option(500, "--permutations"), bootstrap: int = typer.Option(500, "--bootstrap"),
    confidence: float = confidence_option("wsv gap"),
    seed: int = typer.Option(0), as_json: bool = typer.Option(False, "--json"),
    generator: Optional[str] = _recorded_option("--generator", "Where the model's generator lives now (default: "
                                                "the spec it recorded; its weights must be the same)."),
    latents: Optional[str] = _recorded_option("--latents", RECORDED_LATENTS_HELP),
    device: str = _device_option(),
    dtype: Optional[str] = _recorded_dtype_option(),
    cache_dir: Optional[Path] = typer.Option(None, help="Cache root for generated latents."),
    threads: Optional[int] = typer.Option(None),
    ray: Optional[str] = _ray_option(),
    ray_workers: Optional[int] = _ray_workers_option(),
):
    """The falsifier in the model's latent space: MMD2 (p, CI), C2ST and FD between real latents and raw vs
    polished synthetic latents."""
    from vlgap.wsv.api import gap_for_model

    _threads(threads)
    res = gap_for_model(model, manifest, n_permutations=permutations, n_bootstrap=bootstrap, seed=seed,
                        generator=generator, latents=latents, device=device, dtype=dtype, cache_dir=cache_dir,
                        log=_log, ray=ray, ray_workers=ray_workers)
    if as_json:
        print(json.dumps(res, indent=2, default=str))
        return
    for side in ("raw", "polished"):
        x = res[side]
        if x is None:
            continue
        console.print(f"{side:9s} MMD2 {number(x['mmd2_unbiased'], 4)} (p {number(x['p_value'])}, CI {interval(x['ci'], 4, x.get('ci_reason'))}), "
                      f"C2ST {number(x['c2st']['accuracy'], 2)} (p {number(x['c2st']['p_value'])}), FD {number(x['fd'], 2)}")


@wsv_app.command("invert")
def invert_cmd(
    model: Path = typer.Argument(..., help="model.pt from `vlgap wsv train`."),
    captions: Path = typer.Argument(..., help="Held-out captions: a text file (one per line), a coco annotations "
                                              "/ JSONL references file (first caption of each item) or a video "
                                              "manifest (first caption of each item; its videos are the real side)."),
    out: Optional[Path] = typer.Option(None, "--out", "-o", help="File: write the full result (scores, predictions) "
                                                                 "as JSON."),
    generator: Optional[str] = _recorded_option("--generator", "Default: the generator the model was trained "
                                                "with, as recorded (its weights must be the same); a model trained "
                                                "without one (the oracle) needs it. " + GENERATOR_HELP),
    latents: Optional[str] = _recorded_option("--latents", RECORDED_LATENTS_HELP),
    synthetic_only: bool = typer.Option(False, "--synthetic-only", help="With a video manifest: skip the real "
                                                                        "videos (synthetic side only)."),
    bootstrap: int = typer.Option(1000, "--bootstrap", help="Bootstrap resamples over items."),
    confidence: float = confidence_option("wsv invert"),
    permutations: int = typer.Option(1000, "--permutations", help="Randomisation resamples of the paired "
                                                                   "differences."),
    metrics: Optional[str] = metrics_option(),
    seed: int = typer.Option(0, help="Generation seed (and the bootstrap's)."),
    batch_size: int = typer.Option(64), beam: int = typer.Option(1, help="Beam width (1: greedy)."),
    device: str = _device_option(),
    dtype: Optional[str] = _recorded_dtype_option(),
    cache_dir: Optional[Path] = typer.Option(None, help="Cache root for generated latents."),
    threads: Optional[int] = typer.Option(None), as_json: bool = typer.Option(False, "--json"),
    ray: Optional[str] = _ray_option(),
    ray_workers: Optional[int] = _ray_workers_option(),
):
    """The T2V-inversion check: the model captions its generator's raw latents of held-out captions, scored
    against those captions (coco-caption metrics; for the shapes generator also the attribute accuracy);
    with a video manifest, next to its captions of the real videos scored against the same captions, and the
    paired difference."""
    from vlgap.wsv.api import invert_model

    _threads(threads)
    res = invert_model(model, captions, out, generator=generator, latents=latents, synthetic_only=synthetic_only,
                       seed=seed, n_bootstrap=bootstrap, n_permutations=permutations,
                       metrics=metrics.split(",") if metrics else None, batch_size=batch_size, beam=beam,
                       device=device, dtype=dtype, cache_dir=cache_dir, log=_log, ray=ray, ray_workers=ray_workers)
    if as_json:
        print(json.dumps({k: v for k, v in res.items() if k != "predictions"}, indent=2, default=str))
        return
    console.print(f"n = {res['n']} held-out captions (one reference each: the caption each latent was made from)")
    sides = [s for s in ("synthetic", "synthetic_polished", "real") if res.get(s) is not None]
    for k in ("BLEU-4", "METEOR", "ROUGE-L", "CIDEr"):
        if k in res["synthetic"]:
            console.print(f"{k:8s} " + "   ".join(f"{s} {number(res[s][k]['score'])} {interval(res[s][k].get('ci'))}"
                                                   for s in sides))
    if "attributes" in res["synthetic"]:
        console.print("attribute accuracy " + "   ".join(
            f"{s} {number(res[s]['attributes']['mean']['accuracy'])} {interval(res[s]['attributes']['mean'].get('ci'))}"
            for s in sides if "attributes" in res[s]))
    for k, d in (res.get("difference") or {}).items():
        if isinstance(d, dict):
            console.print(f"synthetic - real, {k}: {number(d['difference'])} {interval(d.get('ci'))} "
                          f"(paired over items, p {number(d['p_value']) if d.get('p_value') is not None else 'n/a'})")
    if out is not None:
        console.print(f"result -> {out}")


@wsv_app.command("demo")
def demo_cmd(
    out: Path = typer.Option(Path("runs/wsv-demo"), "--out", "-o", help="Folder: the demo's run folder."),
    threads: Optional[int] = typer.Option(1, help="torch threads per worker."),
    workers: int = typer.Option(2, help="Processes training the demo's cells side by side."),
    cache_dir: Optional[Path] = typer.Option(None),
):
    """Seed 0 of the documented experiment's WSV-offline, text-only and oracle cells, and the chance floor;
    writes a report section and a standalone page."""
    from vlgap.wsv.report import run_demo

    _threads(threads)
    path = run_demo(out, cache_dir=cache_dir, workers=workers, log=_log)
    console.print(f"report: {path}")


from vlgap.wsv.experiment import EXPERIMENT_DEFAULTS as _XD  # noqa: E402  (the documented experiment)

_XT = _XD["train"]


@wsv_app.command("experiment")
def experiment_cmd(
    out: Path = typer.Option(Path("runs/wsv-experiment"), "--out", "-o", help="Folder: the experiment's run folder "
                             "(resumable cell by cell)."),
    seeds: str = typer.Option(",".join(map(str, _XD["seeds"])), help="Training seeds (comma list)."),
    n_train: int = typer.Option(_XD["n_train"], help="Training scenes (x --captions-per-scene captions)."),
    captions_per_scene: int = typer.Option(_XD["captions_per_scene"], "--captions-per-scene",
                                           help="Captions of each training scene in the corpus (1-10, drawn at "
                                                "random from its ten)."),
    latent_grid: str = typer.Option("x".join(map(str, _XD["latent_grid"])), "--latent-grid",
                                    help="MobileNet latents' pooling grid, frames x height x width."),
    n_eval: int = typer.Option(_XD["n_eval"], help="Held-out real-style scenes."),
    n_unlabelled: int = typer.Option(_XD["n_unlabelled"], help="Unlabelled real-style scenes (wsv_mmd only)."),
    n_val: int = typer.Option(_XD["n_val"], help="Validation scenes: their captions give the held-out caption loss "
                                                 "(0: none)."),
    caption_steps: int = typer.Option(_XT["caption_steps"], help="Caption-stage steps before convergence is judged."),
    max_caption_steps: int = typer.Option(_XT.get("max_caption_steps", 0), "--max-caption-steps",
                                          help="Go on past --caption-steps until the held-out caption loss has "
                                               "converged (its lowest point improved at most 1% over the last fifth "
                                               "of the steps), at "
                                               "most this many steps; 0: exactly --caption-steps."),
    head_steps: int = typer.Option(_XT["head_steps"]),
    polisher_steps: int = typer.Option(_XT["polisher_steps"]),
    lm_pretrain_steps: int = typer.Option(_XT["lm_pretrain_steps"]),
    lm_dim: int = typer.Option(_XT["lm_dim"]), lm_layers: int = typer.Option(_XT["lm_layers"]),
    prompter_dim: int = typer.Option(_XT["prompter_dim"]),
    lr: float = typer.Option(_XT["lr"], "--lr", help="Learning rate of the caption stage (and of the frozen-LM row's "
                                                   "LM pretraining)."),
    bootstrap: int = typer.Option(_XD["n_bootstrap"], "--bootstrap"),
    confidence: float = confidence_option("wsv experiment"),
    permutations: int = typer.Option(_XD["n_permutations"], "--permutations"),
    systems: str = typer.Option(",".join(_XD["systems"]),
                                help="Systems (wsv, wsv_mmd, no_polisher, frozen_lm, text_only, oracle), each "
                                     "optionally with another LM: SYSTEM+smollm2 (SmolLM2-135M + LoRA) or "
                                     "SYSTEM+hf:FOLDER. The chance floor is always added."),
    generators: str = typer.Option(",".join(_XD["generators"]),
                                   help="Generator render styles; systems after the first generator: --second-systems."),
    second_systems: str = typer.Option(",".join(_XD["second_generator_systems"])),
    generator: str = _generator_option(GENERATOR_HELP + " With shapes, --generators names its render styles; "
                                       "with diffusers, one name for the cells (default diffusers)."),
    latents: Optional[str] = _latents_option(),
    video_text: str = _video_text_option(),
    lm: str = _lm_option(),
    lora_r: Optional[int] = _lora_r_option("LoRA rank for a pretrained LM (0: every weight)."),
    n_frames: int = typer.Option(SETTING_DEFAULTS["n_frames"], "--n-frames",
                                 help="Frames per clip (a video VAE needs k*m+1, e.g. 17)."),
    size: int = _size_option(),
    generator_steps: int = _generator_steps_option(),
    device: str = _device_option(),
    dtype: str = _dtype_option(),
    summary_only: bool = typer.Option(False, "--summary-only", help="Tabulate finished cells, train none."),
    threads: Optional[int] = typer.Option(None), cache_dir: Optional[Path] = typer.Option(None),
    force: bool = typer.Option(False, "--force", help="Take over an --out folder that holds an experiment with "
                                                      "another configuration (refused otherwise)."),
    ray: Optional[str] = _ray_option(),
    ray_workers: Optional[int] = _ray_workers_option(),
    trust_remote_code: bool = typer.Option(False, "--trust-remote-code", help=TRUST_REMOTE_CODE_HELP),
):
    """The full protocol, resumable cell by cell; writes OUT/summary.json and OUT/summary.md."""
    from vlgap.encoders.causal_lm import allow_remote_code

    allow_remote_code(trust_remote_code)
    from vlgap.wsv.experiment import ExperimentConfig, run_experiment, summary_markdown

    _threads(threads)
    parts = {k: v for k, v in (("generator", generator), ("latents", latents), ("video_text", video_text),
                               ("generator_steps", generator_steps))
             if v != PART_DEFAULTS[k]}  # the defaults stay out of the cell keys (earlier runs keep theirs)
    # one generator given: its cells' name
    if generator != PART_DEFAULTS["generator"] and generators == ",".join(_XD["generators"]):
        generators = generator.removeprefix("shapes:") if generator.startswith("shapes:") else "diffusers"
    lm_options = {k: v for k, v in (("lm", lm), ("lora_r", lora_r), ("dtype", dtype)) if v != SETTING_DEFAULTS[k]}
    from vlgap.errors import VlgapError

    try:
        grid = tuple(int(v) for v in latent_grid.lower().split("x"))
    except ValueError:
        raise VlgapError(f"--latent-grid {latent_grid!r}: give frames x height x width, e.g. 8x8x8") from None
    cfg = ExperimentConfig(n_train=n_train, captions_per_scene=captions_per_scene, latent_grid=grid, n_eval=n_eval,
                           n_unlabelled=n_unlabelled, n_val=n_val, n_bootstrap=bootstrap,
                           n_frames=n_frames, size=size, parts=parts,
                           n_permutations=permutations, c2st_permutations=_XD["c2st_permutations"],
                           seeds=tuple(seed_list(seeds)), systems=tuple(systems.split(",")),
                           generators=tuple(generators.split(",")), second_generator_systems=tuple(second_systems.split(",")),
                           train=dict(caption_steps=caption_steps, max_caption_steps=max_caption_steps,
                                      head_steps=head_steps, polisher_steps=polisher_steps,
                                      lm_pretrain_steps=lm_pretrain_steps, lm_dim=lm_dim, lm_layers=lm_layers,
                                      prompter_dim=prompter_dim, checkpoint_every=_XT["checkpoint_every"], lr=lr,
                                      **lm_options))
    from vlgap.counts import check_count

    check_count("ray_workers", ray_workers, 1, flag="--ray-workers", example=2, allow_none=True)
    summary = run_experiment(out, cfg, cache_dir=cache_dir, log=_log, summary_only=summary_only, force=force,
                             device=device, ray=ray, ray_workers=ray_workers)
    console.print(summary_markdown(summary))


@wsv_app.command("eval-set")
def eval_set_cmd(
    out: Path = typer.Option(..., "--out", "-o", help="Folder for videos/ and manifest.jsonl."),
    n: int = typer.Option(60, help="Scenes."),
    seed: int = typer.Option(1, help="Scene seed (the default corpus uses seed 0: disjoint scenes)."),
    style: str = typer.Option("real", help="Render style: real (camera shake, blur, noise, lighting, JPEG) or synthetic."),
    n_frames: int = typer.Option(SETTING_DEFAULTS["n_frames"]), size: int = typer.Option(SETTING_DEFAULTS["size"]),
):
    """A held-out shapes manifest in a render style (the 'real' evaluation domain)."""
    from vlgap.data.shapes import generate_shapes

    path = generate_shapes(out, n, seed=seed, n_frames=n_frames, size=size, style=style)
    console.print(f"manifest: {path}")
