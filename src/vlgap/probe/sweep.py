"""`vlgap sweep`: alignment over a grid of n_f x n_c for every vision x text encoder pair.

Features come from the cache (extracted once per encoder for all grid values). Each cell runs the full
layer search, a bootstrap interval that re-selects the best pair inside every resample, and a
permutation null. Finished cells are stored one file each under RUN_DIR/cells, so a killed sweep
resumes where it stopped. Then the scaling law is fitted per encoder pair.
"""
from __future__ import annotations

import csv
import io
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from vlgap.data.manifest import Manifest, read_manifest
from vlgap.errors import VlgapError
from vlgap.features.extract import ExtractResult, extract
from vlgap.features.source import layer_names
from vlgap.io_utils import atomic_write_bytes, atomic_write_json, atomic_write_text
from vlgap.keywords import renamed_fields
from vlgap.probe.report import matrix_name
from vlgap.progress import progress_bar, stderr_console

#: residual-bootstrap refits for the law's parameter intervals (each a warm-started refit)
FIT_BOOTSTRAP = 300

ROW_FIELDS = ["vision", "text", "n_f", "n_c", "score", "ci_lo", "ci_hi", "p_value", "null_mean", "x_layer", "y_layer",
              "x_layer_name", "y_layer_name", "n", "k", "chance", "metric"]


@renamed_fields(bootstrap="n_bootstrap", permutations="n_permutations")
@dataclass
class SweepConfig:
    manifest: str
    vision: list[str]
    text: list[str]
    n_frames: list[int]
    n_captions: list[int]
    k: int = 10
    metric: str = "mutual_knn"
    n_bootstrap: int = 200
    n_permutations: int = 200
    seed: int = 0
    device: str = "cpu"
    dtype: str = "float32"
    image_size: int | None = None
    text_pooling: str | None = None
    #: image encoders on video: mean | segments:S | meandiff (vlgap.features.temporal_pooling)
    temporal_pooling: str = "mean"
    batch_size: int = 32
    skip_bad: bool = False
    cache_dir: str | None = None
    fit: bool = True
    #: feature preparation (vlgap.metrics.layer_search.PRESETS), e.g. "platonic-rep"; None: L2 only
    preset: str | None = None
    #: let hf: models run code from their repository (VideoMAEv2); never implied
    trust_remote_code: bool = False
    #: every encoder with random weights (speed tests): cached apart, labelled "random weights" in rows
    random_weights: bool = False

    def __post_init__(self):
        from vlgap.features.temporal_pooling import parse_mode

        self.temporal_pooling = parse_mode(self.temporal_pooling)

    def to_dict(self) -> dict[str, Any]:
        out = dict(self.__dict__)
        if not out["trust_remote_code"]:
            del out["trust_remote_code"]  # older run folders' configs stay equal
        return out


@dataclass
class SweepResult:
    run_dir: Path
    rows: list[dict]
    fits: dict[str, dict] = field(default_factory=dict)
    dropped: list[dict] = field(default_factory=list)


def score_cell(xs: list[np.ndarray], ys: list[np.ndarray], *, k: int, metric: str, n_bootstrap: int, n_permutations: int,
               seed: int, device: str = "cpu", preset: str | None = None) -> dict[str, Any]:
    """Best layer pair, its bootstrap interval (selection inside each resample) and permutation p-value."""
    from vlgap.metrics.layer_search import layer_search

    # xs / ys: per-layer arrays, or LayerStates from `precompute_layers` (reused across cells)
    res = layer_search(xs, ys, k=k, metric=metric, n_bootstrap=n_bootstrap, n_permutations=n_permutations, seed=seed,
                       device=device, preset=preset)
    nan = float("nan")
    ci = res.ci
    return {"matrix": np.asarray(res.scores, dtype=np.float64), "score": float(res.best_score),
            "x_layer": int(res.x_layer), "y_layer": int(res.y_layer),
            "chance": float(res.chance) if res.chance is not None else nan, "n": int(res.n),
            "k": int(res.k) if res.k is not None else 0,
            "ci_lo": float(ci[0]) if ci else nan, "ci_hi": float(ci[1]) if ci else nan,
            "p_value": float(res.p_value) if res.p_value is not None else nan,
            "null_mean": float(res.null_mean) if res.null_mean is not None else nan}


