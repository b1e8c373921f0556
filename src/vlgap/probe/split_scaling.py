"""Split-caption scaling beside independent-caption scaling (the paper's Fig 8, PVD): alignment over n_c
when the n_c captions are parts of one split caption (`vlgap split-captions`), when they are independent
captions, and with the original unsplit caption (the dashed line of Fig 8), all against the vision
features of the same videos.

Every cell is the sweep's cell (`vlgap.probe.cell_score.score_cell`: best layer pair, bootstrap interval with
the pair re-selected in each resample). Vision features are taken from the original manifest (its cache
entry), so splitting captions never re-extracts the videos; items are matched by id.
"""
from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from vlgap.data.manifest import Manifest, read_manifest
from vlgap.errors import VlgapError
from vlgap.features.source import FeatureOptions, FeatureSource, common_ids, feature_options_moved, layer_name

SECTION = "61_split_captions"


def original_caption_manifest(split: Manifest) -> Manifest:
    """The split manifest with each item's unsplit caption (meta.split.source_caption) as its one caption."""
    items = []
    for it in split.items:
        src = (it.meta or {}).get("split", {}).get("source_caption")
        if not isinstance(src, str) or not src.strip():
            raise VlgapError(f"item {it.id!r} has no meta.split.source_caption; write the split manifest with "
                             "`vlgap split-captions`")
        items.append(replace(it, captions=(src,)))
    return Manifest(split.path, items)


@feature_options_moved()
def split_caption_scaling(manifest: str | Path, split_manifest: str | Path, vision: Sequence[str], text: Sequence[str], *,
                          n_f: int = 8, n_captions: Sequence[int] = (1, 2, 4), split_n_captions: Sequence[int] | None = None,
                          k: int = 10, n_bootstrap: int = 200, n_permutations: int = 0, seed: int = 0,
                          independent: bool = True, features: FeatureSource | FeatureOptions | None = None
                          ) -> dict[str, Any]:
    """Rows (vision, text, captions = independent | split | original, n_c, score, ci) on the items both
    manifests hold. independent=False leaves out the independent captions (e.g. when a sweep has them)."""
    from vlgap.probe.cell_score import score_cell

    t0 = time.perf_counter()
    src = FeatureSource.of(features)
    man, split = read_manifest(manifest), read_manifest(split_manifest)
    shared = set(man.ids) & set(split.ids)
    if len(shared) < k + 2:
        raise VlgapError(f"{split_manifest} and {manifest} share {len(shared)} items; k={k} needs at least {k + 2}")
    n_parts = min(len(it.captions) for it in split.items)
    split_values = sorted(set(split_n_captions or [c for c in n_captions if c <= n_parts] or [n_parts]))
    if max(split_values) > n_parts:
        raise VlgapError(f"split n_c={max(split_values)} exceeds the {n_parts} parts of some item of {split_manifest}")
    original = original_caption_manifest(split)
    vis = {v: src.vision(man, v, n_f) for v in vision}
    sets: dict[tuple[str, str, int], Any] = {}
    for t in text:
        if independent:
            for c in n_captions:
                sets[(t, "independent", c)] = src.text(man, t, c)
        for c in split_values:
            sets[(t, "split", c)] = src.text(split, t, c)
        sets[(t, "original", 1)] = src.text(original, t, 1)
    ids = [i for i in common_ids(list(vis.values()) + list(sets.values()), man.ids) if i in shared]
    if len(ids) < k + 2:
        raise VlgapError(f"only {len(ids)} items are usable in every feature set; k={k} needs at least {k + 2}")
    from vlgap.metrics.layer_search import precompute_layers

    def side(fs, name):  # neighbour lists of every layer, once per feature set (as the sweep does)
        return precompute_layers(fs.layers, k=k, metric="mutual_knn", for_bootstrap=n_bootstrap > 0, name=name)

    text_sides = {key: side(fs.subset(ids), f"{key[0]} {key[1]} n_c={key[2]}") for key, fs in sets.items()}
    rows = []
    for vi, v in enumerate(vision):
        x = vis[v].subset(ids)
        x_side = side(x, f"{v} n_f={n_f}")
        for ci, ((t, kind, c), fs) in enumerate(sets.items()):
            y = fs.subset(ids)
            res = score_cell(x_side, text_sides[(t, kind, c)], k=k, metric="mutual_knn", n_bootstrap=n_bootstrap,
                             n_permutations=n_permutations, seed=seed + 1000 * vi + ci)
            res.pop("matrix")
            rows.append({"vision": v, "text": t, "captions": kind, "n_c": c, **res,
                         "x_layer_name": layer_name(x, res["x_layer"]), "y_layer_name": layer_name(y, res["y_layer"])})
    splitter = {(it.meta or {}).get("split", {}).get("splitter") for it in split.items}
    return {"manifest": str(man.path), "split_manifest": str(split.path), "n": len(ids), "n_f": n_f, "k": k,
            "n_parts": n_parts, "splitters": sorted(s for s in splitter if s), "n_bootstrap": n_bootstrap,
            "rows": rows, "seconds": round(time.perf_counter() - t0, 1)}


