"""`vlgap wsv demo`: seed 0 of the documented short run's WSV-offline, text-only and oracle cells and the
chance floor, written as a report section and a standalone HTML page (a paragraph in words, sample
captions with their attribute scores next to video thumbnails, the summary's tables as HTML tables, the
loss-curve figure) under a run dir."""
from __future__ import annotations

import html
import time
from pathlib import Path
from typing import Callable

import numpy as np

from vlgap.errors import VlgapError
from vlgap.io_utils import atomic_write_text

# The demo is seed 0 of the documented short run's synthetic-generator WSV, text-only and oracle cells (and the
# chance floor): the documented experiment's settings (read from EXPERIMENT_DEFAULTS) with the caption stage cut
# to DEMO_CAPTION_STEPS fixed steps, so its numbers equal those cells' (tested), and after `vlgap wsv experiment`
# (same cache) its data preparation is all cache hits.
DEMO_SYSTEMS = ("wsv", "text_only", "oracle")

#: The demo's caption stage: 1,500 fixed steps. The documented experiment trains until converged (3,000 / 3,400 /
#: 3,000 steps for the demo's rows at seed 0): its three demo cells would take about 12 min on 2 cores of the
#: machine that ran it (23 on the slower one of the short run), over the demo's 10 minutes. The short run with
#: these settings is documented beside it (results/wsv-demo-1500-steps).
DEMO_CAPTION_STEPS = 1500


def short_run_settings() -> dict:
    """The documented short run (all seeds, systems and generators): EXPERIMENT_DEFAULTS with the caption stage
    fixed at DEMO_CAPTION_STEPS steps."""
    from vlgap.wsv.experiment import EXPERIMENT_DEFAULTS

    train = {k: v for k, v in EXPERIMENT_DEFAULTS["train"].items() if k != "max_caption_steps"}
    return {**EXPERIMENT_DEFAULTS, "train": {**train, "caption_steps": DEMO_CAPTION_STEPS}}


def demo_config(**overrides):
    """The demo's ExperimentConfig: the documented short run restricted to seed 0, the first generator and
    DEMO_SYSTEMS (overrides: any ExperimentConfig field, e.g. a tiny config in tests)."""
    from vlgap.wsv.experiment import ExperimentConfig

    short = short_run_settings()
    conf = {**short, "seeds": (0,), "systems": DEMO_SYSTEMS, "generators": short["generators"][:1], **overrides}
    return ExperimentConfig(**conf)


