"""CLI commands that run the probe end to end: sweep, report, demo."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.table import Table

from vlgap.cli._app import app
from vlgap.cli.options import device_option, dtype_option, text_dtype_option
from vlgap.cli.options import (ALLOW_REPEATED_FRAMES_HELP, CAPTION_DRAWS_HELP, FRAME_SAMPLING_HELP, RANDOM_WEIGHTS_HELP,
                               TEMPORAL_POOLING_HELP, TRUST_REMOTE_CODE_HELP, confidence_option, frame_counts,
                               int_list)
from vlgap.cli.tables import print_table
from vlgap.stats.bounds import CLIPPED_MARK
from vlgap.formatting import interval, number
from vlgap.io_utils import to_json

console = Console()


def row_label(row: dict, side: str) -> str:
    """A result row's encoder name, with "(random weights)" beside it when its features were."""
    from vlgap.encoders.registry import labelled

    return labelled(row[side], row.get(f"{side}_weights"))


def _print_rows(rows: list[dict]) -> None:
    presets = {r.get("preset") for r in rows} - {None}
    table = Table(title="alignment (best layer pair)" + (f", preset {', '.join(sorted(presets))}" if presets else ""))
    for col in ("vision", "text", "n_f", "n_c", "score", "95% CI", "p", "layers", "N", "chance"):
        table.add_column(col)
    for r in sorted(rows, key=lambda r: (r["vision"], r["text"], r["n_f"], r["n_c"])):
        ci = interval([r.get("ci_lo"), r.get("ci_hi")], reason=r.get("ci_reason"))
        table.add_row(row_label(r, "vision"), row_label(r, "text"), str(r["n_f"]), str(r["n_c"]), number(r["score"]),
                      ci + (CLIPPED_MARK if r.get("ci_note") else ""), number(r.get("p_value"), 4),
                      f"{r['x_layer']},{r['y_layer']}", str(r["n"]), number(r["chance"]))
    print_table(console, table)
    print_interval_warnings(rows)


def print_interval_warnings(rows: list[dict]) -> None:
    """Under a table of cells: the small-sample warning, and which intervals were clipped to the metric's range."""
    from vlgap.stats.bounds import range_notes

    for warning in range_notes(rows, "small_sample"):
        console.print(f"warning: {warning}", style="yellow", highlight=False)
    notes = range_notes(rows, "ci_note")
    if notes:
        clipped = sum(1 for r in rows if r.get("ci_note"))
        console.print(f"{CLIPPED_MARK} {clipped} interval(s) widened or kept inside the metric's range (JSON: ci_note), "
                      f"e.g. {notes[0]}" + (f" (and {len(notes) - 1} other notes)" if len(notes) > 1 else ""),
                      style="yellow", highlight=False)


def _print_items(items: dict | None, out) -> None:
    """N kept and left out of every cell, by reason (`vlgap.probe.items`; the list: dropped_items.jsonl)."""
    if items and items.get("n_dropped"):
        from vlgap.probe.items import REASONS

        said = ", ".join(f"{len(ids)} {REASONS.get(kind, kind)}" for kind, ids in items.get("by_reason", {}).items())
        console.print(f"items: N = {items['n_kept']} of {items['n_items']} in every cell; {items['n_dropped']} left "
                      f"out ({said}): {out}/dropped_items.jsonl", highlight=False, soft_wrap=True)


def _print_fits(fits: dict[str, dict]) -> None:
    from vlgap.probe.report import fit_console_line

    for pair, fit in fits.items():
        console.print("law " + fit_console_line(fit, pair.replace("|", " x ")), highlight=False)


