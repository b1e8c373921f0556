"""`vlgap sweep`: alignment over a grid of n_f x n_c for every vision x text encoder pair.

Before anything is extracted or recorded, every item is checked against the grid (`vlgap.probe.items`:
max n_f frames, max n_c captions, readable media); every cell uses one item set, and each item left out
is named with its reasons in the console, dropped_items.jsonl, sweep.json ("items") and the report.
Features come from the cache (extracted once per encoder for all grid values). Each cell runs the full
layer search, a bootstrap interval that re-selects the best pair inside every resample, and a
permutation null. Finished cells are stored one file each under RUN_DIR/cells, so a killed sweep
resumes where it stopped. Then the scaling law is fitted per encoder pair.

Reuse (vlgap.reuse): RUN_DIR records the sweep's configuration with the data's fingerprint
(run_config.json); a rerun with another configuration or manifest is refused with the differences
(`force=True` / `--force` takes the folder over). Every cell and its score matrix is sealed with a key
of all that determines it (data fingerprint, the items used, encoders, n_f, n_c, every setting, the
cell's seed, the format); a cell whose key differs, or whose bytes changed after they were written,
is reported in one line and recomputed.
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

from vlgap.data.frame_convert import DECODING
from vlgap.data.manifest import Manifest, read_manifest
from vlgap.errors import VlgapError
from vlgap.features.extract import extract
from vlgap.features.source import layer_names
from vlgap.io_utils import atomic_write_json, atomic_write_text, make_folder, to_json
from vlgap.keywords import renamed_fields
from vlgap.probe.cell_score import score_cell, score_cell_draws
from vlgap.probe.items import check_sweep, settle
from vlgap.probe.report import matrix_name
from vlgap.progress import progress_bar, stderr_console
from vlgap.runs.cells import read_cell, write_cell
from vlgap.runs.folder import is_legacy_folder, open_run_folder
from vlgap.stage_times import stage

#: residual-bootstrap refits for the law's parameter intervals (each a warm-started refit)
FIT_BOOTSTRAP = 300
#: version of the cell files and their keys: a change makes every older cell stale (recomputed)
SWEEP_FORMAT = 2
#: resampled neighbour lists kept across a sweep's cells (vlgap.metrics.knn.ResampleMemo)
RESAMPLE_MEMO_BYTES = 1024 * 2**20
#: config fields that do not change any number (where files live, throughput)
RUN_IGNORE = ("manifest", "cache_dir", "batch_size")

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
    #: number format of the text encoders (None: `dtype`); e.g. bfloat16 text beside float32 vision
    text_dtype: str | None = None
    image_size: int | None = None
    text_pooling: str | None = None
    #: image encoders on video: mean | segments:S | meandiff (vlgap.features.temporal_pooling)
    temporal_pooling: str = "mean"
    batch_size: int = 32
    skip_bad: bool = False
    #: keep videos with fewer frames than n_f (frames repeat; warned and listed), else an error or a skip
    allow_repeated_frames: bool = False
    cache_dir: str | None = None
    fit: bool = True
    #: feature preparation (vlgap.metrics.layer_search.PRESETS), e.g. "platonic-rep"; None: L2 only
    preset: str | None = None
    #: let hf: models run code from their repository (VideoMAEv2); never implied
    trust_remote_code: bool = False
    #: every encoder with random weights (speed tests): cached apart, labelled "random weights" in rows
    random_weights: bool = False
    #: R random draws of each item's n_c captions (seeded by `seed`); 1: the first n_c (the paper).
    #: The score is the mean over draws, its interval items + draws (vlgap.metrics.draws)
    caption_draws: int = 1
    #: frame-sampling strategies run side by side (vlgap.data.sampling): uniform (the paper) | random |
    #: stride:S | keyframes; a strategy other than uniform appears as the vision encoder "NAME [strategy]"
    frame_sampling: list[str] = field(default_factory=lambda: ["uniform"])

    def __post_init__(self):
        from vlgap.counts import check_count
        from vlgap.features.temporal_pooling import check_frames, parse_mode

        from vlgap.data.sampling import parse_frame_samplings

        from vlgap.runtime import parse_dtype, parse_text_dtype

        # auto resolved now, against the sweep's device: keys and records hold bfloat16 or float32
        self.dtype = parse_dtype(self.dtype, device=self.device)
        self.text_dtype = parse_text_dtype(self.text_dtype, self.dtype, device=self.device)
        self.temporal_pooling = parse_mode(self.temporal_pooling)
        self.frame_sampling = parse_frame_samplings(self.frame_sampling)
        from vlgap.metrics.alignment import METRIC_NAMES
        from vlgap.metrics.layer_search import PRESETS

        if self.metric not in METRIC_NAMES:
            raise VlgapError(f"metric={self.metric!r}: choose one of {', '.join(METRIC_NAMES)}")
        if self.preset is not None and self.preset not in PRESETS:
            raise VlgapError(f"preset={self.preset!r}: choose one of {', '.join(PRESETS)}, or none")
        self.caption_draws = check_count("caption_draws", self.caption_draws, 1, flag="--caption-draws", example=5)
        self.k = check_count("k", self.k, 1, flag="--k", example=10)
        self.n_bootstrap = check_count("n_bootstrap", self.n_bootstrap, 0, flag="--bootstrap", example=200)
        self.n_permutations = check_count("n_permutations", self.n_permutations, 0, flag="--permutations",
                                          example=200)
        self.batch_size = check_count("batch_size", self.batch_size, 1, flag="--batch-size", example=32)
        self.image_size = check_count("image_size", self.image_size, 1, flag="--image-size", example=224,
                                      allow_none=True)
        from vlgap.counts import count_list, name_list

        for name, flag in (("n_frames", "--n-frames"), ("n_captions", "--n-captions")):
            setattr(self, name, count_list(name, getattr(self, name), 1, flag=flag))
        for name, flag in (("vision", "--vision"), ("text", "--text")):
            setattr(self, name, name_list(name, getattr(self, name), flag=flag, example="mobilenet_v2,minilm"))
        check_frames(self.temporal_pooling, self.n_frames, "--n-frames")

    def to_dict(self) -> dict[str, Any]:
        out = dict(self.__dict__)
        # options at their defaults are left out: older run folders' configs (and cell keys) stay equal
        for flag in ("trust_remote_code", "allow_repeated_frames"):
            if not out[flag]:
                del out[flag]
        if out["caption_draws"] == 1:
            del out["caption_draws"]
        if out["frame_sampling"] == ["uniform"]:
            del out["frame_sampling"]
        if out["text_dtype"] is None:
            del out["text_dtype"]
        return out

    @property
    def text_encoder_dtype(self) -> str:
        """The text encoders' number format: `text_dtype`, else `dtype`."""
        return self.text_dtype or self.dtype

    def vision_variants(self) -> dict[str, tuple[str, str]]:
        """The sweep's vision rows: {row name: (encoder, frame sampling)}; uniform sampling keeps the
        encoder's own name, another strategy is "NAME [strategy]"."""
        return {vision_variant(v, fs): (v, fs) for v in self.vision for fs in self.frame_sampling}


