"""Encoder-by-encoder alignment (Dynamic Reflections app. A.5, Fig 10): mutual k-NN between every pair of
encoders on the same items (best layer pair, bootstrap interval), shown as a heatmap whose rows and
columns follow a hierarchical clustering of 1 - alignment (average linkage, optimal leaf order), so
that encoders which see the videos alike sit together. Vision encoders each run at their own n_f (one
value for all, or one per encoder, e.g. the n_f at which each is best in a sweep:
`vlgap.probe.cross_figures.best_n_f`); text encoders may join the matrix as extra rows (the paper's
Gemma2 row), each on its captions at n_c.
"""
from __future__ import annotations

import html
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from vlgap.data.manifest import read_manifest
from vlgap.encoders.registry import mark_random_weights
from vlgap.errors import VlgapError
from vlgap.features.source import FeatureOptions, FeatureSource, common_ids, feature_options_moved, layer_name
from vlgap.io_utils import atomic_write_json
from vlgap.probe.report import Raw, fmt_ci, html_table, save_figure, write_section


@dataclass
class CrossAlignment:
    names: list[str]
    scores: np.ndarray              # [M, M] best-layer-pair alignment, diagonal 1
    ci_lo: np.ndarray               # [M, M] (nan without bootstrap; diagonal 1)
    ci_hi: np.ndarray
    layers: dict[str, list[int]]    # "a|b" -> [layer of a, layer of b]
    order: list[int]                # clustered order of the encoders
    linkage: np.ndarray | None      # scipy linkage matrix (None for fewer than 2 encoders)
    n: int
    k: int
    metric: str
    chance: float | None
    n_bootstrap: int
    seed: int
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        for key in ("scores", "ci_lo", "ci_hi", "linkage"):
            d[key] = None if d[key] is None else np.asarray(d[key]).tolist()
        d["ordered_names"] = [self.names[i] for i in self.order]
        return d


def cluster_order(scores: np.ndarray) -> tuple[list[int], np.ndarray | None]:
    """Leaf order of average-linkage clustering on distance 1 - alignment (optimal leaf ordering)."""
    from scipy.cluster.hierarchy import leaves_list, linkage, optimal_leaf_ordering
    from scipy.spatial.distance import squareform

    m = scores.shape[0]
    if m < 2:
        return list(range(m)), None
    dist = 1.0 - (scores + scores.T) / 2
    np.fill_diagonal(dist, 0.0)
    condensed = squareform(np.clip(dist, 0.0, None), checks=False)
    z = linkage(condensed, method="average")
    if m > 2:
        z = optimal_leaf_ordering(z, condensed)
    return [int(i) for i in leaves_list(z)], z


def cross_alignment(features: dict[str, Any], *, k: int = 10, metric: str = "mutual_knn", n_bootstrap: int = 0,
                    confidence: float = 0.95, seed: int = 0, device=None, preset: str | None = None) -> CrossAlignment:
    """Alignment between every pair of encoders: `features` maps a name to its per-layer features
    (list of [N, D_l] arrays; the same N items in the same order for every encoder). Each encoder's
    layers are prepared once; each pair runs the layer search (best pair re-selected in every
    bootstrap resample when n_bootstrap > 0)."""
    from vlgap.metrics.layer_search import layer_search, precompute_layers

    names = list(features)
    if len(names) < 2:
        raise VlgapError(f"a cross-alignment matrix needs at least two encoders, got {names}")
    states = {nm: precompute_layers(features[nm], k, metric, for_bootstrap=n_bootstrap > 0, device=device, name=nm,
                                    preset=preset)
              for nm in names}
    ns = {nm: s.n for nm, s in states.items()}
    if len(set(ns.values())) != 1:
        raise VlgapError(f"encoders hold different numbers of items {ns}: give every encoder the same items")
    m = len(names)
    scores, lo, hi = np.eye(m), np.full((m, m), np.nan), np.full((m, m), np.nan)
    np.fill_diagonal(lo, 1.0)
    np.fill_diagonal(hi, 1.0)
    layers: dict[str, list[int]] = {}
    chance = None
    pair = 0
    for i in range(m):
        for j in range(i + 1, m):
            res = layer_search(states[names[i]], states[names[j]], k=k, metric=metric, n_bootstrap=n_bootstrap,
                               confidence=confidence, seed=seed + pair)
            pair += 1
            scores[i, j] = scores[j, i] = res.best_score
            if res.ci is not None:
                lo[i, j], hi[i, j] = res.ci
                lo[j, i], hi[j, i] = res.ci
            layers[f"{names[i]}|{names[j]}"] = [res.x_layer, res.y_layer]
            chance = res.chance
    order, z = cluster_order(scores)
    return CrossAlignment(names, scores, lo, hi, layers, order, z, ns[names[0]], k, metric, chance, n_bootstrap, seed)


