"""`gap(a, b)`: how far apart are two item sets, and how sure are we? (the API behind `vlgap gap`)

Orchestrates the pure statistics of `vlgap.stats`: reads files if given paths, embeds captions
(optionally length-matched first), then reports MMD^2 (unbiased and biased) with a permutation
p-value and a bootstrap interval, and on request a classifier two-sample test, the Frechet
distance, and the witness items that differ most.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch

from vlgap.caveats import caveat, reports_caveats
from vlgap.errors import VlgapError
from vlgap.keywords import renamed_keywords
from vlgap.stats.inputs import ItemSet, load_item_set
from vlgap.stats.mmd import mmd_test
from vlgap.stats.witness import top_witnesses, witness_values


@dataclass
class GapResult:
    mmd2_unbiased: float
    mmd2_biased: float | None
    p_value: float | None
    ci: list[float] | None
    n_a: int
    n_b: int
    kernel: str
    bandwidth: float | None
    method: str
    confidence: float
    ci_method: str | None
    n_permutations: int
    n_bootstrap: int
    seed: int | None
    kernel_params: dict[str, Any] = field(default_factory=dict)
    c2st: dict[str, Any] | None = None
    fd: float | None = None
    fd_ci: list[float] | None = None
    witness: dict[str, Any] | None = None
    length_match: dict[str, Any] | None = None
    embedding: dict[str, Any] | None = None
    inputs: dict[str, str] | None = None
    details: dict[str, Any] = field(default_factory=dict)
    #: why `ci` is None although a bootstrap was asked for (small-n rule, degenerate interval)
    ci_reason: str | None = None
    fd_ci_reason: str | None = None
    #: why a value means little for this input (vlgap.caveats), one line each
    warnings: list[str] = field(default_factory=list)
    #: the MMD p-value enumerated every distinct split (fewer than n_permutations asked)
    exact: bool = False

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        # optional analyses appear only when they were asked for
        for key in ("c2st", "fd", "fd_ci", "witness", "length_match", "embedding", "inputs"):
            if out[key] is None:
                del out[key]
        if not out["details"]:
            del out["details"]
        for key in ("ci_reason", "fd_ci_reason"):
            if out[key] is None:
                del out[key]
        return out

    def to_frame(self):
        """pandas DataFrame, one row per statistic computed: "mmd2" (unbiased; interval and
        permutation p-value), "mmd2_biased", and when asked "frechet_distance", "c2st_accuracy",
        "c2st_auc"; each with n_a, n_b, the kernel and the interval's confidence."""
        from vlgap.frames import FLOAT, INT, STRING, interval_bounds, make_frame, require_pandas
        require_pandas(type(self).__name__)

        rows = [{"statistic": "mmd2", "estimate": self.mmd2_unbiased, **interval_bounds(self.ci),
                 "p_value": self.p_value}]
        if self.mmd2_biased is not None:
            rows.append({"statistic": "mmd2_biased", "estimate": self.mmd2_biased})
        if self.fd is not None:
            rows.append({"statistic": "frechet_distance", "estimate": self.fd, **interval_bounds(self.fd_ci)})
        if self.c2st is not None:
            rows.append({"statistic": "c2st_accuracy", "estimate": self.c2st.get("accuracy"),
                         "p_value": self.c2st.get("p_value")})
            rows.append({"statistic": "c2st_auc", "estimate": self.c2st.get("auc")})
        for row in rows:
            row.update(n_a=self.n_a, n_b=self.n_b, kernel=self.kernel, confidence=self.confidence)
        return make_frame(rows, {"statistic": STRING, "estimate": FLOAT, "ci_low": FLOAT, "ci_high": FLOAT,
                                 "p_value": FLOAT, "n_a": INT, "n_b": INT, "kernel": STRING, "confidence": FLOAT},
                          "GapResult")

    def note(self, alpha: float = 0.05) -> str | None:
        """One line when the bootstrap interval and the permutation p-value disagree at `alpha`."""
        from vlgap.stats.mmd import MMD_DISAGREEMENT_WHY
        from vlgap.stats.resampling import disagreement_note

        return disagreement_note(self.ci, self.p_value, alpha, MMD_DISAGREEMENT_WHY)

    def verdict(self, alpha: float = 0.05) -> str:
        from vlgap.counts import check_probability
        from vlgap.formatting import not_available
        from vlgap.stats.resampling import is_significant

        alpha = check_probability("alpha", alpha, flag="--alpha", example=0.05)
        level = f"{int(round(self.confidence * 100))}%"
        if self.ci:
            ci = f", {level} CI [{self.ci[0]:.4g}, {self.ci[1]:.4g}]"
        elif self.ci_reason:
            ci = f", {level} CI {not_available(self.ci_reason)}"
        else:
            ci = ""
        size = f"n_a={self.n_a}, n_b={self.n_b}"
        note = self.note(alpha)
        note = f"; note: {note}" if note else ""
        if self.p_value is None:
            return f"MMD^2 = {self.mmd2_unbiased:.4g}{ci} ({size}); no p-value (0 permutations)"
        if is_significant(self.p_value, alpha):
            return (f"A and B differ: MMD^2 = {self.mmd2_unbiased:.4g}{ci}, p = {self.p_value:.3g} < alpha={alpha} "
                    f"({size}){note}")
        return (f"no significant difference at alpha={alpha}: MMD^2 = {self.mmd2_unbiased:.4g}{ci}, "
                f"p = {self.p_value:.3g} ({size}){note}")


