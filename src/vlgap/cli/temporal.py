"""CLI of the temporal probes, the encoder-by-encoder matrix and the downstream analysis:
test-of-time, temporal, cross-vision, cross-model-figures, downstream. Each command calls one API function, prints a table
(or JSON) and, with --out RUN_DIR, writes a report section (then `vlgap report RUN_DIR`)."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.table import Table

from vlgap.cli._app import app
from vlgap.cli.tables import print_table
from vlgap.cli.options import (ALLOW_REPEATED_FRAMES_HELP, RANDOM_WEIGHTS_HELP, TEMPORAL_POOLING_HELP, ci_method_option,
                               confidence_option, device_option, dtype_option, one_int,
                               text_dtype_option)
from vlgap.io_utils import to_json

console = Console()


def _names(text: str, option: str) -> list[str]:
    from vlgap.errors import VlgapError

    out = [s.strip() for s in text.split(",") if s.strip()]
    if not out:
        raise VlgapError(f"{option}: give at least one encoder name (comma list)")
    return out


def _features(cache_dir, device, dtype, image_size, text_pooling=None, skip_bad=False, temporal_pooling="mean",
              random_weights=False, allow_repeated_frames=False, text_dtype=None):
    from vlgap.features.source import FeatureOptions, FeatureSource

    return FeatureSource(FeatureOptions(cache_dir=cache_dir, device=device, dtype=dtype, text_dtype=text_dtype,
                                        image_size=image_size,
                                        text_pooling=text_pooling, skip_bad=skip_bad,
                                        allow_repeated_frames=allow_repeated_frames,
                                        temporal_pooling=temporal_pooling, random_weights=random_weights))


def _label(row: dict, key: str) -> str:
    """A row's encoder name, "(random weights)" beside it when its features were."""
    from vlgap.encoders.registry import labelled

    return labelled(row[key], row.get(f"{key}_weights"))


def _ci(ci, reason: str | None = None) -> str:
    from vlgap.formatting import interval  # one number format for every summary

    return interval(ci, 4, reason)


def _p(p) -> str:
    from vlgap.formatting import number

    return number(p)


def _value(v, reason: str | None = None, nd: int = 3) -> str:
    """A number, or "n/a (why)" where it cannot exist."""
    from vlgap.formatting import is_missing, not_available, number

    return not_available(reason) if is_missing(v) else number(v, nd)


def _loo(loo: dict, key: str, nd: int) -> str:
    from vlgap.formatting import not_available, number

    return number(loo[key], nd) if loo.get(key) is not None else not_available("no leave-one-out fit")


def _after(out: Optional[Path]) -> None:
    if out is not None:
        hint = "" if (out / "sweep.json").is_file() else " (the HTML report also needs a sweep in that folder)"
        console.print(f"section written under {out}/sections; render with `vlgap report {out}`{hint}", highlight=False)


def _print_differences(rows: list[dict], title: str, extra: str | None = None) -> None:
    table = Table(title=title)
    cols = ["vision", "text"] + ([extra] if extra else []) + ["N", "A", "B", "A - B", "95% CI", "p", "layers"]
    for c in cols:
        table.add_column(c)
    for r in rows:
        table.add_row(_label(r, "vision"), _label(r, "text"), *([str(r[extra])] if extra else []), str(r["n"]),
                      f"{r['name_a']} {r['score_a']:.4f}", f"{r['name_b']} {r['score_b']:.4f}",
                      f"{r['difference']:+.4f}", _ci(r["ci"]),
                      _p(r.get("p_value")),
                      f"{r['x_layer_name']} / {r['y_layer_name']}")
    print_table(console, table)


