"""Frame-order controls: alignment with the sampled frames of every video reversed or shuffled against
ordered frames, each difference with a paired bootstrap interval
(`vlgap.metrics.conditions.frame_order_difference`).

Image encoders that average per-frame embeddings (temporal pooling "mean", the default) are
order-invariant by construction: their reversed or shuffled features equal the ordered ones up to float
rounding, so every frame-order difference is exactly 0 for them. The report says so instead of implying
a measured null effect. With a pooling that keeps time (FeatureOptions(temporal_pooling="segments:4" or
"meandiff"), `vlgap.features.temporal_pooling`) the controls are extracted in full and measured. Even
then, reversing every video is one fixed permutation (segments:S with S dividing n_f) or sign flip
(meandiff) of the coordinates for all videos alike: it keeps every cosine similarity, so a k-NN
alignment with reversed frames still equals the ordered one up to rounding. Shuffled frames (another
order per video) are the control such a pooling can fail."""
from __future__ import annotations

import html
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from vlgap.data.manifest import read_manifest
from vlgap.encoders.registry import mark_random_weights
from vlgap.errors import VlgapError
from vlgap.features.source import FeatureOptions, FeatureSource, common_ids, feature_options_moved, layer_name
from vlgap.io_utils import atomic_write_json
from vlgap.metrics.conditions import Space, frame_order_difference
from vlgap.probe.figures import paired_difference_figure
from vlgap.probe.report import Raw, fmt, fmt_ci, fmt_or_na, html_table, save_figure, write_section


def _max_rel_diff(a: list[np.ndarray], b: list[np.ndarray]) -> float:
    out = 0.0
    for x, y in zip(a, b):
        scale = max(float(np.max(np.abs(x))), 1e-12)
        out = max(out, float(np.max(np.abs(x - y))) / scale)
    return out


@feature_options_moved()
def run_frame_order(manifest: str | Path, vision: Sequence[str], text: Sequence[str], *, n_f: int = 8, n_c: int = 1,
                    k: int = 10, orders: Sequence[str] = ("reversed", "shuffled"), n_bootstrap: int = 1000,
                    confidence: float = 0.95, seed: int = 0, image_check_items: int | None = None,
                    features: FeatureSource | FeatureOptions | None = None, out: str | Path | None = None) -> dict[str, Any]:
    """Frame-order controls: for every vision x text encoder and every control order, alignment with
    ordered frames minus alignment with the control, with a paired bootstrap interval.

    image_check_items: for image encoders (per-frame embeddings averaged, order-invariant by
    construction) extract the controls only for about this many videos and check that they equal the
    ordered features; the difference is then exactly 0 and is reported as such. None: extract the
    controls for every video whatever the encoder. The check is skipped when the options' temporal
    pooling keeps time (not "mean"): the controls then differ by design and are extracted in full.
    The two halves, `frame_order_features` and `finish_frame_order`, may run in different threads
    (`vlgap demo`)."""
    inputs = frame_order_features(manifest, vision, text, n_f=n_f, n_c=n_c, orders=orders,
                                  image_check_items=image_check_items, features=features)
    return finish_frame_order(inputs, k=k, n_bootstrap=n_bootstrap, confidence=confidence, seed=seed, out=out)


