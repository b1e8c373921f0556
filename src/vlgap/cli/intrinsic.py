"""CLI of the intrinsic-dimension estimates: `vlgap intrinsic-dim` (per layer, on cached or extracted
features or on a feature file; with --sweep, the frame exponent alpha against 2 / d_v)."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.table import Table

from vlgap.cli._app import app
from vlgap.cli.options import RANDOM_WEIGHTS_HELP, ci_method_option, confidence_option, device_option
from vlgap.io_utils import to_json

console = Console()


@app.command("intrinsic-dim")
def intrinsic_dim_cmd(
    source: Path = typer.Argument(..., help="manifest (JSONL, with --vision) or a feature file (.npy [N, D] or "
                                  "[L, N, D], .npz one array per layer)"),
    vision: Optional[str] = typer.Option(None, "--vision", help="vision encoders (comma list) for a manifest"),
    n_f: int = typer.Option(8, "--n-f", help="frames per video of the features"),
    method: str = typer.Option("twonn", "--method", help="twonn (Facco et al. 2017 fit) | twonn-mle | levina-bickel"),
    k1: int = typer.Option(10, "--k1", help="levina-bickel: smallest neighbourhood"),
    k2: int = typer.Option(20, "--k2", help="levina-bickel: largest neighbourhood"),
    sweep: Optional[Path] = typer.Option(None, "--sweep", help="sweep run folder: compare its fitted alpha with 2/d_v"),
    bootstrap: int = typer.Option(200, help="bootstrap resamples over points for the interval"),
    confidence: float = confidence_option("intrinsic-dim"),
    ci_method: str = ci_method_option("intrinsic-dim"),
    seed: int = typer.Option(0),
    cache_dir: Optional[Path] = typer.Option(None, help="feature cache root"),
    device: str = device_option("cpu", spread=True),
    image_size: Optional[int] = typer.Option(None, help="vision input size"),
    random_weights: bool = typer.Option(False, "--random-weights", help=RANDOM_WEIGHTS_HELP),
    out: Optional[Path] = typer.Option(None, "--out", "-o", help="folder: the run folder for the report section"),
    as_json: bool = typer.Option(False, "--json", help="print JSON on stdout"),
):
    """Intrinsic dimension of every layer (TwoNN or Levina-Bickel MLE, bootstrap intervals); --sweep adds App. B's
    alpha vs 2/d_v."""
    from vlgap.cli.temporal import _features, _names
    from vlgap.errors import VlgapError
    from vlgap.probe.intrinsic import layer_dimensions, read_feature_file, run_intrinsic_dimension

    lb = {"k1": k1, "k2": k2} if method == "levina-bickel" else {}
    if source.suffix in (".npy", ".npz"):
        if vision or sweep:
            raise VlgapError("--vision and --sweep need a manifest; a feature file is measured as it is")
        layers, names = read_feature_file(source)
        res = {"method": method, "layers": {source.name: layer_dimensions(
            layers, method, n_bootstrap=bootstrap, confidence=confidence, seed=seed, layer_names=names, **lb)},
               "alpha_vs_2_over_d": []}
    else:
        if not vision:
            raise VlgapError("a manifest needs --vision (comma list of encoders)")
        src = _features(cache_dir, device, "float32", image_size, random_weights=random_weights)
        res = run_intrinsic_dimension(source, _names(vision, "--vision"), n_f=n_f, method=method, sweep_dir=sweep,
                                      n_bootstrap=bootstrap, confidence=confidence, seed=seed, features=src, out=out,
                                      **lb)
    if as_json:
        print(to_json(res))
        return
    from vlgap.formatting import interval

    for key, rows in res["layers"].items():
        t = Table(title=f"intrinsic dimension ({method}): {key}")
        for c in ("layer", "d", "CI", "points"):
            t.add_column(c)
        for r in rows:
            t.add_row(str(r["layer_name"]), f"{r['d']:.2f}", interval(r.get("ci"), 2),
                      str(r.get("n", "-")) + (f" ({r['reason']})" if r.get("reason") else ""))
        console.print(t)
    if res["alpha_vs_2_over_d"]:
        t = Table(title="frame exponent alpha vs 2/d_v (App. B)")
        for c in ("vision", "text", "alpha", "CI", "layer", "d_v", "2/d_v", "CI", "overlap"):
            t.add_column(c)
        for c in res["alpha_vs_2_over_d"]:
            if "d_v" not in c:
                t.add_row(c["vision"], c["text"], "-", "-", "-", "-", "-", "-", c.get("reason", ""))
                continue
            t.add_row(c["vision"], c["text"], f"{c['alpha']:.3f}", interval(c["alpha_ci"], 3), str(c["layer_name"]),
                      f"{c['d_v']:.2f}", f"{c['two_over_d']:.3f}", interval(c["two_over_d_ci"], 3),
                      str(c["intervals_overlap"]))
        console.print(t)
    if out is not None:
        console.print(f"section written under {out}/sections; render with `vlgap report {out}`", highlight=False)
