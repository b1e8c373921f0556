"""`vlgap wsv demo`: one seed of WSV-offline and the text-only baseline on the embedded default, written
as a report section (sample captions next to video thumbnails, score table, falsifier) under a run dir."""
from __future__ import annotations

import html
import json
import time
from pathlib import Path
from typing import Callable

import numpy as np

from vlgap.errors import VlgapError
from vlgap.io_utils import atomic_write_text

# The demo is seed 0 of the experiment's synthetic-generator WSV and text-only cells: same data sizes and
# training settings, so after `vlgap wsv experiment` (same cache) its data preparation is all cache hits.
DEMO = dict(n_train=80, n_eval=60, n_unlabelled=20, seeds=(0,), systems=("wsv", "text_only"),
            generators=("synthetic",), n_bootstrap=300, n_permutations=300, c2st_permutations=30,
            train=dict(head_steps=150, polisher_steps=150, lm_pretrain_steps=200, caption_steps=400, lm_dim=64,
                       lm_layers=2, prompter_dim=32, checkpoint_every=50))


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


def run_demo(run_dir: str | Path = "runs/wsv-demo", *, cache_dir=None, n_show: int = 6,
             log: Callable[[str], None] | None = None, **overrides) -> Path:
    """Run the demo experiment and write RUN_DIR/sections/wsv.json plus RUN_DIR/wsv/index.html."""
    from vlgap.probe.report import write_section
    from vlgap.wsv.experiment import SYSTEM_NAMES, ExperimentConfig, _log_default, run_experiment, summary_markdown
    from vlgap.wsv.generate import available_styles, render_styled

    log = log or _log_default
    run_dir = Path(run_dir)
    conf = {**DEMO, **overrides}
    if "real" not in available_styles():  # an older renderer: evaluate on the synthetic style and say so
        conf["eval_style"] = "synthetic"
    cfg = ExperimentConfig(**conf)
    t0 = time.perf_counter()
    summary = run_experiment(run_dir / "wsv", cfg, cache_dir=cache_dir, log=log)
    from vlgap.wsv.experiment import prepare

    prep = prepare(cfg, cache_dir=cache_dir, log=log)
    from vlgap.wsv.experiment import _cell_key, _read_cell

    g0, s0 = cfg.generators[0], cfg.seeds[0]
    cells = {s: _read_cell(run_dir / "wsv" / "cells" / f"{g0}-{s}-s{s0}.json",
                           _cell_key(cfg, "cell", generator=g0, system=s, seed=s0), log) for s in cfg.systems}
    if any(c is None for c in cells.values()):  # another worker still on it, or removed meanwhile
        raise VlgapError(f"{run_dir / 'wsv' / 'cells'}: a demo cell is missing; rerun `vlgap wsv demo`")
    show = prep.eval_ids[:n_show]
    videos = [render_styled(spec, cfg.n_frames, cfg.size, cfg.eval_style, 10**6 + j)
              for j, spec in enumerate(prep.eval_specs[:n_show])]
    rel = "wsv/thumbnails.png"
    _thumbs(videos, run_dir / rel)
    rows = []
    for j, i in enumerate(show):
        cols = [f"<td>{html.escape(i)}</td>", f"<td>{html.escape(prep.eval_refs[i][0])}</td>"]
        cols += [f"<td>{html.escape(cells[s]['predictions'][i])}</td>" for s in cfg.systems]
        rows.append("<tr>" + "".join(cols) + "</tr>")
    head = "<tr><th>video (row of the figure)</th><th>a reference</th>" + "".join(
        f"<th>{html.escape(SYSTEM_NAMES[s])}</th>" for s in cfg.systems) + "</tr>"
    md = summary_markdown(summary)
    body = (f"<p>One seed of WSV-offline and the text-only baseline, trained on {len(prep.corpus)} captions of "
            f"{cfg.n_train} shapes scenes (text only), evaluated on {cfg.n_eval} held-out scenes rendered in the "
            f"'{cfg.eval_style}' style (disjoint by id and exact text: {html.escape(json.dumps(prep.hygiene))}). "
            f"Thumbnails: frames 1, 6, 11, 16 of the first {n_show} evaluation videos, top to bottom.</p>"
            f"<img src='{rel}' alt='evaluation video thumbnails' style='max-width:360px'>"
            f"<table>{head}{''.join(rows)}</table><pre>{html.escape(md)}</pre>"
            f"<p>Wall time {time.perf_counter() - t0:.0f} s.</p>")
    write_section(run_dir, "wsv", "Text-only video captioning (WSV demo)", body, [rel])
    page = run_dir / "wsv" / "index.html"
    atomic_write_text(page, "<!doctype html><meta charset='utf-8'><title>WSV demo</title>"
                      + body.replace(f"src='{rel}'", "src='thumbnails.png'"))
    return page