@app.command("test-of-time")
def test_of_time_cmd(
    vision: str = typer.Option(..., help="comma list of vision encoders, e.g. mobilenet_v2,efficientnet_lite0"),
    text: str = typer.Option(..., help="comma list of text encoders, e.g. minilm,smollm2"),
    n_frames: str = typer.Option("8", "--n-frames", help="frames per video (n_f; one value)"),
    manifest: Optional[Path] = typer.Option(None, help="a Test of Time manifest (default: generate one in the cache)"),
    seed: int = typer.Option(0, help="generator seed (and bootstrap seed)"),
    bootstrap: int = typer.Option(2000, help="group-bootstrap resamples for the nearest-related fractions"),
    confidence: float = confidence_option("test-of-time"),
    out: Optional[Path] = typer.Option(None, "--out", "-o", help="folder: the run folder for the report section"),
    device: str = device_option("cpu", spread=True),
    dtype: str = dtype_option("float32"),
    text_dtype: Optional[str] = text_dtype_option(),
    image_size: Optional[int] = typer.Option(None),
    text_pooling: Optional[str] = typer.Option(None, help="mean (default) | last"),
    temporal_pooling: str = typer.Option("mean", "--temporal-pooling", help=TEMPORAL_POOLING_HELP),
    cache_dir: Optional[Path] = typer.Option(None),
    random_weights: bool = typer.Option(False, "--random-weights", help=RANDOM_WEIGHTS_HELP),
    as_json: bool = typer.Option(False, "--json", help="print JSON on stdout"),
):
    """Test of Time: alignment at k = 1, 2, 3 and which related caption each space ranks nearest."""
    from vlgap.data.test_of_time import RELATIONS
    from vlgap.probe.test_of_time import run_test_of_time

    features = _features(cache_dir, device, dtype, image_size, text_pooling, temporal_pooling=temporal_pooling,
                         random_weights=random_weights, text_dtype=text_dtype)
    res = run_test_of_time(_names(vision, "--vision"), _names(text, "--text"), n_f=one_int(n_frames, "--n-frames"),
                           seed=seed, manifest=manifest, n_bootstrap=bootstrap, confidence=confidence, out=out,
                           features=features)
    if as_json:
        print(to_json(res))
        return
    table = Table(title=f"Test of Time: tie-aware mutual k-NN ({res['n_items']} items, {res['n_videos']} videos)")
    for c in ("items", "vision", "text", "N", "k", "score", "95% CI", "chance", "layers"):
        table.add_column(c)
    for r in res["alignment"]:
        table.add_row(r["view"], _label(r, "vision"), _label(r, "text"), str(r["n"]), str(r["k"]), f"{r['score']:.3f}", _ci(r["ci"]),
                      f"{r['chance']:.3f}", f"{r['x_layer_name']} / {r['y_layer_name']}")
    print_table(console, table)
    table = Table(title="nearest related caption (last layer; 95% group-bootstrap CI)")
    for c in ("encoder", "space", *RELATIONS, "tied"):
        table.add_column(c)
    for r in res["nearest_related"]:
        table.add_row(_label(r, "encoder"), r["modality"], *[f"{r['fractions'][x]:.2f} {_ci(r['ci'][x])}" for x in RELATIONS],
                      f"{r['tied']:.2f}")
    print_table(console, table)
    _after(out)


