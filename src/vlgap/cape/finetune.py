"""Supervised fine-tuning of CAPE's prompt enhancer (LoRA through peft, or full-parameter) with
transformers' Trainer, the SFT key and seals of its outputs, and loading a trained PE back.
"""
from __future__ import annotations

import hashlib
import math
import os
import time
from pathlib import Path
from typing import Any, Callable, Sequence

import torch

from vlgap.cape.decoding import PROMPT_PREFIX, ensure_pad
from vlgap.encoders.causal_lm import LoadedLM, load_lm, model_device
from vlgap.errors import VlgapError
from vlgap.runtime import torch_dtype


def sft_prompt(text: str) -> str:
    """What the anchored PE sees before its output (no instruction: the fine-tuning teaches the task)."""
    return f"{PROMPT_PREFIX}{' '.join(text.split())}\n"


def encode_pairs(tok, pairs: Sequence[tuple[str, str]], max_length: int = 256) -> list[dict[str, list[int]]]:
    """Token ids of prompt + target + EOS with labels -100 on the prompt: the loss is on the target only."""
    rows = []
    for n, (src, tgt) in enumerate(pairs):
        p = tok.encode(sft_prompt(src), add_special_tokens=False)
        t = tok.encode(tgt + "\n", add_special_tokens=False) + ([tok.eos_token_id] if tok.eos_token_id is not None else [])
        if len(p) + len(t) > max_length:
            raise VlgapError(f"SFT pair {n}: {len(p) + len(t)} tokens exceed max_length={max_length}; "
                             "shorten the input or raise max_length")
        rows.append({"input_ids": p + t, "labels": [-100] * len(p) + t})
    return rows


def collate(tok):
    pad = tok.pad_token_id if tok.pad_token_id is not None else 0

    def fn(rows: list[dict[str, list[int]]]) -> dict[str, torch.Tensor]:
        n = max(len(r["input_ids"]) for r in rows)
        ids = torch.full((len(rows), n), pad, dtype=torch.long)
        lab = torch.full((len(rows), n), -100, dtype=torch.long)
        att = torch.zeros((len(rows), n), dtype=torch.long)
        for i, r in enumerate(rows):  # right padding for training
            m = len(r["input_ids"])
            ids[i, :m] = torch.tensor(r["input_ids"])
            lab[i, :m] = torch.tensor(r["labels"])
            att[i, :m] = 1
        return {"input_ids": ids, "labels": lab, "attention_mask": att}
    return fn


#: LoRA's target modules by default: every projection of a Llama/Qwen/Gemma decoder layer
LORA_MODULES = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
LORA_ALPHA = 32
LORA_LAYERS_HELP = "top:N (the last N decoder layers) | all | 0,1,5 (those layer indices)"
LORA_MODULES_HELP = "comma list of module names (q_proj,v_proj) | all-linear (every linear layer but the LM head)"

def parse_lora_layers(spec: Any) -> Any:
    """'top:8' (or 8) -> 8, the last 8 layers; 'all' (or None) -> None; '0,1,5' (or [0, 1, 5]) -> (0, 1, 5).
    A spec that is none of these is a one-line VlgapError showing the forms."""
    if spec is None or spec == "all":
        return None
    if isinstance(spec, bool):
        spec = str(spec)
    if isinstance(spec, int):
        if spec < 1:
            raise VlgapError(f"--lora-layers {spec!r}: the number of top layers must be >= 1 ({LORA_LAYERS_HELP})")
        return spec
    if isinstance(spec, (list, tuple)):
        text = ",".join(str(x) for x in spec)
    else:
        text = str(spec).strip().replace(" ", "")
    bad = VlgapError(f"--lora-layers {spec!r}: give {LORA_LAYERS_HELP}")
    if text.startswith("top:"):
        try:
            n = int(text[4:])
        except ValueError:
            raise bad from None
        if n < 1:
            raise bad
        return n
    try:
        idx = [int(x) for x in text.split(",") if x != ""]
    except ValueError:
        raise bad from None
    if not idx or min(idx) < 0:
        raise bad
    return tuple(sorted(set(idx)))