def vision_variant(encoder: str, frame_sampling: str) -> str:
    """A sweep row's vision name for an encoder under a frame-sampling strategy."""
    return encoder if frame_sampling == "uniform" else f"{encoder} [{frame_sampling}]"


@dataclass
class SweepResult:
    run_dir: Path
    rows: list[dict]
    fits: dict[str, dict] = field(default_factory=dict)
    #: the items left out of every cell, each with its reasons (dropped_items.jsonl)
    dropped: list[dict] = field(default_factory=list)
    #: N kept and left out, why, and what each cell could use on its own (sweep.json "items", probe.items)
    items: dict = field(default_factory=dict)

    def to_frame(self):
        """pandas DataFrame, one row per sweep cell (encoder pair x n_f x n_c), the sweep.csv columns
        typed: e.g. `df.plot.scatter(x="n_c", y="score")` or a seaborn lineplot over n_f by encoder."""
        from vlgap.frames import FLOAT, INT, STRING, make_frame, require_pandas
        require_pandas(type(self).__name__)

        types = {name: STRING for name in ("vision", "text", "x_layer_name", "y_layer_name", "metric")}
        types.update({name: INT for name in ("n_f", "n_c", "x_layer", "y_layer", "n", "k")})
        return make_frame(self.rows, {name: types.get(name, FLOAT) for name in ROW_FIELDS}, "SweepResult")


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