@app.command("temporal")
def temporal_cmd(
    source: Path = typer.Argument(..., help="manifest (JSONL; reorder pairs from meta.reorder, frames for the "
                                            "frame-order controls) or a reorder JSON (vlgap or VideoComp form)"),
    vision: str = typer.Option(..., help="comma list of vision encoders"),
    text: str = typer.Option(..., help="comma list of text encoders"),
    n_frames: str = typer.Option("8", "--n-frames", help="frames per video (n_f; one value)"),
    n_captions: str = typer.Option("1", "--n-captions", help="captions per video for the frame-order controls (n_c; "
                                                          "one value)"),
    k: int = typer.Option(10, help="neighbours for the frame-order controls"),
    reorder_k: int = typer.Option(5, "--reorder-k", help="neighbours for the reorder probe (the paper: 5)"),
    reorder: bool = typer.Option(True, "--reorder/--no-reorder", help="run the reorder probe"),
    frame_order: bool = typer.Option(True, "--frame-order/--no-frame-order",
                                     help="run the frame-order controls (manifests only)"),
    orders: str = typer.Option("reversed,shuffled", help="frame-order controls"),
    image_check: Optional[int] = typer.Option(None, "--image-check",
                                              help="for image encoders (order-invariant by construction) extract the "
                                                   "controls for only ~this many videos and verify they match"),
    video_dir: Optional[Path] = typer.Option(None, help="folder of the videos named in a reorder JSON"),
    video_template: str = typer.Option("{video_id}.mp4", help="VideoComp video file name (fields: key, video_id, type)"),
    types: str = typer.Option("reorder", help="VideoComp disruption types to keep (substrings, comma list)"),
    bootstrap: int = typer.Option(1000, help="paired bootstrap resamples"),
    confidence: float = confidence_option("temporal"),
    ci_method: str = ci_method_option("temporal"),
    seed: int = typer.Option(0),
    out: Optional[Path] = typer.Option(None, "--out", "-o", help="folder: the run folder for the report sections"),
    device: str = device_option("cpu", spread=True),
    dtype: str = dtype_option("float32"),
    text_dtype: Optional[str] = text_dtype_option(),
    image_size: Optional[int] = typer.Option(None),
    text_pooling: Optional[str] = typer.Option(None, help="mean (default) | last"),
    temporal_pooling: str = typer.Option("mean", "--temporal-pooling", help=TEMPORAL_POOLING_HELP),
    skip_bad: bool = typer.Option(False, help="skip unreadable videos (reported) instead of stopping"),
    allow_repeated_frames: bool = typer.Option(False, "--allow-repeated-frames", help=ALLOW_REPEATED_FRAMES_HELP),
    cache_dir: Optional[Path] = typer.Option(None),
    random_weights: bool = typer.Option(False, "--random-weights", help=RANDOM_WEIGHTS_HELP),
    as_json: bool = typer.Option(False, "--json", help="print JSON on stdout"),
):
    """Reorder probe (positive vs negative captions) and frame-order controls, with paired intervals."""
    from vlgap.errors import VlgapError
    from vlgap.probe.frame_order import run_frame_order
    from vlgap.probe.reorder import run_reorder

    vis, txt = _names(vision, "--vision"), _names(text, "--text")
    n_f = one_int(n_frames, "--n-frames")
    src = _features(cache_dir, device, dtype, image_size, text_pooling, skip_bad, temporal_pooling, random_weights,
                    allow_repeated_frames, text_dtype)
    is_json = source.suffix.lower() == ".json"
    if not reorder and (not frame_order or is_json):
        raise VlgapError("nothing to run: enable --reorder, or --frame-order with a manifest")
    result = {}
    if reorder:
        result["reorder"] = run_reorder(source, vis, txt, n_f=n_f, k=reorder_k, n_bootstrap=bootstrap,
                                        confidence=confidence, seed=seed,
                                        video_dir=video_dir, video_template=video_template,
                                        types=[t for t in types.split(",") if t], out=out, features=src)
    if frame_order and not is_json:
        result["frame_order"] = run_frame_order(source, vis, txt, n_f=n_f, n_c=one_int(n_captions, "--n-captions"),
                                                k=k, orders=[o for o in orders.split(",") if o], n_bootstrap=bootstrap,
                                                confidence=confidence,
                                                seed=seed, image_check_items=image_check, out=out, features=src)
    if as_json:
        print(to_json(result))
        return
    if "reorder" in result:
        r = result["reorder"]
        _print_differences(r["rows"], f"reorder probe: {r['n_triples']} triples, k={r['k']} (drop = positive - negative)")
    if "frame_order" in result:
        r = result["frame_order"]
        _print_differences(r["rows"], f"frame order: N={r['n']}, n_f={r['n_f']}, k={r['k']} (ordered - control)",
                           extra="order")
        for c in r["checks"]:
            if c["invariant"] and c["kind"] == "image":
                console.print(f"{c['vision']}: image encoder, mean over frames: order-invariant by construction "
                              f"({c['order']} features equal ordered ones to {c['max_rel_diff']:.1e} on "
                              f"{c['checked_items']} videos)", highlight=False)
    _after(out)