def weights_fields(vision_record: dict, text_record: dict) -> dict[str, str]:
    """{"vision_weights": "random weights"} / {"text_weights": ...} for a side whose features came from
    random weights (asked for, or a config: spec); nothing for trained weights. Every JSON result and
    table shows it beside the encoder's name."""
    out = {}
    for side, rec in (("vision", vision_record), ("text", text_record)):
        note = rec.get("weights_note")
        if note is None:
            from vlgap.encoders.registry import weights_note

            note = weights_note(rec.get("encoder"))
        if note:
            out[f"{side}_weights"] = note
    return out


def _common_ids(results: list[ExtractResult]) -> tuple[list[str], list[dict]]:
    """Items present in every feature set (bad items skipped by any encoder are dropped everywhere)."""
    sets = [fs for r in results for fs in r.features.values()]
    order = sets[0].ids
    keep = set(order)
    for fs in sets[1:]:
        keep &= set(fs.ids)
    dropped = [{"id": i, "reason": "missing from some feature set (bad item for one encoder or n)"}
               for i in order if i not in keep]
    return [i for i in order if i in keep], dropped


def run_sweep(cfg: SweepConfig, run_dir: str | Path, progress: bool = True,
              encoders: dict[str, Any] | None = None, ray: str | bool | None = None,
              ray_workers: int | None = None) -> SweepResult:
    """Run (or resume) a sweep. `encoders` may map names to already-loaded encoder objects.

    ray: "auto" or a cluster address: extraction runs on Ray (`ray_workers` encoder actors) and every
    (vision, text, n_f, n_c) cell is an independent Ray task (vlgap.distributed.sweep); cells keep
    their seeds (seed + cell number), so the table equals the serial sweep's."""
    run = Path(run_dir)
    run.mkdir(parents=True, exist_ok=True)
    if len(cfg.vision) == 0 or len(cfg.text) == 0:
        raise VlgapError("a sweep needs at least one vision encoder and one text encoder")
    man: Manifest = read_manifest(cfg.manifest)
    if cfg.k >= len(man) - 1:
        raise VlgapError(f"k={cfg.k} needs more than k+1 items; the manifest has {len(man)}")
    atomic_write_json(run / "config.json", cfg.to_dict())
    t0 = time.perf_counter()
    common = dict(cache_dir=cfg.cache_dir, device=cfg.device, dtype=cfg.dtype, skip_bad=cfg.skip_bad,
                  batch_size=cfg.batch_size, progress=progress, ray=ray, ray_workers=ray_workers,
                  trust_remote_code=cfg.trust_remote_code, random_weights=cfg.random_weights)
    loaded = encoders or {}
    vis = {v: extract(man, v, n_frames=cfg.n_frames, image_size=cfg.image_size, temporal_pooling=cfg.temporal_pooling,
                      loaded_encoder=loaded.get(v), **common) for v in cfg.vision}
    txt = {t: extract(man, t, n_captions=cfg.n_captions, pooling=cfg.text_pooling, loaded_encoder=loaded.get(t),
                      **common) for t in cfg.text}
    ids, dropped = _common_ids(list(vis.values()) + list(txt.values()))
    if len(ids) <= cfg.k + 1:
        raise VlgapError(f"only {len(ids)} items are usable in every feature set; k={cfg.k} needs more")
    stderr_console.print(f"features ready in {time.perf_counter() - t0:.1f} s; N = {len(ids)} items"
                         + (f" ({len(dropped)} dropped, see dropped_items.jsonl)" if dropped else ""))
    if dropped:
        atomic_write_text(run / "dropped_items.jsonl", "".join(json.dumps(d) + "\n" for d in dropped))
    cells_dir, mats_dir = run / "cells", run / "matrices"
    cells = [(v, t, nf, nc) for v in cfg.vision for t in cfg.text for nf in cfg.n_frames for nc in cfg.n_captions]
    from functools import lru_cache

    from vlgap.metrics.layer_search import precompute_layers

    @lru_cache(maxsize=None)
    def features(modality: str, name: str, value: int):
        return (vis if modality == "v" else txt)[name].features[value].subset(ids)

    @lru_cache(maxsize=None)
    def side(modality: str, name: str, value: int):
        """Neighbour lists of every layer of one feature set, computed once for all cells that use it."""
        return precompute_layers(features(modality, name, value).layers, k=cfg.k, metric=cfg.metric,
                                 device=cfg.device, preset=cfg.preset, for_bootstrap=cfg.n_bootstrap > 0,
                                 name=f"{name} {modality}={value}")

    def serial(todo):
        for ci in todo:
            v, t, nf, nc = cells[ci]
            yield ci, score_cell(side("v", v, nf), side("t", t, nc), k=cfg.k, metric=cfg.metric,
                                 n_bootstrap=cfg.n_bootstrap, n_permutations=cfg.n_permutations, seed=cfg.seed + ci,
                                 device=cfg.device, preset=cfg.preset)

    by_cell: dict[int, dict] = {}
    todo = []
    for ci, cell in enumerate(cells):
        cell_path = cells_dir / f"{matrix_name(*cell)[:-4]}.json"
        done = json.loads(cell_path.read_text()) if cell_path.is_file() else None
        # a cell of another preset, temporal pooling or weights (random / trained) is redone
        if (done is not None and done.get("preset") == cfg.preset
                and done.get("temporal_pooling", "mean") == cfg.temporal_pooling
                and bool(done.get("random_weights")) == cfg.random_weights):
            by_cell[ci] = done
        else:
            todo.append(ci)
    if ray and todo:
        from vlgap.distributed.sweep import score_cells

        results = score_cells(cfg, cells, todo, features, score_cell, ray=ray)
    else:
        results = serial(todo)
    with progress_bar(progress) as prog:
        task = prog.add_task("alignment cells" + (" (ray)" if ray else ""), total=len(cells), unit="cells")
        prog.update(task, completed=len(cells) - len(todo))
        for ci, res in results:  # in completion order with Ray; each cell is written when it arrives
            v, t, nf, nc = cells[ci]
            name = matrix_name(v, t, nf, nc)[:-4]
            buf = io.BytesIO()
            np.save(buf, res.pop("matrix"))
            atomic_write_bytes(mats_dir / f"{name}.npy", buf.getvalue())
            x_names, y_names = layer_names(features("v", v, nf)), layer_names(features("t", t, nc))
            row = {"vision": v, "text": t, "n_f": nf, "n_c": nc, **res, "metric": cfg.metric, "preset": cfg.preset,
                   "temporal_pooling": cfg.temporal_pooling,
                   **weights_fields(features("v", v, nf).record, features("t", t, nc).record),
                   **({"random_weights": True} if cfg.random_weights else {}),
                   "x_layer_name": x_names[res["x_layer"]] if res["x_layer"] < len(x_names) else "",
                   "y_layer_name": y_names[res["y_layer"]] if res["y_layer"] < len(y_names) else ""}
            atomic_write_json(cells_dir / f"{name}.json", row)
            by_cell[ci] = row
            prog.advance(task)
    rows = [by_cell[ci] for ci in range(len(cells))]
    fits = fit_pairs(rows, progress=progress) if cfg.fit else {}
    write_tables(run, rows, cfg, fits)
    return SweepResult(run, rows, fits, dropped)


