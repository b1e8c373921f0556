"""CLI `vlgap cape ...`: the CAPE-T2V prompt enhancer (rewrite, train, demo, experiment, export)."""
from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer
from rich.console import Console

from vlgap.cli._app import app
from vlgap.cli.group import VocabGroup
from vlgap.cli.options import (TRUST_REMOTE_CODE_HELP, confidence_option, device_option, dtype_option, encoding_option,
                               seed_list)

ADAPTER_HELP = ("Trained PE (operators pe, third): a LoRA adapter folder (out/adapter), a full-SFT model folder "
                "(out/model) or the `vlgap cape train --out` folder itself.")
LM_HELP = "The causal LM: smollm2, gemma3_270m, hf:<hub id or folder>, a local folder or a hub id (any causal LM)."
DTYPE_WHAT = "the LM's weights for SFT and rewriting."

cape_app = typer.Typer(help="CAPE-T2V prompt enhancer: six-part rewrites, anchored PE, the 2x2 experiment.",
                       no_args_is_help=True, cls=VocabGroup)
app.add_typer(cape_app, name="cape")


@cape_app.command("rewrite")
def rewrite_command(
    prompts: Path = typer.Argument(..., help="Text file, one prompt per line."),
    operator: str = typer.Option("template", "--operator",
                                 help="template | pe | third | rewriter | precomputed | openai-compatible."),
    adapter: Optional[Path] = typer.Option(None, "--adapter", help=ADAPTER_HELP),
    rewrites: Optional[Path] = typer.Option(None, "--rewrites", help="JSONL of outside rewrites (operator "
                                                                     "precomputed): input, output, model."),
    endpoint: Optional[str] = typer.Option(None, "--endpoint", help="Chat-completions base URL (operator "
                                                                    "openai-compatible), e.g. http://127.0.0.1:8000/v1."),
    model: Optional[str] = typer.Option(None, "--endpoint-lm", help="The LM the endpoint serves, by the name it "
                                                                    "serves it under."),
    base: str = typer.Option("smollm2", "--lm", help=LM_HELP + " (operators pe, third with a LoRA adapter)"),
    rewriter_model: str = typer.Option("smollm2", "--rewriter-lm", help="LM of the prompted rewriter (same forms "
                                                                        "as --lm)."),
    device: str = device_option("cpu", spread=True),
    dtype: str = dtype_option("float32", what=DTYPE_WHAT),
    cache: Optional[Path] = typer.Option(None, "--cache-dir", help="Folder for the resumable rewrite cache."),
    batch_size: int = typer.Option(16, "--batch-size", help="Prompts per generate() call."),
    max_input_tokens: int = typer.Option(192, "--max-input-tokens", help="Longer prompts are an error..."),
    truncate: bool = typer.Option(False, "--truncate", help="...unless this flag cuts them (reported per prompt)."),
    as_json: bool = typer.Option(False, "--json", help="Print a JSON list, one object per prompt."),
    trust_remote_code: bool = typer.Option(False, "--trust-remote-code", help=TRUST_REMOTE_CODE_HELP),
    encoding: str = encoding_option(),
) -> None:
    """Rewrite prompts into the six-part schema with one operator."""
    from vlgap.encoders.causal_lm import allow_remote_code

    allow_remote_code(trust_remote_code)
    from vlgap.cape.operators import get_operator, rewrite
    from vlgap.errors import VlgapError
    from vlgap.io_utils import to_json

    from vlgap.paths import output_folder, read_text_utf8

    lines = read_text_utf8(prompts, "PROMPTS").splitlines()  # a folder, a missing file, non-UTF-8: one line
    if cache is not None:
        output_folder(cache, "--cache-dir")
    while lines and not lines[-1].strip():
        lines.pop()  # a trailing newline is not an empty prompt
    if not lines:
        raise VlgapError(f"prompt file {str(prompts)!r} has no prompts (one per line)")
    op = get_operator(operator, adapter=adapter, base=base, rewriter_model=rewriter_model, batch_size=batch_size,
                      rewrites=rewrites, endpoint=endpoint, model=model, device=device, dtype=dtype)
    res = rewrite(op, lines, cache_dir=cache, batch_size=batch_size, max_input_tokens=max_input_tokens,
                  truncate=truncate)
    keys = ("short_caption", "dense_caption", "main_object", "background", "camera", "style", "valid", "retries")
    out = [{k: r[k] for k in keys} | ({"truncated_input": True} if r.get("truncated_input") else {}) for r in res]
    if as_json:
        print(to_json(out))
        return
    con = Console()
    for i, r in enumerate(res, 1):
        con.print(f"[bold]#{i}[/] valid={r['valid']} retries={r['retries']}", highlight=False)
        con.print(r["text"], highlight=False, markup=False)


