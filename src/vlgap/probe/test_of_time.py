"""Test of Time (Dynamic Reflections sec. 8): mutual k-NN alignment at k = 1, 2, 3 on the 180 generated
(video, caption) items, and, for every caption, which of its three logically related captions each
space ranks nearest (equivalent / colour swap = same words / relation swap = same colour order).
Tie-aware scoring and the group jackknife are in `vlgap.metrics.ties` (why: see there)."""
from __future__ import annotations

import html
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from vlgap.data.manifest import Item, Manifest, read_manifest
from vlgap.data.test_of_time import PLACEMENTS, RELATIONS, tot_dataset
from vlgap.encoders.registry import mark_random_weights
from vlgap.errors import VlgapError
from vlgap.features.source import FeatureOptions, FeatureSource, feature_options_moved, layer_names
from vlgap.io_utils import atomic_write_json
from vlgap.metrics.ties import cosine_similarities, group_fraction_ci, nearest_related, tot_alignment_from_sims
from vlgap.probe.figures import legend_outside, pyplot
from vlgap.probe.report import Raw, fmt, fmt_ci, html_table, save_figure, write_section

RELATION_LABELS = {"equivalent": "equivalent (same meaning, other words)",
                   "colour_swap": "colour swap (same words, opposite meaning)",
                   "relation_swap": "relation swap (same colour order, other relation word)"}


def _tot_views(items) -> dict[str, np.ndarray]:
    one = np.array([i for i, it in enumerate(items) if it.meta.get("placement") == PLACEMENTS[0]], dtype=np.int64)
    return {"one placement per colour pair": one, "all items (paper's N)": np.arange(len(items))}


def analyse_test_of_time(items, vision: dict[str, list[np.ndarray]], text: dict[str, list[np.ndarray]], *,
                         ks: Sequence[int] = (1, 2, 3), layer_names: dict[str, list[str]] | None = None,
                         n_bootstrap: int = 2000, confidence: float = 0.95, seed: int = 0) -> dict[str, Any]:
    """Test of Time analysis on per-item features (rows in the order of `items`, manifest items whose meta
    holds group, equivalent, colour_swap, relation_swap ids)."""
    ids = [it.id for it in items]
    pos = {x: i for i, x in enumerate(ids)}
    try:
        related = np.array([[pos[it.meta[r]] for r in RELATIONS] for it in items])
        groups = np.array([it.meta["group"] for it in items])
    except KeyError as err:
        raise VlgapError(f"Test of Time items need meta.group and meta.{'/'.join(RELATIONS)} naming items of the "
                         f"same set; missing {err}") from None
    layer_names = layer_names or {}
    views = _tot_views(items)
    sims = {name: [cosine_similarities(layer) for layer in layers] for name, layers in {**vision, **text}.items()}
    alignment = []
    for view, idx in views.items():
        if len(idx) < 8:
            continue
        sub = np.ix_(idx, idx)
        for v in vision:
            for t in text:
                for r in tot_alignment_from_sims([s[sub] for s in sims[v]], [s[sub] for s in sims[t]], groups[idx],
                                                 ks=ks, confidence=confidence):
                    r.pop("scores")
                    alignment.append({"vision": v, "text": t, "view": view, **r,
                                      "x_layer_name": (layer_names.get(v) or [None] * (r["x_layer"] + 1))[r["x_layer"]],
                                      "y_layer_name": (layer_names.get(t) or [None] * (r["y_layer"] + 1))[r["y_layer"]]})
    nearest, by_layer = [], {}
    for modality, spaces in (("vision", vision), ("text", text)):
        for name, layers in spaces.items():
            credits = [nearest_related(layer, related, sims=sm) for layer, sm in zip(layers, sims[name])]
            by_layer[name] = [c.mean(axis=0).tolist() for c in credits]
            last = len(layers) - 1
            c = credits[last]
            cis = group_fraction_ci(c, groups, n_bootstrap, confidence, seed)
            nearest.append({"encoder": name, "modality": modality, "layer": last,
                            "layer_name": (layer_names.get(name) or [None] * len(layers))[last], "n": len(items),
                            "fractions": dict(zip(RELATIONS, c.mean(axis=0).tolist())),
                            "ci": dict(zip(RELATIONS, cis)),
                            "tied": float(np.mean(c.max(axis=1) < 1.0))})
    return {"n_items": len(items), "n_groups": int(len(np.unique(groups))), "ks": list(ks), "alignment": alignment,
            "nearest_related": nearest, "nearest_related_by_layer": by_layer,
            "views": {v: int(len(i)) for v, i in views.items()}, "confidence": confidence}