def _as_item_set(x: Any, side: str, layer: int | str | None = None) -> ItemSet:
    if isinstance(x, ItemSet):
        return x
    if isinstance(x, (str, Path)):
        if not Path(x).expanduser().exists():
            raise VlgapError(f"{side.lower()}: {str(x)!r} is no file; give an array [N, D], a list of captions, or the "
                             "path of a feature file (.npy/.npz/.safetensors/.pt) or a caption file (.txt/.jsonl)")
        return load_item_set(x, layer)
    if isinstance(x, (list, tuple)) and x and all(isinstance(t, str) for t in x):
        return ItemSet(f"<{side} captions>", texts=list(x))
    if isinstance(x, torch.Tensor):
        return ItemSet(f"<{side} tensor>", array=x)  # type: ignore[arg-type]
    from vlgap.arguments import check_array_like

    check_array_like(x, side.lower(), "the path of a feature file (.npy/.npz/.safetensors/.pt) or a caption file "
                     "(.txt/.jsonl), a list of captions, or an array [N, D]")
    return ItemSet(f"<{side} array>", array=np.asarray(x))


@reports_caveats
@renamed_keywords(bootstrap="n_bootstrap", permutations="n_permutations")
def gap(
    a: Any,
    b: Any,
    *,
    kernel: str = "rbf",
    bandwidth: float | None = None,
    n_permutations: int = 1000,
    n_bootstrap: int = 1000,
    confidence: float = 0.95,
    ci_method: Literal["bca", "percentile"] = "bca",
    method: Literal["auto", "quadratic", "block"] = "auto",
    length_match: bool = False,
    bin_width: int | str = "auto",
    length_unit: Literal["whitespace", "tokenizer"] = "whitespace",
    c2st: bool = False,
    c2st_permutations: int = 100,
    fd: bool = False,
    fd_bootstrap: int = 0,
    witness: bool | None = None,
    top_k: int = 5,
    encoder: Any = "minilm",
    layer: int | str | None = None,
    pooling: str | None = None,
    batch_size: int = 64,
    device: Any = None,
    dtype: torch.dtype | None = None,
    seed: int = 0,
) -> GapResult:
    """Distribution gap between item sets `a` and `b`.

    a, b: arrays [N, D] (numpy or torch), lists of captions, or paths (.npy/.npz/.safetensors,
    .txt one caption per line, .jsonl with "caption"). Captions are embedded with `encoder`
    (registry name, default "minilm", or a loaded TextEncoder) at `layer` (default: its last); an
    array file holding several layers (vlgap.features.arrays) needs `layer` (index or name).
    length_match: subsample caption sets to a common length histogram first (captions only).
    witness: list the `top_k` most characteristic items per side (default: on for captions).
    Returns a GapResult; `.to_dict()` has keys mmd2_unbiased, mmd2_biased, p_value, ci, n_a, n_b,
    kernel, bandwidth, and c2st / fd / witness / length_match when computed.
    """
    from vlgap.counts import check_count

    top_k = check_count("top_k", top_k, 0, flag="--top-k", example=5)
    c2st_permutations = check_count("c2st_permutations", c2st_permutations, 0, flag="--c2st-permutations",
                                    example=100)
    fd_bootstrap = check_count("fd_bootstrap", fd_bootstrap, 0, flag="--fd-bootstrap", example=1000)
    set_a, set_b = _as_item_set(a, "A", layer), _as_item_set(b, "B", layer)
    labels_a = labels_b = None
    match_summary = None
    keep_a = keep_b = None  # original item indices after length matching
    embedding = None
    text_encoder = None
    if length_match:
        if not (set_a.is_text and set_b.is_text):
            raise VlgapError("--length-match needs captions on both sides (text or JSONL files), not arrays")
        from vlgap.stats.text_sets import length_match_texts, load_text_encoder

        tokenizer = None
        if length_unit == "tokenizer":
            text_encoder = load_text_encoder(encoder, device=device or "cpu", pooling=pooling) \
                if isinstance(encoder, str) else encoder
            tokenizer = getattr(text_encoder, "tokenizer", None)
            if tokenizer is None:
                raise VlgapError(f"encoder {getattr(text_encoder, 'name', encoder)!r} exposes no tokenizer; "
                                 "use length_unit='whitespace'")
        elif length_unit != "whitespace":
            raise VlgapError(f"length_unit={length_unit!r}: use 'whitespace' or 'tokenizer'")
        match = length_match_texts(set_a.texts, set_b.texts, tokenizer=tokenizer, bin_width=bin_width, seed=seed)
        set_a = ItemSet(set_a.source, texts=[set_a.texts[i] for i in match.index_a])
        set_b = ItemSet(set_b.source, texts=[set_b.texts[i] for i in match.index_b])
        match_summary = match.summary()
        keep_a, keep_b = match.index_a, match.index_b

    arrays = []
    truncated: dict[str, int] = {}
    for s in (set_a, set_b):
        if s.is_text:
            from vlgap.stats.text_sets import check_captions, embed_texts, load_text_encoder

            check_captions(s.texts, s.source)
            if len(s.texts) < 2:
                raise VlgapError(f"{s.source}: {len(s.texts)} caption(s); a two-sample statistic needs at least 2 per side")
            if text_encoder is None:
                text_encoder = load_text_encoder(encoder, device=device or "cpu", pooling=pooling) \
                    if isinstance(encoder, str) else encoder
            emb = embed_texts(s.texts, text_encoder, layer=-1 if layer is None else layer, batch_size=batch_size,
                              name=s.source)
            truncated[s.source] = emb.n_truncated
            embedding = emb.to_dict() | {"n_truncated": sum(truncated.values())}
            arrays.append(emb.array)
        else:
            arrays.append(s.array)
    if set_a.is_text:
        labels_a = set_a.texts
    if set_b.is_text:
        labels_b = set_b.texts
    if witness is None:
        witness = set_a.is_text or set_b.is_text

    res = mmd_test(arrays[0], arrays[1], kernel=kernel, bandwidth=bandwidth, n_permutations=n_permutations,
                   n_bootstrap=n_bootstrap, confidence=confidence, ci_method=ci_method, method=method,
                   seed=seed, device=device, dtype=dtype, return_kernel=False if method == "block" else witness)
    kmat = None
    if isinstance(res, tuple):
        res, kmat = res
    out = GapResult(
        mmd2_unbiased=res.mmd2_unbiased, mmd2_biased=res.mmd2_biased, p_value=res.p_value, ci=res.ci,
        n_a=res.n_a, n_b=res.n_b, kernel=res.kernel, bandwidth=res.bandwidth, method=res.method,
        confidence=confidence, ci_method=res.ci_method, n_permutations=res.n_permutations,
        n_bootstrap=res.n_bootstrap, seed=seed, kernel_params=res.kernel_params, details=res.details,
        ci_reason=res.ci_reason, exact=res.exact,
        length_match=match_summary, embedding=embedding,
        inputs={"a": set_a.source, "b": set_b.source})
    if witness and kmat is not None:
        f_a, f_b = witness_values(kmat, res.n_a)
        out.witness = top_witnesses(f_a, f_b, top_k=top_k, labels_a=labels_a, labels_b=labels_b)
        # report positions in the caller's input, not in the length-matched subsample
        for side, keep in (("a", keep_a), ("b", keep_b)):
            if keep is not None:
                for item in out.witness[side]:
                    item["index"] = int(keep[item["index"]])
        del kmat
    if c2st:
        from vlgap.stats.c2st import c2st as run_c2st

        out.c2st = run_c2st(arrays[0], arrays[1], n_permutations=c2st_permutations, seed=seed).to_dict()
    if fd:
        from vlgap.stats.frechet import frechet_distance

        fres = frechet_distance(arrays[0], arrays[1], n_bootstrap=fd_bootstrap, confidence=confidence, seed=seed)
        out.fd, out.fd_ci, out.fd_ci_reason = fres.fd, fres.ci, fres.ci_reason
    return out
