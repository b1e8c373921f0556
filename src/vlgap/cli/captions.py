"""CLI commands: caption-eval (coco-caption metrics with intervals, optionally a paired comparison)."""
from __future__ import annotations

from pathlib import Path
from typing import Callable, List, Optional

import typer

from vlgap.cli._app import app  # noqa: F401
from vlgap.cli.options import ci_method_option, confidence_option, device_option, encoding_option
from vlgap.cli.tables import print_table


def _fmt(x, digits: int = 4) -> str:
    from vlgap.formatting import interval, number  # one number format for every summary

    return interval(x, digits) if isinstance(x, (list, tuple)) else number(x, digits)


def _ci(ci, reason=None, digits: int = 4) -> str:
    """An interval, or "n/a (why)" where the small-n rule withheld it (never a point)."""
    from vlgap.formatting import interval

    return interval(ci, digits, reason)


class _RegistryHelp(typer.models.OptionInfo):
    """An option whose help is made from the caption-metric registry (captions.registry) when the
    command is built, so a metric registered after this module was imported shows in --help."""

    def __init__(self, base: typer.models.OptionInfo, make: Callable[[], str]):
        self.__dict__.update(base.__dict__)
        self.__dict__["make_help"] = make

    @property
    def help(self) -> str:
        return self.make_help()

    @help.setter
    def help(self, value: str | None) -> None:  # typer sets it; the registry says it
        pass


def _names(test) -> str:
    from vlgap.captions.registry import caption_metrics

    return ", ".join(m.name for m in caption_metrics() if test(m))


def metrics_option(*param_decls: str) -> typer.models.OptionInfo:
    """`--metrics` (default None: the default metrics), its help read from the caption-metric registry."""
    from vlgap.captions.registry import metrics_help

    return _RegistryHelp(typer.Option(None, *param_decls), metrics_help)