def _n_frames_per_encoder(n_frames: str, n_frames_from: Optional[Path], vision: list[str]):
    """--n-frames "8" (every encoder) or "a=4,b=8"; --n-frames-from RUN_DIR: each encoder's best n_f in a sweep."""
    from vlgap.errors import VlgapError
    from vlgap.probe.cross_figures import best_n_f, parse_n_f, read_sweep

    if n_frames_from is not None:
        best = best_n_f(read_sweep(n_frames_from)["rows"])
        missing = [v for v in vision if v not in best]
        if missing:
            raise VlgapError(f"--n-frames-from {n_frames_from}: {', '.join(missing)} not in that sweep (its vision "
                             f"encoders: {', '.join(best)})")
        given = parse_n_f(n_frames) if "=" in n_frames else {}
        return {v: given.get(v, best[v]) for v in vision}
    value = parse_n_f(n_frames)
    if value is None:
        raise VlgapError("--n-frames best needs --n-frames-from RUN_DIR (a sweep to take each encoder's best n_f from)")
    return value if isinstance(value, dict) else one_int(n_frames, "--n-frames")


@app.command("cross-vision")
def cross_vision_cmd(
    manifest: Path = typer.Argument(..., help="dataset manifest (JSONL)"),
    vision: str = typer.Option(..., help="comma list of vision encoders (two or more, or one with --text)"),
    n_frames: str = typer.Option("8", "--n-frames", help="frames per video: one n_f for every encoder (8), or "
                                 "one per encoder (mobilenet_v2=4,efficientnet_lite0=8)"),
    n_frames_from: Optional[Path] = typer.Option(None, "--n-frames-from", help="a sweep's run folder: each vision "
                                                 "encoder at the n_f where it aligns best there (--n-frames "
                                                 "name=n_f overrides single encoders)"),
    text: Optional[str] = typer.Option(None, help="comma list of text encoders added as rows (Fig 10's text row)"),
    n_captions: str = typer.Option("1", "--n-captions", help="captions per video for the text rows (n_c; one value)"),
    k: int = typer.Option(10),
    bootstrap: int = typer.Option(200, help="bootstrap resamples per pair (best pair re-selected in each)"),
    confidence: float = confidence_option("cross-vision"),
    ci_method: str = ci_method_option("cross-vision"),
    seed: int = typer.Option(0),
    out: Optional[Path] = typer.Option(None, "--out", "-o", help="folder: the run folder for the report section"),
    device: str = device_option("cpu", spread=True),
    dtype: str = dtype_option("float32"),
    text_dtype: Optional[str] = text_dtype_option(),
    image_size: Optional[int] = typer.Option(None),
    text_pooling: Optional[str] = typer.Option(None, "--text-pooling", help="mean (default) | last"),
    temporal_pooling: str = typer.Option("mean", "--temporal-pooling", help=TEMPORAL_POOLING_HELP),
    cache_dir: Optional[Path] = typer.Option(None),
    random_weights: bool = typer.Option(False, "--random-weights", help=RANDOM_WEIGHTS_HELP),
    as_json: bool = typer.Option(False, "--json", help="print JSON on stdout"),
):
    """Alignment between every pair of encoders, clustered (heatmap with --out): vision encoders each at their
    n_f, text encoders as extra rows."""
    from vlgap.probe.cross_model import run_cross_alignment

    names = _names(vision, "--vision")
    texts = _names(text, "--text") if text else []
    res = run_cross_alignment(manifest, names, n_f=_n_frames_per_encoder(n_frames, n_frames_from, names),
                              text=texts, n_c=one_int(n_captions, "--n-captions"), k=k,
                              n_bootstrap=bootstrap, confidence=confidence, seed=seed, out=out,
                              features=_features(cache_dir, device, dtype, image_size, text_pooling=text_pooling,
                                                 temporal_pooling=temporal_pooling, random_weights=random_weights,
                                                 text_dtype=text_dtype))
    if as_json:
        print(to_json(res))
        return
    from vlgap.encoders.registry import labelled

    labels = [labelled(n, n in (res.get("random_weights") or ())) for n in res["names"]]
    title = "vision x vision" + (" (+ text rows)" if texts else "")
    table = Table(title=f"{title} {res['metric']} (k={res['k']}, N={res['n']}), clustered order")
    table.add_column("")
    for i in res["order"]:
        table.add_column(labels[i])
    for i in res["order"]:
        table.add_row(labels[i], *[f"{res['scores'][i][j]:.3f}" for j in res["order"]])
    print_table(console, table)
    per = res.get("n_f_per_encoder") or {}
    if len(set(per.values())) > 1:
        console.print("n_f per encoder: " + ", ".join(f"{v} {n}" for v, n in per.items()), highlight=False)
    _after(out)


