"""`vlgap downstream --task ...`: downstream proxies computed on frozen features, per encoder and per
layer, then correlated with alignment (the analysis of vlgap.probe.downstream).

Dynamic Reflections Fig 2 correlates alignment with weighted k-NN accuracy (k = 8) on Kinetics-400
and SSv2; sec. 7 with probe tasks. Here, for each vision encoder and each of its layers:
- knn-classify: cross-validated weighted k-NN accuracy (vlgap.metrics.proxies; k = 8, T = 0.07);
- linear-probe: cross-validated logistic-regression accuracy;
- retrieval (needs a joint model: the vision encoder's last layer and the text encoder's last layer in
  one space): text<->video R@1/5/10 and median rank.
Labels come from the manifest: `meta[<key>]` (dotted paths reach inside, e.g. spec.background), or
for the shapes world a name in SHAPES_LABELS (background, shape, colour, n_objects, first_event).

Alignment is the mutual k-NN score of each vision layer against the text encoder (its best text layer),
from the same features. Two analyses:
- per encoder: one point per vision encoder, (best layer-pair alignment, best layer's accuracy);
- per layer ("which layer predicts which task"): one point per (encoder, layer), leave-one-encoder-out
  prediction (the encoder is the family), and per encoder the Spearman correlation over its layers
  of alignment with accuracy, plus the best layer for each.
"""
from __future__ import annotations

import html
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from vlgap.caveats import caveat, reports_caveats
from vlgap.errors import VlgapError
from vlgap.io_utils import atomic_write_json

TASKS = ("knn-classify", "linear-probe", "retrieval")


def _first_event(spec: dict) -> str | None:
    events = spec.get("events") or []
    if not events:
        return None
    first = min(range(len(events)), key=lambda i: (events[i].get("start", 0.0), i))
    return str(events[first].get("kind"))


#: labels of a shapes-world video derived from its spec (meta["spec"])
SHAPES_LABELS = {
    "background": lambda s: s.get("background"),
    "shape": lambda s: (s.get("objects") or [{}])[0].get("shape"),
    "colour": lambda s: (s.get("objects") or [{}])[0].get("colour"),
    "n_objects": lambda s: len(s.get("objects") or []),
    "first_event": _first_event,
}


def _dotted(meta: dict, path: str) -> Any:
    cur: Any = meta
    for part in path.split("."):
        if isinstance(cur, dict) and part in cur:
            cur = cur[part]
        elif isinstance(cur, list) and part.lstrip("-").isdigit() and -len(cur) <= int(part) < len(cur):
            cur = cur[int(part)]
        else:
            return None
    return cur


def manifest_labels(manifest, key: str) -> list[str]:
    """One label per item: meta[key] (a dotted path reaches inside), else a shapes-world label of
    meta["spec"] (SHAPES_LABELS). An item without it is an error naming the item."""
    from vlgap.data.manifest import Manifest, read_manifest

    man = manifest if isinstance(manifest, Manifest) else read_manifest(manifest)
    out = []
    for it in man.items:
        value = _dotted(it.meta, key)
        if value is None and key in SHAPES_LABELS and isinstance(it.meta.get("spec"), dict):
            value = SHAPES_LABELS[key](it.meta["spec"])
        if value is None or isinstance(value, (dict, list)):
            raise VlgapError(
                f"item {it.id!r} has no label {key!r}: give a meta key of the manifest (e.g. label, written by "
                f"`vlgap import kinetics|ssv2`; a dotted path such as spec.background), or for shapes videos one "
                f"of {', '.join(SHAPES_LABELS)}")
        out.append(str(value))
    if len(set(out)) < 2 and out:
        raise VlgapError(f"label {key!r}: every one of the {len(out)} items has the same value {out[0]!r}, so a "
                         "classifier's accuracy is 1 = chance whatever the features; choose a label with at least "
                         "2 classes")
    return out


def parse_tasks(task: str) -> list[str]:
    names = [t.strip() for t in task.split(",") if t.strip()]
    bad = [t for t in names if t not in TASKS]
    if not names or bad:
        raise VlgapError(f"--task {task!r}: choose one or more (comma list) of {', '.join(TASKS)}")
    return names


@dataclass
class ProxyResult:
    layers: list[dict[str, Any]]  # one row per (encoder, layer, task, labels)
    encoders: list[dict[str, Any]]  # per encoder: alignment, best layers, within-encoder correlation
    correlation: dict[str, Any] | None  # per-encoder analysis (DownstreamResult.to_dict)
    per_layer: dict[str, Any] | None  # per-layer analysis
    config: dict[str, Any]
    notes: list[str] = field(default_factory=list)
    #: what the run changed from the request (e.g. --folds lowered for a small class) and why a value means
    #: little (vlgap.caveats): printed as warnings
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"warnings": self.warnings, "layers": self.layers, "encoders": self.encoders,
                "correlation": self.correlation,
                "per_layer": self.per_layer, "config": self.config, "notes": self.notes}