@app.command("sweep")
def sweep_cmd(
    manifest: Path = typer.Argument(..., help="dataset manifest (JSONL)"),
    vision: str = typer.Option(..., help="comma list of vision encoders, e.g. mobilenet_v2,efficientnet_lite0"),
    text: str = typer.Option(..., help="comma list of text encoders, e.g. minilm,smollm2"),
    n_frames: str = typer.Option("1,2,4,8", help="comma list of n_f"),
    n_captions: str = typer.Option("1,2,4,8", help="comma list of n_c"),
    out: Path = typer.Option(Path("runs/sweep"), "--out", "-o", help="folder: the run folder (resumable; a folder holding "
                             "another configuration or manifest is refused, see --force)"),
    force: bool = typer.Option(False, "--force", help="take over an --out folder that holds another "
                               "configuration (its cells are recomputed, never mixed)"),
    k: int = typer.Option(10),
    metric: str = typer.Option("mutual_knn"),
    preset: Optional[str] = typer.Option(None, help="platonic-rep: its feature preparation (one clamp over all layers)"),
    bootstrap: int = typer.Option(200, help="bootstrap resamples (best pair re-selected in each); 0 = none"),
    confidence: float = confidence_option("sweep"),
    permutations: int = typer.Option(200, help="permutations of the pairing for the null; 0 = none"),
    seed: int = typer.Option(0),
    device: str = device_option("cpu", spread=True),
    dtype: str = dtype_option("float32"),
    text_dtype: Optional[str] = text_dtype_option(),
    image_size: Optional[int] = typer.Option(None),
    text_pooling: Optional[str] = typer.Option(None, help="mean (default) | last"),
    temporal_pooling: str = typer.Option("mean", "--temporal-pooling", help=TEMPORAL_POOLING_HELP),
    frame_sampling: str = typer.Option("uniform", "--frame-sampling", help=FRAME_SAMPLING_HELP + "; a comma list "
                                       "runs them side by side (rows 'NAME [strategy]', one n_f curve each)"),
    caption_draws: int = typer.Option(1, "--caption-draws", help=CAPTION_DRAWS_HELP),
    skip_bad: bool = typer.Option(False, help="skip bad items (listed): undecodable ones, and videos with fewer "
                                  "frames than n_f unless --allow-repeated-frames"),
    allow_repeated_frames: bool = typer.Option(False, "--allow-repeated-frames", help=ALLOW_REPEATED_FRAMES_HELP),
    cache_dir: Optional[Path] = typer.Option(None),
    as_json: bool = typer.Option(False, "--json", help="print the rows as JSON"),
    ray: Optional[str] = typer.Option(None, "--ray", help="run on Ray: auto (RAY_ADDRESS, a running cluster, "
                                      "else a local one) or a cluster address"),
    ray_workers: Optional[int] = typer.Option(None, "--ray-workers", help="encoder actors for extraction"),
    trust_remote_code: bool = typer.Option(False, "--trust-remote-code", help=TRUST_REMOTE_CODE_HELP),
    random_weights: bool = typer.Option(False, "--random-weights", help=RANDOM_WEIGHTS_HELP),
):
    """Alignment over an n_f x n_c grid for every vision x text pair; writes sweep.csv/json and scaling.json."""
    from vlgap.paths import input_file, output_folder
    from vlgap.probe.sweep import SweepConfig, run_sweep

    input_file(manifest, "MANIFEST")
    output_folder(out, "--out")
    if cache_dir is not None:
        output_folder(cache_dir, "--cache-dir")
    cfg = SweepConfig(str(manifest), [s for s in vision.split(",") if s], [s for s in text.split(",") if s],
                      frame_counts(n_frames, "--n-frames"), int_list(n_captions, "--n-captions"), k=k, metric=metric,
                      n_bootstrap=bootstrap, n_permutations=permutations, seed=seed, preset=preset, device=device, dtype=dtype,
                      text_dtype=text_dtype,
                      image_size=image_size, text_pooling=text_pooling, temporal_pooling=temporal_pooling,
                      skip_bad=skip_bad, allow_repeated_frames=allow_repeated_frames,
                      trust_remote_code=trust_remote_code, random_weights=random_weights,
                      frame_sampling=frame_sampling, caption_draws=caption_draws,
                      cache_dir=str(cache_dir) if cache_dir else None)
    res = run_sweep(cfg, out, ray=ray, ray_workers=ray_workers, force=force)
    if as_json:
        print(to_json({"rows": res.rows, "scaling": res.fits, "items": res.items}))
    else:
        _print_rows(res.rows)
        _print_fits(res.fits)
        _print_items(res.items, out)
        console.print(f"tables in {out}/sweep.csv and {out}/sweep.json; `vlgap report {out}` draws them")


@app.command("report")
def report_cmd(run_dir: Path = typer.Argument(..., help="a folder written by `vlgap sweep` or `vlgap demo`")):
    """Write RUN_DIR/report.html (self-contained) and RUN_DIR/figures/*.png."""
    from vlgap.probe.report import write_report

    console.print(f"report: {write_report(run_dir)}")


#: the demo's own default, read from its config so the help cannot drift from it
_DEMO_DEFAULT_VIDEOS = 192


@app.command("demo")
def demo_cmd(
    config: Optional[Path] = typer.Option(None, help="TOML file with DemoConfig keys (optionally under a \\[demo] table)"),
    out: Optional[str] = typer.Option(None, "--out", "-o", help="folder: the run folder (default runs/demo)"),
    n_videos: Optional[int] = typer.Option(None, help=f"number of shapes videos (default {_DEMO_DEFAULT_VIDEOS})"),
    device: Optional[str] = device_option(None, spread=True),
    text_dtype: Optional[str] = text_dtype_option("Default auto (float32 vision beside it)."),
    temporal_pooling: Optional[str] = typer.Option(None, "--temporal-pooling", help=TEMPORAL_POOLING_HELP),
    frame_sampling: Optional[str] = typer.Option(None, "--frame-sampling", help=FRAME_SAMPLING_HELP + "; a comma "
                                                 "list runs them side by side (default uniform)"),
    caption_draws: Optional[int] = typer.Option(None, "--caption-draws", help=CAPTION_DRAWS_HELP + " (default 1)"),
    quiet: bool = typer.Option(False, help="no progress bars"),
    random_weights: bool = typer.Option(False, "--random-weights", help=RANDOM_WEIGHTS_HELP),
    force: bool = typer.Option(False, "--force", help="take over an --out folder that holds another "
                               "configuration (recomputed, never mixed)"),
    preset: Optional[str] = typer.Option(None, "--preset", help="default (the core probe) | dr-full (plus caption "
                                         "draws, frame sampling, caption diversity, split captions, downstream "
                                         "proxies, intrinsic dimension and the cross-model figures)"),
):
    """The main job: the whole probe on the embedded shapes videos with real bundled encoders, then the report."""
    import time

    from vlgap.cli.config_file import load_config
    from vlgap.probe.demo import run_demo

    t0 = time.perf_counter()
    cfg = load_config(config, {"out": out, "n_videos": n_videos, "device": device, "text_dtype": text_dtype,
                               "temporal_pooling": temporal_pooling, "frame_sampling": frame_sampling,
                               "caption_draws": caption_draws,
                               "random_weights": True if random_weights else None, "preset": preset})
    report = run_demo(cfg, progress=not quiet, force=force)
    from vlgap.runs.schemas import SCALING, SWEEP, read_run_json

    doc = read_run_json(Path(cfg.out) / "sweep.json", SWEEP)
    _print_rows(doc["rows"])
    _print_items(doc.get("items"), cfg.out)
    scaling = Path(cfg.out) / "scaling.json"
    _print_fits(read_run_json(scaling, SCALING) if scaling.is_file() else {})
    console.print(f"[bold green]report:[/] {report.resolve()}  ({time.perf_counter() - t0:.0f} s)")