@app.command("cross-model-figures")
def cross_model_figures_cmd(
    run_dir: Path = typer.Argument(..., help="a sweep's run folder (vlgap sweep / vlgap demo)"),
    n_f: str = typer.Option("best", "--n-f", help="best (each vision encoder at the n_f where it aligns best in "
                            "the sweep), one n_f for all (8), or name=n_f per encoder"),
    text: Optional[str] = typer.Option(None, help="Fig 7: only these text encoders' pairs (comma list; default all)"),
    n_c_low: int = typer.Option(1, "--n-c-low", help="Fig 7 x axis and Fig 11: captions per video"),
    n_c_high: Optional[int] = typer.Option(None, "--n-c-high", help="Fig 7 y axis and Fig 12 (default: the "
                                           "sweep's largest n_c)"),
    bootstrap: int = typer.Option(2000, help="bootstrap resamples over the models for the Fig 7 line"),
    confidence: float = confidence_option("cross-model-figures"),
    seed: int = typer.Option(0),
    encoder_matrix: bool = typer.Option(False, "--encoder-matrix", help="also Fig 10: every encoder x every "
                                        "encoder (vision at its n_f, text rows); needs the sweep's features"),
    matrix_n_c: int = typer.Option(1, "--matrix-n-c", help="captions per video of the text rows in Fig 10"),
    matrix_bootstrap: int = typer.Option(200, "--matrix-bootstrap", help="bootstrap resamples per pair in Fig 10"),
    as_json: bool = typer.Option(False, "--json", help="print JSON on stdout"),
):
    """The paper's cross-model figures from a sweep: 1 vs n_c captions across models with the fitted line
    (Fig 7), vision x text best-score matrices with layer indices (Figs 11, 12) and, with
    --encoder-matrix, the encoder x encoder matrix (Fig 10). Writes report sections into RUN_DIR."""
    from vlgap.formatting import interval, number
    from vlgap.probe.cross_figures import parse_n_f
    from vlgap.probe.cross_model_report import run_cross_model_figures

    res = run_cross_model_figures(run_dir, n_f=parse_n_f(n_f), text=_names(text, "--text") if text else None,
                                  n_c_low=n_c_low, n_c_high=n_c_high, n_bootstrap=bootstrap, confidence=confidence,
                                  seed=seed, encoder_matrix=encoder_matrix, matrix_n_c=matrix_n_c,
                                  matrix_bootstrap=matrix_bootstrap)
    if as_json:
        print(to_json(res))
        return
    console.print("n_f per vision encoder (" + res["n_f_choice"] + "): "
                  + ", ".join(f"{v} {nf}" for v, nf in res["n_f"].items()), highlight=False)
    gain = res["caption_gain"]
    if "error" in gain:
        console.print(f"[yellow]Fig 7: no line:[/] {gain['error']}", highlight=False)
    else:
        f = gain["fit"]
        console.print(f"Fig 7, N = {gain['n_points']} pairs, n_c {gain['n_c_low']} -> {gain['n_c_high']}: "
                      f"y = {number(f['slope'])} x {'-' if f['intercept'] < 0 else '+'} {number(abs(f['intercept']))}, slope CI {interval(f['slope_ci'])} "
                      f"(bootstrap over models) {interval(f['slope_ci_t'])} (t, {f['n'] - 2} df), r = "
                      f"{number(f['r'])}, mean y/x {number(f['mean_ratio'], 2)} {interval(f['mean_ratio_ci'], 2)}",
                      highlight=False)
        for note in gain["notes"]:
            console.print(f"[yellow]note:[/] {note}", highlight=False)
    for nc, m in res["matrices"].items():
        table = Table(title=f"vision x text best score (vision layer, text layer), n_c = {nc}")
        table.add_column("vision (n_f)")
        for t in m["text"]:
            table.add_column(t, justify="right")
        for i, v in enumerate(m["vision"]):
            table.add_row(f"{v} ({m['n_f'][v]})", *[
                f"{number(m['scores'][i][j])} ({m['x_layer'][i][j]}, {m['y_layer'][i][j]}) "
                f"{interval([m['ci_lo'][i][j], m['ci_hi'][i][j]])}" for j in range(len(m["text"]))])
        console.print(table)
    if "encoder_matrix" in res:
        d = res["encoder_matrix"]
        console.print("Fig 10 order: " + ", ".join(d["ordered_names"]), highlight=False)
    console.print(f"sections written under {run_dir}/sections; render with `vlgap report {run_dir}`", highlight=False)