@cape_app.command("train")
def train_command(
    out: Path = typer.Option(..., "--out", "-o", help="Folder for checkpoints and the result (out/adapter, or "
                                                     "out/model with --full)."),
    base: str = typer.Option("smollm2", "--lm", help=LM_HELP),
    targets: Optional[Path] = typer.Option(None, "--targets", help="JSONL of captioner targets with inputs "
                                                                    "(default: the shapes world)."),
    n_videos: int = typer.Option(48, "--videos", help="Shapes videos (x4 input kinds: concise, detailed, user "
                                                      "and the dataset's dense caption) when no --targets."),
    steps: int = typer.Option(80, "--steps", help="SFT steps (the experiment's recipe: 80 x batch 4 at lr 3e-3)."),
    batch_size: int = typer.Option(4, "--batch-size"),
    lr: float = typer.Option(3e-3, "--lr"),
    full: bool = typer.Option(False, "--full", help="Full-parameter SFT (saves out/model) instead of LoRA."),
    lora_r: int = typer.Option(16, "--lora-r", help="LoRA rank."),
    lora_alpha: int = typer.Option(32, "--lora-alpha", help="LoRA alpha (scale alpha/r)."),
    lora_layers: str = typer.Option("top:8", "--lora-layers", help="Decoder layers with LoRA: top:N (the last N) | "
                                                                   "all | 0,1,5."),
    lora_modules: Optional[str] = typer.Option(None, "--lora-modules", help="Modules with LoRA: comma list of names "
                                               "| all-linear (default: every projection, q/k/v/o/gate/up/down_proj)."),
    device: str = device_option("cpu", spread=True),
    dtype: str = dtype_option("float32", what=DTYPE_WHAT),
    seed: int = typer.Option(0, "--seed"),
    force: bool = typer.Option(False, "--force", help="Start over in an --out folder that holds a run with "
                                                      "another configuration (refused otherwise)."),
    trust_remote_code: bool = typer.Option(False, "--trust-remote-code", help=TRUST_REMOTE_CODE_HELP),
) -> None:
    """Fine-tune an anchored PE (SFT: input -> six-part target, loss on the target only; LoRA or --full)."""
    from vlgap.encoders.causal_lm import allow_remote_code

    allow_remote_code(trust_remote_code)
    from vlgap.cape import world as W
    from vlgap.cape.lm import check_lora_targets, load_lm, parse_lora_layers, parse_lora_modules, sft_key, train_lora
    from vlgap.runtime import runtime
    from vlgap.cape.schema import read_targets_jsonl
    from vlgap.counts import check_count
    from vlgap.errors import VlgapError
    from vlgap.io_utils import append_text, atomic_write_json, to_json
    from vlgap.runs import open_run_folder

    check_count("steps", steps, 1, flag="--steps", example=16)
    check_count("batch_size", batch_size, 1, flag="--batch-size", example=8)
    check_count("lora_r", lora_r, 1, flag="--lora-r", example=16)
    check_count("lora_alpha", lora_alpha, 1, flag="--lora-alpha", example=32)
    check_count("n_videos", n_videos, 1, flag="--videos", example=48)
    check_count("seed", seed, 0, flag="--seed", example=0)
    from vlgap.counts import check_positive
    from vlgap.paths import input_file, output_folder

    lr = check_positive("lr", lr, flag="--lr", example=3e-3)  # before any file is written
    output_folder(out, "--out")
    if targets is not None:
        input_file(targets, "--targets")
    rt = runtime(device, dtype, spread=True)
    device, dtype = rt.device, rt.dtype
    parse_lora_layers(lora_layers), parse_lora_modules(lora_modules)
    if targets is not None:
        pairs = []
        for rec in read_targets_jsonl(targets):
            ins = rec.get("inputs") or ({"user": rec["input"]} if "input" in rec else None)
            if not ins:
                raise VlgapError(f"{targets.name}: record {rec['id']!r} has no \"input\" or \"inputs\" to learn from")
            pairs += [(x, rec["target"].to_text()) for x in (ins.values() if isinstance(ins, dict) else ins)]
    else:
        pairs = W.sft_pairs(W.sample_videos(n_videos, seed=seed), W.SFT_KINDS)  # the experiment's recipe
    # the console keeps vlgap's own lines and stdout the JSON: what the libraries print (the Trainer's log
    # dicts, warnings) goes to out/library.log. Loading the model comes before the folder is claimed (its
    # hash is in the key), so that part is logged to a temporary file first and appended once it is.
    import os
    import tempfile

    from vlgap.cape.experiment import LIBRARY_LOG, CapeConfig, _log
    from vlgap.cape.runlog import library_output_to

    max_length = CapeConfig.sft_max_length  # the experiment's: a dense input plus its target fit
    fd, early = tempfile.mkstemp(prefix="vlgap-cape-train-", suffix=".log")
    os.close(fd)
    try:
        with library_output_to(early):
            lm = load_lm(base, device=device, dtype=dtype)
            if not full:  # the targets exist in this model: refused before the folder records the run
                check_lora_targets(lm.model, lora_layers, lora_modules)
            options = dict(full=full, lora_alpha=lora_alpha, lora_layers=lora_layers, lora_modules=lora_modules)
            key = sft_key(pairs, base_model_hash=lm.model_hash, steps=steps, batch_size=batch_size, lr=lr, seed=seed,
                          r=lora_r, top_layers=None, max_length=max_length, save_every=10, **options)
            # a new or taken-over folder loses its checkpoints, adapter and model: nothing in it is this run's
            open_run_folder(out, "cape-train", key, force=force, clear=("checkpoints", "adapter", "model"),
                            results=("checkpoints", "adapter", "model", "sft.json"))
        append_text(out / LIBRARY_LOG, Path(early).read_text(encoding="utf-8"))
    finally:
        os.unlink(early)
    with library_output_to(out / LIBRARY_LOG) as log_path:
        try:
            info = train_lora(lm.model, lm.tokenizer, pairs, out, steps=steps, batch_size=batch_size, lr=lr,
                              seed=seed, r=lora_r, max_length=max_length, log=_log, key=key, **options)
        finally:
            _log(f"library output (trainer logs, warnings): {log_path}")
    info["base_model_hash"] = lm.model_hash
    atomic_write_json(out / "sft.json", info)
    print(to_json({k: v for k, v in info.items() if k != "history"}))