def data_record(man: Manifest) -> dict[str, Any]:
    """What identifies the data of a sweep: the manifest's content fingerprint and its size."""
    return {"manifest_fingerprint": man.fingerprint(), "n_items": len(man)}


def run_record(cfg: SweepConfig, man: Manifest) -> dict[str, Any]:
    """The configuration a run folder records (vlgap.reuse.claim_run_folder)."""
    return {**cfg.to_dict(), "data": data_record(man), "format": SWEEP_FORMAT}


def cell_key(cfg: SweepConfig, data: dict[str, Any], items_digest: str, cell: tuple, seed: int,
             weights: dict[str, str | None] | None = None) -> dict[str, Any]:
    """Everything that determines one cell's numbers (its row and its score matrix). `weights`: the
    identity of each model's weights (the features' `weights_id`, vlgap.encoders.identity) by row name;
    models without one (bundled names, random weights) keep the keys they had. "decoding": how the
    media were decoded (vlgap.data.frame_convert.DECODING): cells scored on features of frames decoded
    by an earlier reader are recomputed, as those features are."""
    v, t, nf, nc = cell
    settings = {k: v_ for k, v_ in cfg.to_dict().items()
                if k not in (*RUN_IGNORE, "vision", "text", "n_frames", "n_captions", "seed", "fit")}
    key = {"format": SWEEP_FORMAT, "data": data, "items": items_digest, "vision": v, "text": t, "n_f": nf,
           "n_c": nc, "seed": seed, "decoding": DECODING, **settings}
    for side, name in (("vision", v), ("text", t)):
        if (weights or {}).get(name):
            key[f"{side}_weights_id"] = weights[name]
    return key


#: what a sweep folder of an older vlgap holds without a run record (its cells are unsealed, hence
#: recomputed: taking it over mixes nothing)
LEGACY_FILES = ("config.json", "cells")


#: what a sweep (or demo) computes in its folder: a folder without any of them has nothing to protect
RESULT_FILES = ("cells", "matrices", "sweep.json", "sweep.csv", "sections")


def legacy_run_folder(run: Path) -> bool:
    """A sweep folder written before run folders recorded their configuration."""
    return is_legacy_folder(run, LEGACY_FILES)


def claim_sweep_folder(run: Path, kind: str, record: dict[str, Any], *, force: bool = False,
                       ignore: tuple[str, ...] = (), formats: dict[str, Any] | None = None) -> bool:
    """The sweep's run folder (`vlgap.runs.open_run_folder`, with the run's number formats), also taking
    over one of an older vlgap, or one whose run computed no cell (refused or stopped before its first)."""
    return open_run_folder(run, kind, record, force=force, ignore=ignore, legacy=LEGACY_FILES, log=_report,
                           formats=formats, results=RESULT_FILES)


def _report(line: str) -> None:
    stderr_console.print(f"vlgap: {line}", highlight=False, soft_wrap=True)


def lazy_encoders(cfg: SweepConfig, skip=()) -> dict[str, Any]:
    """One `LazyEncoder` per vision and text encoder of the sweep, with the sweep's settings: each loads
    on first use only (not at all when every feature is cached). `vlgap demo` hands them to the sweep
    and then to its temporal sections, so no encoder loads twice. Names in `skip` (given
    encoders) get none."""
    from vlgap.encoders.registry import check_encoder_name, get_encoder
    from vlgap.features.source import LazyEncoder

    vision, text = [v for v in cfg.vision if v not in skip], [t for t in cfg.text if t not in skip]
    for name in (*vision, *text):  # a misspelt name is refused now, not at its first use
        check_encoder_name(name, cfg.cache_dir)

    def lazy(name: str, vision: bool) -> LazyEncoder:
        opts: dict[str, Any] = {"pooling": None if vision else cfg.text_pooling,
                                "image_size": cfg.image_size if vision else None}
        opts = {k: v for k, v in opts.items() if v}
        if cfg.trust_remote_code:
            opts["trust_remote_code"] = True
        if cfg.random_weights:
            opts["random_weights"] = True
        dtype = cfg.dtype if vision else cfg.text_encoder_dtype
        return LazyEncoder(lambda: get_encoder(name, device=cfg.device, dtype=dtype, **opts), name)

    return {**{v: lazy(v, True) for v in vision}, **{t: lazy(t, False) for t in text}}