def parse_lora_modules(spec: Any) -> Any:
    """None -> LORA_MODULES; 'all-linear' -> 'all-linear' (peft's own word); 'q_proj,v_proj' (or a list)
    -> ('q_proj', 'v_proj')."""
    if spec is None:
        return LORA_MODULES
    if spec == "all-linear":
        return "all-linear"
    names = [x.strip() for x in (spec.split(",") if isinstance(spec, str) else spec) if str(x).strip()]
    if not names:
        raise VlgapError(f"--lora-modules {spec!r}: give {LORA_MODULES_HELP}")
    return tuple(dict.fromkeys(names))


def _layer_indices(choice: Any, n_layers: int) -> list[int] | None:
    if choice is None or not n_layers:
        return None
    if isinstance(choice, int):
        return list(range(max(0, n_layers - choice), n_layers))
    out_of_range = [i for i in choice if i >= n_layers]
    if out_of_range:
        raise VlgapError(f"--lora-layers: layer {out_of_range[0]} does not exist; the model has {n_layers} decoder "
                         f"layers (0 to {n_layers - 1})")
    return list(choice)


def check_lora_targets(model, layers: Any = None, modules: Any = None) -> None:
    """The LoRA targets exist in `model`, asked before a run folder records the run: every name of
    `modules` (see parse_lora_modules) names modules of it, as peft matches them (the whole name or its
    last parts), and every index of `layers` is one of its decoder layers. A one-line VlgapError names
    what is missing and the model's linear layers."""
    _layer_indices(parse_lora_layers(layers), int(getattr(model.config, "num_hidden_layers", 0) or 0))
    targets = parse_lora_modules(modules)
    if targets == "all-linear":
        return
    names = [n for n, _ in model.named_modules() if n]
    missing = [t for t in targets if not any(n == t or n.endswith("." + t) for n in names)]
    if missing:
        head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
        linear = sorted({n.rsplit(".", 1)[-1] for n, m in model.named_modules()
                         if isinstance(m, torch.nn.Linear) and m is not head})
        raise VlgapError(f"--lora-modules {','.join(targets)}: {', '.join(missing)} "
                         f"{'is not a module' if len(missing) == 1 else 'are not modules'} of this model; its linear "
                         f"layers are {', '.join(linear)} (or all-linear)")


def lora_model(model, r: int = 16, alpha: int = LORA_ALPHA, dropout: float = 0.05, seed: int = 0,
               top_layers: int | None = None, *, layers: Any = None, modules: Any = None):
    """LoRA on every projection (or `modules`: names, or 'all-linear'); `top_layers` restricts it to the
    last n decoder layers, so the backward pass stops there (about half the step time of all 30 layers
    of SmolLM2 on a CPU); `layers` (see parse_lora_layers) says the same in any form and replaces it."""
    from peft import LoraConfig, get_peft_model

    torch.manual_seed(seed)  # LoRA A matrices are drawn at wrap time: the seed makes operators differ
    n_layers = int(getattr(model.config, "num_hidden_layers", 0) or 0)
    choice = parse_lora_layers(layers) if layers is not None else top_layers
    targets = parse_lora_modules(modules)
    if targets == "all-linear":  # peft's meaning, spelled out: peft refuses the word together with layers
        head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
        targets = tuple(sorted({n.rsplit(".", 1)[-1] for n, m in model.named_modules()
                                if isinstance(m, torch.nn.Linear) and m is not head and "." in n}))
    cfg = LoraConfig(r=r, lora_alpha=alpha, lora_dropout=dropout, task_type="CAUSAL_LM",
                     layers_to_transform=_layer_indices(choice, n_layers), target_modules=list(targets))
    try:
        return get_peft_model(model, cfg)
    except ValueError as err:  # peft names modules it could not find in a paragraph
        linear = sorted({n.rsplit(".", 1)[-1] for n, m in model.named_modules() if isinstance(m, torch.nn.Linear)})
        raise VlgapError(f"--lora-modules {','.join(targets)}: "
                         f"{str(err).splitlines()[0][:160]}; this model's linear layers are "
                         f"{', '.join(linear)} (or all-linear)") from None


#: version of the SFT keys (adapter seals, checkpoint seals): a change retrains older adapters
SFT_FORMAT = 2