def _run(preset_name: str, out: Path, as_json: bool, force: bool = False, device: str = "cpu", **overrides) -> None:
    from vlgap.cape.experiment import one_thread_unless_set, preset, run_experiment
    from vlgap.io_utils import to_json

    if preset_name == "demo":
        one_thread_unless_set()
    res = run_experiment(out, preset(preset_name, **overrides), force=force, device=device)
    if as_json:
        keys = ("cells", "main_effects", "interaction", "third_operator", "mmd", "controls", "validity", "template_reference",
                "timings_s", "config")
        print(to_json({k: res[k] for k in keys}))
    else:
        print((out / "report.md").read_text())


@cape_app.command("demo")
def demo_command(
    out: Path = typer.Option(Path("runs/cape_demo"), "--out", "-o", help="Run folder (resumable)."),
    as_json: bool = typer.Option(False, "--json"),
    device: str = device_option("cpu", spread=True),
    dtype: Optional[str] = dtype_option(None, what=DTYPE_WHAT + " Default auto (the demo preset): bfloat16 where "
                                        "the device computes it natively, else float32."),
    force: bool = typer.Option(False, "--force", help="Start over in an --out folder that holds a run with "
                                                      "another configuration (refused otherwise)."),
) -> None:
    """Reduced experiment (fewer SFT steps and prompts, one generator seed, LMs in bfloat16 where the device
    computes it natively and float32 elsewhere, one torch thread unless OMP_NUM_THREADS is set)."""
    _run("demo", out, as_json, force=force, device=device, dtype=dtype)


