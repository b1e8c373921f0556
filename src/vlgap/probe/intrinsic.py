"""Intrinsic dimension per layer (`vlgap intrinsic-dim`) and App. B's check: is the fitted frame exponent
alpha of the scaling law close to 2 / d_v, d_v the intrinsic dimension of the encoder's video features?

Dynamic Reflections App. B derives alpha = 2 / d_v (estimation variance ~ n^(-2/d) on a d-dimensional
manifold) but measures no d_v; here d_v is estimated (vlgap.metrics.intrinsic_dim: TwoNN or
Levina-Bickel, bootstrap intervals) on every layer of the vision features, and set against alpha from
the sweep's scaling.json (its bootstrap interval) at the layer the sweep picked for the largest n_f, n_c.
"""
from __future__ import annotations

import html
import time
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from vlgap.errors import VlgapError
from vlgap.io_utils import atomic_write_json


def layer_dimensions(layers: Sequence[np.ndarray], method: str = "twonn", *, n_bootstrap: int = 200,
                     confidence: float = 0.95, seed: int = 0, layer_names: Sequence[str] | None = None,
                     where: str = "", **kw) -> list[dict[str, Any]]:
    """intrinsic_dimension of every layer ([N, D_l] arrays); a layer where it is refused gets d = NaN and a
    reason; each row carries its layer's "warnings" (vlgap.caveats; `where` + "layer L: " names it in the
    run's lines)."""
    from vlgap.caveats import collecting
    from vlgap.metrics.intrinsic_dim import intrinsic_dimension

    out = []
    for i, x in enumerate(layers):
        name = layer_names[i] if layer_names is not None and i < len(layer_names) else str(i)
        with collecting(prefix=f"{where}layer {name}: "):  # which layer a caveat is about, in the run's lines
            try:
                r = intrinsic_dimension(x, method, n_bootstrap=n_bootstrap, confidence=confidence, seed=seed, **kw)
            except VlgapError as err:
                r = {"d": float("nan"), "ci": None, "method": method, "reason": str(err)}
        out.append(dict(r, layer=i, layer_name=name))
    return out


def read_feature_file(path: str | Path) -> tuple[list[np.ndarray], list[str]]:
    """Layers of a feature file, read by the one reader of feature files (`vlgap.features.arrays.read_layers`:
    .npy [N, D] or [L, N, D], .npz / .safetensors one array per layer, platonic-rep .pt; the bytes checked
    to be what the name says), as float64, with their names."""
    from vlgap.features.arrays import read_layers

    p = Path(path)
    if not p.is_file():
        raise VlgapError(f"feature file {str(p)!r} does not exist (give a .npy [N, D] or [L, N, D], or a .npz)")
    la = read_layers(p)
    return [np.asarray(a, dtype=np.float64) for a in la.layers], list(la.names)


def _sweep_layer(rows: list[dict], vision: str, text: str) -> tuple[int, int, int] | None:
    """(x_layer, n_f, n_c) of the sweep cell with the largest n_f and n_c for this pair."""
    sub = [r for r in rows if r["vision"] == vision and r["text"] == text and int(r.get("x_layer", -1)) >= 0]
    if not sub:
        return None
    r = max(sub, key=lambda r: (int(r["n_f"]), int(r["n_c"])))
    return int(r["x_layer"]), int(r["n_f"]), int(r["n_c"])


def alpha_vs_dimension(fits: dict[str, dict], rows: list[dict], dims: dict[tuple[str, int], list[dict]]) -> list[dict]:
    """One row per fitted (vision, text) law: alpha with its interval, the layer the sweep chose at the
    largest n_f / n_c, d_v of that layer (at that n_f) and 2 / d_v with its interval. dims:
    (vision, n_f) -> layer_dimensions rows."""
    from vlgap.metrics.intrinsic_dim import exponent_from_dimension

    out = []
    for key, fit in fits.items():
        vision, _, text = key.partition("|")
        row: dict[str, Any] = {"vision": vision, "text": text}
        if "error" in fit:
            row["reason"] = f"no scaling fit: {fit['error']}"
            out.append(row)
            continue
        row["alpha"] = fit["params"]["alpha"]
        row["alpha_ci"] = (fit.get("param_ci") or {}).get("alpha")
        row["alpha_identified"] = "alpha" not in (fit.get("not_identified") or [])
        pick = _sweep_layer(rows, vision, text)
        if pick is None or (vision, pick[1]) not in dims:
            row["reason"] = "no intrinsic dimension for this encoder's sweep layer"
            out.append(row)
            continue
        layer, n_f, _ = pick
        d = dims[(vision, n_f)][layer]
        two = exponent_from_dimension(d["d"], d.get("ci"))
        lo_a, hi_a = row["alpha_ci"] or (None, None)
        overlap = None
        if row["alpha_ci"] and two["ci"]:
            overlap = bool(lo_a <= two["ci"][1] and two["ci"][0] <= hi_a)
        row.update(layer=layer, layer_name=d.get("layer_name"), n_f=n_f, d_v=d["d"], d_v_ci=d.get("ci"),
                   two_over_d=two["value"], two_over_d_ci=two["ci"], intervals_overlap=overlap,
                   implied_d_from_alpha=2.0 / row["alpha"] if row["alpha"] > 0 else float("nan"))
        out.append(row)
    return out