@feature_options_moved(source="features")
def run_test_of_time(vision: Sequence[str], text: Sequence[str], *, n_f: int = 8, ks: Sequence[int] = (1, 2, 3),
                     seed: int = 0, size: int = 128, manifest: str | Path | None = None, n_bootstrap: int = 2000,
                     confidence: float = 0.95, features: FeatureSource | FeatureOptions | None = None,
                     out: str | Path | None = None) -> dict[str, Any]:
    """Test of Time probe for every vision x text encoder (generates the set in the cache unless
    `manifest` is given). Vision features are extracted once per distinct video and text features once
    per distinct caption, then given to every item that shares them. With `out`, writes
    out/temporal/test_of_time.json and the report section. The two halves, `tot_features`
    and `finish_tot`, may run in different threads (`vlgap demo`)."""
    inputs = tot_features(vision, text, n_f=n_f, seed=seed, size=size, manifest=manifest, features=features)
    return finish_tot(inputs, ks=ks, n_bootstrap=n_bootstrap, confidence=confidence, seed=seed, out=out)


def tot_features(vision: Sequence[str], text: Sequence[str], *, n_f: int = 8, seed: int = 0,
                          size: int = 128, manifest: str | Path | None = None,
                          features: FeatureSource | FeatureOptions | None = None) -> dict[str, Any]:
    """The features `run_test_of_time` analyses: each encoder's, per item (extracted or from the cache)."""
    t0 = time.perf_counter()
    src = FeatureSource.of(features)
    man = read_manifest(manifest or tot_dataset(seed, size, src.cache_dir))
    items = man.items
    videos: dict[Path, Item] = {}
    captions: dict[str, Item] = {}
    for it in items:
        if len(it.captions) != 1:
            raise VlgapError(f"Test of Time item {it.id!r} has {len(it.captions)} captions; expected exactly one")
        videos.setdefault(it.media, Item(f"video{len(videos):03d}", it.media, it.kind, it.captions, {}))
        captions.setdefault(it.captions[0], Item(f"caption{len(captions):03d}", it.media, it.kind, it.captions, {}))
    vman, cman = Manifest(man.path, list(videos.values())), Manifest(man.path, list(captions.values()))
    vpos = {media: i for i, media in enumerate(videos)}
    cpos = {cap: i for i, cap in enumerate(captions)}
    vrow = [vpos[it.media] for it in items]
    crow = [cpos[it.captions[0]] for it in items]
    vis, txt, names = {}, {}, {}
    for v in vision:
        fs = src.vision(vman, v, n_f)
        if fs.ids != [x.id for x in vman.items]:
            raise VlgapError(f"{v}: some Test of Time videos could not be read ({fs.record.get('bad_items')})")
        vis[v] = [layer[vrow] for layer in fs.layers]
        names[v] = layer_names(fs)
    for t in text:
        fs = src.text(cman, t, 1)
        txt[t] = [layer[crow] for layer in fs.layers]
        names[t] = layer_names(fs)
    return {"man": man, "vis": vis, "txt": txt, "names": names, "n_videos": len(videos),
            "n_distinct_captions": len(captions), "n_f": n_f,
            "random_weights": src.random_weight_names([*vision, *text]), "seconds": time.perf_counter() - t0}