def frame_order_features(manifest: str | Path, vision: Sequence[str], text: Sequence[str], *, n_f: int = 8,
                         n_c: int = 1, orders: Sequence[str] = ("reversed", "shuffled"),
                         image_check_items: int | None = None,
                         features: FeatureSource | FeatureOptions | None = None) -> dict[str, Any]:
    """The features `run_frame_order` compares: ordered frames, captions and each control (for image
    encoders that average frames, the control of about `image_check_items` videos only)."""
    t0 = time.perf_counter()
    src = FeatureSource.of(features)
    man = read_manifest(manifest)
    for o in orders:
        if o not in ("reversed", "shuffled"):
            raise VlgapError(f"frame order control {o!r}: use 'reversed' or 'shuffled'")
    pooling = src.options.temporal_pooling
    ordered = {v: src.vision(man, v, n_f) for v in vision}
    txt = {t: src.text(man, t, n_c) for t in text}
    controls = {}
    for v in vision:
        kind = ordered[v].record.get("encoder", {}).get("kind", "unknown")
        for order in orders:
            if image_check_items and kind == "image" and pooling == "mean":
                n_shards = max(1, len(man) // int(image_check_items))
                controls[v, order] = ("part", src.vision(man, v, n_f, frame_order=order, shard=(0, n_shards)))
            else:
                controls[v, order] = ("full", src.vision(man, v, n_f, frame_order=order))
    return {"src": src, "man": man, "vision": list(vision), "text": list(text), "n_f": n_f, "n_c": n_c,
            "orders": list(orders), "image_check_items": image_check_items, "ordered": ordered, "txt": txt,
            "controls": controls, "seconds": time.perf_counter() - t0}


def finish_frame_order(inputs: dict[str, Any], *, k: int = 10, n_bootstrap: int = 1000, confidence: float = 0.95,
                       seed: int = 0, out: str | Path | None = None) -> dict[str, Any]:
    """The comparison of `frame_order_features`' output, its JSON and report section (with `out`)."""
    t0 = time.perf_counter()
    src, man, vision, text = inputs["src"], inputs["man"], inputs["vision"], inputs["text"]
    n_f, ordered, txt, orders = inputs["n_f"], inputs["ordered"], inputs["txt"], inputs["orders"]
    pooling = src.options.temporal_pooling
    ids = common_ids(list(ordered.values()) + list(txt.values()), man.ids)
    rows, checks = [], []
    text_spaces = {t: Space(txt[t].subset(ids).layers, t) for t in text}
    for vi, v in enumerate(vision):
        base = ordered[v].subset(ids)
        base_space = Space(base.layers, v)
        kind = base.record.get("encoder", {}).get("kind", "unknown")
        for oi, order in enumerate(orders):
            check = {"vision": v, "order": order, "kind": kind}
            extent, fs = inputs["controls"][v, order]
            if extent == "part":
                rel = _max_rel_diff(fs.layers, ordered[v].subset(fs.ids).layers)
                check.update(checked_items=fs.n, max_rel_diff=rel, invariant=rel < 1e-4)
                # features equal up to rounding: the control is the ordered space itself
                control = base_space if rel < 1e-4 else Space(
                    src.vision(man, v, n_f, frame_order=order).subset(ids).layers, order)
            else:
                control_fs = fs.subset(ids)
                rel = _max_rel_diff(control_fs.layers, base.layers)
                check.update(checked_items=control_fs.n, max_rel_diff=rel, invariant=rel < 1e-4)
                control = Space(control_fs.layers, order)
            checks.append(check)
            for ti, t in enumerate(text):
                d = frame_order_difference(base_space, control, text_spaces[t], k=k, n_bootstrap=n_bootstrap,
                                           confidence=confidence, control=order, seed=seed + 1000 * vi + 10 * ti + oi)
                rows.append({"vision": v, "text": t, "order": order, "kind": kind, **d.to_dict(),
                             "by_construction": bool(check["invariant"] and kind == "image"),
                             "x_layer_name": layer_name(base, d.x_layer), "y_layer_name": layer_name(txt[t], d.y_layer)})
    res = {"manifest": str(man.path), "n": len(ids), "n_f": n_f, "n_c": inputs["n_c"], "k": k, "orders": orders,
           "rows": rows, "checks": checks, "confidence": confidence, "image_check_items": inputs["image_check_items"],
           "temporal_pooling": pooling,
           "seconds": round(inputs["seconds"] + time.perf_counter() - t0, 1)}
    mark_random_weights(res, src.random_weight_names([*vision, *text]))
    if out is not None:
        atomic_write_json(Path(out) / "temporal" / "frame_order.json", res)
        write_frame_order_section(res, out)
    return res


def write_frame_order_section(res: dict[str, Any], run_dir: str | Path) -> Path:
    run_dir = Path(run_dir)
    rows = res["rows"]
    fig = paired_difference_figure(rows, [f"{r['vision']} × {r['text']}, {r['order']}" for r in rows],
                             f"Frame order: N={res['n']} videos, n_f={res['n_f']}, n_c={res['n_c']}, k={res['k']}",
                             "ordered - control (paired bootstrap 95% CI)", label_b="control (reversed / shuffled)")
    figs = [save_figure(fig, run_dir, "figures/frame_order.png")]
    table = html_table(["vision", "text", "control", "encoder kind", "N", "ordered", "95% CI", "control", "95% CI",
                        "ordered - control", "95% CI", "p", "note"],
                       [[r["vision"], r["text"], r["order"], r["kind"], r["n"], r["score_a"], Raw(fmt_ci(r["ci_a"])),
                         r["score_b"], Raw(fmt_ci(r["ci_b"])), Raw(fmt(r["difference"], 4)), Raw(fmt_ci(r["ci"], 4)),
                         fmt_or_na(r.get("p_value"), "no resamples"),
                         "0 by construction (mean over frames)" if r["by_construction"] else
                         ("interval excludes 0" if r["ci"] and (r["ci"][0] > 0 or r["ci"][1] < 0) else
                          "interval contains 0")] for r in rows])
    checks = html_table(["vision", "control", "encoder kind", "videos checked", "max |Δ feature| / max |feature|",
                         "order-invariant"],
                        [[c["vision"], c["order"], c["kind"], c["checked_items"], Raw(f"{c['max_rel_diff']:.2e}"),
                          "yes" if c["invariant"] else "no"] for c in res["checks"]])
    any_image = any(r["by_construction"] for r in rows)
    pooling = res.get("temporal_pooling", "mean")
    body = (f"<p>The sampled frames of every video (n_f = {res['n_f']}) are reversed or shuffled (a fixed random "
            "order per video) before encoding; the text side is unchanged (n_c = "
            f"{res['n_c']}), k = {res['k']}, N = {res['n']}. Each difference has a paired bootstrap interval over "
            "videos (neighbours recomputed in every resample; layer pair fixed, chosen by the mean of both "
            "conditions).</p>"
            + (f"<p>Image encoders pool their per-frame embeddings with <b>temporal pooling {html.escape(pooling)}"
               "</b>, which keeps the order of the sampled frames, so the controls are measured, not zero by "
               "construction. Reversing every video is still one fixed permutation or sign flip of the feature "
               "coordinates for all videos alike (segments:S with S dividing n_f; meandiff), which keeps every "
               "cosine similarity: the reversed control can then differ from ordered frames only by rounding. "
               "Shuffled frames (another order per video) are the informative control.</p>"
               if pooling != "mean" else "")
            + ("<p><b>Image encoders are order-invariant by construction</b>: they embed each frame on its own and "
               "average the embeddings, so reversing or shuffling the frames changes the features only by float "
               "rounding (checked below) and every difference is exactly 0. That zero is a property of the "
               "aggregation, not evidence that the videos carry no order information; only a native video "
               "encoder (e.g. hf-video:...) can show an order effect here.</p>" if any_image else "")
            + table + "<h3>Feature check</h3>" + checks)
    return write_section(run_dir, "42_frame_order", "Temporal: frame-order controls", body, figs,
                         random_weights=res.get("random_weights"))