def score_layers(layers: Sequence[np.ndarray], labels: Sequence[str], task: str, *, k: int = 8,
                 temperature: float = 0.07, n_folds: int = 5, seed: int = 0, confidence: float = 0.95,
                 c: float = 1.0) -> list[dict[str, Any]]:
    """The classification proxy `task` on every layer (arrays [N, D_l]) with one label per row."""
    from vlgap.metrics.proxies import knn_classify_cv, linear_probe_cv

    out = []
    for li, x in enumerate(layers):
        if task == "knn-classify":
            r = knn_classify_cv(x, labels, k=k, temperature=temperature, n_folds=n_folds, seed=seed,
                                confidence=confidence)
        elif task == "linear-probe":
            r = linear_probe_cv(x, labels, c=c, n_folds=n_folds, seed=seed, confidence=confidence)
        else:
            raise VlgapError(f"task {task!r} is not a per-layer classification task ({', '.join(TASKS[:2])})")
        out.append(dict(r, layer=li))
    return out


def layer_alignment(vision_layers, text_layers, k: int = 10) -> np.ndarray:
    """[L_v, L_t] mutual k-NN scores of every layer pair (NaN where a layer has zero variance)."""
    from vlgap.metrics.base import ZeroVarianceError
    from vlgap.metrics.layer_search import layer_search

    try:
        return np.asarray(layer_search(list(vision_layers), list(text_layers), k=k, metric="mutual_knn",
                                       n_bootstrap=0, n_permutations=0).scores, dtype=float)
    except ZeroVarianceError:
        return np.full((len(vision_layers), len(text_layers)), np.nan)


