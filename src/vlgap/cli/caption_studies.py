"""CLI of the caption studies of Dynamic Reflections: caption-diversity (diverse captions vs paraphrases
over n_c) and split-captions (PVD-style parts of one detailed caption)."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.table import Table

from vlgap.cli._app import app
from vlgap.cli.options import (RANDOM_WEIGHTS_HELP, TEMPORAL_POOLING_HELP, ci_method_option, confidence_option,
                               encoding_option,
                               device_option, dtype_option, int_list, one_int)
from vlgap.io_utils import to_json

console = Console()


@app.command("caption-diversity")
def caption_diversity_cmd(
    manifest: Path = typer.Argument(..., help="manifest with meta.caption_groups (`vlgap make-data shapes "
                                              "--caption-mode both`) or any shapes manifest (groups rebuilt from the spec)"),
    vision: str = typer.Option(..., help="comma list of vision encoders"),
    text: str = typer.Option(..., help="comma list of text encoders"),
    n_captions: str = typer.Option("1,2,4,8", "--n-captions", help="n_c values to sweep (comma list, at most 10)"),
    n_frames: str = typer.Option("8", "--n-frames", help="frames per video (n_f; one value)"),
    k: int = typer.Option(10, help="neighbours of the mutual k-NN"),
    bootstrap: int = typer.Option(1000, help="paired bootstrap resamples over items"),
    confidence: float = confidence_option("caption-diversity"),
    ci_method: str = ci_method_option("caption-diversity"),
    seed: int = typer.Option(0, help="bootstrap seed"),
    out: Optional[Path] = typer.Option(None, "--out", "-o", help="folder: the run folder for caption_diversity.json "
                                                               "and the report section"),
    device: str = device_option("cpu", spread=True),
    dtype: str = dtype_option("float32"),
    image_size: Optional[int] = typer.Option(None),
    text_pooling: Optional[str] = typer.Option(None, help="mean (default) | last"),
    temporal_pooling: str = typer.Option("mean", "--temporal-pooling", help=TEMPORAL_POOLING_HELP),
    cache_dir: Optional[Path] = typer.Option(None),
    random_weights: bool = typer.Option(False, "--random-weights", help=RANDOM_WEIGHTS_HELP),
    as_json: bool = typer.Option(False, "--json", help="print JSON on stdout"),
):
    """Diverse captions vs paraphrases of one fact set: alignment over n_c for both, and the paired difference."""
    from vlgap.cli.temporal import _ci, _features, _label, _names, _p, _after
    from vlgap.probe.caption_diversity import caption_diversity

    features = _features(cache_dir, device, dtype, image_size, text_pooling, temporal_pooling=temporal_pooling,
                         random_weights=random_weights)
    res = caption_diversity(manifest, _names(vision, "--vision"), _names(text, "--text"),
                            n_captions=int_list(n_captions, "--n-captions"), n_f=one_int(n_frames, "--n-frames"),
                            k=k, n_bootstrap=bootstrap, confidence=confidence, seed=seed, features=features, out=out)
    if as_json:
        print(to_json(res))
        return
    table = Table(title=f"caption diversity vs quantity (N={res['n']}, n_f={res['n_f']}, k={res['k']})")
    for c in ("vision", "text", "n_c", "facts D / P", "diverse", "paraphrase", "D - P", "95% CI", "p"):
        table.add_column(c)
    for r in res["rows"]:
        facts = ("n/a" if r["facts_diverse"] is None else f"{r['facts_diverse']:.1f} / {r['facts_paraphrase']:.1f}")
        table.add_row(_label(r, "vision"), _label(r, "text"), str(r["n_c"]), facts,
                      f"{r['score_a']:.4f} {_ci(r['ci_a'])}", f"{r['score_b']:.4f} {_ci(r['ci_b'])}",
                      f"{r['difference']:+.4f}", _ci(r["ci"]), _p(r.get("p_value")))
    console.print(table)
    _after(out)


@app.command("split-captions")
def split_captions_cmd(
    manifest: Path = typer.Argument(..., help="manifest whose items' detailed caption is split"),
    out: Path = typer.Option(..., "--out", "-o", help="file: the manifest to write (JSONL; its split report is "
                                                      "written beside it)"),
    parts: int = typer.Option(..., "--parts", help="parts per caption (the paper's PVD: 10)"),
    lm: Optional[str] = typer.Option(None, "--lm", help="split with this causal LM and App. A.3's prompt (smollm2 "
                                     "offline, a folder or a hub id); without it, the rule splitter (sentences and "
                                     "clauses)"),
    source: str = typer.Option("longest", help="which caption to split: longest | first | all (joined)"),
    tolerance: float = typer.Option(0.1, help="share of the caption's content words the parts may add"),
    on_invalid: str = typer.Option("fallback", "--on-invalid",
                                   help="an invalid split: fallback (the rule split, when valid; else skipped) | "
                                        "skip | error; each is listed in the report"),
    device: str = device_option("cpu", spread=True),
    batch_size: int = typer.Option(8, help="lm: prompts per generate() call"),
    max_new_tokens: Optional[int] = typer.Option(None, help="lm: token budget per answer (default from the prompt)"),
    as_json: bool = typer.Option(False, "--json", help="print the split report as JSON"),
    encoding: str = encoding_option(),
):
    """Split one caption per item into n parts (PVD style), validated for coverage; writes a new manifest."""
    from vlgap.counts import check_count
    from vlgap.data.split_captions import split_captions, split_summary

    check_count("batch_size", batch_size, flag="--batch-size", example=8)
    check_count("max_new_tokens", max_new_tokens, flag="--max-new-tokens", allow_none=True, example=200)
    from vlgap.paths import output_file

    output_file(out, "--out")  # the manifest is read (and checked) by split_captions
    splitter = f"lm:{lm}" if lm else "rule"
    report = split_captions(manifest, out, parts=parts, splitter=splitter, source=source, tolerance=tolerance,
                            on_invalid=on_invalid, device=device, batch_size=batch_size,
                            max_new_tokens=max_new_tokens, progress=not as_json)
    if as_json:
        print(to_json(report))
        return
    console.print(split_summary(report), highlight=False, markup=False, soft_wrap=True)