@app.command("downstream")
def downstream_cmd(
    scores: Optional[Path] = typer.Argument(None, help="CSV: model, task, score (optional family), one row per model "
                                            "and task; or, with --task, the manifest whose items are scored"),
    alignment: Optional[Path] = typer.Argument(None, help="CSV: model, alignment (optional family), or a sweep.csv "
                                               "(not with --task: alignment is computed from the features)"),
    text: Optional[str] = typer.Option(None, help="sweep.csv: the text encoder to take; --task: the text encoder "
                                       "of the alignment (and of retrieval: a joint model's text tower)"),
    n_f: Optional[int] = typer.Option(None, "--n-f", help="sweep.csv: the n_f to take; --task: frames per video "
                                      "(default 8)"),
    n_c: Optional[int] = typer.Option(None, "--n-c", help="sweep.csv: the n_c to take; --task: captions (default 1)"),
    task: Optional[str] = typer.Option(None, "--task", help="compute the scores on frozen features: comma list of "
                                       "knn-classify | linear-probe | retrieval"),
    labels: str = typer.Option("label", "--labels", help="--task: label key(s) in the manifest's meta (comma "
                               "list; dotted paths; shapes videos: background, shape, colour, n_objects, "
                               "first_event)"),
    vision: Optional[str] = typer.Option(None, "--vision", help="--task: vision encoders (comma list)"),
    k: int = typer.Option(8, "--k", help="--task knn-classify: neighbours (the paper: 8)"),
    temperature: float = typer.Option(0.07, "--temperature", help="--task knn-classify: vote weights exp(sim/T) "
                                      "(the paper states none; DINO's 0.07)"),
    folds: int = typer.Option(5, "--folds", help="--task: stratified cross-validation folds"),
    alignment_k: int = typer.Option(10, "--alignment-k", help="--task: k of the mutual k-NN alignment"),
    cache_dir: Optional[Path] = typer.Option(None, help="--task: feature cache root"),
    device: str = device_option("cpu", spread=True),
    image_size: Optional[int] = typer.Option(None, help="--task: vision input size"),
    random_weights: bool = typer.Option(False, "--random-weights", help=RANDOM_WEIGHTS_HELP),
    bootstrap: int = typer.Option(2000, help="bootstrap resamples for the Spearman interval"),
    confidence: float = confidence_option("downstream"),
    ci_method: str = ci_method_option("downstream"),
    seed: int = typer.Option(0),
    out: Optional[Path] = typer.Option(None, "--out", "-o", help="folder: the run folder for the report section"),
    as_json: bool = typer.Option(False, "--json", help="print JSON on stdout"),
):
    """Per task: Pearson (Fisher-z CI) and Spearman (bootstrap CI), leave-one-out prediction, Holm across tasks.
    With --task: the scores are computed per encoder and per layer on frozen features first."""
    from vlgap.errors import VlgapError
    from vlgap.probe.downstream import run_downstream

    if task is not None:
        _proxies_cmd(scores, alignment, task=task, labels=labels, vision=vision, text=text, n_f=n_f, n_c=n_c, k=k,
                     temperature=temperature, folds=folds, alignment_k=alignment_k, cache_dir=cache_dir,
                     device=device, image_size=image_size, random_weights=random_weights, bootstrap=bootstrap,
                     confidence=confidence, seed=seed, out=out, as_json=as_json)
        return
    if scores is None or alignment is None:
        raise VlgapError("give SCORES and ALIGNMENT CSVs, or --task knn-classify|linear-probe|retrieval with a "
                         "manifest, --vision and --text")
    res = run_downstream(scores, alignment, out=out, n_bootstrap=bootstrap, confidence=confidence, seed=seed,
                         text=text, n_f=n_f, n_c=n_c)
    if as_json:
        print(to_json(res.to_dict()))
        return
    table = Table(title=f"alignment vs downstream ({len(res.models)} models)")
    for c in ("task", "n", "Pearson r", "CI", "p", "Holm p", "Spearman", "CI", "Holm p", "LOO RMSE", "mean RMSE", "Q²"):
        table.add_column(c)
    for t in res.tasks:
        pe, sp, lo = t["pearson"], t["spearman"], t.get("loo") or {}
        why = pe.get("reason")  # a task whose correlation is undefined: n/a (why), and one warning line
        table.add_row(t["task"], str(t["n"]), _value(pe["r"], why), _ci(pe["ci"], pe.get("ci_reason")), _value(pe["p"], why),
                      _value(pe["p_holm"], why), _value(sp["rho"], why), _ci(sp["ci"], sp.get("ci_reason")),
                      _value(sp["p_holm"], why), _loo(lo, "rmse", 4), _loo(lo, "baseline_rmse", 4), _loo(lo, "q2", 3))
    print_table(console, table)
    for n in res.notes:
        console.print(f"[yellow]note:[/] {n}", highlight=False)
    _after(out)