@reports_caveats
def downstream_proxies(manifest, vision: Sequence[str], text: str, *, task: str = "knn-classify",
                       labels: str | Sequence[str] = "label", n_f: int = 8, n_c: int = 1, k: int = 8,
                       temperature: float = 0.07, n_folds: int = 5, alignment_k: int = 10, c: float = 1.0,
                       n_bootstrap: int = 1000, confidence: float = 0.95, seed: int = 0, features=None,
                       per_layer: bool = True) -> ProxyResult:
    """Downstream proxies per encoder and per layer, and their correlation with alignment (module
    docstring). `task`: comma list of knn-classify, linear-probe, retrieval; `labels`: one or more label
    keys (classification tasks run once per key, named `"<task>:<key>"`)."""
    from vlgap.data.manifest import Manifest, read_manifest
    from vlgap.features.source import FeatureSource, common_ids, layer_name
    from vlgap.metrics.proxies import retrieval_scores
    from vlgap.probe.downstream import downstream, spearman_bootstrap

    t0 = time.perf_counter()
    tasks = parse_tasks(task)
    keys = [labels] if isinstance(labels, str) else list(labels)
    keys = [s.strip() for kk in keys for s in str(kk).split(",") if s.strip()]
    if not vision:
        raise VlgapError("give at least one vision encoder")
    man = manifest if isinstance(manifest, Manifest) else read_manifest(manifest)
    src = FeatureSource.of(features)
    tfs = src.text(man, text, n_c)
    vfs = {v: src.vision(man, v, n_f) for v in vision}
    ids = common_ids([tfs, *vfs.values()], man.ids)
    notes: list[str] = []
    if len(ids) < len(man.ids):
        notes.append(f"{len(man.ids) - len(ids)} items lack features for some encoder and were left out")
    sub = man.subset(ids)
    pos = {it.id: it for it in sub.items}
    ordered = Manifest(man.path, [pos[i] for i in ids])
    label_sets = {key: manifest_labels(ordered, key) for key in keys} if any(t != "retrieval" for t in tasks) else {}
    tlayers = tfs.subset(ids).layers
    rows: list[dict[str, Any]] = []
    encoders: list[dict[str, Any]] = []
    for v, fs in vfs.items():
        vl = fs.subset(ids).layers
        matrix = layer_alignment(vl, tlayers, k=alignment_k)
        per_layer_align = np.nanmax(np.where(np.isnan(matrix), -np.inf, matrix), axis=1)
        per_layer_align[~np.isfinite(per_layer_align)] = np.nan
        enc = {"encoder": v, "n_layers": len(vl), "alignment": per_layer_align.tolist(),
               "best_alignment": float(np.nanmax(per_layer_align)) if np.any(np.isfinite(per_layer_align)) else float("nan"),
               "best_alignment_layer": int(np.nanargmax(per_layer_align)) if np.any(np.isfinite(per_layer_align)) else -1,
               "layer_names": [layer_name(fs, i) for i in range(len(vl))], "tasks": {}}
        for tk in tasks:
            if tk == "retrieval":
                r = retrieval_scores(vl[-1], tlayers[-1], n_bootstrap=n_bootstrap, confidence=confidence, seed=seed)
                value = r["text_to_video"]["R@1"]["value"]
                rows.append({"encoder": v, "layer": len(vl) - 1, "layer_name": enc["layer_names"][-1],
                             "task": "retrieval", "score": value, "alignment": float(per_layer_align[-1]),
                             "detail": r})
                enc["tasks"]["retrieval"] = {"best_layer": len(vl) - 1, "score": value}
                continue
            for key, y in label_sets.items():
                name = f"{tk}:{key}"
                scored = score_layers(vl, y, tk, k=k, temperature=temperature, n_folds=n_folds, seed=seed,
                                      confidence=confidence, c=c)
                for r in scored:
                    rows.append({"encoder": v, "layer": r["layer"], "layer_name": enc["layer_names"][r["layer"]],
                                 "task": name, "score": r["accuracy"], "alignment": float(per_layer_align[r["layer"]]),
                                 "detail": r})
                acc = np.array([r["accuracy"] for r in scored])
                best = int(np.argmax(acc))
                within = spearman_bootstrap(per_layer_align, acc, n_bootstrap=n_bootstrap, confidence=confidence,
                                            seed=seed) if len(vl) >= 3 and np.all(np.isfinite(per_layer_align)) else None
                enc["tasks"][name] = {"best_layer": best, "best_layer_name": enc["layer_names"][best],
                                      "score": float(acc[best]), "ci": scored[best]["ci"],
                                      "chance": scored[best]["chance"], "n": scored[best]["n"],
                                      "spearman_over_layers": within}
        encoders.append(enc)
    task_names = list(dict.fromkeys(r["task"] for r in rows))
    correlation = None
    model_rows = [{"model": e["encoder"], "task": tn, "score": e["tasks"][tn]["score"], "family": None}
                  for tn in task_names for e in encoders]
    align = {e["encoder"]: e["best_alignment"] for e in encoders}
    if len(encoders) >= 3:
        correlation = downstream(model_rows, align, n_bootstrap=n_bootstrap, confidence=confidence, seed=seed).to_dict()
    else:
        notes.append(f"{len(encoders)} vision encoder(s): the per-encoder correlation needs 3 or more; see the "
                     "per-layer analysis")
    per = None
    if per_layer:
        layer_rows = [{"model": f"{r['encoder']}:{r['layer']}", "task": r["task"], "score": r["score"],
                       "family": r["encoder"] if len(encoders) >= 2 else None}
                      for r in rows if r["task"] != "retrieval" and np.isfinite(r["alignment"])]
        layer_align = {f"{r['encoder']}:{r['layer']}": {"alignment": r["alignment"], "family": r["encoder"]}
                       for r in rows if np.isfinite(r["alignment"])}
        if layer_rows:
            per = downstream(layer_rows, layer_align, n_bootstrap=n_bootstrap, confidence=confidence,
                             seed=seed).to_dict()
    config = {"manifest": str(man.path), "vision": list(vision), "text": text, "tasks": task_names, "labels": keys,
              "n_f": n_f, "n_c": n_c, "k": k, "temperature": temperature, "n_folds": n_folds,
              "alignment_k": alignment_k, "n_items": len(ids), "seed": seed, "confidence": confidence,
              "random_weights": src.random_weight_names([*vision, text]),
              "seconds": round(time.perf_counter() - t0, 1)}
    if "knn-classify" in tasks:
        notes.append(f"weighted k-NN: k = {k} (Dynamic Reflections Fig 2); the paper does not state a temperature, "
                     f"T = {temperature} follows DINO (weights exp(sim / T))")
    from vlgap.metrics.proxies import FOLDS_REDUCED

    for line in dict.fromkeys(n for r in rows for n in (r["detail"].get("notes") or []) if n.startswith(FOLDS_REDUCED)):
        caveat(line)  # in the result's warnings (and the command's warning lines), as every caveat
    used = sorted({r["detail"]["n_folds"] for r in rows if "n_folds" in r["detail"]})
    if used:
        config["n_folds_used"] = used[0] if len(used) == 1 else used
    return ProxyResult(rows, encoders, correlation, per, config, notes)


# ---- report ---------------------------------------------------------------------------------------

