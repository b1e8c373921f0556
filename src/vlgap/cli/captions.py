"""CLI commands: caption-eval (coco-caption metrics with intervals, optionally a paired comparison)."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from vlgap.cli._app import app  # noqa: F401


def _fmt(x, digits: int = 4) -> str:
    from vlgap.formatting import interval, number  # one number format for every summary

    return interval(x, digits) if isinstance(x, (list, tuple)) else number(x, digits)


@app.command("caption-eval")
def caption_eval_command(
    pred: Path = typer.Option(..., "--pred", help="Predictions: coco results JSON [{image_id, caption}] or JSONL {id, caption}."),
    refs: Path = typer.Option(..., "--refs", help="References: coco annotations JSON {annotations: [...]} or JSONL {id, captions: [...]}."),
    metrics: Optional[str] = typer.Option(None, "--metrics", help="Comma list of bleu,meteor,rouge,cider,sacrebleu (default: all; METEOR skipped with a note if Java is missing)."),
    bootstrap: int = typer.Option(0, "--bootstrap", help="Bootstrap resamples over items for intervals (0: none; 1000 is usual)."),
    per_item: Optional[Path] = typer.Option(None, "--per-item", help="Write per-item scores to this CSV file."),
    seed: int = typer.Option(0, "--seed", help="Seed for bootstrap and permutations."),
    confidence: float = typer.Option(0.95, "--confidence", help="Interval confidence level."),
    ci_method: str = typer.Option("bca", "--ci-method", help="bca | percentile."),
    compare: Optional[Path] = typer.Option(None, "--compare", help="Second system's predictions: report --pred minus --compare, paired."),
    permutations: int = typer.Option(10000, "--permutations", help="With --compare: permutations for the p-value."),
    cider_df: Optional[Path] = typer.Option(None, "--cider-df", help="Freeze CIDEr document frequencies from this references file (default: the --refs set, as coco-caption)."),
    on_missing: str = typer.Option("error", "--on-missing", help="error | drop: ids present on one side only."),
    on_duplicate: str = typer.Option("error", "--on-duplicate", help="error | first: several predictions for one id."),
    on_empty: str = typer.Option("error", "--on-empty", help="error | keep: empty captions."),
    meteor_jar: Optional[Path] = typer.Option(None, "--meteor-jar", help="meteor-1.5.jar to use (default: the one in pycocoevalcap)."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of a table."),
) -> None:
    """BLEU-1..4, METEOR, ROUGE-L, CIDEr with coco-caption's numbers, SacreBLEU with its signature, N and intervals."""
    from rich.console import Console
    from rich.table import Table

    from vlgap.captions.evaluate import caption_eval, compare_captions, per_item_csv
    from vlgap.errors import VlgapError
    from vlgap.io_utils import atomic_write_text, to_json

    common = dict(seed=seed, confidence=confidence, method=ci_method,
                  cider_df=str(cider_df) if cider_df else "corpus",
                  meteor_jar=meteor_jar, on_missing=on_missing, on_duplicate=on_duplicate, on_empty=on_empty)
    if compare is not None:
        if per_item is not None:
            raise VlgapError("--per-item is for a single system; run caption-eval without --compare to write it")
        result = compare_captions(pred, compare, refs, metrics, n_bootstrap=bootstrap or 1000,
                                  n_permutations=permutations, names=(pred.stem, compare.stem), **common)
    else:
        result = caption_eval(pred, refs, metrics, n_bootstrap=bootstrap, per_item=per_item is not None, **common)
        if per_item is not None:
            atomic_write_text(per_item, per_item_csv(result.pop("per_item")))
    if as_json:
        print(to_json(result))
        return

    console = Console()
    score_keys = [k for k, v in result.items() if isinstance(v, dict) and ("score" in v or "difference" in v)]
    level = f"{int(round(confidence * 100))}% CI"
    if compare is None:
        table = Table(title=f"Caption metrics: {pred.name} vs {refs.name} (N = {result['n']})")
        table.add_column("metric")
        table.add_column("score", justify="right")
        if bootstrap:
            table.add_column(level, justify="right")
        for k in score_keys:
            v = result[k]
            row = [k, _fmt(v["score"])]
            if bootstrap:
                row.append(f"[{_fmt(v['ci'][0])}, {_fmt(v['ci'][1])}]")
            table.add_row(*row)
    else:
        a, b = result["systems"]
        table = Table(title=f"Paired comparison on {result['n']} items: {a} - {b}")
        for col in ("metric", a, b, "difference", level, "p-value"):
            table.add_column(col, justify="left" if col == "metric" else "right")
        for k in score_keys:
            v = result[k]
            table.add_row(k, _fmt(v[a]), _fmt(v[b]), _fmt(v["difference"]),
                          f"[{_fmt(v['ci'][0])}, {_fmt(v['ci'][1])}]", f"{v['p_value']:.4g}")
    console.print(table)
    if "SacreBLEU" in result:
        console.print(f"SacreBLEU signature: {result['SacreBLEU']['signature']}", highlight=False)
    for note in result.get("notes", []):
        console.print(f"note: {note}", highlight=False)
    for key, value in result.get("input", {}).items():
        console.print(f"input policy {key}: {value}", highlight=False)
    if per_item is not None:
        console.print(f"per-item scores written to {per_item}", highlight=False)