def sft_key(pairs: Sequence[tuple[str, str]], *, base_model_hash: str, steps: int, batch_size: int, lr: float,
            seed: int, r: int, top_layers: int | None, max_length: int, save_every: int, full: bool = False,
            lora_alpha: int = LORA_ALPHA, lora_layers: Any = None, lora_modules: Any = None,
            length_buckets: bool = False) -> dict[str, Any]:
    """Everything that determines an SFT run's checkpoints and adapter (or full model): a changed option
    never resumes a checkpoint of another. Options added after format 2 appear only when they differ
    from what format 2 did (LoRA alpha 32 on every projection), so older adapters stay valid. The layers
    are keyed by what they select: top_layers=8 and lora_layers='top:8' are one key."""
    h = hashlib.sha256()
    for x, y in pairs:
        h.update(x.encode() + b"\0" + y.encode() + b"\0")
    key = {"format": SFT_FORMAT, "base_model_hash": base_model_hash, "pairs": h.hexdigest()[:24],
           "n_pairs": len(pairs), "steps": steps, "batch_size": batch_size, "lr": lr, "seed": seed, "lora_r": r,
           "top_layers": top_layers, "max_length": max_length, "save_every": save_every}
    if length_buckets:  # another data order: another run
        key["length_buckets"] = True
    if full:  # every parameter trains: the LoRA settings do not exist
        return {**key, "full": True, "lora_r": None, "top_layers": None}
    choice = parse_lora_layers(lora_layers) if lora_layers is not None else top_layers
    if isinstance(choice, tuple):
        key.update(top_layers=None, lora_layers=list(choice))
    else:
        key["top_layers"] = choice
    if lora_alpha != LORA_ALPHA:
        key["lora_alpha"] = lora_alpha
    modules = parse_lora_modules(lora_modules)
    if modules != LORA_MODULES:
        key["lora_modules"] = modules if isinstance(modules, str) else list(modules)
    return key


def seal_folder(folder: Path, key: Any) -> None:
    """Seal every file a library saved into `folder` (vlgap.reuse.seal_file), recursively."""
    from vlgap.reuse import seal_file

    for p in sorted(folder.rglob("*")):
        if p.is_file() and not p.name.endswith(".seal.json") and not p.name.endswith(".tmp"):
            seal_file(p, key)


def check_folder(folder: Path, key: Any) -> list[str]:
    """Problems of a sealed folder (files stale, changed, unsealed), one line each; [] when it may be used."""
    from vlgap.reuse import check_artefact

    files = [p for p in sorted(folder.rglob("*")) if p.is_file() and not p.name.endswith(".seal.json")]
    if not files:
        return [f"{folder}: empty"]
    verdicts = [check_artefact(p, key) for p in files]
    return [v.message() for v in verdicts if not v.ok]


def _precision(model, full: bool) -> dict[str, bool]:
    """Trainer's mixed-precision flags for a model whose weights are already in their dtype: autocast
    (bf16 / fp16) only on a GPU that supports it; on a CPU the weights simply stay in bf16 / fp16
    (Trainer's CPU autocast made a step ~15x slower here). Full SFT in float16 is refused: its fp16
    gradients cannot be unscaled (use bfloat16)."""
    p = next(model.parameters())
    if full and p.dtype == torch.float16:
        raise VlgapError("--full with --dtype float16: full-parameter SFT needs float32 or bfloat16 weights "
                         "(float16 gradients overflow and cannot be unscaled); use --dtype bfloat16")
    on_gpu = p.device.type == "cuda"
    return {"bf16": on_gpu and p.dtype == torch.bfloat16 and torch.cuda.is_bf16_supported(),
            "fp16": on_gpu and p.dtype == torch.float16}


def _spread(model) -> bool:
    dm = getattr(model, "hf_device_map", None) or {}
    return len({str(v) for v in dm.values()} - {"cpu", "disk"}) > 1


