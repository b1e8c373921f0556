"""Scoring a captioner and the falsifier (reuses vlgap.captions and vlgap.stats; no training here).

`score_captions`: BLEU-1..4, METEOR, ROUGE-L, CIDEr with per-item bootstrap intervals (coco-caption
numbers from `caption_eval`) plus the share of distinct generated captions. `latent_gap`: the reviewers'
falsifier: MMD^2 (unbiased, permutation p-value, bootstrap interval), C2ST accuracy (cross-validated
logistic regression, permutation p-value) and the Frechet distance between real latents and (a) raw,
(b) polished synthetic latents. MMD^2 uses the whole flattened latent; C2ST and the Frechet distance use
the latent averaged over height and width ([C*F] dims): with N items per side a Gaussian fit in
C*F*H*W >> N dimensions is degenerate, and a linear classifier there is slow and overfits (stated in
the output).
"""
from __future__ import annotations

import inspect
from typing import Any, Sequence

import numpy as np

from vlgap.errors import VlgapError

HEADLINE = ("BLEU-4", "METEOR", "ROUGE-L", "CIDEr")


def distinct_share(captions: Sequence[str]) -> float:
    """Share of distinct captions (1.0: every video got its own caption; 1/N: one template for all)."""
    if not captions:
        raise VlgapError("no captions to count")
    return len(set(captions)) / len(captions)


def score_captions(pred: dict[str, str], refs: dict[str, list[str]], *, n_bootstrap: int = 1000,
                   seed: int = 0, metrics: Sequence[str] | None = None, keep_empty: bool = False,
                   confidence: float = 0.95) -> dict[str, Any]:
    """{"BLEU-1".."BLEU-4", "METEOR", "ROUGE-L", "CIDEr": {"score", "ci"}, "n", "distinct": {...},
    "n_empty"}. keep_empty: score an empty caption as the empty string (a captioner that says nothing scores
    0 on it; the experiment's captioners may); otherwise an empty prediction is an error."""
    from vlgap.captions.evaluate import caption_eval

    kw = "n_bootstrap" if "n_bootstrap" in inspect.signature(caption_eval).parameters else "bootstrap"
    extra = {"on_empty": "keep"} if keep_empty else {}
    res = caption_eval(pred, refs, metrics=list(metrics) if metrics else None, seed=seed, **{kw: n_bootstrap},
                       confidence=confidence, **extra)
    preds = list(pred.values())
    res["distinct"] = {"share": distinct_share(preds), "n_distinct": len(set(preds)), "n": len(preds)}
    res["n_empty"] = sum(not p.strip() for p in preds)
    return res