def finish_tot(inputs: dict[str, Any], *, ks: Sequence[int] = (1, 2, 3), n_bootstrap: int = 2000,
                        confidence: float = 0.95, seed: int = 0, out: str | Path | None = None) -> dict[str, Any]:
    """The analysis of `tot_features`' output, its JSON and report section (with `out`)."""
    t0 = time.perf_counter()
    man = inputs["man"]
    res = analyse_test_of_time(man.items, inputs["vis"], inputs["txt"], ks=ks, layer_names=inputs["names"],
                               n_bootstrap=n_bootstrap, confidence=confidence, seed=seed)
    res.update({"manifest": str(man.path), "n_videos": inputs["n_videos"],
                "n_distinct_captions": inputs["n_distinct_captions"], "n_f": inputs["n_f"],
                "n_c": 1, "seconds": round(inputs["seconds"] + time.perf_counter() - t0, 1)})
    mark_random_weights(res, inputs["random_weights"])
    if out is not None:
        atomic_write_json(Path(out) / "temporal" / "test_of_time.json", res)
        write_test_of_time_section(res, out)
    return res


def _tot_reading(res: dict[str, Any]) -> str:
    parts = []
    for r in res["nearest_related"]:
        if r["modality"] != "text":
            continue
        fr = r["fractions"]
        top = max(RELATIONS, key=lambda x: fr[x])
        reading = {"colour_swap": "a bag-of-words reading", "equivalent": "a logical (temporal) reading",
                   "relation_swap": "a word-order reading"}[top]
        parts.append(f"{html.escape(r['encoder'])} puts the {top.replace('_', ' ')} nearest for "
                     f"{fr[top]:.0%} of the captions ({reading})")
    return "<p><b>Reading.</b> " + "; ".join(parts) + ".</p>" if parts else ""


