"""The experiment's summary: rows of mean [t-interval over seeds] per (generator, system), each text-only
system placed between chance and the oracle ceiling, the falsifier and the inversion table, rendered as
Markdown or HTML tables (`vlgap.runs.summaries`) and as a pandas frame."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from vlgap.captions.registry import score_range
from vlgap.stats.bounds import UNIT
from vlgap.runs.summaries import (interval_frame, interval_text, over_seeds, t_interval, tables_frame, tables_html,
                                  tables_markdown)
from vlgap.wsv.convergence import STILL_FALLING, late_fall
from vlgap.wsv.experiment.cells import _cell_key, _read_cell, _row_cell_key, mean_curve
from vlgap.wsv.experiment.config import TEXT_ONLY_SYSTEMS, ExperimentConfig, _log_default, split_system, system_label
from vlgap.wsv.experiment.inversion import _chance_inversions, _inversions

def _summary_row(g: str, s: str, mine: list[dict[str, Any]]) -> dict[str, Any]:
    """One table row: mean [t-interval over seeds] of every score of the cells `mine` (one per seed)."""
    from vlgap.wsv.evaluate import ATTRIBUTES, HEADLINE

    row: dict[str, Any] = {"generator": g, "system": s, "label": system_label(s), "n_seeds": len(mine),
                           "seeds": [c["seed"] for c in mine], "n_items": mine[0]["scores"]["n"]}
    for m in (*HEADLINE, "BLEU-1"):
        vals = [c["scores"][m]["score"] for c in mine if m in c["scores"]]
        if vals:
            mean, ci = t_interval(vals, score_range=score_range(m))
            row[m] = {"mean": mean, "t_ci": ci, "per_seed": vals,
                      "item_bootstrap_ci_per_seed": [c["scores"][m].get("ci") for c in mine]}
    if all("attributes" in c["scores"] for c in mine):
        att = {}
        for a in (*ATTRIBUTES, "mean"):
            vals = [c["scores"]["attributes"][a]["accuracy"] for c in mine]
            mean, ci = t_interval(vals, score_range=UNIT)
            att[a] = {"mean": mean, "t_ci": ci, "per_seed": vals, "n": mine[0]["scores"]["attributes"][a]["n"],
                      "item_bootstrap_ci_per_seed": [c["scores"]["attributes"][a]["ci"] for c in mine]}
            if a != "mean":
                att[a]["unread_share"] = float(np.mean([c["scores"]["attributes"][a]["unread_share"] for c in mine]))
        row["attributes"] = att
    row["distinct_share"] = t_interval([c["scores"]["distinct"]["share"] for c in mine])[0]
    if all("train_seconds" in c for c in mine):
        row["train_seconds"] = float(np.mean([c["train_seconds"] for c in mine]))
    if any(c.get("selected") for c in mine):  # the caption step kept per seed (lowest validation loss)
        row["selected"] = [c.get("selected") for c in mine]
    if all("val" in c.get("loss_curves", {}) for c in mine):  # cells from before the record: their curve
        row["val_late_fall"] = [c["val_late_fall"] if "val_late_fall" in c else late_fall(c["loss_curves"]["val"])
                                for c in mine]
    if all("caption_steps_run" in c for c in mine):
        row["caption_steps_run"] = [c["caption_steps_run"] for c in mine]
        row["max_caption_steps"] = mine[0]["config"].get("max_caption_steps", 0)
    if all("loss_curves" in c for c in mine):
        stages = list(mine[0]["loss_curves"])
        row["loss"] = {st: {"final": t_interval([c["loss_curves"][st][-1][1] for c in mine]),
                            "curve_mean_over_seeds": mean_curve([c["loss_curves"][st] for c in mine])}
                       for st in stages}
    return row


def _inversion_row(g: str, s: str, mine: list[dict[str, Any]]) -> dict[str, Any]:
    """One row of the inversion table: per side (synthetic, real) CIDEr and the mean attribute accuracy, and
    their paired difference, each as mean [t-interval over seeds] with the per-seed intervals (item bootstrap
    for a side; for the difference: CIDEr's paired bootstrap, the attribute accuracy's inverted sign-flip
    test)."""
    mine = sorted(mine, key=lambda c: c["seed"])
    row: dict[str, Any] = {"generator": g, "system": s, "label": system_label(s), "n_seeds": len(mine),
                           "seeds": [c["seed"] for c in mine], "n_items": mine[0]["n"]}

    def side_scores(side: str, with_ci: bool) -> dict[str, Any]:
        cider = [c[side]["CIDEr"] for c in mine]
        out = {"CIDEr": over_seeds([x["score"] for x in cider], score_range=score_range("CIDEr"),
                                    **({"item_bootstrap_ci_per_seed": [x.get("ci") for x in cider]} if with_ci else {}))}
        if all("attributes" in c[side] for c in mine):
            att = [c[side]["attributes"]["mean"] for c in mine]
            out["attributes"] = over_seeds([x["accuracy"] for x in att], score_range=UNIT,
                                            **({"item_bootstrap_ci_per_seed": [x["ci"] for x in att]} if with_ci else {}))
        return out

    for side in ("synthetic", "real"):
        row[side] = side_scores(side, with_ci=True)
    if all("synthetic_polished" in c for c in mine):
        row["synthetic_polished"] = side_scores("synthetic_polished", with_ci=False)
    row["difference"] = {}
    for m in ("CIDEr", "attributes"):
        if all(m in c["difference"] for c in mine):
            d = [c["difference"][m] for c in mine]
            row["difference"][m] = over_seeds([x["difference"] for x in d], ci_per_seed=[x["ci"] for x in d],
                                               p_value_per_seed=[x["p_value"] for x in d])
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
              cells: list[dict[str, Any]] | None = None, chance: list[dict[str, Any]] | None = None,
              inversion: list[dict[str, Any]] | None = None,
              chance_inversion: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """Tables over the finished cells (`cells`: as verified by run_experiment; default: read them,
    verified, from out/cells; `chance`, `inversion` (out/inversion) and `chance_inversion` likewise)."""
    if inversion is None:
        planned = cfg.cells()
        inversion = _inversions(out, cfg, planned, None, {f"{g}-{s}-s{seed}": {} for g, s, seed in planned},
                                _log_default, compute=False)
    if chance_inversion is None:
        chance_inversion = _chance_inversions(out, cfg, None, _log_default, compute=False)
    if cells is None:
        cells = [c for c in (_read_cell(out / "cells" / f"{g}-{s}-s{seed}.json",
                                        _row_cell_key(cfg, g, s, seed), _log_default)
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
                           "c2st": t_interval([x["c2st"]["accuracy"] for x in gs], score_range=UNIT),
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
    inv_rows = []
    for g, s in [(r["generator"], r["system"]) for r in rows]:
        mine = [c for c in inversion if c["generator"] == g and c["system"] == s]
        if mine:
            inv_rows.append(_inversion_row(g, s, mine))
    inv = {"rows": inv_rows, "chance": _inversion_row("none", "chance", chance_inversion) if chance_inversion else None,
           "n_cells": len(inversion), "n_cells_planned": len(cfg.cells()),
           "pairing": "paired over evaluation scenes: held-out caption i is one of scene i's captions (checked)",
           "references": "one per scene: the held-out caption (both the synthetic and the real captions)",
           "synthetic_specs": sorted({c["synthetic_specs"] for c in inversion})}
    return {"config": cfg.record(), "hygiene": hygiene, "rows": rows, "chance": floor, "falsifier": falsifier,
            "inversion": inv,
            "raw_gap": raw_gap, "n_cells": len(cells), "n_cells_planned": len(cfg.cells()),
            "cell_seconds": float(sum(c["seconds"] for c in cells))}


#: mean [t-interval] as table text
_ci = interval_text


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
    loss = {"title": "Training and validation loss (mean over seeds of each stage's loss averaged over 20 equal "
                     "windows of its steps, up to the step every seed reached, interpolated between windows where seeds ran "
                     "different numbers of steps; validation: the caption loss on the validation scenes' captions, never "
                     "trained on, every 50 steps): the caption stage's curves, the caption steps run per seed (with "
                     "a step limit: training went on until the validation loss converged, or stopped at the limit), "
                     "the step whose weights were kept (lowest validation loss) per seed, how much the lowest "
                     "validation loss still improved over the last fifth of the steps per seed (above "
                     f"{STILL_FALLING:.0%}: still falling, the row had not converged when training stopped), and each "
                     "stage's final window (mean [t-interval])",
            "header": ["generator", "system", "caption-stage training loss at step (curve)",
                       "validation loss at step (curve)", "caption steps run per seed",
                       "kept caption step per seed (its validation loss)",
                       "validation loss fall over the last fifth of steps, per seed", "final loss per stage"],
            "rows": []}

    def _fall(v):
        if v is None:
            return "n/a (too few validation points)"
        return f"{max(v, 0.0):.1%}" + (" (still falling)" if v > STILL_FALLING else "")

    def _run(r):
        if "caption_steps_run" not in r:
            return "n/a (not recorded)"
        limit = r.get("max_caption_steps") or 0
        return ", ".join(f"{n} (step limit)" if limit and n >= limit else str(n) for n in r["caption_steps_run"]) + (
            f" (until converged, at most {limit})" if limit else " (fixed)")

    def _picks(curve):
        picks = sorted({0, len(curve) // 4, len(curve) // 2, (3 * len(curve)) // 4, len(curve) - 1}) if curve else []
        return ", ".join(f"{curve[k][0]}: {curve[k][1]:.2f}" for k in picks)

    for r in rows:
        if "loss" not in r:
            continue
        kept = ", ".join(f"{x['caption_step']} ({x['val_loss']:.2f})" if x else "last"
                         for x in r.get("selected", [])) or "last"
        loss["rows"].append([_generator_label(r), r.get("label") or system_label(r["system"]),
                             _picks(r["loss"].get("caption", {}).get("curve_mean_over_seeds", [])),
                             _picks(r["loss"].get("val", {}).get("curve_mean_over_seeds", [])) or "n/a (no validation set)",
                             _run(r), kept, ", ".join(_fall(v) for v in r["val_late_fall"]) if "val_late_fall" in r
                             else "n/a (no validation set)",
                             "; ".join(f"{st} {_ci(v['final'], 2)}" for st, v in r["loss"].items() if st != "val")])
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
    inv = summary.get("inversion") or {}
    inversion = {"title": "T2V inversion: each system's captions of its generator's raw latents of held-out captions "
                          "(captions no system trained on) vs its captions of the real-style videos, both scored "
                          "against the held-out caption (one reference per scene: CIDEr here is not the scores "
                          "table's ten-reference CIDEr); attribute accuracy against what each video shows; "
                          "synthetic - real paired over scenes: mean [t-interval over seeds] {each seed's paired "
                          "interval: CIDEr paired bootstrap, attribute accuracy inverted sign-flip test}; the "
                          "polisher is bypassed on both inputs, as at inference; the last column: the polished "
                          "synthetic latents the captioner trained on. High on synthetic, low on real: the system "
                          "inverts its generator and the synthetic-to-real gap is the bottleneck; low on both: the "
                          "captioner is weak",
                 "header": ["latents captioned", "system", "seeds", "CIDEr, synthetic", "CIDEr, real",
                            "CIDEr, synthetic - real", "attribute accuracy, synthetic", "attribute accuracy, real",
                            "attribute accuracy, synthetic - real",
                            "synthetic polished (the captioner's training input): CIDEr; attribute accuracy"],
                 "rows": []}

    def per_seed(d):
        # summaries written before the attribute difference became a sign-flip inversion name the key differently
        cis = [c for c in d.get("ci_per_seed", d.get("paired_bootstrap_ci_per_seed", [])) if c]
        return _ci(d) + (" {" + "; ".join(f"[{c[0]:.3f}, {c[1]:.3f}]" for c in cis) + "}" if cis else "")

    for r in list(inv.get("rows") or []) + ([inv["chance"]] if inv.get("chance") else []):
        base = split_system(r["system"])[0]
        where = {"oracle": f"{r['generator']} (trained on paired real-style videos)",
                 "chance": "none (a random training caption for both)"}.get(base, r["generator"])
        cells = [where, r.get("label") or system_label(r["system"]), str(r["n_seeds"])]
        for m in ("CIDEr", "attributes"):
            cells += [_ci(r[side][m]) if m in r[side] else "n/a" for side in ("synthetic", "real")]
            cells.append(per_seed(r["difference"][m]) if m in r["difference"] else "n/a")
        pol = r.get("synthetic_polished")
        cells.append("; ".join(_ci(pol[m]) for m in ("CIDEr", "attributes") if m in pol) if pol else
                     "n/a" if base == "chance" else "no polisher")
        inversion["rows"].append(cells)
    return [t for t in (scores, attributes, loss, fals, inversion) if t["rows"]]


def summary_markdown(summary: dict[str, Any]) -> str:
    return tables_markdown(summary_tables(summary))


def summary_html(summary: dict[str, Any]) -> str:
    """The same tables as HTML (escaped cells, every column)."""
    return tables_html(summary_tables(summary))


def summary_frame(summary: dict[str, Any]):
    """The summary's numbers as a pandas DataFrame in long format: one row per (generator, system, metric)
    with the mean over seeds, its t-interval and the number of seeds (the chance floor as system "chance";
    metrics: the caption metrics, "attributes" (mean grounded attribute accuracy) and "attributes:<name>")."""
    records = []
    for r in list(summary["rows"]) + ([summary["chance"]] if summary.get("chance") else []):
        ids = {"generator": r["generator"], "system": r["system"]}
        for m, v in r.items():
            if isinstance(v, dict) and "t_ci" in v:
                records.append({**ids, "metric": m, **v})
        for a, v in r.get("attributes", {}).items():
            records.append({**ids, "metric": "attributes" if a == "mean" else f"attributes:{a}", **v,
                            "n": len(v["per_seed"])})
    return interval_frame(records, names=("generator", "system"))


def summary_tables_frame(summary: dict[str, Any]):
    """The summary's tables (`summary_tables`) as one long pandas DataFrame of their text cells."""
    return tables_frame(summary_tables(summary))
