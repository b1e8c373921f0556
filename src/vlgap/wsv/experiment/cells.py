"""The experiment's cells: one (generator, system, seed) trained and scored on the held-out real-style
videos, the chance floor, each cell's loss curves, and the cells' keys (everything that determines one:
the whole configuration, a row's own settings). Cells are sealed and read back verified by `vlgap.runs`."""
from __future__ import annotations

import math
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any, Callable

import numpy as np

from vlgap.runs.cells import read_cell, write_cell
from vlgap.wsv.convergence import late_fall, validation_curve
from vlgap.wsv.experiment.config import ExperimentConfig, _log_default, split_system
from vlgap.wsv.experiment.prepare import Prepared

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

    base, over = split_system(system)[0], cfg.row_settings(system)
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
    over = cfg.row_settings(s)
    return _cell_key(cfg, "cell", generator=g, system=s, seed=seed, **({"row_settings": over} if over else {}))


def _read_cell(path: Path, key: dict[str, Any], log: Callable[[str], None]) -> dict[str, Any] | None:
    """A result file of the experiment, verified (`vlgap.runs.cells.read_cell`), or None."""
    return read_cell(path, key, what="WSV result", report=log)


#: a result file of the experiment, sealed under its key (`vlgap.runs.cells.write_cell`)
_write_cell = write_cell