def split_scaling_figure(res: dict[str, Any]):
    from vlgap.probe.figures import legend_outside, pyplot

    plt = pyplot()
    pairs = list(dict.fromkeys((r["vision"], r["text"]) for r in res["rows"]))
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for p_i, (v, t) in enumerate(pairs):
        colour = f"C{p_i % 10}"
        for kind, style in (("independent", "-o"), ("split", "-s")):
            sub = sorted((r for r in res["rows"] if (r["vision"], r["text"], r["captions"]) == (v, t, kind)),
                         key=lambda r: r["n_c"])
            if not sub:
                continue
            x = np.array([r["n_c"] for r in sub], dtype=float)
            ax.plot(x, [r["score"] for r in sub], style, color=colour, mfc="white" if kind == "split" else colour,
                    label=f"{v} × {t}: {kind} captions")
            lo, hi = [r["ci_lo"] for r in sub], [r["ci_hi"] for r in sub]
            if np.all(np.isfinite(lo)):
                ax.fill_between(x, lo, hi, color=colour, alpha=0.1)
        orig = [r for r in res["rows"] if (r["vision"], r["text"], r["captions"]) == (v, t, "original")]
        if orig:
            ax.axhline(orig[0]["score"], color=colour, ls="--", lw=1, label=f"{v} × {t}: original caption")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("captions per item n_c (independent captions, or parts of one caption)")
    ax.set_ylabel("mutual k-NN alignment (95% CI)")
    ax.set_title(f"Split vs independent captions: N={res['n']}, n_f={res['n_f']}, k={res['k']}, "
                 f"{res['n_parts']} parts", fontsize=10)
    fig.tight_layout()
    legend_outside(ax, fontsize=6)
    return fig


def write_split_scaling_section(res: dict[str, Any], run_dir: str | Path, note: str = "") -> Path:
    from vlgap.probe.report import Raw, fmt_ci, html_table, save_figure, write_section

    run_dir = Path(run_dir)
    figs = [save_figure(split_scaling_figure(res), run_dir, "figures/split_captions.png")]
    rows = sorted(res["rows"], key=lambda r: (r["vision"], r["text"], r["captions"], r["n_c"]))
    table = html_table(["vision", "text", "captions", "n_c", "N", "score", "95% CI", "layers"],
                       [[r["vision"], r["text"], r["captions"], r["n_c"], r["n"], r["score"],
                         Raw(fmt_ci([r["ci_lo"], r["ci_hi"]])), f"{r['x_layer_name']} / {r['y_layer_name']}"]
                        for r in rows])
    body = ("<p>The paper's PVD experiment (Fig 8) splits one detailed caption per video into parts (Gemini-2.5 "
            "Pro, App. A.3's prompt) and sweeps n_c over the parts; three synthesized parts already beat the "
            f"original caption. Here each video's longest caption is split into {res['n_parts']} parts by "
            f"{', '.join(res['splitters']) or 'a splitter'} (`vlgap split-captions`, every split validated to cover "
            "the caption), and alignment over n_c of the parts is drawn beside n_c independent captions (the "
            "sweep's) and the original unsplit caption (dashed). Each cell is the sweep's: best layer pair, "
            f"bootstrap interval re-selecting the pair ({res['n_bootstrap']} resamples); N = {res['n']}, "
            f"n_f = {res['n_f']}, k = {res['k']}.</p>" + (f"<p>{note}</p>" if note else "") + table)
    return write_section(run_dir, SECTION, "Split captions (PVD style) vs independent captions", body, figs)
