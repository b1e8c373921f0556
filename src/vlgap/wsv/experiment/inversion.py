"""The T2V-inversion check of each finished cell: its model captions its generator's latents of held-out
captions beside its captions of the real videos, both scored against the held-out caption (paired over
scenes). Each check is a cell of its own (out/inversion/<cell>.json), keyed by the bytes of the cell it
was computed from."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

from vlgap.errors import VlgapError
from vlgap.runs.cells import cell
from vlgap.wsv.experiment.cells import _cell_key, _trained
from vlgap.wsv.experiment.config import ExperimentConfig, _log_default
from vlgap.wsv.experiment.prepare import Prepared

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
    computed here). With `lock`, only the worker that claims its lock file computes it (`vlgap.runs`)."""
    return cell(out / "inversion" / f"{name}.json", key, compute, what="WSV result", report=log, lock=lock)


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