def _thumbs(videos: list[np.ndarray], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from vlgap.probe.report import _save

    n, k = len(videos), 4
    fig, axes = plt.subplots(n, k, figsize=(k * 1.3, n * 1.3))
    axes = np.atleast_2d(axes)
    for i, v in enumerate(videos):
        for j, f in enumerate(np.linspace(0, len(v) - 1, k).round().astype(int)):
            axes[i, j].imshow(v[f])
            axes[i, j].axis("off")
    fig.tight_layout()
    _save(fig, path)
    plt.close(fig)


def loss_curve_figure(summary: dict, path: str | Path) -> Path:
    """The caption stage's training loss (mean over seeds, per 1/20 of the steps) of every row, one line each,
    and its validation loss (dashed, same colour) where the cells recorded one."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from vlgap.probe.report import _save
    from vlgap.wsv.experiment import system_label

    fig, ax = plt.subplots(figsize=(6.5, 3.8))
    for r in summary["rows"]:
        curve = r.get("loss", {}).get("caption", {}).get("curve_mean_over_seeds")
        if curve:
            gen = "" if r["system"] == "oracle" else f" ({r['generator']} generator)"
            line, = ax.plot([p[0] for p in curve], [p[1] for p in curve], marker=".", label=system_label(r["system"]) + gen)
            val = r.get("loss", {}).get("val", {}).get("curve_mean_over_seeds")
            if val:  # the held-out caption loss, same colour, dashed
                ax.plot([p[0] for p in val], [p[1] for p in val], ls="--", color=line.get_color())
    ax.set_xlabel("caption-stage step")
    ax.set_ylabel("loss (nats per token); dashed: validation")
    ax.set_title(f"Caption-stage loss, mean over {max((r['n_seeds'] for r in summary['rows']), default=0)} seeds")
    ax.legend(fontsize=7)
    fig.tight_layout()
    path = Path(path)
    _save(fig, path)
    plt.close(fig)
    return path


def _hygiene_words(h: dict) -> str:
    return (f"{h['id_overlap']} shared scene ids, {h['exact_text_overlap_after_removal']} training captions equal to an "
            f"evaluation reference (after removing {h['train_captions_identical_to_eval_references_removed']}), "
            f"{h.get('oracle_video_scene_specs_equal_to_eval_specs', 0)} oracle training videos showing an evaluation "
            "scene")


def _demo_worker(out: str, cfg, cache_dir, threads: int) -> None:
    """A second process training the demo's cells (the experiment's workers share a folder by cell locks)."""
    import torch

    from vlgap.wsv.experiment import run_experiment

    torch.set_num_threads(threads)
    run_experiment(out, cfg, cache_dir=cache_dir, log=lambda m: None)


def _demo_paired_latents(cfg, cache_dir, threads: int) -> None:
    """A helper process encoding the oracle's paired videos into the latent cache, while the demo's first
    process embeds the captions and encodes the synthetic corpus (the three largest inputs of the cells)."""
    import torch

    from vlgap.wsv.experiment import prepare

    torch.set_num_threads(threads)
    prepare(cfg, cache_dir=cache_dir, log=lambda m: None).paired["real"]


def run_demo(run_dir: str | Path = "runs/wsv-demo", *, cache_dir=None, n_show: int = 6, workers: int = 2,
             log: Callable[[str], None] | None = None, **overrides) -> Path:
    """Run the demo experiment and write RUN_DIR/sections/wsv.json plus RUN_DIR/wsv/index.html.

    workers: processes training the demo's cells side by side (as `vlgap wsv experiment` workers sharing
    one folder; each with this process's torch thread count); the cells are the same whatever the number."""
    from vlgap.probe.report import write_section
    from vlgap.wsv.experiment import (_cell_key, _log_default, _read_cell, prepare, render_video_set, run_experiment,
                                      summary_html, system_label)
    from vlgap.wsv.generate import available_styles

    log = log or _log_default
    run_dir = Path(run_dir)
    if "real" not in available_styles():  # an older renderer: evaluate on the synthetic style and say so
        overrides = {"eval_style": "synthetic", **overrides}
    cfg = demo_config(**overrides)
    from vlgap.counts import check_count

    workers = check_count("workers", workers, 1, flag="--workers", example=2)
    t0 = time.perf_counter()
    prep = prepare(cfg, cache_dir=cache_dir, log=log)
    helpers = []
    if workers > 1:
        import multiprocessing

        import torch

        ctx = multiprocessing.get_context("spawn")
        # every input the cells read is made once before the cell helpers start: the oracle's paired videos
        # in a helper of their own, the caption embeddings and the synthetic corpus here meanwhile
        paired = ctx.Process(target=_demo_paired_latents, args=(cfg, cache_dir, torch.get_num_threads())) \
            if "oracle" in cfg.systems else None
        if paired is not None:
            paired.start()
        _ = prep.text_emb, prep.val_text_emb  # embedded (and cached) here
        for g in cfg.generators:
            prep.synth[g]
        if paired is not None:
            paired.join()
            if paired.exitcode != 0:
                raise VlgapError(f"the demo process encoding the paired videos failed (exit code {paired.exitcode}); "
                                 "rerun `vlgap wsv demo` or use --workers 1 to see its error")
        helpers = [ctx.Process(target=_demo_worker, args=(str(run_dir / "wsv"), cfg, cache_dir,
                                                          torch.get_num_threads())) for _ in range(workers - 1)]
        for p in helpers:
            p.start()
    summary = run_experiment(run_dir / "wsv", cfg, cache_dir=cache_dir, log=log)
    if helpers:
        for p in helpers:
            p.join()
        if any(p.exitcode != 0 for p in helpers):
            raise VlgapError(f"a demo worker process failed (exit codes {[p.exitcode for p in helpers]}); rerun "
                             "`vlgap wsv demo` (finished cells are kept) or use --workers 1 to see its error")
        summary = run_experiment(run_dir / "wsv", cfg, cache_dir=cache_dir, log=log, summary_only=True)
    g0, s0 = cfg.generators[0], cfg.seeds[0]
    cells = {s: _read_cell(run_dir / "wsv" / "cells" / f"{g0}-{s}-s{s0}.json",
                           _cell_key(cfg, "cell", generator=g0, system=s, seed=s0), log) for s in cfg.systems}
    if any(c is None for c in cells.values()):  # another worker still on it, or removed meanwhile
        raise VlgapError(f"{run_dir / 'wsv' / 'cells'}: a demo cell is missing; rerun `vlgap wsv demo`")
    n_show = min(n_show, len(prep.eval_ids))
    show = prep.eval_ids[:n_show]
    videos = list(render_video_set(cfg, "eval", prep.eval_specs[:n_show]))
    rel, rel_loss = "wsv/thumbnails.png", "wsv/loss_curves.png"
    _thumbs(videos, run_dir / rel)
    loss_curve_figure(summary, run_dir / rel_loss)

    def captioned(s: str, i: str) -> str:
        att = cells[s]["scores"]["attributes"]["per_item"][i]
        said = ", ".join(f"{k} {v:.2f}" for k, v in att.items())
        return f"<td>{html.escape(cells[s]['predictions'][i])}<br><small>{html.escape(said)}</small></td>"

    rows = []
    for i in show:
        rows.append("<tr>" + f"<td>{html.escape(i)}</td><td>{html.escape(prep.eval_refs[i][0])}</td>"
                    + "".join(captioned(s, i) for s in cfg.systems) + "</tr>")
    head = "<tr><th>video (row of the figure)</th><th>a reference</th>" + "".join(
        f"<th>{html.escape(system_label(s))}</th>" for s in cfg.systems) + "</tr>"
    names = ", ".join(system_label(s) for s in cfg.systems)
    steps = cfg.train.get("caption_steps")
    length = (f"{steps:,} caption steps, fixed: the documented short run; the README's experiment trains until "
              "converged" if steps and not cfg.train.get("max_caption_steps") else "trained until converged")
    body = (f"<p>Seed {s0} of the documented experiment's cells ({length}) for {html.escape(names)}, and the "
            f"chance floor "
            f"(each video gets a random training caption). The text-only systems learn from {len(prep.corpus)} "
            f"captions of {cfg.n_train} shapes scenes and never see a video of them; the oracle ceiling learns from "
            f"the same captions paired with their own scenes rendered in the '{html.escape(cfg.eval_style)}' style. "
            f"All are scored on {cfg.n_eval} held-out scenes rendered in that style ({html.escape(_hygiene_words(prep.hygiene))}). "
            f"Beside CIDEr, each caption is read back into a scene spec and checked against the video's true shape, "
            f"colour, background and events (an attribute it does not state counts as wrong). Thumbnails: frames "
            f"1, 6, 11, 16 of the first {n_show} evaluation videos, top to bottom; under each caption its "
            f"attribute scores.</p>"
            f"<img src='{rel}' alt='evaluation video thumbnails' style='max-width:360px'>"
            f"<table><thead>{head}</thead><tbody>{''.join(rows)}</tbody></table>{summary_html(summary)}"
            f"<img src='{rel_loss}' alt='caption-stage training loss curves' style='max-width:560px'>"
            f"<p>Wall time {time.perf_counter() - t0:.0f} s.</p>")
    write_section(run_dir, "wsv", "Text-only video captioning (WSV demo)", body, [rel, rel_loss])
    page = run_dir / "wsv" / "index.html"
    atomic_write_text(page, "<!doctype html><meta charset='utf-8'><title>WSV demo</title>"
                      "<style>table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;"
                      "padding:3px 6px;vertical-align:top}</style>"
                      + body.replace(f"src='{rel}'", "src='thumbnails.png'").replace(f"src='{rel_loss}'",
                                                                                   "src='loss_curves.png'"))
    return page