@cape_app.command("experiment")
def experiment_command(
    out: Path = typer.Option(Path("runs/cape"), "--out", "-o", help="Run folder (resumable stage by stage)."),
    seed: int = typer.Option(0, "--seed"),
    n_test: Optional[int] = typer.Option(None, "--prompts", help="Held-out user prompts."),
    n_train: Optional[int] = typer.Option(None, "--train-captions", help="Generator training captions."),
    sft_steps: Optional[int] = typer.Option(None, "--sft-steps"),
    seeds: Optional[str] = typer.Option(None, "--seeds", help="Generator-training seeds of each cell, a comma list "
                                                              "(default 0,1,2)."),
    rewriter_model: Optional[str] = typer.Option(None, "--rewriter-lm", help="LM of the prompted rewriter: "
                                                                             "smollm2 | gemma3_270m | HF id."),
    bootstrap: Optional[int] = typer.Option(None, "--bootstrap"),
    confidence: float = confidence_option("cape experiment"),
    permutations: Optional[int] = typer.Option(None, "--permutations"),
    base: Optional[str] = typer.Option(None, "--lm", help=LM_HELP + " Default smollm2."),
    device: str = device_option("cpu", spread=True),
    dtype: Optional[str] = dtype_option(None, what=DTYPE_WHAT + " Default float32."),
    full: bool = typer.Option(False, "--full", help="Full-parameter SFT of the PE and third operator instead of "
                                                    "LoRA."),
    lora_r: Optional[int] = typer.Option(None, "--lora-r", help="LoRA rank (default 16)."),
    lora_alpha: Optional[int] = typer.Option(None, "--lora-alpha", help="LoRA alpha (default 32)."),
    lora_layers: Optional[str] = typer.Option(None, "--lora-layers", help="top:N | all | 0,1,5 (default: the "
                                                                          "preset's top layers)."),
    lora_modules: Optional[str] = typer.Option(None, "--lora-modules", help="Comma list of module names | "
                                                                            "all-linear (default: every projection)."),
    as_json: bool = typer.Option(False, "--json", help="JSON with cells, main_effects, interaction, third_operator."),
    force: bool = typer.Option(False, "--force", help="Start over in an --out folder that holds a run with "
                                                      "another configuration (refused otherwise)."),
    trust_remote_code: bool = typer.Option(False, "--trust-remote-code", help=TRUST_REMOTE_CODE_HELP),
) -> None:
    """Full design: 2x2 (training captions x inference rewrites, PE vs prompted rewriter) + third operator."""
    from vlgap.encoders.causal_lm import allow_remote_code

    allow_remote_code(trust_remote_code)
    _run("full", out, as_json, force=force, seed=seed, n_test=n_test, n_train_videos=n_train, sft_steps=sft_steps,
         generator_seeds=tuple(seed_list(seeds)) if seeds is not None else None, rewriter_model=rewriter_model,
         n_bootstrap=bootstrap, n_permutations=permutations, base=base, device=device, dtype=dtype,
         sft_full=full or None,
         lora_r=lora_r, lora_alpha=lora_alpha, lora_layers=lora_layers, lora_modules=lora_modules)


@cape_app.command("export")
def export_command(
    captions: Path = typer.Argument(..., help="JSONL of fine-tuning captions (keys id/video and caption)."),
    out: Path = typer.Option(..., "--out", "-o", help="File: the JSONL to write, the same records with the "
                                                     "six-part caption."),
    operator: str = typer.Option("pe", "--operator"),
    adapter: Optional[Path] = typer.Option(None, "--adapter", help=ADAPTER_HELP),
    base: str = typer.Option("smollm2", "--lm", help=LM_HELP + " (operators pe, third with a LoRA adapter)"),
    rewriter_model: str = typer.Option("smollm2", "--rewriter-lm", help="LM of the prompted rewriter."),
    device: str = device_option("cpu", spread=True),
    dtype: str = dtype_option("float32", what=DTYPE_WHAT),
    rewrites: Optional[Path] = typer.Option(None, "--rewrites", help="JSONL of outside rewrites (precomputed)."),
    endpoint: Optional[str] = typer.Option(None, "--endpoint", help="Chat-completions base URL (openai-compatible)."),
    model: Optional[str] = typer.Option(None, "--endpoint-lm", help="The LM the endpoint serves, by the name it "
                                                                    "serves it under."),
    cache: Optional[Path] = typer.Option(None, "--cache-dir", help="Folder for the resumable rewrite cache."),
    trust_remote_code: bool = typer.Option(False, "--trust-remote-code", help=TRUST_REMOTE_CODE_HELP),
) -> None:
    """Rewrite a DiT fine-tuning caption file with an operator (for diffusers training scripts)."""
    from vlgap.encoders.causal_lm import allow_remote_code

    allow_remote_code(trust_remote_code)
    from vlgap.cape.diffusion import export_captions
    from vlgap.cape.operators import get_operator

    op = get_operator(operator, adapter=adapter, base=base, rewriter_model=rewriter_model, rewrites=rewrites,
                      endpoint=endpoint, model=model, device=device, dtype=dtype)
    n = export_captions(captions, out, op, cache_dir=cache)
    Console(stderr=True).print(f"wrote {n} rewritten captions to {out}")