def run_sweep(cfg: SweepConfig, run_dir: str | Path, progress: bool = True,
              encoders: dict[str, Any] | None = None, ray: str | bool | None = None,
              ray_workers: int | None = None, *, force: bool = False, claim: bool = True) -> SweepResult:
    """Run (or resume) a sweep. `encoders` may map names to already-loaded encoder objects.

    ray: "auto" or a cluster address: extraction runs on Ray (`ray_workers` encoder actors) and every
    (vision, text, n_f, n_c) cell is an independent Ray task (vlgap.distributed.sweep); cells keep
    the sweep's seed (the same resamples in every cell), so the table equals the serial sweep's.
    force: take over a run folder that holds another configuration (its cells are recomputed, by
    their keys); without it such a folder is refused with the differences. claim=False: the caller
    (`vlgap demo`) has claimed the folder for its own configuration.

    The two halves, `sweep_features` (every encoder's features) and `finish_sweep` (cells, laws,
    tables), may run in different threads (`vlgap demo` runs the second beside the next encoders)."""
    return finish_sweep(sweep_features(cfg, run_dir, progress, encoders, ray, ray_workers, force=force, claim=claim))


@dataclass
class SweepFeatures:
    """A sweep's features, extracted and checked: what `finish_sweep` scores."""

    cfg: SweepConfig
    run: Path
    record: dict[str, Any]
    vis: dict[str, ExtractResult]
    txt_draws: dict[str, list[ExtractResult]]
    draws: list
    ids: list[str]
    dropped: list[dict]
    progress: bool
    ray: str | bool | None
    plan: Any


