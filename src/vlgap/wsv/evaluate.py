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
                   seed: int = 0, metrics: Sequence[str] | None = None) -> dict[str, Any]:
    """{"BLEU-1".."BLEU-4", "METEOR", "ROUGE-L", "CIDEr": {"score", "ci"}, "n", "distinct": {...}}."""
    from vlgap.captions.evaluate import caption_eval

    kw = "n_bootstrap" if "n_bootstrap" in inspect.signature(caption_eval).parameters else "bootstrap"
    res = caption_eval(pred, refs, metrics=list(metrics) if metrics else None, seed=seed, **{kw: n_bootstrap})
    preds = list(pred.values())
    res["distinct"] = {"share": distinct_share(preds), "n_distinct": len(set(preds)), "n": len(preds)}
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
