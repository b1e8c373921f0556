"""Reorder probe (VideoComp style): alignment with the positive captions against alignment with each
negative (same events, other order) substituted for its positive, with a paired bootstrap interval on
the drop (`vlgap.metrics.conditions.reorder_drop`). Triples come from a shapes manifest
(meta["reorder"]) or a JSON file (`vlgap.data.reorder.read_reorder_json`: our form or VideoComp's)."""
from __future__ import annotations

import html
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from vlgap.data.manifest import Item, Manifest, read_manifest
from vlgap.data.reorder import caption_manifest, read_reorder_json, reorder_triples
from vlgap.encoders.registry import mark_random_weights
from vlgap.features.source import FeatureOptions, FeatureSource, common_ids, feature_options_moved, layer_name
from vlgap.io_utils import atomic_write_json
from vlgap.metrics.conditions import Space, negative_sides, owner_rows, prepared_layers, reorder_from_sides
from vlgap.probe.figures import paired_difference_figure
from vlgap.probe.report import Raw, fmt, fmt_ci, fmt_or_na, html_table, save_figure, write_section


@feature_options_moved()
def run_reorder(source: str | Path, vision: Sequence[str], text: Sequence[str], *, n_f: int = 8, k: int = 5,
                n_bootstrap: int = 1000, confidence: float = 0.95, seed: int = 0, video_dir=None,
                types: Sequence[str] = ("reorder",), video_template: str = "{video_id}.mp4",
                features: FeatureSource | FeatureOptions | None = None, out: str | Path | None = None) -> dict[str, Any]:
    """Reorder probe for every vision x text encoder. `source`: a manifest (.jsonl) whose items carry
    meta.reorder (shapes), or a reorder JSON file (`read_reorder_json`: vlgap or VideoComp form). The two
    halves, `reorder_features` and `finish_reorder`, may run in different threads (`vlgap demo`)."""
    inputs = reorder_features(source, vision, text, n_f=n_f, video_dir=video_dir, types=types,
                              video_template=video_template, features=features)
    return finish_reorder(inputs, k=k, n_bootstrap=n_bootstrap, confidence=confidence, seed=seed, out=out)


def reorder_features(source: str | Path, vision: Sequence[str], text: Sequence[str], *, n_f: int = 8,
                     video_dir=None, types: Sequence[str] = ("reorder",), video_template: str = "{video_id}.mp4",
                     features: FeatureSource | FeatureOptions | None = None) -> dict[str, Any]:
    """The triples and features `run_reorder` analyses (extracted or from the cache)."""
    t0 = time.perf_counter()
    vision, text = list(vision), list(text)
    src = FeatureSource.of(features)
    path = Path(source)
    if path.suffix.lower() == ".json":
        triples = read_reorder_json(path, video_dir=video_dir, types=types, video_template=video_template)
        vman = Manifest(None, [Item(t.id, t.video, "video", (t.positive,), {}) for t in triples])
    else:
        man = read_manifest(path)
        triples = reorder_triples(man)
        ids = {t.id for t in triples}
        # reuse the whole manifest's cached features (e.g. from the sweep) when they exist
        whole = all(src.is_cached(man, v, "n_f", n_f) for v in vision)
        vman = man if whole else man.subset(ids)
    pman = caption_manifest([(t.id, t.video, t.positive) for t in triples])
    negatives = [(f"{t.id}~{j}", t.id, t.video, x) for t in triples for j, x in enumerate(t.negatives)]
    nman = caption_manifest([(nid, media, x) for nid, _, media, x in negatives])
    vis = {v: src.vision(vman, v, n_f) for v in vision}
    pos = {t: src.text(pman, t) for t in text}
    neg = {t: src.text(nman, t) for t in text}
    return {"source": path, "vision": vision, "text": text, "triples": triples, "negatives": negatives, "vis": vis,
            "pos": pos, "neg": neg, "n_f": n_f, "temporal_pooling": src.options.temporal_pooling,
            "random_weights": src.random_weight_names([*vision, *text]), "seconds": time.perf_counter() - t0}