def sweep_features(cfg: SweepConfig, run_dir: str | Path, progress: bool = True,
                   encoders: dict[str, Any] | None = None, ray: str | bool | None = None,
                   ray_workers: int | None = None, *, force: bool = False, claim: bool = True) -> SweepFeatures:
    """The first half of `run_sweep`: the run folder claimed, every encoder's features extracted (or
    read from the cache) and the items that every feature set holds."""
    run = Path(run_dir)
    if len(cfg.vision) == 0 or len(cfg.text) == 0:
        raise VlgapError("a sweep needs at least one vision encoder and one text encoder")
    man: Manifest = read_manifest(cfg.manifest)
    plan = check_sweep(cfg, man, encoders, ray=ray, progress=progress)
    for line in plan.lines():
        _report(line)
    record = run_record(cfg, man)
    if claim:
        claim_sweep_folder(run, "sweep", record, force=force, ignore=RUN_IGNORE)
    make_folder(run)
    atomic_write_json(run / "config.json", cfg.to_dict())
    t0 = time.perf_counter()
    common = dict(cache_dir=cfg.cache_dir, device=cfg.device, dtype=cfg.dtype, skip_bad=cfg.skip_bad,
                  allow_repeated_frames=cfg.allow_repeated_frames,
                  batch_size=cfg.batch_size, progress=progress, ray=ray, ray_workers=ray_workers,
                  trust_remote_code=cfg.trust_remote_code, random_weights=cfg.random_weights)
    loaded = dict(encoders or {})
    if not ray:  # an encoder used for several strategies or draws loads once, and only if something is missing
        lazy = lazy_encoders(cfg, skip=loaded)
        if len(cfg.frame_sampling) > 1:
            loaded.update({v: lazy[v] for v in cfg.vision if v not in loaded})
        if cfg.caption_draws > 1:
            loaded.update({t: lazy[t] for t in cfg.text if t not in loaded})
    variants = cfg.vision_variants()
    vis = {name: extract(man, v, n_frames=cfg.n_frames, image_size=cfg.image_size,
                         temporal_pooling=cfg.temporal_pooling, frame_sampling=fs, loaded_encoder=loaded.get(v),
                         **common) for name, (v, fs) in variants.items()}
    # one text feature set per caption draw: draw None is the paper's first n_c captions
    draws = [None] if cfg.caption_draws == 1 else [(cfg.seed, r) for r in range(cfg.caption_draws)]
    text_common = {**common, "dtype": cfg.text_encoder_dtype}
    txt_draws = {t: [extract(man, t, n_captions=cfg.n_captions, pooling=cfg.text_pooling, caption_draw=d,
                             loaded_encoder=loaded.get(t), **text_common) for d in draws] for t in cfg.text}
    sets = [("vision", name, "n_f", v, fs) for name, res in vis.items() for v, fs in res.features.items()]
    sets += [("text", t, "n_c", v, fs) for t, runs in txt_draws.items() for res in runs
             for v, fs in res.features.items()]
    plan, ids = settle(plan, sets)
    if any(p.kind == "extraction" for p in plan.problems):  # what the plan could not foresee
        for line in plan.lines():
            _report(line)
    dropped = plan.dropped_records()
    if dropped:
        atomic_write_text(run / "dropped_items.jsonl", "".join(json.dumps(d) + "\n" for d in dropped))
    else:
        (run / "dropped_items.jsonl").unlink(missing_ok=True)
    if len(ids) <= cfg.k + 1:
        raise VlgapError(f"only {len(ids)} of {len(man)} items are usable in every feature set; k={cfg.k} needs "
                         f"more than k+1 (the items left out: {run / 'dropped_items.jsonl'})")
    stderr_console.print(f"features ready in {time.perf_counter() - t0:.1f} s; N = {len(ids)} of {len(man)} items"
                         + (f" ({len(dropped)} left out of every cell, see dropped_items.jsonl)" if dropped else ""),
                         highlight=False, soft_wrap=True)
    return SweepFeatures(cfg, run, record, vis, txt_draws, draws, ids, dropped, progress, ray, plan)