def _named_files(items: Optional[List[str]], flag: str) -> dict[str, Path]:
    from vlgap.errors import VlgapError

    out = {}
    for item in items or []:
        if "=" not in item:
            raise VlgapError(f"{flag} {item!r}: write OPERATOR=FILE, e.g. {flag} pe=pe_captions.jsonl")
        name, path = item.split("=", 1)
        out[name.strip()] = Path(path)
    return out


@cape_app.command("scores")
def scores_command(
    specs: List[str] = typer.Argument(..., help="CELL=FILE per cell (CELL: TRAIN/INFER or TRAIN/INFER/SEED, e.g. "
                                                "pe/pe=pe_pe_eval_results.json), or a FILE with train/infer columns."),
    fmt: str = typer.Option("auto", "--format", help="auto | vbench | compbench | judge | table."),
    captions: Optional[List[str]] = typer.Option(None, "--captions", help="OP=FILE: the DiT's fine-tuning captions "
                                                 "of one operator (export JSONL or input/output/model JSONL)."),
    prompt_rewrites: Optional[List[str]] = typer.Option(None, "--prompt-rewrites", help="OP=FILE: the inference "
                                                        "rewrites of the scored prompts (input/output/model JSONL)."),
    encoder: str = typer.Option("minilm", "--encoder", help="Text encoder for MMD^2 and the witness regression."),
    bootstrap: int = typer.Option(2000, "--bootstrap"),
    confidence: float = confidence_option("cape scores"),
    permutations: int = typer.Option(2000, "--permutations"),
    seed: int = typer.Option(0, "--seed"),
    out: Optional[Path] = typer.Option(None, "--out", "-o", help="Folder for scores_results.json and "
                                                                 "scores_report.md."),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """The 2x2, third-operator and control analyses from real benchmark scores (VBench, T2V-CompBench, a judge)."""
    from vlgap.cape.operators import PrecomputedOperator
    from vlgap.cape.scores import analyse_scores, default_embed, load_cells, read_text_file, scores_markdown
    from vlgap.io_utils import atomic_write_json, atomic_write_text, to_json

    if out is not None:
        from vlgap.paths import output_folder

        output_folder(out, "--out")
    cells = load_cells(specs, fmt)
    caps = {op: read_text_file(p) for op, p in _named_files(captions, "--captions").items()}
    rws = {op: {k: v["text"] for k, v in PrecomputedOperator(p, name=op).table.items()}
           for op, p in _named_files(prompt_rewrites, "--prompt-rewrites").items()}
    res = analyse_scores(cells, prompt_rewrites=rws or None, captions=caps or None,
                         embed=default_embed(encoder) if (caps or rws) else None, n_bootstrap=bootstrap,
                         n_permutations=permutations, seed=seed)
    md = scores_markdown(res)
    if out is not None:
        atomic_write_json(out / "scores_results.json", res)
        atomic_write_text(out / "scores_report.md", md)
    print(to_json(res) if as_json else md)


@cape_app.command("controls")
def controls_command(
    run: Path = typer.Argument(..., help="Run folder of `vlgap cape experiment` / `vlgap cape demo`."),
    permutations: Optional[int] = typer.Option(None, "--permutations", help="Default: the run's own setting."),
    bootstrap: Optional[int] = typer.Option(None, "--bootstrap", help="Default: the run's own setting."),
    confidence: float = confidence_option("cape controls"),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Table 3's surface overlap and the randomization check from an existing run folder (no retraining)."""
    from vlgap.cape.controls import controls_from_run
    from vlgap.io_utils import to_json

    res = controls_from_run(run, n_permutations=permutations, n_bootstrap=bootstrap, confidence=confidence)
    print(to_json(res) if as_json else (run / "controls.md").read_text())