def train_lora(model, tok, pairs: Sequence[tuple[str, str]], out_dir: str | os.PathLike, *, steps: int,
               batch_size: int = 8, lr: float = 1e-3, seed: int = 0, r: int = 16, save_every: int = 10,
               max_length: int = 256, top_layers: int | None = None, log: Callable[[str], None] | None = None,
               key: dict[str, Any] | None = None, full: bool = False, lora_alpha: int = LORA_ALPHA,
               lora_layers: Any = None, lora_modules: Any = None, dtype: str | None = None,
               length_buckets: bool = False) -> dict[str, Any]:
    """SFT with transformers' Trainer: LoRA (default) or every parameter (`full=True`). Trains where the
    model is (cpu; cuda:0; a model spread over GPUs by `load_lm(device="spread")`), in its dtype (`dtype`
    casts it first); bf16 / fp16 autocast only on a GPU (see `_precision`); gradient checkpointing off.
    Checkpoints every `save_every` steps under out_dir/checkpoints and resumes from the last one. Saves
    the LoRA adapter to out_dir/adapter, or the whole fine-tuned model (with its tokenizer) to
    out_dir/model when `full`. Returns the loss history and timing.

    LoRA: rank `r`, `lora_alpha`, layers (`top_layers` = N last layers, or `lora_layers`: 'top:N' | 'all' |
    '0,1,5'; give one of them), modules (`lora_modules`: names or 'all-linear'; default LORA_MODULES).

    `key` (see `sft_key`): every checkpoint file and the adapter are sealed under it; a checkpoint of
    another key or whose bytes changed is reported in one line and training starts from step 0.

    `length_buckets`: batches of rows of similar length (`LengthBucketSampler`) instead of Trainer's random
    batches: less padding, so fewer tokens per step (a changed data order: part of the SFT key)."""
    import shutil

    from transformers import Trainer, TrainerCallback

    from vlgap.cape._trainer import OneModelArguments
    from vlgap.counts import check_count

    steps = check_count("steps", steps, 1, flag="--steps", example=16)
    batch_size = check_count("batch_size", batch_size, 1, flag="--batch-size", example=8)
    r = check_count("lora_r", r, 1, flag="--lora-r", example=16)
    lora_alpha = check_count("lora_alpha", lora_alpha, 1, flag="--lora-alpha", example=32)
    save_every = check_count("save_every", save_every, 1, example=10)
    if lora_layers is not None and top_layers is not None and not full:
        raise VlgapError(f"give one of top_layers={top_layers} and lora_layers={lora_layers!r} "
                         f"(top_layers=N is lora_layers='top:N')")
    if dtype is not None:
        model.to(torch_dtype(dtype))
    device = model_device(model)
    if device.type == "cuda" and (device.index or 0) != 0 and not _spread(model):
        raise VlgapError(f"SFT on {device}: transformers' Trainer trains on the first visible GPU; run with "
                         f"CUDA_VISIBLE_DEVICES={device.index} and --device cuda")
    precision = _precision(model, full)
    ensure_pad(tok)
    out_dir = Path(out_dir)
    rows = encode_pairs(tok, pairs, max_length=max_length)
    if full:
        torch.manual_seed(seed)
        model.requires_grad_(True)
        trained = model
    else:
        trained = lora_model(model, r=r, alpha=lora_alpha, seed=seed, top_layers=top_layers, layers=lora_layers,
                             modules=lora_modules)
    n_trainable = int(sum(p.numel() for p in trained.parameters() if p.requires_grad))
    ckpt_dir = out_dir / "checkpoints"
    history: list[dict[str, float]] = []

    class Log(TrainerCallback):
        def on_log(self, args, state, control, logs=None, **kw):
            if logs and "loss" in logs:
                history.append({"step": state.global_step, "loss": float(logs["loss"])})
                if log:
                    log(f"SFT step {state.global_step}/{steps}: loss {logs['loss']:.4f}")

        def on_save(self, args, state, control, **kw):
            if key is not None:  # called after the Trainer wrote the checkpoint
                folder = ckpt_dir / f"checkpoint-{state.global_step}"
                if folder.is_dir():
                    seal_folder(folder, key)

    args = OneModelArguments(
        output_dir=str(ckpt_dir), max_steps=steps, per_device_train_batch_size=batch_size, learning_rate=lr,
        lr_scheduler_type="linear", warmup_steps=max(1, steps // 10), logging_steps=1, save_strategy="steps",
        save_steps=save_every, save_total_limit=1, seed=seed, data_seed=seed, report_to=[], **precision,
        gradient_checkpointing=False, use_cpu=device.type != "cuda", dataloader_num_workers=0,
        remove_unused_columns=False, disable_tqdm=True, weight_decay=0.0)
    trainer_class = Trainer
    if length_buckets:
        sampler = LengthBucketSampler([len(r["input_ids"]) for r in rows], batch_size, seed)

        class BucketTrainer(Trainer):
            def _get_train_sampler(self, *args, **kwargs):
                return sampler

        trainer_class = BucketTrainer
    trainer = trainer_class(model=trained, args=args, train_dataset=rows, data_collator=collate(tok),
                            callbacks=[Log()])
    last = None
    if ckpt_dir.is_dir():
        done = sorted(ckpt_dir.glob("checkpoint-*"), key=lambda p: int(p.name.split("-")[-1]))
        if done and key is not None:
            problems = check_folder(done[-1], key)
            if problems:  # a changed or foreign checkpoint is never resumed
                (log or _stderr_line)(f"SFT checkpoint {done[-1].name} not reused ({problems[0]}"
                                      + (f" and {len(problems) - 1} more" if len(problems) > 1 else "")
                                      + "); training from step 0")
                shutil.rmtree(ckpt_dir)
                done = []
        last = str(done[-1]) if done else None
    t0 = time.perf_counter()
    result = trainer.train(resume_from_checkpoint=last)
    seconds = time.perf_counter() - t0
    train_loss = float(result.training_loss) if result.training_loss is not None else math.nan
    if last is not None:  # the whole run's losses: those of the checkpoint's steps come back with its state
        history, train_loss = whole_history(trainer.state.log_history, train_loss)
    saved = out_dir / ("model" if full else "adapter")
    trained.save_pretrained(str(saved))
    if full:
        tok.save_pretrained(str(saved))
        trained.eval()
    if key is not None:
        seal_folder(saved, key)
    from vlgap.encoders._common import dtype_name

    info = {"steps": steps, "batch_size": batch_size, "lr": lr, "seed": seed, "lora_r": None if full else r,
            "n_pairs": len(rows), "top_layers": None if full else top_layers, "seconds": round(seconds, 1),
            "resumed_from": last, "samples_per_second": round(steps * batch_size / max(seconds, 1e-9), 3),
            "train_loss": train_loss,
            "history": history, "full": full, "n_trainable": n_trainable, "saved": saved.name,
            "device": str(device), "dtype": dtype_name(next(model.parameters()).dtype), **precision,
            "length_buckets": bool(length_buckets)}
    if not full:
        info.update(lora_alpha=lora_alpha, lora_layers=lora_layers,
                    lora_modules=lora_modules if lora_modules is not None else ",".join(LORA_MODULES))
    return info


def whole_history(log_history: Sequence[dict], fallback: float) -> tuple[list[dict[str, float]], float]:
    """(the loss of every logged step, their mean per step) from a Trainer's `state.log_history`, which a
    resumed run reloads from its checkpoint: a resumed training reports the losses of all its steps, as an
    uninterrupted one does, not only those run since the checkpoint (Trainer's own `training_loss` of a
    resumed run is the mean of the steps after it). `fallback` when nothing was logged."""
    history, seen = [], set()
    for h in log_history:
        if "loss" in h and "step" in h and int(h["step"]) not in seen:
            seen.add(int(h["step"]))
            history.append({"step": int(h["step"]), "loss": float(h["loss"])})
    history.sort(key=lambda h: h["step"])
    if not history:
        return history, fallback
    # each logged loss is the mean over the steps since the previous log: weight it by them
    prev, total = 0, 0.0
    for h in history:
        total += h["loss"] * (h["step"] - prev)
        prev = h["step"]
    return history, total / max(prev, 1)


class LengthBucketSampler(torch.utils.data.Sampler):
    """A random order of the rows in which each run of `batch_size` rows has similar lengths: the rows are
    shuffled, cut into chunks of `batch_size * chunk_batches`, each chunk is sorted by length and cut into
    batches, and the batches are shuffled. Every row is still seen once per epoch, in an order drawn from
    `seed` and the epoch (so a resumed run skips the same batches); a batch pads far less than one drawn
    at random (SFT pairs of the demo: 1.25x the real tokens at random, about 1.05x bucketed)."""

    def __init__(self, lengths: Sequence[int], batch_size: int, seed: int, chunk_batches: int = 8):
        self.lengths = list(lengths)
        self.batch_size, self.seed, self.chunk = batch_size, seed, batch_size * chunk_batches
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = int(epoch)

    def __len__(self) -> int:
        return len(self.lengths)

    def order(self) -> list[int]:
        g = torch.Generator().manual_seed(self.seed * 1_000_003 + self.epoch)
        perm = torch.randperm(len(self.lengths), generator=g).tolist()
        batches = []
        for c in range(0, len(perm), self.chunk):
            chunk = sorted(perm[c:c + self.chunk], key=lambda i: -self.lengths[i])
            batches += [chunk[b:b + self.batch_size] for b in range(0, len(chunk), self.batch_size)]
        return [i for j in torch.randperm(len(batches), generator=g).tolist() for i in batches[j]]

    def __iter__(self):
        return iter(self.order())


def _stderr_line(line: str) -> None:
    import sys

    print(f"vlgap: {line}", file=sys.stderr, flush=True)


def load_adapter(lm: LoadedLM, adapter_dir: str | os.PathLike) -> LoadedLM:
    """The base LM with a saved LoRA adapter merged in (merged weights decode as fast as the base)."""
    from peft import PeftModel

    from vlgap.io_utils import sha256_of_file

    adapter_dir = Path(adapter_dir)
    weights = adapter_dir / "adapter_model.safetensors"
    if not weights.is_file():
        raise VlgapError(f"no LoRA adapter at {str(adapter_dir)!r} (adapter_model.safetensors missing)")
    _check_trained_files([weights, adapter_dir / "adapter_config.json"], "LoRA adapter", adapter_dir)
    try:
        merged = PeftModel.from_pretrained(lm.model, str(adapter_dir)).merge_and_unload().eval()
    except (RuntimeError, ValueError, KeyError) as err:  # an adapter of another base: shapes or names differ
        try:
            import json

            trained_on = json.loads((adapter_dir / "adapter_config.json").read_text()).get("base_model_name_or_path")
        except (OSError, ValueError):
            trained_on = None
        raise VlgapError(f"LoRA adapter {str(adapter_dir)!r} does not fit the base LM {lm.name!r} "
                         f"({' '.join(str(err).split())[:160]}); it was trained on {trained_on or 'another base'}: "
                         "give that as --lm") from None
    digest = hashlib.sha256(f"{lm.model_hash}|{sha256_of_file(weights)}".encode()).hexdigest()
    return LoadedLM(merged, lm.tokenizer, f"{lm.name}+lora", digest, lm.load_seconds, dict(lm.info), lm.device)


def _check_trained_files(files: Sequence[Path], what: str, folder: Path) -> None:
    """Checksums only (a trained PE may be used with any key): a changed file is refused, an unsealed
    weight file (not written by vlgap cape train) is said in one line."""
    from vlgap.reuse import check_artefact

    for f in files:
        if not f.is_file():
            continue
        verdict = check_artefact(f)
        if verdict.status == "corrupt":
            raise VlgapError(f"{what} file {verdict.message()}; retrain it (`vlgap cape train --out "
                             f"{folder.parent}`)")
        if verdict.status == "unsealed" and f.suffix in (".safetensors", ".bin"):
            _stderr_line(f"{what} {f} has no seal (not written by vlgap cape train): not verified")


def trained_pe(path: str | os.PathLike) -> tuple[str, Path] | None:
    """What `vlgap cape train` left at `path`: ('lora', adapter folder) or ('full', model folder); `path`
    may be that folder or the train run folder holding adapter/ or model/. None when neither."""
    path = Path(path)
    for folder in (path, path / "adapter", path / "model"):
        if (folder / "adapter_model.safetensors").is_file():
            return "lora", folder
        if (folder / "config.json").is_file() and (any(folder.glob("*.safetensors")) or any(folder.glob("*.bin"))):
            return "full", folder
    return None


def load_trained(path: str | os.PathLike, base: str = "smollm2", *, device: str = "cpu",
                 dtype: str | torch.dtype = "float32") -> LoadedLM:
    """A PE trained by `train_lora`: a LoRA adapter merged into `base`, or a full-SFT model folder (loaded
    on its own; `base` is not needed), on `device` in `dtype`."""
    found = trained_pe(path)
    if found is None:
        raise VlgapError(f"no trained PE at {str(path)!r}: give a LoRA adapter folder (out/adapter) or a full-SFT "
                         "model folder (out/model) written by `vlgap cape train`")
    kind, folder = found
    if kind == "lora":
        return load_adapter(load_lm(base, device=device, dtype=dtype), folder)
    _check_trained_files(sorted(folder.glob("*.safetensors")) + sorted(folder.glob("*.bin")), "full-SFT model",
                         folder)
    return load_lm(str(folder), device=device, dtype=dtype)