def _flat(x: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(x.reshape(len(x), -1), np.float64)


def _fd_view(x: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(x.mean(axis=(3, 4)).reshape(len(x), -1), np.float64) if x.ndim == 5 else _flat(x)


def two_sample(real: np.ndarray, synth: np.ndarray, *, n_permutations: int = 500, n_bootstrap: int = 500,
               c2st_permutations: int = 100, seed: int = 0) -> dict[str, Any]:
    """One comparison: real vs synthetic latents."""
    from vlgap.stats.c2st import c2st
    from vlgap.stats.frechet import frechet_distance
    from vlgap.stats.mmd import mmd_test

    if real.shape[1:] != synth.shape[1:]:
        raise VlgapError(f"real latents {list(real.shape[1:])} and synthetic latents {list(synth.shape[1:])} differ "
                         "in shape; encode both with the same latent encoder")
    if len(real) < 5 or len(synth) < 5:
        raise VlgapError(f"the falsifier needs at least 5 latents per side (5-fold C2ST), got {len(real)} real, {len(synth)} synthetic")
    a, b = _flat(real), _flat(synth)
    m = mmd_test(a, b, n_permutations=n_permutations, n_bootstrap=n_bootstrap, seed=seed, method="quadratic")
    pa, pb = _fd_view(real), _fd_view(synth)
    c = c2st(pa, pb, n_permutations=c2st_permutations, seed=seed)
    f = frechet_distance(pa, pb, n_bootstrap=0, seed=seed)
    return {"mmd2_unbiased": m.mmd2_unbiased, "p_value": m.p_value, "ci": m.ci, "ci_reason": m.ci_reason,
            "bandwidth": m.bandwidth,
            "c2st": {"accuracy": c.accuracy, "p_value": c.p_value, "chance": 0.5, "auc": c.auc},
            "fd": f.fd, "n_real": len(real), "n_synthetic": len(synth)}


def latent_gap(real: np.ndarray, raw: np.ndarray, polished: np.ndarray | None, *, n_permutations: int = 500,
               n_bootstrap: int = 500, c2st_permutations: int = 100, seed: int = 0) -> dict[str, Any]:
    """{"raw": ..., "polished": ...} each with mmd2_unbiased, p_value, ci, c2st, fd (see two_sample).
    The same bandwidth rule (median heuristic of each pooled pair) is applied to both comparisons."""
    kw = dict(n_permutations=n_permutations, n_bootstrap=n_bootstrap, c2st_permutations=c2st_permutations, seed=seed)
    out = {"raw": two_sample(real, raw, **kw),
           "polished": two_sample(real, polished, **kw) if polished is not None else None,
           "fd_space": "latent averaged over height and width (C*F dims)",
           "c2st_space": "latent averaged over height and width (C*F dims), 5-fold logistic regression",
           "mmd_space": "flattened latent (C*F*H*W dims), RBF kernel, median-heuristic bandwidth"}
    return out


# ---- grounded score: what a caption says about the video, read back and checked against its true spec ----

ATTRIBUTES = ("shape", "colour", "background", "events")


def _event_key(kind: str, shape: str, direction: str | None, colour: str | None) -> tuple:
    """What identifies an event in a caption: its kind and shape, plus the direction of a move and the new
    colour of a recolour (timing is not compared: captions rarely state it)."""
    return (kind, shape, direction if kind == "move" else None, colour if kind == "recolor" else None)


def _matched_share(n_matched: int, n_stated: int, n_true: int) -> float:
    """matched / max(stated, true): 1 only when the caption names exactly the true items; every missing or
    extra item costs the same."""
    return n_matched / max(n_stated, n_true, 1)


def attribute_scores(stated: dict | None, spec) -> dict[str, tuple[float, bool]]:
    """{attribute: (score in [0, 1], stated?)} of one caption against one video's true SceneSpec.

    `stated` is `Reading.stated` (None: the reader could not read the caption: everything unread).
    shape: matched shapes / max(named, true). colour: named true shapes whose colour the caption gets right
    (a colour it gives the shape is its start or its end colour, or its end-state colour is the end colour:
    "a red heart" fits a heart that turns red), / max(named, true). background: 1 if named
    and right. events: multiset match of (kind, shape, direction of a move, new colour of a recolour),
    / max(stated, true). An attribute the caption does not state scores 0 and counts as unread."""
    stated = stated or {"background": None, "shapes": {}, "events": []}
    true_shapes = {o.shape: o for o in spec.objects}
    end_colour = {o.shape: o.colour for o in spec.objects}
    for e in sorted(spec.events, key=lambda e: e.start):
        if e.kind == "recolor":
            end_colour[spec.objects[e.obj].shape] = e.colour
    named = stated["shapes"]
    shape_hit = sum(s in true_shapes for s in named)
    coloured = {s: v for s, v in named.items() if v.get("colour") or v.get("end_colour")}
    colour_hit = sum(s in true_shapes and (v.get("colour") in (true_shapes[s].colour, end_colour[s])
                                            or v.get("end_colour") == end_colour[s]) for s, v in coloured.items())
    true_ev: dict[tuple, int] = {}
    for e in spec.events:
        k = _event_key(e.kind, spec.objects[e.obj].shape, e.direction, e.colour)
        true_ev[k] = true_ev.get(k, 0) + 1
    said_ev: dict[tuple, int] = {}
    for e in stated["events"]:
        k = _event_key(e["kind"], e["shape"], e.get("direction"), e.get("colour"))
        said_ev[k] = said_ev.get(k, 0) + 1
    ev_hit = sum(min(n, true_ev.get(k, 0)) for k, n in said_ev.items())
    n_true = len(true_shapes)
    return {"shape": (_matched_share(shape_hit, len(named), n_true), bool(named)),
            "colour": (_matched_share(colour_hit, len(named), n_true), bool(coloured)),
            "background": (float(stated["background"] is not None and stated["background"] == spec.background),
                           stated["background"] is not None),
            "events": (_matched_share(ev_hit, len(stated["events"]), len(spec.events)), bool(stated["events"]))}


def _bootstrap_mean_ci(x: np.ndarray, n_bootstrap: int, rng: np.random.Generator,
                       confidence: float = 0.95) -> list[float] | None:
    if n_bootstrap <= 0 or len(x) < 2:
        return None
    idx = rng.integers(0, len(x), size=(n_bootstrap, len(x)))
    means = x[idx].mean(axis=1)
    lo, hi = np.quantile(means, [(1 - confidence) / 2, (1 + confidence) / 2])
    return [float(lo), float(hi)]


def grounded_score(pred: dict[str, str], specs: dict[str, Any], *, n_bootstrap: int = 1000,
                   seed: int = 0, confidence: float = 0.95) -> dict[str, Any]:
    """Per-attribute accuracy of captions against their videos' true scene specs (the shapes world).

    Each caption is read back by `wsv.reader.read_caption`; every attribute's accuracy is the mean over
    videos of `attribute_scores` with N and a percentile bootstrap interval over videos (at `confidence`, 95 %), and
    `unread_share` is the share of videos whose caption does not state that attribute (scored 0). "mean"
    averages the four attributes per video. Items of `pred` without a spec are an error."""
    from vlgap.wsv.reader import read_caption

    missing = [i for i in pred if i not in specs]
    if missing:
        raise VlgapError(f"grounded score: {len(missing)} captioned videos have no scene spec (e.g. {missing[:3]}); "
                         "it needs the true spec of every video (shapes-world manifests carry it in meta.spec)")
    if not pred:
        raise VlgapError("grounded score: no captions to score")
    ids = list(pred)
    per_item, unreadable = {}, 0
    for i in ids:
        try:
            stated = read_caption(pred[i], rng=0).stated
        except VlgapError:
            stated, unreadable = None, unreadable + 1
        per_item[i] = attribute_scores(stated, specs[i])
    rng = np.random.default_rng(seed)
    out: dict[str, Any] = {"n": len(ids), "unreadable": unreadable}
    table = np.array([[per_item[i][a][0] for a in ATTRIBUTES] for i in ids], float)
    for j, a in enumerate(ATTRIBUTES):
        out[a] = {"accuracy": float(table[:, j].mean()),
                  "ci": _bootstrap_mean_ci(table[:, j], n_bootstrap, rng, confidence), "n": len(ids), "unread_share": float(np.mean([not per_item[i][a][1] for i in ids]))}
    mean = table.mean(axis=1)
    out["mean"] = {"accuracy": float(mean.mean()), "ci": _bootstrap_mean_ci(mean, n_bootstrap, rng, confidence),
                   "n": len(ids)}
    out["per_item"] = {i: {a: per_item[i][a][0] for a in ATTRIBUTES} for i in ids}
    return out


# ---- T2V inversion: the captioner on its own generator's latents vs on real videos ----

def _paired_mean_difference(a: np.ndarray, b: np.ndarray, *, n_permutations: int, seed: int) -> dict[str, Any]:
    """mean(a - b) over paired items with the two-sided sign-flip test and the interval that inverts it
    (`vlgap.stats.resampling.sign_flip_inference`): the interval excludes 0 exactly when p < 0.05, so the
    two never contradict each other. Too few items for an interval: "ci" None with "ci_reason"; no
    permutations asked for: the point difference only."""
    from vlgap.stats.resampling import sign_flip_inference

    d = np.asarray(a, float) - np.asarray(b, float)
    out: dict[str, Any] = {"difference": float(d.mean()), "ci": None, "p_value": None, "n": len(d)}
    if n_permutations < 1 or len(d) < 2:
        out["ci_reason"] = (f"{len(d)} item(s): a paired test needs at least 2" if len(d) < 2
                            else "no permutations asked for")
        return out
    interval, test = sign_flip_inference(d, n_permutations=n_permutations, seed=seed)
    out.update(ci=interval.ci, p_value=test.p_value, n_permutations=test.n_permutations, exact=test.exact)
    if interval.reason is not None:
        out["ci_reason"] = interval.reason
    return out


def inversion_scores(pred_synthetic: dict[str, str], captions: dict[str, str], *,
                     pred_real: dict[str, str] | None = None, synthetic_specs: dict[str, Any] | None = None,
                     real_specs: dict[str, Any] | None = None, pred_polished: dict[str, str] | None = None,
                     n_bootstrap: int = 1000, n_permutations: int = 1000, seed: int = 0,
                     metrics: Sequence[str] | None = None) -> dict[str, Any]:
    """The T2V-inversion check: captions a system wrote for the generator's latents of held-out captions
    (`pred_synthetic`, item -> caption) scored against those captions (`captions`, item -> the one
    caption its synthetic latent was generated from), and, when `pred_real` is given, the same system's
    captions of the real videos the held-out captions belong to, scored against the same single reference
    each, so that the only difference is the input (synthetic latent vs real video). `pred_polished`
    (a system with a polisher): its captions of the same synthetic latents polished, the input its
    captioner was trained on, scored the same way under "synthetic_polished".

    Returns {"n", "references": "one per item ...", "synthetic": scores, "real": scores or None,
    "difference": {"CIDEr": {...}, "attributes": {...}} or None}: scores as `score_captions` (with
    per-item bootstrap intervals) plus "attributes" (`grounded_score`) where specs are given
    (`synthetic_specs`: what each synthetic video shows; `real_specs`: each real video's true spec).
    The differences are synthetic - real, paired over items: CIDEr by `compare_captions` (paired
    bootstrap, document frequencies of the shared references, approximate-randomisation p-value), the
    mean attribute accuracy by a sign-flip test and the interval that inverts it. High on synthetic
    and low on real: the captioner inverts its generator and the synthetic-to-real gap is the bottleneck;
    low on both: the captioner itself is weak."""
    from vlgap.captions.evaluate import compare_captions

    ids = list(pred_synthetic)
    if not ids:
        raise VlgapError("inversion: no synthetic captions to score")
    missing = [i for i in ids if i not in captions]
    if missing:
        raise VlgapError(f"inversion: {len(missing)} items have no held-out caption (e.g. {missing[:3]}); each "
                         "synthetic latent is scored against the caption it was generated from")
    if pred_real is not None and list(pred_real) != ids:
        only = sorted(set(ids) ^ set(pred_real))
        raise VlgapError(f"inversion: the real and synthetic captions must cover the same items in the same order "
                         f"(paired by item); they differ on {len(only)} (e.g. {only[:3]})" if only else
                         "inversion: the real and synthetic captions must list the same items in the same order")
    refs = {i: [captions[i]] for i in ids}
    kw = dict(n_bootstrap=n_bootstrap, seed=seed, metrics=metrics, keep_empty=True)

    def side(pred, specs):
        s = score_captions(pred, refs, **kw)
        if specs is not None:
            s["attributes"] = grounded_score(pred, specs, n_bootstrap=n_bootstrap, seed=seed)
        return s

    out: dict[str, Any] = {"n": len(ids), "references": "one per item: the held-out caption the synthetic latent "
                                                        "was generated from", "synthetic": side(pred_synthetic,
                                                                                                synthetic_specs),
                           "real": None, "difference": None}
    if pred_polished is not None:
        if list(pred_polished) != ids:
            raise VlgapError("inversion: the polished-latent captions must list the synthetic items in the same order")
        out["synthetic_polished"] = side(pred_polished, synthetic_specs)
    if pred_real is None:
        return out
    out["real"] = side({i: pred_real[i] for i in ids}, real_specs)
    diff: dict[str, Any] = {"pairing": "item i's synthetic latent was generated from a caption of item i's real video"}
    if n_bootstrap >= 2:
        cmp = compare_captions(pred_synthetic, {i: pred_real[i] for i in ids}, refs, metrics="cider",
                               n_bootstrap=n_bootstrap, n_permutations=max(n_permutations, 1), seed=seed,
                               names=("synthetic", "real"), on_empty="keep", ci_method="percentile")
        c = cmp["CIDEr"]
        diff["CIDEr"] = {"difference": c["difference"], "ci": c.get("ci"), **({"ci_reason": c["ci_reason"]} if
                                                                             c.get("ci_reason") else {}),
                         "p_value": c["p_value"], "n": len(ids),
                         "method": "paired bootstrap over items (percentile), document frequencies of the shared "
                                   "references; approximate-randomisation p-value"}
    else:  # no resampling asked for: the point difference only
        diff["CIDEr"] = {"difference": out["synthetic"]["CIDEr"]["score"] - out["real"]["CIDEr"]["score"], "ci": None,
                         "p_value": None, "n": len(ids)}
    if "attributes" in out["synthetic"] and "attributes" in out["real"]:
        def per_item_mean(att):
            return np.array([np.mean([att["per_item"][i][a] for a in ATTRIBUTES]) for i in ids])

        diff["attributes"] = {**_paired_mean_difference(per_item_mean(out["synthetic"]["attributes"]),
                                                        per_item_mean(out["real"]["attributes"]),
                                                        n_permutations=n_permutations, seed=seed),
                              "method": "two-sided sign-flip test over items of the mean attribute accuracy, "
                                        "and the interval that inverts it"}
    out["difference"] = diff
    return out