def proxies_figure(res: ProxyResult):
    from vlgap.probe.figures import figure_legend, pyplot, within_range

    plt = pyplot()

    tasks = [t for t in dict.fromkeys(r["task"] for r in res.layers) if t != "retrieval"]
    if not tasks:
        return None
    fig, axes = plt.subplots(1, len(tasks), figsize=(4.6 * len(tasks), 3.8), squeeze=False)
    for ax, tn in zip(axes[0], tasks):
        for enc in res.encoders:
            rr = [r for r in res.layers if r["task"] == tn and r["encoder"] == enc["encoder"]]
            x = [r["alignment"] for r in rr]
            y = [r["score"] for r in rr]
            ax.plot(x, y, "o-", ms=3, lw=0.8, label=enc["encoder"])
            ax.annotate("last", (x[-1], y[-1]), fontsize=6)
        chance = next(r["detail"]["chance"] for r in res.layers if r["task"] == tn)
        ax.axhline(chance, color="grey", ls=":", lw=1, label="chance (majority)")
        ax.set_xlabel("layer alignment (best text layer, mutual k-NN)")
        ax.set_ylabel("cross-validated accuracy")
        ax.set_title(tn, fontsize=9)
        within_range(ax, y + [chance], (0.0, 1.0))
    fig.tight_layout()
    figure_legend(fig, axes[0])
    return fig


def _corr_rows(corr: dict) -> list[list]:
    from vlgap.probe.report import Raw, fmt_ci

    out = []
    for t in corr["tasks"]:
        pe, sp, lo = t["pearson"], t["spearman"], t.get("loo") or {}
        lofo = t.get("lofo")
        out.append([t["task"], t["n"], pe["r"], Raw(fmt_ci(pe["ci"])), Raw(f"{pe.get('p_holm', float('nan')):.3g}"),
                    sp["rho"], Raw(fmt_ci(sp["ci"])), Raw(f"{sp.get('p_holm', float('nan')):.3g}"),
                    lo.get("q2", float("nan")), lofo["q2"] if lofo else Raw("-")])
    return out


def write_proxies_section(res: ProxyResult, run_dir: str | Path, name: str = "70_downstream") -> Path:
    from vlgap.probe.report import Raw, fmt_ci, html_table, save_figure, write_section

    run_dir = Path(run_dir)
    atomic_write_json(run_dir / "downstream" / "proxies.json", res.to_dict())
    figs = []
    fig = proxies_figure(res)
    if fig is not None:
        figs.append(save_figure(fig, run_dir, "figures/downstream_proxies.png"))
    cfg = res.config
    best_rows = []
    for e in res.encoders:
        for tn, t in e["tasks"].items():
            sp = t.get("spearman_over_layers") or {}
            best_rows.append([e["encoder"], tn, Raw(html.escape(str(t.get("best_layer_name", t["best_layer"])))),
                              t["score"], Raw(fmt_ci(t.get("ci"))), t.get("chance", float("nan")), t.get("n", "-"),
                              Raw(html.escape(e["layer_names"][e["best_alignment_layer"]]) if e["best_alignment_layer"] >= 0 else "-"),
                              sp.get("rho", float("nan")), Raw(fmt_ci(sp.get("ci")))])
    conf = f"{cfg['confidence']:.0%}"
    body = (f"<p>Proxies on frozen features of {cfg['n_items']} items (n_f = {cfg['n_f']}), labels "
            f"{', '.join(cfg['labels'])}; weighted k-NN with k = {cfg['k']} and T = {cfg['temperature']} "
            f"({cfg['n_folds']}-fold stratified cross-validation, Wilson {conf} intervals, chance = majority-class "
            f"fraction). Alignment: mutual k-NN (k = {cfg['alignment_k']}) of each vision layer against its best "
            f"{html.escape(cfg['text'])} layer (n_c = {cfg['n_c']}).</p>"
            "<h4>Which layer predicts which task</h4>"
            + html_table(["encoder", "task", "best layer", "accuracy", f"{conf} CI", "chance", "N",
                          "best-aligned layer", "Spearman over layers", f"{conf} CI"], best_rows))
    if res.per_layer:
        body += ("<h4>Per layer: one point per (encoder, layer)</h4><p>LOFO = leave one encoder out.</p>"
                 + html_table(["task", "points", "Pearson r", f"{conf} CI", "Holm p", "Spearman", f"{conf} CI",
                               "Holm p", "LOO Q²", "LOFO Q²"], _corr_rows(res.per_layer)))
    if res.correlation:
        body += ("<h4>Per encoder: best layer pair alignment vs best layer accuracy</h4>"
                 + html_table(["task", "models", "Pearson r", f"{conf} CI", "Holm p", "Spearman", f"{conf} CI",
                               "Holm p", "LOO Q²", "LOFO Q²"], _corr_rows(res.correlation)))
    body += "".join(f"<p class='warn'>{html.escape(n)}</p>" for n in res.notes)
    return write_section(run_dir, name, "Downstream proxies on frozen features", body, figs,
                         random_weights=cfg.get("random_weights"))