def heatmap_figure(res: CrossAlignment, title: str = ""):
    """Clustered heatmap: dendrogram on top, cells annotated with the score (and interval)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from scipy.cluster.hierarchy import dendrogram

    m = len(res.names)
    order = res.order
    mat = res.scores[np.ix_(order, order)]
    size = max(4.0, 1.1 * m + 2.5)
    fig = plt.figure(figsize=(size + 1.2, size + 1.0))
    ax_d = fig.add_axes([0.2, 0.8, 0.6, 0.14])
    ax = fig.add_axes([0.2, 0.12, 0.6, 0.66])
    cax = fig.add_axes([0.83, 0.12, 0.03, 0.66])
    if res.linkage is not None and float(np.max(res.linkage[:, 2])) > 0:
        dendrogram(res.linkage, ax=ax_d, no_labels=True, color_threshold=0, above_threshold_color="k")
    ax_d.set_axis_off()
    diag = np.eye(m, dtype=bool)
    off = mat[~diag]
    lo = float(np.nanmin(off)) if off.size else 0.0
    hi = float(np.nanmax(off)) if off.size else 1.0
    lo = min(lo, res.chance) if res.chance is not None else lo
    cmap = plt.get_cmap("viridis").with_extremes(bad="#dddddd")  # diagonal (1 by definition): off the scale
    im = ax.imshow(np.ma.masked_array(mat, diag), cmap=cmap, vmin=lo, vmax=max(hi, lo + 1e-6))
    labels = [res.names[i] for i in order]
    ax.set_xticks(range(m), labels, rotation=45, ha="right", fontsize=8)
    ax.set_yticks(range(m), labels, fontsize=8)
    for a in range(m):
        for b in range(m):
            i, j = order[a], order[b]
            txt = "1" if i == j else f"{res.scores[i, j]:.3f}"
            if i != j and np.isfinite(res.ci_lo[i, j]):
                txt += f"\n[{res.ci_lo[i, j]:.3f}, {res.ci_hi[i, j]:.3f}]"
            bright = i == j or (res.scores[i, j] - lo) / max(hi - lo, 1e-12) > 0.6
            ax.text(b, a, txt, ha="center", va="center", fontsize=7, color="k" if bright else "w")
    cb = fig.colorbar(im, cax=cax)
    cb.set_label(f"{res.metric} (off-diagonal; chance {res.chance:.3f})" if res.chance else res.metric)
    ax_d.set_title(title or f"{res.metric}, k={res.k}, N={res.n}: every pair of encoders (clustered)", fontsize=10)
    return fig


def per_encoder_n_f(encoders_names: Sequence[str], n_f: "int | dict[str, int]") -> dict[str, int]:
    """One n_f per vision encoder: an int for all, or a dict that must name every encoder (a one-line
    error lists the missing ones)."""
    from vlgap.counts import check_count

    if isinstance(n_f, dict):
        missing = [v for v in encoders_names if v not in n_f]
        if missing:
            raise VlgapError(f"n_f per encoder: no value for {', '.join(missing)}; give name=n_f for every vision "
                             f"encoder, e.g. {','.join(f'{v}=8' for v in encoders_names)}")
        return {v: check_count(f"n_f of {v}", n_f[v], 1, flag="--n-frames", example=8) for v in encoders_names}
    value = check_count("n_f", n_f, 1, flag="--n-frames", example=8)
    return {v: value for v in encoders_names}


@feature_options_moved()
def run_cross_alignment(manifest, encoders_names: Sequence[str], *, n_f: "int | dict[str, int]" = 8, k: int = 10,
                        n_bootstrap: int = 200, confidence: float = 0.95, seed: int = 0,
                        text: Sequence[str] = (), n_c: int = 1, metric: str = "mutual_knn", preset: str | None = None,
                        features: FeatureSource | FeatureOptions | None = None, out: str | Path | None = None,
                        section: str = "43_cross_vision", json_name: str = "temporal/cross_vision.json",
                        figure_name: str = "figures/cross_vision_heatmap.png") -> dict[str, Any]:
    """Encoder x encoder matrix on a manifest (features from the cache or extracted): every vision encoder
    at its n_f (`n_f`: one int, or {name: n_f} for every encoder) and every `text` encoder on n_c
    captions as extra rows. With `out`, writes `out/<json_name>` and the report section `section` with
    its heatmap."""
    from vlgap.counts import check_count

    t0 = time.perf_counter()
    src = FeatureSource.of(features)
    man = read_manifest(manifest)
    text = list(text)
    both = sorted(set(encoders_names) & set(text))
    if both:
        raise VlgapError(f"{', '.join(both)} given as both a vision and a text encoder; name each encoder once")
    n_fs = per_encoder_n_f(encoders_names, n_f)
    n_c = check_count("n_c", n_c, 1, flag="--n-captions", example=1)
    sets = {v: src.vision(man, v, n_fs[v]) for v in encoders_names}
    sets.update({t: src.text(man, t, n_c) for t in text})
    ids = common_ids(list(sets.values()), man.ids)
    res = cross_alignment({v: fs.subset(ids).layers for v, fs in sets.items()}, k=k, n_bootstrap=n_bootstrap,
                          confidence=confidence, seed=seed, metric=metric, preset=preset)
    d = res.to_dict()
    one_n_f = len(set(n_fs.values())) == 1 and not isinstance(n_f, dict)
    d.update({"manifest": str(man.path), "n_f": next(iter(n_fs.values())) if one_n_f else n_fs,
              "n_f_per_encoder": n_fs, "text": text, "n_c": n_c if text else None, "preset": preset,
              "modality": {**{v: "vision" for v in encoders_names}, **{t: "text" for t in text}},
              "layer_names": {key: [layer_name(sets[a], la), layer_name(sets[b], lb)]
                              for key, (la, lb) in res.layers.items() for a, b in [key.split("|")]},
              "seconds": round(time.perf_counter() - t0, 1)})
    mark_random_weights(d, src.random_weight_names(list(encoders_names) + text))
    if out is not None:
        write_cross_section(res, d, out, section=section, json_name=json_name, figure_name=figure_name)
    return d


def _n_f_words(d: dict[str, Any]) -> str:
    per = d.get("n_f_per_encoder") or {}
    if per and len(set(per.values())) > 1 or isinstance(d.get("n_f"), dict):
        return "n_f per encoder: " + ", ".join(f"{v} {n}" for v, n in per.items())
    return f"n_f = {d.get('n_f')}"


def write_cross_section(res: CrossAlignment, d: dict[str, Any], run_dir: str | Path, *,
                        section: str = "43_cross_vision", json_name: str = "temporal/cross_vision.json",
                        figure_name: str = "figures/cross_vision_heatmap.png", title: str | None = None,
                        lead: str = "") -> Path:
    run_dir = Path(run_dir)
    atomic_write_json(run_dir / json_name, d)
    text = list(d.get("text") or [])
    figs = [save_figure(heatmap_figure(res), run_dir, figure_name)]
    rows = []
    modality = d.get("modality") or {}
    for key, (la, lb) in d["layer_names"].items():
        a, b = key.split("|")
        i, j = res.names.index(a), res.names.index(b)
        ci = None if not np.isfinite(res.ci_lo[i, j]) else [res.ci_lo[i, j], res.ci_hi[i, j]]
        kinds = f"{modality.get(a, 'vision')} × {modality.get(b, 'vision')}"
        rows.append([a, b, Raw(html.escape(kinds)), res.n, res.scores[i, j], Raw(fmt_ci(ci)), res.chance,
                     Raw(html.escape(f"{la} / {lb}"))])
    what = "vision encoders" + (f" and text encoders ({', '.join(text)}, n_c = {d.get('n_c')})" if text else "")
    body = (lead + f"<p>Mutual k-NN (k = {res.k}) between every pair of {html.escape(what)} on the same {res.n} "
            f"videos ({html.escape(_n_f_words(d))}), best layer pair, {res.n_bootstrap} bootstrap resamples over "
            "videos (best pair re-selected in each). Rows and columns follow average-linkage clustering of "
            f"1 - alignment; clustered order: {html.escape(', '.join(d['ordered_names']))}.</p>"
            + html_table(["encoder A", "encoder B", "kinds", "N", "alignment", "95% CI", "chance", "layers (A / B)"],
                         rows)
            + ("" if len(res.names) > 2 else "<p>With two encoders the clustering is trivial; add encoders with "
               "<code>vlgap cross-vision</code> for a real matrix.</p>"))
    if title is None:
        title = "Vision × vision alignment" + (" (with text rows)" if text else "")
    return write_section(run_dir, section, title, body, figs, random_weights=d.get("random_weights"))