def write_test_of_time_section(res: dict[str, Any], run_dir: str | Path) -> Path:
    plt = pyplot()
    run_dir = Path(run_dir)
    figs = []
    views = list(dict.fromkeys(r["view"] for r in res["alignment"]))
    fig, axes = plt.subplots(1, len(views), figsize=(6 * len(views), 4.2), squeeze=False)
    for ax, view in zip(axes[0], views):
        rows = [r for r in res["alignment"] if r["view"] == view]
        pairs = list(dict.fromkeys((r["vision"], r["text"]) for r in rows))
        width = 0.8 / max(1, len(res["ks"]))
        for j, k in enumerate(res["ks"]):
            sub = [next(r for r in rows if (r["vision"], r["text"]) == p and r["k"] == k) for p in pairs]
            x = np.arange(len(pairs)) + (j - (len(res["ks"]) - 1) / 2) * width
            y = np.array([r["score"] for r in sub])
            err = np.array([[r["score"] - r["ci"][0], r["ci"][1] - r["score"]] if r["ci"] else [0, 0] for r in sub]).T
            ax.bar(x, y, width, yerr=err, capsize=3, label=f"k={k} (chance {sub[0]['chance']:.3f})")
            for xi, yi in zip(x, y):
                ax.text(xi, yi + 0.02, f"{yi:.2f}", ha="center", fontsize=6)
        ax.set_xticks(np.arange(len(pairs)), [f"{v}\n× {t}" for v, t in pairs], fontsize=8)
        ax.set_ylim(0, 1.05)
        ax.set_ylabel("tie-aware mutual k-NN (best layer pair)")
        ax.set_title(f"Test of Time, {view} (N={rows[0]['n']})", fontsize=10)
        legend_outside(ax, "below")
    figs.append(save_figure(fig, run_dir, "figures/test_of_time_alignment.png"))
    by_layer = res["nearest_related_by_layer"]
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.2))
    nr = res["nearest_related"]
    colours = {"equivalent": "#4c72b0", "colour_swap": "#dd8452", "relation_swap": "#55a868"}
    left = np.zeros(len(nr))
    for rel in RELATIONS:
        vals = np.array([r["fractions"][rel] for r in nr])
        axes[0].barh(np.arange(len(nr)), vals, left=left, color=colours[rel], label=RELATION_LABELS[rel])
        left += vals
    axes[0].set_yticks(np.arange(len(nr)), [f"{r['encoder']} ({r['modality']}, last layer)" for r in nr], fontsize=8)
    axes[0].set_xlabel("fraction of captions whose nearest related caption is ...")
    axes[0].legend(fontsize=7, loc="lower left", bbox_to_anchor=(0, 1.02))
    styles = ["-", "--", "-.", ":"]
    text_names = [r["encoder"] for r in nr if r["modality"] == "text"]
    for e_i, name in enumerate(text_names):
        fr = np.asarray(by_layer[name])
        depth = np.linspace(0, 1, len(fr)) if len(fr) > 1 else np.zeros(1)
        for rel_i, rel in enumerate(RELATIONS):
            axes[1].plot(depth, fr[:, rel_i], color=colours[rel], ls=styles[e_i % len(styles)],
                         label=name if rel_i == 1 else None)
    axes[1].set_xlabel("relative layer depth (0 = embeddings, 1 = last layer)")
    legend_outside(axes[1], title="text encoder (line style)", title_fontsize=7)
    axes[1].set_ylabel("fraction nearest")
    axes[1].set_title("text spaces: nearest related caption by layer (colour = relation)", fontsize=10)
    figs.append(save_figure(fig, run_dir, "figures/test_of_time_nearest.png"))

    rows = []
    for r in res["alignment"]:
        rows.append([r["view"], r["vision"], r["text"], r["n"], r["k"], r["score"], Raw(fmt_ci(r["ci"])), r["chance"],
                     Raw(html.escape(f"{r['x_layer_name'] or r['x_layer']} / {r['y_layer_name'] or r['y_layer']}"))])
    table1 = html_table(["items", "vision", "text", "N", "k", "score", "95% CI (group jackknife)", "chance k/(N-1)",
                         "layers (vision / text)"], rows)
    rows = []
    for r in res["nearest_related"]:
        rows.append([r["encoder"], r["modality"], r["layer_name"] or r["layer"], r["n"],
                     *[Raw(f"{fmt(r['fractions'][rel])} {fmt_ci(r['ci'][rel])}") for rel in RELATIONS], r["tied"]])
    table2 = html_table(["encoder", "space", "layer", "N", *[RELATION_LABELS[x] for x in RELATIONS],
                         "fraction with a tie"], rows)
    body = (
        f"<p>{res['n_items']} generated (video, caption) items, {res['n_videos']} distinct videos, "
        f"{res['n_distinct_captions']} distinct caption texts, {res['n_groups']} groups of 4 related items; "
        f"n_f = {res['n_f']} frames, one caption. Every caption has three logically related captions in its "
        "group: the equivalent one (same video, same meaning, other words), the colour swap (same words, "
        "opposite meaning: the bag-of-words neighbour) and the relation swap (same colour order, the other "
        "relation word, opposite meaning).</p>"
        "<p><b>Duplicates.</b> Two equivalent captions share one video file and each caption text occurs once "
        "per placement (captions do not name positions), so identical inputs tie exactly. All items are kept "
        "(the paper's protocol) and ties are scored in expectation (uniformly random tie-breaking), which "
        "makes the score independent of item order and equal to the usual mutual k-NN when nothing ties. "
        "The first view keeps one placement per colour pair, where each caption text is unique and all "
        "related captions of a caption are in its group (the structure the paper describes); in the view with all items every caption's nearest text neighbours are its "
        "verbatim copies from the other placements (outside its group), so there the k = 1, 2 scores reflect "
        "caption repetition and ties, not the ranking of related captions. Intervals: delete-one-group "
        "jackknife with the layer pair fixed (items of a group share videos and words); a zero-width interval "
        "means every group contributes alike.</p>"
        + table1 +
        "<h3>Which related caption does each space put nearest?</h3>"
        "<p>Last layer of each encoder (the figure shows every layer); intervals resample groups. In the "
        "vision spaces the equivalent caption's item has the same video, so it is nearest by construction, "
        "and the colour and relation swaps share the other video of the group (always a tie): the vision rows "
        "only confirm the data structure. The text rows are the finding: a bag-of-words reading puts the "
        "colour swap first, a temporal (logical) reading the equivalent caption.</p>" + table2 + _tot_reading(res))
    return write_section(run_dir, "40_test_of_time", "Temporal: Test of Time", body, figs,
                         random_weights=res.get("random_weights"))