def fit_pairs(rows: list[dict], progress: bool = False) -> dict[str, dict]:
    """Fit the scaling law per encoder pair; a grid too small to identify it is reported, not fatal.
    With `progress`, each pair's bootstrap refits count up on stderr (seconds each on a CPU)."""
    from vlgap.progress import counter
    from vlgap.scaling import fit_scaling

    fits = {}
    for v, t in dict.fromkeys((r["vision"], r["text"]) for r in rows):
        sub = [r for r in rows if r["vision"] == v and r["text"] == t]
        grid = [{"n_f": r["n_f"], "n_c": r["n_c"], "score": r["score"]} for r in sub]
        try:
            with counter(f"scaling law {v} x {t}: bootstrap refits", FIT_BOOTSTRAP, "refits", progress) as report:
                fits[f"{v}|{t}"] = fit_scaling(grid, n_bootstrap=FIT_BOOTSTRAP,
                                               progress=lambda done, total: report(done)).to_dict()
        except VlgapError as err:
            fits[f"{v}|{t}"] = {"error": str(err)}
    return fits


def write_tables(run: Path, rows: list[dict], cfg: SweepConfig, fits: dict[str, dict]) -> None:
    rows = sorted(rows, key=lambda r: (r["vision"], r["text"], r["n_f"], r["n_c"]))
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=ROW_FIELDS, extrasaction="ignore")
    w.writeheader()
    w.writerows(rows)
    atomic_write_text(run / "sweep.csv", buf.getvalue())
    interval = (f"{cfg.n_bootstrap} bootstrap resamples over items, best layer pair re-selected in each"
                if cfg.n_bootstrap else "none")
    atomic_write_json(run / "sweep.json", {"rows": rows, "config": dict(cfg.to_dict(), interval=interval),
                                           "description": f"manifest {cfg.manifest}"})
    atomic_write_json(run / "scaling.json", fits)