def finish_reorder(inputs: dict[str, Any], *, k: int = 5, n_bootstrap: int = 1000, confidence: float = 0.95,
                   seed: int = 0, out: str | Path | None = None) -> dict[str, Any]:
    """The analysis of `reorder_features`' output, its JSON and report section (with `out`)."""
    t0 = time.perf_counter()
    vision, text, triples, negatives = inputs["vision"], inputs["text"], inputs["triples"], inputs["negatives"]
    vis, pos, neg = inputs["vis"], inputs["pos"], inputs["neg"]
    owner_of = {nid: tid for nid, tid, _, _ in negatives}
    ids = common_ids(list(vis.values()) + list(pos.values()), [t.id for t in triples])
    rows, spaces = [], {}
    for ti, t in enumerate(text):
        with_neg = {owner_of[x] for x in neg[t].ids}
        keep = [i for i in ids if i in with_neg]  # videos with a readable positive, negative and video
        row_of = {i: r for r, i in enumerate(keep)}
        nfs = neg[t].subset([x for x in neg[t].ids if owner_of[x] in row_of])
        psp = Space(pos[t].subset(keep).layers, f"{t} positives")
        owner, counts = owner_rows([row_of[owner_of[x]] for x in nfs.ids], nfs.n, len(keep))
        neg_sides = negative_sides(prepared_layers(nfs.layers, f"{t} negatives"), psp, owner)
        for vi, v in enumerate(vision):
            xs = vis[v].subset(keep)
            key = (v, tuple(keep))  # one Space per vision encoder and item set: its layers are ranked once
            spaces.setdefault(key, Space(xs.layers, v))
            d = reorder_from_sides(spaces[key], psp, neg_sides, owner, counts, k=k, n_bootstrap=n_bootstrap,
                                    confidence=confidence, seed=seed + 101 * vi + ti)
            rows.append({"vision": v, "text": t, "kind": xs.record.get("encoder", {}).get("kind", "unknown"),
                         **d.to_dict(), "x_layer_name": layer_name(xs, d.x_layer),
                         "y_layer_name": layer_name(nfs, d.y_layer)})
    rows.sort(key=lambda r: (vision.index(r["vision"]), text.index(r["text"])))
    res = {"source": str(inputs["source"]), "n_triples": len(triples), "n_negatives": len(negatives),
           "n_f": inputs["n_f"], "k": k, "temporal_pooling": inputs["temporal_pooling"],
           "rows": rows, "confidence": confidence, "seconds": round(inputs["seconds"] + time.perf_counter() - t0, 1),
           "example": {"positive": triples[0].positive, "negative": triples[0].negatives[0]}}
    mark_random_weights(res, inputs["random_weights"])
    if out is not None:
        atomic_write_json(Path(out) / "temporal" / "reorder.json", res)
        write_reorder_section(res, out)
    return res


def write_reorder_section(res: dict[str, Any], run_dir: str | Path) -> Path:
    run_dir = Path(run_dir)
    rows = res["rows"]
    fig = paired_difference_figure(rows, [f"{r['vision']} × {r['text']}" for r in rows],
                             f"Reorder probe: N={rows[0]['n'] if rows else 0} videos, k={res['k']}",
                             "drop = positive - negative (paired bootstrap 95% CI)")
    figs = [save_figure(fig, run_dir, "figures/reorder_drop.png")]
    table = html_table(["vision", "text", "vision kind", "N", "positive", "95% CI", "negative", "95% CI", "drop",
                        "95% CI", "p", "interval excludes 0", "chance", "layers (vision / text)"],
                       [[r["vision"], r["text"], r.get("kind", "-"), r["n"], r["score_a"], Raw(fmt_ci(r["ci_a"])), r["score_b"],
                         Raw(fmt_ci(r["ci_b"])), Raw(fmt(r["difference"], 4)), Raw(fmt_ci(r["ci"], 4)),
                         fmt_or_na(r.get("p_value"), "no resamples"),
                         "yes" if r["ci"] and (r["ci"][0] > 0 or r["ci"][1] < 0) else "no", r["chance"],
                         Raw(html.escape(f"{r['x_layer_name']} / {r['y_layer_name']}"))] for r in rows])
    ex = res["example"]
    from vlgap.provenance import display_path

    source = display_path(res["source"], run_dir)  # a manifest or reorder file: never the machine's absolute path
    body = (f"<p>VideoComp-style temporal reorder probe on {html.escape(source)}: {res['n_triples']} "
            f"(video, positive, negative) triples, {res['n_negatives']} negatives, n_f = {res['n_f']}, k = {res['k']} "
            "(the paper's k for 512 triples). Each negative describes the same events in another order; it replaces "
            "its positive and its text neighbours are searched among the positives of the other videos. "
            "Intervals: paired bootstrap over videos with every neighbour list recomputed in each resample "
            f"({rows[0]['n_bootstrap'] if rows else 0} resamples); the layer pair is the best by the mean of "
            "both conditions and held fixed. Image encoders pool frames by temporal pooling "
            f"{html.escape(res.get('temporal_pooling', 'mean'))}.</p>"
            f"<p>Example — positive: <i>{html.escape(ex['positive'])}</i><br>negative: "
            f"<i>{html.escape(ex['negative'])}</i></p>"
            "<p><b>Reading the drop.</b> A drop needs the text encoder to place the reordered caption elsewhere "
            "than the positive; it is evidence that the <i>vision</i> space sees order only beyond what an "
            "order-blind vision encoder shows. Image encoders that average frames (temporal pooling mean) are "
            "such a baseline by construction (vision kind 'image' below): any drop they show comes from how the "
            "text space moves the reordered caption relative to the content the vision side sees.</p>" + table)
    return write_section(run_dir, "41_reorder", "Temporal: event reorder (VideoComp style)", body, figs,
                         random_weights=res.get("random_weights"))