@app.command("caption-eval")
def caption_eval_command(
    pred: Optional[Path] = typer.Option(None, "--pred", help="Predictions: coco results JSON [{image_id, caption}], JSONL {id, caption}, a JSON {id: caption}, or a JSON list of captions (list-aligned with --refs)."),
    refs: Optional[Path] = _RegistryHelp(typer.Option(None, "--refs"), lambda: "References: coco annotations JSON {annotations: [...]}, JSONL {id, captions: [...]}, a JSON {id: [captions]}, or a JSON list of reference lists (list-aligned with --pred) (not needed for " + _names(lambda m: m.references != "required") + ")."),
    metrics: Optional[str] = metrics_option("--metrics"),
    images: Optional[Path] = _RegistryHelp(typer.Option(None, "--images"), lambda: "Folder of pictures for " + _names(lambda m: "pictures" in m.needs) + ": DIR/<image_id>.<jpg|jpeg|png|webp>, else for a numeric id DIR/<12-digit id>.<ext> or COCO's DIR/COCO_<split>_<12-digit id>.<ext>."),
    image_pattern: Optional[str] = typer.Option(None, "--image-pattern", help="File name of an item's picture in --images, instead of the default rules: a Python format string with the field {id}, e.g. '{id:012d}.jpg' or 'COCO_val2014_{id:012d}.jpg'."),
    videos: Optional[Path] = typer.Option(None, "--videos", help="Video manifest (JSONL {id, video, captions}) instead of --images: scores over sampled frames."),
    frames: str = typer.Option("all", "--frames", help="With --videos: the frame rule, all (every frame, the official EMScorer) | int-linspace:N (the VATEX-EVAL demo, N = 10) | rint-linspace:N (nearest; a bare N means this); recorded in the result."),
    clip: Optional[str] = typer.Option(None, "--clip", help="CLIP-family checkpoint: hf:<hub id or folder> (CLIP, SigLIP) or pacs:<checkpoint.pth>[@<CLIP hub id or folder>] (w = 2.0)."),
    clip_convention: str = typer.Option("official", "--clip-convention", help="official (default, alias hessel: jmhessel/clipscore, or aimagelab/pacscore with a pacs: checkpoint: openai pixels and tokenisation, 'A photo depicts ', RefCLIP-S unclamped) | transformers (the checkpoint's processor and tokenizer, RefCLIP-S clamped as the paper) | torchmetrics (100 x max(cos, 0), no prefix)."),
    emscore_convention: str = typer.Option("official", "--emscore-convention", help="official (default: ShiYaya/emscore EMScorer.score: [SOS] to the first [EOS], idf, openai pixels and text, over-long captions refused) | content-tokens (content tokens only, uniform weights, the checkpoint's processor)."),
    emscore_idf: Optional[bool] = typer.Option(None, "--emscore-idf/--no-emscore-idf", help="EMScore's idf weights over the references (the candidates without references), as EMScorer.score(idf=True); --no-emscore-idf weighs every token 1 (idf=False). Default: on for --emscore-convention official, off (uniform) for content-tokens."),
    clip_w: Optional[float] = typer.Option(None, "--clip-w", help="Custom CLIP-S weight w (overrides the convention's)."),
    clip_prefix: Optional[str] = typer.Option(None, "--clip-prefix", help="Custom text put before every caption (overrides the convention's; '' for none)."),
    no_truncate: bool = typer.Option(False, "--no-truncate", help="Reject captions longer than the text tower's limit instead of truncating them (end-of-text kept)."),
    bertscore_model: str = typer.Option("minilm", "--bertscore-model", help="Text encoder spec for BERTScore (minilm, hf:<id or folder>, ...)."),
    bertscore_layer: Optional[int] = typer.Option(None, "--bertscore-layer", help="Hidden state for BERTScore (0 = embeddings; default the last)."),
    idf: bool = typer.Option(False, "--idf", help="BERTScore with idf weights from the references."),
    bertscore_baseline: Optional[str] = typer.Option(None, "--bertscore-baseline", help="A baseline file (from `--bertscore-baseline build`) to rescale BERTScore; 'build' makes one for --bertscore-model from --baseline-sentences or --refs and exits."),
    baseline_sentences: Optional[Path] = typer.Option(None, "--baseline-sentences", help="With --bertscore-baseline build: a text file, one sentence per line (default: the --refs captions)."),
    baseline_pairs: int = typer.Option(10000, "--baseline-pairs", help="With --bertscore-baseline build: random sentence pairs averaged."),
    human: Optional[Path] = typer.Option(None, "--human", help="Human judgments CSV: item, rating, caption|system (ratings) or item, preference, caption_a/caption_b|system_a/system_b (A-vs-B votes); or Flickr8k's ExpertAnnotations.txt / CrowdFlowerAnnotations.txt (with Flickr8k.token.txt beside it; --pred then optional)."),
    human_pred: Optional[List[str]] = typer.Option(None, "--human-pred", help="NAME=FILE: another system's predictions that --human's system column names (repeatable)."),
    device: str = device_option("cpu", what="the CLIP and BERTScore models"),
    bootstrap: int = typer.Option(1000, "--bootstrap", help="Bootstrap resamples over items for the intervals beside every corpus score (0: none)."),
    out: Optional[Path] = typer.Option(None, "--out", "-o", help="File to write: the per-item scores (CSV; one system, no --compare), or with --bertscore-baseline build the baseline (default bertscore-baseline-<model>.json)."),
    seed: int = typer.Option(0, "--seed", help="Seed for bootstrap and permutations."),
    confidence: float = confidence_option("caption-eval"),
    ci_method: str = ci_method_option("caption-eval"),
    compare: Optional[Path] = typer.Option(None, "--compare", help="Second system's predictions: report --pred minus --compare, paired."),
    permutations: int = typer.Option(10000, "--permutations", help="With --compare: permutations for the p-value."),
    cider_df: Optional[Path] = typer.Option(None, "--cider-df", help="Freeze CIDEr document frequencies from this references file (default: the --refs set, as coco-caption)."),
    on_missing: str = typer.Option("error", "--on-missing", help="error | drop: ids present on one side only."),
    on_duplicate: str = typer.Option("error", "--on-duplicate", help="error | first: several predictions for one id."),
    on_empty: str = typer.Option("error", "--on-empty", help="error | keep: empty captions."),
    meteor_jar: Optional[Path] = typer.Option(None, "--meteor-jar", help="meteor-1.5.jar to use (default: the one in pycocoevalcap)."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of a table."),
    encoding: str = encoding_option(),
) -> None:
    """BLEU-1..4, METEOR, ROUGE-L, CIDEr with coco-caption's numbers, SacreBLEU with its signature; CLIPScore, RefCLIPScore, EMScore, BERTScore on request; N, intervals and agreement with human judgments."""
    from rich.console import Console
    from rich.table import Table

    from vlgap.captions.evaluate import caption_eval, compare_captions, per_item_csv
    from vlgap.errors import VlgapError
    from vlgap.io_utils import atomic_write_text, to_json
    from vlgap.stats.bounds import SMALL_N_ITEMS, small_sample_warning

    if bertscore_baseline == "build":
        _build_baseline(bertscore_model, baseline_sentences, refs, baseline_pairs, seed, out, device, as_json)
        return
    per_item = out
    if pred is None and (human is None or compare is not None):
        raise VlgapError("--pred is required (predictions to score; only --human alone can go without it)")
    if per_item is not None:
        from vlgap.paths import output_file

        output_file(per_item, "--out")
    model_options = dict(images=images, image_pattern=image_pattern, videos=videos, n_frames=frames, clip=clip,
                         clip_convention=clip_convention, emscore_convention=emscore_convention, emscore_idf=emscore_idf,
                         clip_w=clip_w, clip_prefix=clip_prefix, truncate=not no_truncate,
                         bertscore_model=bertscore_model, bertscore_layer=bertscore_layer, idf=idf,
                         bertscore_baseline=bertscore_baseline, device=device)
    common = dict(seed=seed, confidence=confidence, ci_method=ci_method,
                  cider_df=str(cider_df) if cider_df else "corpus",
                  meteor_jar=meteor_jar, on_missing=on_missing, on_duplicate=on_duplicate, on_empty=on_empty,
                  **model_options)
    if compare is not None:
        if per_item is not None:
            raise VlgapError("--out (the per-item scores) is for a single system; run caption-eval without "
                             "--compare to write it")
        result = compare_captions(pred, compare, refs, metrics, n_bootstrap=bootstrap or 1000,
                                  n_permutations=permutations, names=(pred.stem, compare.stem), **common)
    else:
        systems = {}
        for spec in human_pred or []:
            name, sep, file = spec.partition("=")
            if not sep or not name or not file:
                raise VlgapError(f"--human-pred {spec!r}: use NAME=FILE (the name the --human CSV's system column uses)")
            systems[name] = file
        result = caption_eval(pred, refs, metrics, n_bootstrap=bootstrap, per_item=per_item is not None,
                              human=human, human_systems=systems, **common)
        if per_item is not None:
            atomic_write_text(per_item, per_item_csv(result.pop("per_item")))
    if as_json:
        print(to_json(result))
        return

    console = Console()
    score_keys = [k for k, v in result.items() if isinstance(v, dict) and ("score" in v or "difference" in v)]
    level = f"{int(round(confidence * 100))}% CI"
    if pred is None:
        pass  # only the agreement with the human judgments
    elif compare is None:
        against = f" vs {refs.name}" if refs is not None else ""
        table = Table(title=f"Caption metrics: {pred.name}{against} (N = {result['n']})")
        table.add_column("metric")
        table.add_column("score", justify="right")
        if bootstrap:
            table.add_column(level, justify="right")
        for k in score_keys:
            v = result[k]
            row = [k, _fmt(v["score"])]
            if bootstrap:
                row.append(_ci(v.get("ci"), v.get("ci_reason")))
            table.add_row(*row)
    else:
        a, b = result["systems"]
        table = Table(title=f"Paired comparison on {result['n']} items: {a} - {b}")
        for col in ("metric", a, b, "difference", level, "p-value"):
            table.add_column(col, justify="left" if col == "metric" else "right")
        for k in score_keys:
            v = result[k]
            table.add_row(k, _fmt(v[a]), _fmt(v[b]), _fmt(v["difference"]),
                          _ci(v.get("ci"), v.get("ci_reason")), f"{v['p_value']:.4g}")
    if pred is not None:
        print_table(console, table)
    for k in score_keys:
        if result[k].get("note"):
            console.print(f"{k}: {result[k]['note']}", highlight=False)
        if result[k].get("ci_note"):
            console.print(f"{k} interval: {result[k]['ci_note']}", highlight=False)
    if pred is not None and compare is None:
        if not bootstrap:
            console.print("no intervals (--bootstrap 0); --bootstrap 1000 gives each score its interval over items",
                          highlight=False)
        elif result["n"] < SMALL_N_ITEMS:
            console.print(f"warning: {small_sample_warning(result['n'])}", highlight=False)
    if "SacreBLEU" in result:
        console.print(f"SacreBLEU signature: {result['SacreBLEU']['signature']}", highlight=False)
    if "BERTScore-F1" in result:
        console.print(f"BERTScore signature: {result['BERTScore-F1']['signature']}", highlight=False)
    for key in ("CLIPScore", "RefCLIPScore"):
        if key in result:
            conv = result[key]["convention"]
            console.print(f"{key}: convention {conv['name']} (w = {conv['w']:g}, prefix {conv['prefix']!r}), "
                          f"{result[key]['truncated_captions']} caption(s) truncated", highlight=False)
            break
    _print_agreement(console, result, confidence)
    for note in result.get("notes", []):
        console.print(f"note: {note}", highlight=False, markup=False)  # text: `vlgap[meteor]` keeps its brackets
    for key, value in result.get("input", {}).items():
        console.print(f"input policy {key}: {value}", highlight=False)
    if per_item is not None:
        console.print(f"per-item scores written to {per_item}", highlight=False)


def _print_agreement(console, result: dict, confidence: float) -> None:
    from rich.table import Table

    level = f"{int(round(confidence * 100))}% CI"
    if "human_agreement" in result:
        h = result["human_agreement"]
        table = Table(title=f"Agreement with human ratings ({h['n_rows']} captions, {h['n_items']} items)")
        for col in ("metric", "Kendall tau-b", "Kendall tau-c", "Pearson", "Spearman"):
            table.add_column(col, justify="left" if col == "metric" else "right")
        for name, v in h["metrics"].items():
            cells = [name]
            for key in ("kendall_tau_b", "kendall_tau_c", "pearson", "spearman"):
                ci, reason = v[key].get("ci"), v[key].get("ci_reason")
                cells.append(_fmt(v[key]["value"]) + (f" {_ci(ci, reason)}" if ci or reason else ""))
            table.add_row(*cells)
        print_table(console, table)
        if "protocol" in h:
            console.print(f"{h['protocol']}: papers report {h['reported_as']}; "
                          f"{h['candidates_in_references_left_out']} candidate(s) equal to a reference and "
                          f"{h['nan_ratings_left_out']} NaN rating(s) left out", highlight=False)
    if "preference_agreement" in result:
        h = result["preference_agreement"]
        table = Table(title=f"Agreement with A-vs-B votes ({h['n_rows']} votes, {h['n_items']} items)")
        for col in ("metric", "agreement", level, "votes used"):
            table.add_column(col, justify="left" if col == "metric" else "right")
        for name, v in h["metrics"].items():
            ci, reason = v.get("ci"), v.get("ci_reason")
            table.add_row(name, _fmt(v["value"]), _ci(ci, reason) if ci or reason else "", str(v["n_votes"]))
        print_table(console, table)


def _build_baseline(model_spec: str, sentences_file, refs, n_pairs: int, seed: int, out, device: str,
                    as_json: bool) -> None:
    from vlgap.captions.bertscore import build_baseline, load_text_token_model, write_baseline
    from vlgap.errors import VlgapError
    from vlgap.counts import check_count
    from vlgap.io_utils import to_json
    from vlgap.paths import output_file, read_text_utf8

    n_pairs = check_count("n_pairs", n_pairs, 1, flag="--baseline-pairs", example=10000)  # before the model loads
    if out is not None:
        output_file(out, "--out")
    if sentences_file is not None:
        sentences = read_text_utf8(sentences_file, "--baseline-sentences").splitlines()
        source = str(sentences_file)
    elif refs is not None:
        from vlgap.captions.io import materialise, reference_rows

        data, src = materialise(refs, "references")
        sentences = [c for _, c in reference_rows(data, src) if c]
        source = str(refs)
    else:
        raise VlgapError("--bertscore-baseline build needs sentences: --baseline-sentences FILE (one per line) or --refs")
    model = load_text_token_model(model_spec, device=device)
    baseline = build_baseline(model, sentences, n_pairs=n_pairs, seed=seed, source=source)
    slug = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in model_spec)
    path = write_baseline(baseline, out or Path(f"bertscore-baseline-{slug}.json"))
    if as_json:
        print(to_json({"baseline": str(path), **baseline}))
    else:
        print(f"BERTScore baseline for {model_spec} ({len(baseline['layers'])} layers, {n_pairs} pairs of "
              f"{baseline['n_sentences']} sentences) written to {path}")
