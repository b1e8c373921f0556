"""CLI commands of the alignment probe: align (alias layer-search), fit-scaling (then sweep, report, demo)."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.table import Table

from vlgap.cli._app import app
from vlgap.cli.options import ci_method_option, confidence_option, device_option
from vlgap.cli.tables import print_table

console = Console()


# ------------------------------------------------------------------------------------------------
# align
# ------------------------------------------------------------------------------------------------

def align_cmd(
    x: Path = typer.Argument(..., help="features of side X: .npy [N, D] or [L, N, D]; .npz/.safetensors (one array, "
                                       "or one [N, D] per layer, natural name order); platonic-rep .pt ('feats' [N, L, D])"),
    y: Path = typer.Argument(..., help="features of side Y, same items in the same order"),
    k: int = typer.Option(10, "--k", help="neighbours for the k-NN metrics (the paper: 10 for N=1024)"),
    metric: str = typer.Option("mutual_knn", "--metric", help="mutual_knn | cycle_knn | cknna | cka | unbiased_cka | "
                                                              "svcca | lcs_knn | edit_distance_knn"),
    preset: Optional[str] = typer.Option(None, "--preset", help="platonic-rep: its feature preparation (one clamp at "
                                         "the 0.95 quantile of |x| over all of a side's layers, then L2 rows)"),
    q: Optional[float] = typer.Option(None, "--q", help="clamp outliers at this quantile of |x| first, per layer "
                                      "(with --preset: the preset's quantile)"),
    bootstrap: int = typer.Option(0, "--bootstrap", help="bootstrap resamples over items for the best score's interval (0: none)"),
    permutations: int = typer.Option(0, "--permutations", help="permutations of the pairing for a p-value (0: none)"),
    confidence: float = confidence_option("align"),
    ci_method: str = ci_method_option("align"),
    seed: int = typer.Option(0, "--seed", help="seed of the bootstrap and permutations"),
    device: str = device_option("cpu", what="where the metrics compute"),
    as_json: bool = typer.Option(False, "--json", help="print JSON on stdout"),
    ray: Optional[str] = typer.Option(None, "--ray", help="run on Ray: auto (RAY_ADDRESS, a running cluster, "
                                      "else a local one) or a cluster address"),
):
    """Alignment of every X layer with every Y layer; the best pair, chance level and N."""
    from vlgap.features.arrays import check_same_items, read_layers
    from vlgap.io_utils import to_json
    from vlgap.metrics.layer_search import layer_search

    fx, fy = read_layers(x), read_layers(y)
    check_same_items(fx, fy)
    res = layer_search(fx.layers, fy.layers, k=k, metric=metric, q=q, preset=preset, n_bootstrap=bootstrap,
                       n_permutations=permutations, confidence=confidence, ci_method=ci_method,
                       seed=seed, device=device, ray=ray)
    if as_json:
        print(to_json(res.to_dict()))
        return
    _print_search(res, x, y)


# one command, two names: `align` (as the API's align) and `layer-search` (as the API's layer_search)
app.command("align")(align_cmd)
app.command("layer-search", help="Same as `align`: every X layer against every Y layer.")(align_cmd)


def _print_search(res, x: Path, y: Path) -> None:
    scores = res.scores
    console.print(f"[bold]{res.metric}[/]  X={x.name} ({scores.shape[0]} layers)  "
                  f"Y={y.name} ({scores.shape[1]} layers)  N={res.n}" + (f"  k={res.k}" if res.k else ""))
    line = f"best: [bold]{res.best_score:.4f}[/] at X layer {res.x_layer}, Y layer {res.y_layer}"
    if res.bootstrap is not None:
        from vlgap.formatting import interval

        line += (f"  {res.confidence:.0%} CI {interval(res.ci, 4, res.ci_reason)} ({res.bootstrap.method}, "
                 f"{res.bootstrap.n_resamples} resamples)")
    console.print(line, highlight=False)
    if res.ci_note:
        console.print(f"[yellow]interval:[/] {res.ci_note}", highlight=False)
    if res.small_sample:
        console.print(f"[yellow]warning:[/] {res.small_sample}", highlight=False)
    for note in getattr(res, "notes", []):
        console.print(f"[yellow]n/a:[/] {note}", highlight=False)
    prep = (f"preset {res.preset} (one clamp at the {res.q:g} quantile of |x| over all layers of a side, then L2 rows)"
            if res.preset else (f"clamp at the {res.q:g} quantile per layer, then L2 rows" if res.q else "L2 rows"))
    console.print(f"features: {prep}", highlight=False)
    if res.chance is not None:
        console.print(f"chance (random pairing): {res.chance:.4f}", highlight=False)
    if res.permutation is not None:
        p = res.permutation
        console.print(f"permutation null ({p.n_permutations}): p = {p.p_value:.4g}, best-pair null mean "
                      f"{p.null_mean:.4f}, single-pair null mean {p.null_pair_mean:.4f}", highlight=False)
    if res.bootstrap is not None and res.bootstrap.best_pair_frequency:
        top = res.bootstrap.best_pair_frequency[0]
        console.print(f"best pair stability: ({top['x_layer']}, {top['y_layer']}) best in "
                      f"{top['frequency']:.0%} of resamples", highlight=False)
    if scores.size <= 400:
        table = Table(title="scores (rows: X layers, columns: Y layers)", show_lines=False)
        table.add_column("X\\Y", justify="right")
        for j in range(scores.shape[1]):
            table.add_column(str(j), justify="right")
        for i in range(scores.shape[0]):
            cells = [("[bold]" + f"{v:.3f}" + "[/]") if (i, j) == (res.x_layer, res.y_layer) else f"{v:.3f}"
                     for j, v in enumerate(scores[i])]
            table.add_row(str(i), *cells)
        print_table(console, table)


# ------------------------------------------------------------------------------------------------
# fit-scaling
# ------------------------------------------------------------------------------------------------

@app.command("fit-scaling")
def fit_scaling_cmd(
    grid: Path = typer.Argument(..., help="CSV with columns n_f, n_c, score (optional score_lo, score_hi)"),
    bootstrap: int = typer.Option(1000, "--bootstrap", help="bootstrap refits for the parameter intervals"),
    bootstrap_method: str = typer.Option("residual", "--bootstrap-method",
                                         help="residual | case: what the bootstrap resamples (not an interval method)"),
    confidence: float = confidence_option("fit-scaling"),
    ci_method: str = ci_method_option("fit-scaling"),
    use_intervals: bool = typer.Option(True, "--use-intervals/--no-intervals",
                                       help="weight cells by their score_lo/score_hi intervals when present"),
    seed: int = typer.Option(0, "--seed", help="seed of the bootstrap"),
    vision: Optional[str] = typer.Option(None, "--vision", help="only the rows of this vision encoder "
                                         "(a sweep.csv of several encoder pairs holds one cell per pair)"),
    text: Optional[str] = typer.Option(None, "--text", help="only the rows of this text encoder"),
    as_json: bool = typer.Option(False, "--json", help="print JSON on stdout"),
):
    """Fit score = S_inf - (C_f n_f^-alpha + C_c n_c^-beta); intervals, held-out check, alternatives."""
    from vlgap.counts import check_count
    from vlgap.io_utils import to_json
    from vlgap.progress import counter
    from vlgap.scaling import fit_scaling, read_grid_csv, select_rows

    from vlgap.reuse import seal_path, verified_input

    bootstrap = check_count("n_bootstrap", bootstrap, 0, flag="--bootstrap", example=1000)
    # a sweep.csv is sealed by the sweep: a table edited since is refused; an unsealed CSV is the user's own
    verified_input(grid, "GRID", fix=f"rerun the sweep to rewrite it, or fit numbers of your own from a copy "
                                    f"(the seal {seal_path(grid).name} stays behind)")
    cols = select_rows(read_grid_csv(grid), {"vision": vision, "text": text}, what=str(grid))
    with counter("bootstrap refits of the law", bootstrap, "refits", enabled=bootstrap > 0) as report:
        fit = fit_scaling(cols, n_bootstrap=bootstrap, bootstrap_method=bootstrap_method, confidence=confidence,
                          use_intervals=use_intervals, seed=seed, progress=lambda done, total: report(done))
    if as_json:
        print(to_json(fit.to_dict()))
        return
    _print_fit(fit, grid)


def _print_fit(fit, grid: Path) -> None:
    from vlgap.probe.report import fit_console

    console.print(f"{grid.name}: {fit.n_cells} cells, n_f in {fit.n_f_values}, n_c in {fit.n_c_values}"
                  + ("  (weighted)" if fit.weighted else ""), highlight=False)
    for part in fit_console(fit.to_dict()):
        console.print(part, highlight=False)



# ------------------------------------------------------------------------------------------------
# sweep, report, demo: below this line
# ------------------------------------------------------------------------------------------------
