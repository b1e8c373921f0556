"""CLI commands: gap (distribution gap between two item sets) and compare (paired / 2x2 scores)."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.table import Table

from vlgap.cli._app import app  # noqa: F401
from vlgap.cli.options import ci_method_option, confidence_option, device_option, encoding_option
from vlgap.cli.tables import print_table

KERNELS = ("rbf", "linear", "poly", "cmmd")


def _fmt(x, digits: int = 4) -> str:
    from vlgap.formatting import number  # one number format for every summary

    return number(x, digits)


def _ci(ci, reason=None, digits: int = 4) -> str:
    """An interval, or "n/a (why)" where the small-n rule withheld it (never a point)."""
    from vlgap.formatting import interval

    return interval(ci, digits, reason)


@app.command("gap")
def gap_command(
    a: Path = typer.Argument(..., help="Set A: features (.npy/.npz/.safetensors/.pt, as `vlgap align` reads them; "
                                       "one layer, or --layer) or captions (.txt/.jsonl)."),
    b: Path = typer.Argument(..., help="Set B, same kinds as A."),
    kernel: str = typer.Option("rbf", "--kernel", help="rbf (median heuristic) | linear | poly (KID cubic) | cmmd (sigma=10, x1000)."),
    bandwidth: Optional[float] = typer.Option(None, "--bandwidth", help="RBF sigma; default: median heuristic on the pooled sample."),
    permutations: int = typer.Option(1000, "--permutations", help="Permutations for the p-value (0: none)."),
    bootstrap: int = typer.Option(1000, "--bootstrap", help="Bootstrap resamples for the interval (0: none)."),
    confidence: float = confidence_option("gap"),
    ci_method: str = ci_method_option("gap"),
    method: str = typer.Option("auto", "--method", help="auto | quadratic | block (block: for N too large for an N x N kernel)."),
    length_match: bool = typer.Option(False, "--length-match", help="Captions: subsample both sets to a common length histogram."),
    bin_width: str = typer.Option("auto", "--bin-width", help="Length-matching bin width in tokens, or auto."),
    length_unit: str = typer.Option("whitespace", "--length-unit", help="whitespace words | tokenizer (the encoder's tokens)."),
    c2st: bool = typer.Option(False, "--c2st", help="Also run a classifier two-sample test (logistic regression)."),
    c2st_permutations: int = typer.Option(100, "--c2st-permutations", help="Label permutations for the C2ST p-value."),
    fd: bool = typer.Option(False, "--fd", help="Also report the Frechet distance between Gaussian fits."),
    fd_bootstrap: int = typer.Option(0, "--fd-bootstrap", help="Bootstrap resamples for an FD interval (0: none)."),
    encoder: str = typer.Option("minilm", "--encoder", help="Text encoder for caption files."),
    layer: Optional[str] = typer.Option(None, "--layer", help="Layer (index or name): of the text encoder (default: "
                                        "last), or of an array file holding several layers (then required)."),
    pooling: Optional[str] = typer.Option(None, "--pooling", help="Text pooling over tokens: mean (default) | last."),
    top_k: int = typer.Option(5, "--top-k", help="Witness items to show per side (captions)."),
    device: Optional[str] = device_option(None, spread=True),
    seed: int = typer.Option(0, "--seed", help="Seed for permutations, bootstrap, subsampling."),
    alpha: float = typer.Option(0.05, "--alpha", help="Significance level of the printed verdict."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of a table."),
    encoding: str = encoding_option(),
) -> None:
    """How far apart are two item sets? MMD^2 with a permutation p-value and a bootstrap interval."""
    from vlgap.errors import VlgapError
    from vlgap.io_utils import to_json
    from vlgap.stats.gap import gap

    from vlgap.counts import check_probability

    alpha = check_probability("alpha", alpha, flag="--alpha", example=0.05)
    if kernel not in KERNELS:
        raise VlgapError(f"--kernel {kernel!r}: choose one of {', '.join(KERNELS)}")
    width = bin_width if bin_width == "auto" else _int_option(bin_width, "--bin-width")
    result = gap(a, b, kernel=kernel, bandwidth=bandwidth, n_permutations=permutations, n_bootstrap=bootstrap,
                 confidence=confidence, ci_method=ci_method, method=method, length_match=length_match, bin_width=width,
                 length_unit=length_unit, c2st=c2st,
                 c2st_permutations=c2st_permutations, fd=fd, fd_bootstrap=fd_bootstrap, encoder=encoder, layer=layer, pooling=pooling, top_k=top_k,
                 device=device, seed=seed)
    if as_json:
        print(to_json(result.to_dict()))
        return
    console = Console()
    table = Table(title=f"Distribution gap: {a.name} vs {b.name}")
    table.add_column("statistic")
    table.add_column("value", justify="right")
    level = f"{int(round(result.confidence * 100))}% CI ({result.ci_method})"
    rows = [
        ("MMD^2 unbiased", _fmt(result.mmd2_unbiased)),
        ("MMD^2 biased", _fmt(result.mmd2_biased)),
        (level, _ci(result.ci, result.ci_reason)),
        (f"p-value ({result.n_permutations} permutations)" if result.method == "quadratic" else "p-value (t over blocks)",
         _fmt(result.p_value, 3)),
        ("n_a / n_b", f"{result.n_a} / {result.n_b}"),
        ("kernel", result.kernel + (f" (sigma={result.bandwidth:.4g})" if result.bandwidth else "")),
        ("method", result.method),
    ]
    if result.length_match:
        lm = result.length_match
        rows.append(("length matching kept", f"A {lm['n_a_kept']}/{lm['n_a_before']}, B {lm['n_b_kept']}/{lm['n_b_before']}"))
    if result.c2st:
        c = result.c2st
        rows.append(("C2ST accuracy / AUC", f"{c['accuracy']:.3f} / {c['auc']:.3f}"))
        rows.append(("C2ST p-value", _fmt(c["p_value"], 3)))
    if result.fd is not None:
        rows.append(("Frechet distance", _fmt(result.fd) + (f" {_ci(result.fd_ci, result.fd_ci_reason)}" if result.fd_ci or result.fd_ci_reason else "")))
    for name, value in rows:
        table.add_row(name, value)
    print_table(console, table)
    if result.witness:
        for side, label in (("a", "A"), ("b", "B")):
            w = Table(title=f"Most characteristic of {label} (witness)")
            w.add_column("item #", justify="right")
            w.add_column("witness", justify="right")
            w.add_column("caption" if result.witness[side] and result.witness[side][0]["label"] else "")
            for item in result.witness[side]:
                w.add_row(str(item["index"]), f"{item['witness']:.4g}", item["label"] or "")
            print_table(console, w)
    console.print(result.verdict(alpha), highlight=False)


def _int_option(value: str, name: str) -> int:
    from vlgap.errors import VlgapError

    try:
        return int(value)
    except ValueError:
        raise VlgapError(f"{name} {value!r}: give a whole number or 'auto'") from None


@app.command("compare")
def compare_command(
    scores: Path = typer.Argument(..., help="CSV: item,system,score (paired) or item,a,b,score (--factorial)."),
    factorial: bool = typer.Option(False, "--factorial", help="2x2 analysis: main effects of a and b and their interaction."),
    system_a: Optional[str] = typer.Option(None, "--a", help="System A (default: first in the file)."),
    system_b: Optional[str] = typer.Option(None, "--b", help="System B (default: second in the file)."),
    bootstrap: int = typer.Option(1000, "--bootstrap", help="Bootstrap resamples for intervals."),
    permutations: int = typer.Option(10000, "--permutations", help="Sign-flip permutations for p-values."),
    confidence: float = confidence_option("compare"),
    ci_method: str = ci_method_option("compare"),
    seed: int = typer.Option(0, "--seed"),
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of a table."),
    encoding: str = encoding_option(),
) -> None:
    """Compare systems scored on the same items: paired difference, or a 2x2 factorial analysis."""
    from vlgap.io_utils import to_json
    from vlgap.stats.paired import compare

    result = compare(scores, factorial=factorial, system_a=system_a, system_b=system_b, n_bootstrap=bootstrap,
                     n_permutations=permutations, confidence=confidence, ci_method=ci_method, seed=seed)
    if as_json:
        print(to_json(result))
        return
    console = Console()
    level = f"{int(round(result['confidence'] * 100))}% CI"
    if result["analysis"] == "paired":
        t = Table(title=f"Paired comparison on {result['n_items']} items")
        t.add_column("")
        t.add_column("mean", justify="right")
        t.add_column(level, justify="right")
        t.add_column("p-value", justify="right")
        t.add_row(result["system_a"], _fmt(result["mean_a"]), _ci(result["ci_a"], result.get("ci_a_reason")), "")
        t.add_row(result["system_b"], _fmt(result["mean_b"]), _ci(result["ci_b"], result.get("ci_b_reason")), "")
        t.add_row(f"{result['system_a']} - {result['system_b']}", _fmt(result["difference"]), _ci(result["ci"], result.get("ci_reason")),
                  _fmt(result["p_value"], 3))
        print_table(console, t)
        from vlgap.stats.resampling import is_significant

        verdict = ("no test (--permutations 0)" if result["p_value"] is None else
                   "no significant difference at alpha=0.05" if not is_significant(result["p_value"]) else
                   f"{result['system_a'] if result['difference'] > 0 else result['system_b']} scores higher (p < 0.05)")
        console.print(f"{verdict}; wins {result['wins_a']} / {result['wins_b']}, ties {result['ties']}", highlight=False)
        return
    t = Table(title=f"2x2 factorial on {result['n_items']} items "
                    f"(a: {result['levels_a'][0]} -> {result['levels_a'][1]}, b: {result['levels_b'][0]} -> {result['levels_b'][1]})")
    t.add_column("effect")
    t.add_column("estimate", justify="right")
    t.add_column(level, justify="right")
    t.add_column("p-value", justify="right")
    for key, label in (("main_a", "main effect a"), ("main_b", "main effect b"), ("interaction", "interaction a x b")):
        e = result[key]
        t.add_row(label, _fmt(e["estimate"]), _ci(e["ci"], e.get("ci_reason")), _fmt(e["p_value"], 3))
    for key, cell in result["cells"].items():
        t.add_row(f"cell a={result['levels_a'][int(key[0])]}, b={result['levels_b'][int(key[1])]}",
                  _fmt(cell["mean"]), _ci(cell["ci"], cell.get("ci_reason")), "")
    print_table(console, t)
    from vlgap.stats.resampling import is_significant

    significant = [k for k in ("main_a", "main_b", "interaction") if is_significant(result[k]["p_value"])]
    if result["main_a"]["p_value"] is None:
        console.print("no tests (--permutations 0)", highlight=False)
        return
    console.print("significant at alpha=0.05: " + (", ".join(significant) if significant else "none"), highlight=False)
