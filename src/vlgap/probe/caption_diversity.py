"""Caption diversity vs quantity: does alignment grow with n_c because more captions carry more facts,
or just because there is more text? Two caption groups per item, ten captions of different facts
(`diverse`) and ten paraphrases of one fact set (`paraphrase`), are swept over n_c against the same
videos; at every n_c the difference diverse - paraphrase gets a paired bootstrap interval over items.

Groups come from each item's meta["caption_groups"] (`vlgap make-data shapes --caption-mode both`, or
any manifest that carries them), or, for a shapes manifest without them, are rebuilt from the scene
spec and caption seed (`vlgap.data.shapes.caption_groups`), so the demo's cached data serves as is.

The paired difference is `vlgap.metrics.conditions.compare_conditions`: the vision space is shared,
the two text spaces differ; each resample draws the same items for both groups and recomputes every
neighbour list (resampling fixed per-item overlaps would understate the variance of a k-NN score);
the layer pair is fixed by the best mean of the two groups. With the shapes groups both start from the
same first caption, so at n_c = 1 the difference is exactly 0 by construction.
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
from vlgap.io_utils import atomic_write_json

GROUPS = ("diverse", "paraphrase")
SECTION = "60_caption_diversity"


def manifest_groups(man: Manifest) -> tuple[dict[str, Manifest], dict[str, list[list[list[str]]] | None]]:
    """The manifest once per caption group (same items and media, the group's captions), and each
    group's facts per item and caption (None when the manifest does not say)."""
    from vlgap.data.shapes.caption_groups import caption_groups

    groups: dict[str, list] = {g: [] for g in GROUPS}
    facts: dict[str, list | None] = {g: [] for g in GROUPS}
    for it in man.items:
        meta = it.meta or {}
        stored = meta.get("caption_groups")
        if isinstance(stored, dict) and all(g in stored for g in GROUPS):
            got = {g: list(stored[g]) for g in GROUPS}
            got_facts = meta.get("caption_group_facts") or {}
        elif "spec" in meta and "caption_seed" in meta:
            built = caption_groups(meta["spec"], int(meta["caption_seed"]))
            got, got_facts = {g: built[g] for g in GROUPS}, built["facts"]
        else:
            raise VlgapError(f"item {it.id!r} has neither meta.caption_groups ({' and '.join(GROUPS)} caption lists) "
                             "nor a shapes scene spec; write such data with `vlgap make-data shapes --caption-mode "
                             "both`")
        for g in GROUPS:
            if not got[g] or not all(isinstance(c, str) and c.strip() for c in got[g]):
                raise VlgapError(f"item {it.id!r}: caption group {g!r} must be a non-empty list of non-empty strings")
            groups[g].append(replace(it, captions=tuple(got[g])))
            f = got_facts.get(g) if isinstance(got_facts, dict) else None
            if facts[g] is not None and f is not None and len(f) == len(got[g]):
                facts[g].append([list(x) for x in f])
            else:
                facts[g] = None
    return {g: Manifest(man.path, groups[g]) for g in GROUPS}, facts


def facts_at(facts: list[list[list[str]]] | None, n_c: int, keep: set[int] | None = None) -> float | None:
    """Mean number of distinct facts stated by the first n_c captions of each item."""
    if facts is None:
        return None
    counts = [len(set().union(*map(set, f[:n_c]))) for i, f in enumerate(facts) if keep is None or i in keep]
    return float(np.mean(counts)) if counts else None


def group_difference(vision, diverse, paraphrase, *, k: int = 10, n_bootstrap: int = 1000, confidence: float = 0.95,
                     seed: int = 0, names: tuple[str, str] = GROUPS):
    """Alignment of the same videos (`vision`: arrays, per-layer list or a `Space`) with two text groups
    (same items, same order), and A - B with a paired bootstrap interval (a PairedDifference)."""
    import torch

    from vlgap.metrics.conditions import KnnCondition, Space, compare_conditions

    x = vision if isinstance(vision, Space) else Space(vision, "vision")
    a = diverse if isinstance(diverse, Space) else Space(diverse, names[0])
    b = paraphrase if isinstance(paraphrase, Space) else Space(paraphrase, names[1])
    if not (x.n == a.n == b.n):
        raise VlgapError(f"vision ({x.n}), {names[0]} ({a.n}) and {names[1]} ({b.n}) features must hold the same "
                         "items in the same order")
    if len(a) != len(b):
        raise VlgapError(f"{names[0]} features have {len(a)} layers, {names[1]} {len(b)}: use one text encoder")
    rows, ones = torch.arange(x.n), torch.ones(x.n, dtype=torch.float64)
    return compare_conditions(KnnCondition(names[0], x.sides, a.sides, rows, ones),
                              KnnCondition(names[1], x.sides, b.sides, rows, ones),
                              n_items=x.n, k=k, n_bootstrap=n_bootstrap, confidence=confidence, seed=seed)


@feature_options_moved()
def caption_diversity(manifest: str | Path, vision: Sequence[str], text: Sequence[str], *,
                      n_captions: Sequence[int] = (1, 2, 4, 8), n_f: int = 8, k: int = 10, n_bootstrap: int = 1000,
                      confidence: float = 0.95, seed: int = 0, features: FeatureSource | FeatureOptions | None = None,
                      out: str | Path | None = None) -> dict[str, Any]:
    """Sweep n_c for ten diverse captions and ten paraphrases of one fact set per item, for every vision x
    text encoder: each group's alignment with its interval and the paired difference diverse - paraphrase
    (see the module docstring). With `out`, writes out/caption_diversity.json and the report section."""
    from vlgap.counts import check_count
    from vlgap.encoders.registry import mark_random_weights
    from vlgap.metrics.conditions import Space

    t0 = time.perf_counter()
    n_captions = sorted({check_count("n_c", v, 1, flag="--n-captions", example=4) for v in n_captions})
    if not n_captions:
        raise VlgapError("--n-captions is empty: give at least one value, e.g. 1,2,4,8")
    src = FeatureSource.of(features)
    man = read_manifest(manifest)
    by_group, facts = manifest_groups(man)
    shortest = min(len(it.captions) for g in GROUPS for it in by_group[g].items)
    if max(n_captions) > shortest:
        raise VlgapError(f"n_c={max(n_captions)} exceeds the {shortest} captions some item has in a group; use "
                         f"--n-captions up to {shortest}")
    # vision features of the manifest as given (its cache entry, e.g. the demo's); text once per group
    vis = {v: src.vision(man, v, n_f) for v in vision}
    txt = {(t, g, c): src.text(by_group[g], t, c) for t in text for g in GROUPS for c in n_captions}
    ids = common_ids(list(vis.values()) + list(txt.values()), man.ids)
    if len(ids) < k + 2:
        raise VlgapError(f"only {len(ids)} items are usable in every feature set; k={k} needs at least {k + 2}")
    keep = {i for i, item_id in enumerate(man.ids) if item_id in set(ids)}
    rows = []
    for vi, v in enumerate(vision):
        vspace = Space(vis[v].subset(ids).layers, v)
        for ti, t in enumerate(text):
            for ci, c in enumerate(n_captions):
                a = Space(txt[(t, "diverse", c)].subset(ids).layers, "diverse")
                b = Space(txt[(t, "paraphrase", c)].subset(ids).layers, "paraphrase")
                d = group_difference(vspace, a, b, k=k, n_bootstrap=n_bootstrap, confidence=confidence,
                                     seed=seed + 10000 * vi + 100 * ti + ci)
                rows.append({"vision": v, "text": t, "n_c": c, **d.to_dict(),
                             "facts_diverse": facts_at(facts["diverse"], c, keep),
                             "facts_paraphrase": facts_at(facts["paraphrase"], c, keep),
                             "x_layer_name": layer_name(vis[v], d.x_layer),
                             "y_layer_name": layer_name(txt[(t, "diverse", c)], d.y_layer)})
    res = {"manifest": str(man.path), "n": len(ids), "n_f": n_f, "n_captions": list(n_captions), "k": k,
           "confidence": confidence, "n_bootstrap": n_bootstrap, "groups": list(GROUPS), "rows": rows,
           "dropped": [i for i in man.ids if i not in set(ids)],
           "seconds": round(time.perf_counter() - t0, 1)}
    mark_random_weights(res, src.random_weight_names([*vision, *text]))
    if out is not None:
        atomic_write_json(Path(out) / "caption_diversity.json", res)
        write_caption_diversity_section(res, out)
    return res


def caption_diversity_figure(res: dict[str, Any]):
    """Per encoder pair: both groups' alignment over n_c with intervals (left), the paired difference (right)."""
    from vlgap.probe.figures import legend_outside, pyplot

    plt = pyplot()
    pairs = list(dict.fromkeys((r["vision"], r["text"]) for r in res["rows"]))
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for p_i, (v, t) in enumerate(pairs):
        sub = sorted((r for r in res["rows"] if (r["vision"], r["text"]) == (v, t)), key=lambda r: r["n_c"])
        x = np.array([r["n_c"] for r in sub], dtype=float)
        colour = f"C{p_i % 10}"
        for key, ci_key, style, name in (("score_a", "ci_a", "-o", "diverse"), ("score_b", "ci_b", "--s", "paraphrase")):
            y = np.array([r[key] for r in sub])
            axes[0].plot(x, y, style, color=colour, label=f"{v} × {t}, {name}")
            if all(r[ci_key] for r in sub):
                axes[0].fill_between(x, [r[ci_key][0] for r in sub], [r[ci_key][1] for r in sub], color=colour,
                                     alpha=0.12)
        y = np.array([r["difference"] for r in sub])
        err = None
        if all(r["ci"] for r in sub):
            err = np.array([[r["difference"] - r["ci"][0] for r in sub], [r["ci"][1] - r["difference"] for r in sub]])
        axes[1].errorbar(x * (1 + 0.03 * (p_i - (len(pairs) - 1) / 2)), y, yerr=err, fmt="-D", color=colour,
                         capsize=3, label=f"{v} × {t}")
    for ax in axes:
        ax.set_xscale("log", base=2)
        ax.set_xlabel("captions per item n_c")
    axes[0].set_ylabel("mutual k-NN alignment (95% CI)")
    axes[1].set_ylabel("diverse - paraphrase (paired bootstrap 95% CI)")
    axes[1].axhline(0, color="grey", lw=1)
    fig.suptitle(f"Caption diversity vs quantity: N={res['n']} videos, n_f={res['n_f']}, k={res['k']}", fontsize=10)
    fig.tight_layout()
    legend_outside(axes[0], "below", fontsize=6)
    legend_outside(axes[1], fontsize=6)
    return fig


def write_caption_diversity_section(res: dict[str, Any], run_dir: str | Path) -> Path:
    from vlgap.probe.report import Raw, fmt, fmt_ci, fmt_or_na, html_table, save_figure, write_section

    run_dir = Path(run_dir)
    figs = [save_figure(caption_diversity_figure(res), run_dir, "figures/caption_diversity.png")]
    table = html_table(
        ["vision", "text", "n_c", "facts (diverse)", "facts (paraphrase)", "diverse", "95% CI", "paraphrase",
         "95% CI", "diverse - paraphrase", "95% CI", "p", "layers"],
        [[r["vision"], r["text"], r["n_c"], fmt_or_na(r["facts_diverse"], "not recorded"),
          fmt_or_na(r["facts_paraphrase"], "not recorded"), r["score_a"], Raw(fmt_ci(r["ci_a"])), r["score_b"],
          Raw(fmt_ci(r["ci_b"])), Raw(fmt(r["difference"], 4)), Raw(fmt_ci(r["ci"], 4)),
          fmt_or_na(r.get("p_value"), "no resamples"), f"{r['x_layer_name']} / {r['y_layer_name']}"]
         for r in res["rows"]])
    body = (f"<p>The critique asks whether more captions help because they carry more information or just more "
            f"text. Each of the N = {res['n']} videos has two caption groups: ten captions of different facts "
            "(<i>diverse</i>, the usual shapes captions) and ten paraphrases of one fact set (<i>paraphrase</i>: "
            "rewordings of the diverse group's first caption, stating exactly its facts). Both groups start with "
            "the same caption, so at n_c = 1 they are the same text. The facts columns count the distinct facts "
            "the first n_c captions state (mean per video). Differences have a paired bootstrap interval over "
            f"videos ({res['n_bootstrap']} resamples, neighbours recomputed in each; layer pair fixed by the best "
            f"mean of both groups); n_f = {res['n_f']}, k = {res['k']}.</p>" + table)
    return write_section(run_dir, SECTION, "Caption diversity vs quantity (diverse captions vs paraphrases)", body,
                         figs, random_weights=res.get("random_weights"))