def finish_sweep(prepared: SweepFeatures) -> SweepResult:
    """The second half of `run_sweep`: every cell (each sealed under its key when it is written; cells
    already sealed are read), the scaling laws and the tables."""
    from vlgap.reuse import key_digest, write_artefact

    cfg, run, record, ids = prepared.cfg, prepared.run, prepared.record, prepared.ids
    vis, txt_draws, draws, progress, ray = (prepared.vis, prepared.txt_draws, prepared.draws, prepared.progress,
                                            prepared.ray)
    variants, plan = cfg.vision_variants(), prepared.plan
    cells_dir, mats_dir = run / "cells", run / "matrices"
    cells = [(v, t, nf, nc) for v in variants for t in cfg.text for nf in cfg.n_frames for nc in cfg.n_captions]
    from functools import lru_cache

    from vlgap.metrics.layer_search import precompute_layers

    @lru_cache(maxsize=None)
    def features(modality: str, name: str, value: int, draw: int = 0):
        if modality == "v":
            return vis[name].features[value].subset(ids)
        return txt_draws[name][draw].features[value].subset(ids)

    @lru_cache(maxsize=None)
    def side(modality: str, name: str, value: int, draw: int = 0):
        """Neighbour lists of every layer of one feature set, computed once for all cells that use it."""
        return precompute_layers(features(modality, name, value, draw).layers, k=cfg.k, metric=cfg.metric,
                                 device=cfg.device, preset=cfg.preset, for_bootstrap=cfg.n_bootstrap > 0,
                                 name=f"{name} {modality}={value}" + (f" draw {draw}" if len(draws) > 1 else ""))

    def one(ci):
        v, t, nf, nc = cells[ci]
        # every cell draws the same resamples and permutations (common random numbers): differences
        # between cells carry no resampling noise of their own, and each side's resampled lists serve
        # every cell it enters (vlgap.metrics.knn.ResampleMemo)
        opts = dict(k=cfg.k, metric=cfg.metric, n_bootstrap=cfg.n_bootstrap, n_permutations=cfg.n_permutations,
                    seed=cfg.seed, device=cfg.device, preset=cfg.preset)
        if len(draws) > 1:
            return ci, score_cell_draws(side("v", v, nf), [side("t", t, nc, r) for r in range(len(draws))], **opts)
        return ci, score_cell(side("v", v, nf), side("t", t, nc), **opts)

    def serial(todo):
        from vlgap.metrics.knn import resample_memo
        from vlgap.parallel import threaded_map, workers_for

        with resample_memo(RESAMPLE_MEMO_BYTES):
            yield from threaded_map(one, todo, workers_for(len(todo), cfg.device))

    data = record["data"]
    items_digest = key_digest(ids)[:16]
    # replaced weights (a folder's files, a moved hub snapshot) make other features, hence other cells
    weights = {name: next(iter(res.features.values())).record.get("encoder_key", {}).get("weights_id")
               for name, res in [*vis.items(), *((t, runs[0]) for t, runs in txt_draws.items())] if res.features}
    keys = [cell_key(cfg, data, items_digest, cell, cfg.seed, weights) for ci, cell in enumerate(cells)]

    report = _report
    by_cell: dict[int, dict] = {}
    todo = []
    for ci, cell in enumerate(cells):
        name = matrix_name(*cell)[:-4]
        cell_path, mat_path = cells_dir / f"{name}.json", mats_dir / f"{name}.npy"
        # reused only when both files are sealed under this cell's key and unchanged since written
        done = read_cell(cell_path, keys[ci], what="sweep cell", report=report, attached={mat_path: "sweep score matrix"})
        if done is not None:
            by_cell[ci] = done
        else:
            todo.append(ci)
    if ray and todo:
        from vlgap.distributed.sweep import score_cells

        results = score_cells(cfg, cells, todo, features, score_cell, ray=ray)
    else:
        results = serial(todo)
    with progress_bar(progress) as prog, stage(f"alignment cells ({len(todo)} of {len(cells)})"):
        task = prog.add_task("alignment cells" + (" (ray)" if ray else ""), total=len(cells), unit="cells")
        prog.update(task, completed=len(cells) - len(todo))
        for ci, res in results:  # in completion order with Ray; each cell is written when it arrives
            v, t, nf, nc = cells[ci]
            name = matrix_name(v, t, nf, nc)[:-4]
            buf = io.BytesIO()
            np.save(buf, res.pop("matrix"))
            about = {"cell": name, "run": str(run)}
            write_artefact(mats_dir / f"{name}.npy", buf.getvalue(), keys[ci], extra=about)
            x_names, y_names = layer_names(features("v", v, nf)), layer_names(features("t", t, nc))
            row = {"vision": v, "text": t, "n_f": nf, "n_c": nc, **res, "metric": cfg.metric, "preset": cfg.preset,
                   "temporal_pooling": cfg.temporal_pooling,
                   **({"vision_encoder": variants[v][0], "frame_sampling": variants[v][1]}
                      if cfg.frame_sampling != ["uniform"] else {}),
                   **weights_fields(features("v", v, nf).record, features("t", t, nc).record),
                   **({"random_weights": True} if cfg.random_weights else {}),
                   "x_layer_name": x_names[res["x_layer"]] if 0 <= res["x_layer"] < len(x_names) else "",
                   "y_layer_name": y_names[res["y_layer"]] if 0 <= res["y_layer"] < len(y_names) else ""}
            if "na_reason" in res:
                report(f"cell {name} is n/a: {res['na_reason']}")
            # the row as JSON round-trips it (NaN included): the resumed table equals this one
            by_cell[ci] = write_cell(cells_dir / f"{name}.json", row, keys[ci], extra=about)
            prog.advance(task)
    rows = [by_cell[ci] for ci in range(len(cells))]
    with stage("scaling laws"):
        fits = fit_pairs(rows, progress=progress) if cfg.fit else {}
    write_tables(run, rows, cfg, fits, key=record, items=plan.to_dict())
    return SweepResult(run, rows, fits, prepared.dropped, plan.to_dict())


