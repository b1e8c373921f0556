"""Encoder-by-encoder alignment (Dynamic Reflections app. A.5): mutual k-NN between every pair of
encoders of one modality on the same items (best layer pair, bootstrap interval), shown as a heatmap
whose rows and columns follow a hierarchical clustering of 1 - alignment (average linkage, optimal
leaf order), so that encoders which see the videos alike sit together.
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
                    confidence: float = 0.95, seed: int = 0, device=None) -> CrossAlignment:
    """Alignment between every pair of encoders: `features` maps a name to its per-layer features
    (list of [N, D_l] arrays; the same N items in the same order for every encoder). Each encoder's
    layers are prepared once; each pair runs the layer search (best pair re-selected in every
    bootstrap resample when n_bootstrap > 0)."""
    from vlgap.metrics.layer_search import layer_search, precompute_layers

    names = list(features)
    if len(names) < 2:
        raise VlgapError(f"a cross-alignment matrix needs at least two encoders, got {names}")
    states = {nm: precompute_layers(features[nm], k, metric, for_bootstrap=n_bootstrap > 0, device=device, name=nm)
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


@feature_options_moved()
def run_cross_alignment(manifest, encoders_names: Sequence[str], *, n_f: int = 8, k: int = 10,
                        n_bootstrap: int = 200, confidence: float = 0.95, seed: int = 0,
                        features: FeatureSource | FeatureOptions | None = None, out: str | Path | None = None) -> dict[str, Any]:
    """Vision x vision matrix on a manifest (features from the cache or extracted at n_f frames).
    With `out`, writes out/temporal/cross_vision.json and the report section with its heatmap."""
    t0 = time.perf_counter()
    src = FeatureSource.of(features)
    man = read_manifest(manifest)
    sets = {v: src.vision(man, v, n_f) for v in encoders_names}
    ids = common_ids(list(sets.values()), man.ids)
    res = cross_alignment({v: fs.subset(ids).layers for v, fs in sets.items()}, k=k, n_bootstrap=n_bootstrap,
                          confidence=confidence, seed=seed)
    d = res.to_dict()
    d.update({"manifest": str(man.path), "n_f": n_f, "layer_names": {
        key: [layer_name(sets[a], la), layer_name(sets[b], lb)] for key, (la, lb) in res.layers.items()
        for a, b in [key.split("|")]},
        "seconds": round(time.perf_counter() - t0, 1)})
    mark_random_weights(d, src.random_weight_names(encoders_names))
    if out is not None:
        write_cross_section(res, d, out)
    return d


def write_cross_section(res: CrossAlignment, d: dict[str, Any], run_dir: str | Path) -> Path:
    run_dir = Path(run_dir)
    atomic_write_json(run_dir / "temporal" / "cross_vision.json", d)
    figs = [save_figure(heatmap_figure(res), run_dir, "figures/cross_vision_heatmap.png")]
    rows = []
    for key, (la, lb) in d["layer_names"].items():
        a, b = key.split("|")
        i, j = res.names.index(a), res.names.index(b)
        ci = None if not np.isfinite(res.ci_lo[i, j]) else [res.ci_lo[i, j], res.ci_hi[i, j]]
        rows.append([a, b, res.n, res.scores[i, j], Raw(fmt_ci(ci)), res.chance,
                     Raw(html.escape(f"{la} / {lb}"))])
    body = (f"<p>Mutual k-NN (k = {res.k}) between every pair of vision encoders on the same {res.n} videos "
            f"(n_f = {d.get('n_f')}), best layer pair, {res.n_bootstrap} bootstrap resamples over videos (best pair "
            "re-selected in each). Rows and columns follow average-linkage clustering of 1 - alignment; "
            f"clustered order: {html.escape(', '.join(d['ordered_names']))}.</p>"
            + html_table(["encoder A", "encoder B", "N", "alignment", "95% CI", "chance", "layers (A / B)"], rows)
            + ("" if len(res.names) > 2 else "<p>With two encoders the clustering is trivial; add encoders with "
               "<code>vlgap cross-vision</code> for a real matrix.</p>"))
    return write_section(run_dir, "43_cross_vision", "Vision × vision alignment", body, figs,
                         random_weights=d.get("random_weights"))
