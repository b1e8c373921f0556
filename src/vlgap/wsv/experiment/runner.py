"""`run_experiment`: every cell of the experiment in one folder, resumable cell by cell and shared by
several worker processes (`vlgap.runs`: the folder refuses another configuration, a worker claims a cell
by its lock file, finished cells are sealed and skipped), then summary.json and summary.md."""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable

from vlgap.io_utils import atomic_write_json, atomic_write_text
from vlgap.runs.cells import cell, peek_cell, write_cell
from vlgap.runs.claims import available_cores, claimed, lock_path, oversubscription_warning
from vlgap.runs.folder import open_run_folder
from vlgap.wsv.experiment.cells import _cell_key, _read_cell, _row_cell_key, chance_cell, run_cell
from vlgap.wsv.experiment.config import ExperimentConfig, _log_default
from vlgap.wsv.experiment.inversion import _chance_inversions, _inversions
from vlgap.wsv.experiment.prepare import prepare
from vlgap.wsv.experiment.summary import summarise, summary_markdown

def _refuse_nothing_to_summarise(out: Path, cfg: ExperimentConfig) -> None:
    """--summary-only tabulates finished cells: with none of this configuration in `out` (an empty folder, a
    folder of another run) the tables would hold the chance floor alone, so it is refused before anything
    is written."""
    from vlgap.errors import VlgapError
    from vlgap.reuse import check_artefact

    planned = cfg.cells()
    if not any(check_artefact(out / "cells" / f"{g}-{s}-s{seed}.json", _row_cell_key(cfg, g, s, seed),
                              verify_bytes=False).ok for g, s, seed in planned):
        raise VlgapError(f"--summary-only: {out} holds no finished cell of this configuration (0 of {len(planned)}), "
                         f"so there is nothing to summarise; run `vlgap wsv experiment --out {out}` without "
                         "--summary-only first (with the same options)")


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
    from vlgap.runtime import announce_formats, parse_device

    out = Path(out_dir)
    device = parse_device(device, check=not ray)  # refused before the folder records anything (Ray: where it runs)
    cfg, formats = (cfg or ExperimentConfig()).resolved(device)  # auto -> bfloat16 | float32 on this device
    if not summary_only:
        announce_formats(list(formats.values()), log)
    if summary_only:
        _refuse_nothing_to_summarise(out, cfg)
    # other workers may share this folder: only temporaries older than any write in progress are leftovers
    open_run_folder(out, "wsv-experiment", cfg.record(), force=force, legacy=("experiment_config.json",), log=log,
                    temporaries_older_than=time.time() - 120, formats=formats,
                    results=("gap", "cells", "inversion", "summary.json", "summary.md"))
    atomic_write_json(out / "experiment_config.json", cfg.record())
    t0 = time.perf_counter()
    prep = prepare(cfg, cache_dir=cache_dir, log=log, device=device, ray=ray, ray_workers=ray_workers)
    atomic_write_json(out / "hygiene.json", prep.hygiene)
    raw_gap = {}
    for g in cfg.generators:  # raw synthetic vs real does not depend on the training seed: once per generator
        def raw(g=g):
            from vlgap.wsv.evaluate import two_sample

            return two_sample(prep.real, prep.heldout_synth[g], n_permutations=cfg.n_permutations,
                              n_bootstrap=cfg.n_bootstrap, c2st_permutations=cfg.c2st_permutations, seed=cfg.world_seed)

        raw_gap[g] = cell(out / "gap" / f"raw-{g}.json", _cell_key(cfg, "raw_gap", generator=g), raw,
                          what="WSV result", report=log)
        log(f"gap raw {g} vs real: MMD2 {raw_gap[g]['mmd2_unbiased']:.4f} (p {raw_gap[g]['p_value']:.3g}), "
            f"C2ST {raw_gap[g]['c2st']['accuracy']:.2f}, FD {raw_gap[g]['fd']:.2f}")
    cells = cfg.cells()
    done: dict[str, dict[str, Any]] = {}
    warned: str | None = None  # said once per run: workers x torch threads above the cores
    for j, (g, s, seed) in enumerate(cells):
        name = f"{g}-{s}-s{seed}"
        path = out / "cells" / f"{name}.json"
        key = _row_cell_key(cfg, g, s, seed)
        # before the claim, nothing is removed: another worker may be between writing this cell and sealing it
        res = peek_cell(path, key, what="WSV result", report=log)
        if res is not None:
            done[name] = res
            log(f"cell {j + 1}/{len(cells)} {name}: done earlier, skipped")
            continue
        if summary_only:
            continue
        with claimed(lock_path(path)) as mine:
            if not mine:
                log(f"cell {j + 1}/{len(cells)} {name}: another worker is on it, skipped")
                continue
            res = _read_cell(path, key, log)  # finished by another worker between the look and the claim
            if res is not None:
                done[name] = res
                log(f"cell {j + 1}/{len(cells)} {name}: done by another worker, skipped")
                continue
            log(f"cell {j + 1}/{len(cells)} {name}: training ({time.perf_counter() - t0:.0f} s elapsed)")
            if not warned:
                import torch

                warned = oversubscription_warning(out, torch.get_num_threads(), available_cores())
                if warned:
                    log(warned)
            res = run_cell(prep, cfg, g, s, seed, out / "work" / name, log=log, force=force)
            done[name] = write_cell(path, res, key)
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
        chance.append(cell(out / "cells" / f"chance-s{seed}.json", _cell_key(cfg, "chance", seed=seed),
                           lambda seed=seed: chance_cell(prep, cfg, seed), what="WSV result", report=log))
    inversion = _inversions(out, cfg, cells, prep, done, log, compute=not summary_only, force=force)
    chance_inv = _chance_inversions(out, cfg, prep, log, compute=True)  # cheap, like the chance cells
    summary = summarise(out, cfg, prep.hygiene, raw_gap, cells=[done[f"{g}-{s}-s{seed}"] for g, s, seed in cells
                                                              if f"{g}-{s}-s{seed}" in done], chance=chance,
                        inversion=inversion, chance_inversion=chance_inv)
    summary["wall_seconds_this_run"] = round(time.perf_counter() - t0, 1)
    atomic_write_json(out / "summary.json", summary)
    atomic_write_text(out / "summary.md", summary_markdown(summary))
    return summary