def _proxies_cmd(manifest, alignment, *, task, labels, vision, text, n_f, n_c, k, temperature, folds, alignment_k,
                 cache_dir, device, image_size, random_weights, bootstrap, confidence, seed, out, as_json):
    from vlgap.errors import VlgapError
    from vlgap.probe.proxies import downstream_proxies, write_proxies_section

    if manifest is None:
        raise VlgapError("--task needs the manifest as the first argument")
    if alignment is not None:
        raise VlgapError("--task computes alignment from the features: leave out the ALIGNMENT argument")
    if not vision or not text:
        raise VlgapError("--task needs --vision (comma list) and --text (the text encoder of the alignment)")
    src = _features(cache_dir, device, "float32", image_size, random_weights=random_weights)
    res = downstream_proxies(manifest, _names(vision, "--vision"), text, task=task, labels=labels,
                             n_f=n_f or 8, n_c=n_c or 1, k=k, temperature=temperature, n_folds=folds,
                             alignment_k=alignment_k, n_bootstrap=bootstrap, confidence=confidence, seed=seed,
                             features=src)
    if out is not None:
        write_proxies_section(res, out)
    if as_json:
        print(to_json(res.to_dict()))
        return
    table = Table(title=f"downstream proxies ({res.config['n_items']} items): best layer per encoder and task")
    for c in ("encoder", "task", "best layer", "score", "CI", "chance", "N", "Spearman over layers"):
        table.add_column(c)
    for e in res.encoders:
        for tn, t in e["tasks"].items():
            sp = t.get("spearman_over_layers") or {}
            table.add_row(e["encoder"], tn, str(t.get("best_layer_name", t["best_layer"])), f"{t['score']:.3f}",
                          _ci(t.get("ci")), f"{t.get('chance', float('nan')):.3f}", str(t.get("n", "-")),
                          f"{sp.get('rho', float('nan')):.3f} {_ci(sp.get('ci'))}")
    console.print(table)
    if res.per_layer:
        lt = Table(title="per layer: alignment vs score over (encoder, layer) points")
        for c in ("task", "points", "Pearson r", "CI", "Holm p", "Spearman", "CI", "LOFO Q²"):
            lt.add_column(c)
        for t in res.per_layer["tasks"]:
            pe, sp = t["pearson"], t["spearman"]
            lofo = t.get("lofo")
            lt.add_row(t["task"], str(t["n"]), f"{pe['r']:.3f}", _ci(pe["ci"]), f"{pe['p_holm']:.3g}",
                       f"{sp['rho']:.3f}", _ci(sp["ci"]), f"{lofo['q2']:.3f}" if lofo else "-")
        console.print(lt)
    for n in res.notes:
        console.print(f"[yellow]note:[/] {n}", highlight=False)
    _after(out)