def _figure(dims: dict[tuple[str, int], list[dict]]):
    from vlgap.probe.figures import legend_outside, pyplot

    plt = pyplot()

    fig, ax = plt.subplots(figsize=(6.4, 3.8))
    for (vision, n_f), rows in dims.items():
        x = np.arange(len(rows))
        d = np.array([r["d"] for r in rows], dtype=float)
        lo = np.array([(r["ci"] or [np.nan, np.nan])[0] for r in rows], dtype=float)
        hi = np.array([(r["ci"] or [np.nan, np.nan])[1] for r in rows], dtype=float)
        ax.plot(x, d, "o-", ms=3, label=f"{vision} (n_f={n_f})")
        ax.fill_between(x, lo, hi, alpha=0.25)
    ax.set_xlabel("layer")
    ax.set_ylabel("intrinsic dimension")
    fig.tight_layout()
    legend_outside(ax)
    return fig


def write_intrinsic_section(run_dir: str | Path, dims: dict[tuple[str, int], list[dict]], comparison: list[dict],
                            method: str, confidence: float = 0.95, name: str = "71_intrinsic_dimension",
                            random_weights: list[str] | None = None) -> Path:
    from vlgap.probe.report import Raw, fmt_ci, html_table, save_figure, warning_paragraphs, write_section

    run_dir = Path(run_dir)
    atomic_write_json(run_dir / "intrinsic" / "intrinsic_dimension.json",
                      {"method": method, "layers": {f"{v}|n_f={n}": r for (v, n), r in dims.items()},
                       "alpha_vs_2_over_d": comparison})
    figs = [save_figure(_figure(dims), run_dir, "figures/intrinsic_dimension.png")] if dims else []
    conf = f"{confidence:.0%}"
    rows = []
    for c in comparison:
        if "d_v" not in c:
            rows.append([c["vision"], c["text"], c.get("alpha", float("nan")), Raw(fmt_ci(c.get("alpha_ci"))),
                         Raw("-"), Raw("-"), Raw("-"), Raw("-"), Raw("-"), Raw(html.escape(c.get("reason", "")))])
            continue
        verdict = {True: "intervals overlap", False: "intervals disjoint", None: "-"}[c["intervals_overlap"]]
        if not c["alpha_identified"]:
            verdict += "; alpha not identified by the grid"
        rows.append([c["vision"], c["text"], c["alpha"], Raw(fmt_ci(c["alpha_ci"])),
                     Raw(html.escape(f"{c['layer_name']} (n_f={c['n_f']})")), c["d_v"], Raw(fmt_ci(c["d_v_ci"])),
                     c["two_over_d"], Raw(fmt_ci(c["two_over_d_ci"])), Raw(html.escape(verdict))])
    body = (f"<p>App. B reads the frame exponent as alpha = 2/d_v. d_v here: {html.escape(method)} on the vision "
            f"features (bootstrap {conf} intervals over points), at the layer the sweep picked for the largest "
            "n_f and n_c; the figure shows every layer.</p>"
            + html_table(["vision", "text", "alpha", f"{conf} CI", "layer", "d_v", f"{conf} CI", "2/d_v", f"{conf} CI",
                          "verdict"], rows)
            + warning_paragraphs(f"{v} (n_f={n}) layer {r['layer_name']}: {w}"
                                 for (v, n), layer_rows in dims.items() for r in layer_rows
                                 for w in r.get("warnings", [])))
    return write_section(run_dir, name, "Intrinsic dimension and the frame exponent (App. B)", body, figs,
                         random_weights=random_weights)


def run_intrinsic_dimension(manifest, vision: Sequence[str], *, n_f: int = 8, method: str = "twonn",
                            sweep_dir: str | Path | None = None, n_bootstrap: int = 200, confidence: float = 0.95,
                            seed: int = 0, features=None, out: str | Path | None = None, **kw) -> dict[str, Any]:
    """Per-layer intrinsic dimension of each vision encoder's features at n_f (cache or extraction); with
    `sweep_dir`, also at every n_f the sweep picked, and alpha vs 2/d_v from its scaling.json."""
    from vlgap.data.manifest import Manifest, read_manifest
    from vlgap.features.source import FeatureSource, layer_names

    t0 = time.perf_counter()
    man = manifest if isinstance(manifest, Manifest) else read_manifest(manifest)
    src = FeatureSource.of(features)
    rows: list[dict] = []
    fits: dict[str, dict] = {}
    wanted = {(v, n_f) for v in vision}
    if sweep_dir is not None:
        sd = Path(sweep_dir)
        for f in ("sweep.json", "scaling.json"):
            if not (sd / f).is_file():
                raise VlgapError(f"{sd} has no {f}: give a sweep run folder (`vlgap sweep` / `vlgap demo` output)")
        from vlgap.runs.schemas import SCALING, SWEEP, read_run_json

        fix = f"rerun `vlgap sweep ... --out {sd}` to rewrite it"
        rows = read_run_json(sd / "sweep.json", SWEEP, fix=fix)["rows"]
        fits = {k: v for k, v in read_run_json(sd / "scaling.json", SCALING, fix=fix).items()
                if k.split("|")[0] in vision}
        for key in fits:
            v, _, t = key.partition("|")
            pick = _sweep_layer(rows, v, t)
            if pick is not None:
                wanted.add((v, pick[1]))
    dims: dict[tuple[str, int], list[dict]] = {}
    for v, nf in sorted(wanted):
        fs = src.vision(man, v, nf)
        dims[(v, nf)] = layer_dimensions(fs.layers, method, n_bootstrap=n_bootstrap, confidence=confidence, seed=seed,
                                         layer_names=layer_names(fs) or None, where=f"{v} (n_f={nf}) ", **kw)
    comparison = alpha_vs_dimension(fits, rows, dims) if fits else []
    rw = src.random_weight_names(vision)
    if out is not None:
        write_intrinsic_section(out, dims, comparison, method, confidence, random_weights=rw)
    return {"method": method, "layers": {f"{v}|n_f={n}": r for (v, n), r in dims.items()},
            "alpha_vs_2_over_d": comparison, "random_weights": rw, "seconds": round(time.perf_counter() - t0, 1)}