def fit_pairs(rows: list[dict], progress: bool = False) -> dict[str, dict]:
    """Fit the scaling law per encoder pair; a grid too small to identify it is reported, not fatal.
    The pairs' fits (each with FIT_BOOTSTRAP refits, seconds on a CPU) run in worker processes, one
    per core (vlgap.parallel.process_map); each fit is a pure function of its grid, so the result
    does not depend on the number of workers."""
    from vlgap.parallel import process_map, workers_for
    from vlgap.progress import counter

    pairs = list(dict.fromkeys((r["vision"], r["text"]) for r in rows))
    jobs, notes = [], []
    for v, t in pairs:
        sub = [r for r in rows if r["vision"] == v and r["text"] == t]
        # n/a cells (zero-variance features) carry no score: the law is fitted without them, and says so
        na = [f"n_f={r['n_f']} n_c={r['n_c']}" for r in sub if not np.isfinite(r["score"])]
        jobs.append(([{"n_f": r["n_f"], "n_c": r["n_c"], "score": r["score"]} for r in sub if np.isfinite(r["score"])],
                     FIT_BOOTSTRAP))
        notes.append(f"{len(na)} n/a cell(s) left out ({', '.join(na)})" if na else None)
    with counter(f"scaling laws ({FIT_BOOTSTRAP} bootstrap refits each)", len(pairs), "pairs", progress) as report:
        results = []
        for fit in process_map(_fit_grid, jobs, workers_for(len(jobs))):
            results.append(fit)
            report(len(results))
    fits = {}
    for (v, t), fit, note in zip(pairs, results, notes):
        if "error" in fit:
            fit = {"error": fit["error"] + (f" ({note})" if note else "")}
        elif note:
            fit.setdefault("warnings", []).append(note)
        fits[f"{v}|{t}"] = fit
    return fits


def _fit_grid(grid: list[dict], n_bootstrap: int) -> dict:
    """One pair's law as a dict ({"error": ...} where the grid cannot identify it); runs in a worker."""
    from vlgap.scaling import fit_scaling

    try:
        return fit_scaling(grid, n_bootstrap=n_bootstrap).to_dict()
    except VlgapError as err:
        return {"error": str(err)}


def write_tables(run: Path, rows: list[dict], cfg: SweepConfig, fits: dict[str, dict],
                 key: dict[str, Any] | None = None, items: dict[str, Any] | None = None) -> None:
    """sweep.csv, sweep.json and scaling.json, sealed under the run's configuration (`key`): a table
    edited afterwards is caught by `vlgap.reuse.check_artefact` (the report checks sweep.json).
    `items`: N kept and left out with the reasons (`vlgap.probe.items.ItemPlan.to_dict`)."""
    from vlgap.reuse import write_artefact

    key = key if key is not None else cfg.to_dict()
    rows = sorted(rows, key=lambda r: (r["vision"], r["text"], r["n_f"], r["n_c"]))
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=ROW_FIELDS, extrasaction="ignore")
    w.writeheader()
    w.writerows(rows)
    write_artefact(run / "sweep.csv", buf.getvalue().encode(), key)
    interval = (f"{cfg.n_bootstrap} bootstrap resamples over items, best layer pair re-selected in each"
                if cfg.n_bootstrap else "none")
    if cfg.n_bootstrap and cfg.caption_draws > 1:
        interval += (f"; score = mean over {cfg.caption_draws} random caption draws, interval widened by the "
                     "between-draw variance (vlgap.metrics.draws)")
    from vlgap.provenance import display_path, record

    doc = {"rows": rows, "config": dict(cfg.to_dict(), interval=interval),
           "description": f"manifest {display_path(cfg.manifest, run, cfg.cache_dir)}",
           "provenance": record("vlgap.sweep")}  # beside the key, not in it: another day or machine is the same run
    if isinstance(key.get("data"), dict):
        doc["data"] = key["data"]
    if items is not None:
        doc["items"] = items
    write_artefact(run / "sweep.json", (to_json(doc) + "\n").encode(), key)
    write_artefact(run / "scaling.json", (to_json(fits) + "\n").encode(), key)
