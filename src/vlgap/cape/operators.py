"""Caption operators behind one interface, with a resumable on-disk cache.

An operator maps input texts (captions or user prompts) to six-part rewrites:
  template  zero-cost reference: fills the six parts from the shapes vocabulary found in the input
  pe        the anchored PE: a fine-tuned LM (LoRA or full SFT, any causal LM), label-forced decoding
  rewriter  the prompted control: another LM, fixed six-part instruction + few-shot, no fine-tuning
  third     same size and data as the PE, another LoRA seed: the falsifier's operator
  precomputed  rewrites written elsewhere (a 397B model, an API) read from a JSONL: input -> output
  openai-compatible  a chat-completions HTTP endpoint the user runs (vLLM, llama.cpp server, ...),
               called with the standard library only
Every result is cached under (operator name, model hash, input text). The cache file is sealed
(vlgap.reuse) under its operator, model hash and decoding settings: a file of another key, or whose
bytes changed after they were written, is reported in one line and recomputed, never mixed in.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import sys
from pathlib import Path
from typing import Any, Callable, Sequence

from vlgap.arguments import checked_class
from vlgap.cape import world as W
from vlgap.cape.schema import PARTS, SixPart
from vlgap.data import shapes as S
from vlgap.errors import VlgapError
from vlgap.io_utils import folder_lock

OPERATORS = ("template", "pe", "rewriter", "third", "precomputed", "openai-compatible")
MAX_INPUT_TOKENS = 192
INSTRUCTION = ("Rewrite the video prompt as a caption with six labelled lines: Short Caption, Dense Caption, "
               "Main Object, Background, Camera, Style. Keep every fact of the prompt; one line per part.\n\n")


def result_dict(six: SixPart | None, text: str, valid: bool, retries: int, **extra: Any) -> dict[str, Any]:
    d = {p: (getattr(six, p) if six is not None else None) for p in PARTS}
    return {**d, "valid": bool(valid), "retries": int(retries), "text": text, **extra}


class Operator:
    name: str = "operator"
    uses_lm: bool = False

    @property
    def model_hash(self) -> str:
        raise NotImplementedError

    def rewrite_batch(self, texts: Sequence[str]) -> list[dict[str, Any]]:
        raise NotImplementedError

    def count_tokens(self, text: str) -> int:
        return len(text.split())

    def truncate(self, text: str, n: int) -> str:
        return " ".join(text.split()[:n])


# ------------------------------------------------------------------------------------------------
# template
# ------------------------------------------------------------------------------------------------

_SHAPE_WORDS = {w: s for s, ws in W._USER_OBJ.items() for w in ws} | {s: s for s in S.SHAPES}
_BG_WORDS = {**{W._user_bg(b): b for b in S.PHOTO_BACKGROUNDS}, **{p: b for b, (_, ps) in S.PHOTO_BACKGROUNDS.items()
                                                                   for p in ps}}
_CAM_WORDS = {p: c for c, ps in W._USER_CAM.items() for p in ps} | {d: c for c, d in W.CAMERA_DESCRIPTIONS.items()}
_STYLE_WORDS = {p: s for s, ps in W._USER_STYLE.items() for p in ps} | {d: s for s, d in W.STYLE_DESCRIPTIONS.items()}


def _first(text: str, table: dict[str, str]) -> str | None:
    hits = [(text.find(k), -len(k), v) for k, v in table.items() if k in text]
    return min(hits)[2] if hits else None


class TemplateOperator(Operator):
    """Reads the shapes vocabulary out of the input and writes it into fixed six-part phrases; falls back
    to 'unspecified' where the input says nothing. Deterministic and instant."""
    name = "template"

    @property
    def model_hash(self) -> str:
        return "template-v1"

    def rewrite_batch(self, texts: Sequence[str]) -> list[dict[str, Any]]:
        out = []
        for text in texts:
            low = " ".join(text.lower().split())
            shape = _first(low, _SHAPE_WORDS)
            m = re.search(r"(\w+) (?:" + "|".join(map(re.escape, sorted(_SHAPE_WORDS, key=len, reverse=True)))
                          + r")\b", low)
            colour = m.group(1) if m and m.group(1) in S.COLOURS else _first(low, {c: c for c in S.COLOURS})
            bg = _first(low, _BG_WORDS)
            if bg is None:
                bg = next((b for b in sorted(S.PLAIN_BACKGROUNDS, key=len, reverse=True)
                           if f"{b} bg" in low or f"{b} background" in low), None)
            cam = _first(low, _CAM_WORDS) or "static"
            style = _first(low, _STYLE_WORDS)
            obj = " ".join(x for x in (colour, shape) if x) or "unspecified object"
            bg_text = W._bg_phrase(bg) if bg else "unspecified background"
            six = SixPart(short_caption=f"A {obj} on {bg_text}.", dense_caption=" ".join(text.split()),
                          main_object=f"a {obj}", background=bg_text, camera=W.CAMERA_DESCRIPTIONS[cam],
                          style=W.STYLE_DESCRIPTIONS[style] if style else "unspecified style")
            out.append(result_dict(six, six.to_text(), True, 0))
        return out


# ------------------------------------------------------------------------------------------------
# LM operators
# ------------------------------------------------------------------------------------------------


def few_shot_examples(n: int = 2, seed: int = 424242) -> list[tuple[str, str]]:
    """Fixed few-shot pairs for the prompted rewriter, from videos outside every experiment split."""
    vids = W.sample_videos(n, seed=seed)
    kinds = ("user", "detailed", "concise")
    return [(W.inputs_of(v)[kinds[i % 3]], W.target_of(v).to_text()) for i, v in enumerate(vids)]


class LMOperator(Operator):
    """An LM behind label-forced decoding. `prefix` is prepended to every prompt (instruction and
    few-shot examples for the prompted rewriter; empty for a fine-tuned PE)."""
    uses_lm = True

    def __init__(self, name: str, load: Callable[[], Any], *, prefix: str = "", batch_size: int = 16,
                 max_retries: int = 2, seed: int = 0, model_hash: str | None = None,
                 budget_targets: Sequence[str] | None = None):
        from vlgap.counts import check_count

        self.name, self._load, self.prefix = name, load, prefix
        # six-part targets the per-part token budgets are sized from (`lm.budgets_from_targets`, in this
        # model's tokens); None: the fixed lm.FIELD_BUDGET
        self.budget_targets = list(budget_targets) if budget_targets else None
        self._budget: dict[str, int] | None = None
        self.batch_size = check_count("batch_size", batch_size, 1, flag="--batch-size", example=16)
        self.max_retries = check_count("max_retries", max_retries, 0, example=2)
        self.seed = seed
        self._lm = None
        self._hash = model_hash

    @property
    def lm(self):
        if self._lm is None:
            self._lm = self._load()
        return self._lm

    @property
    def model_hash(self) -> str:
        if self._hash is None:
            base = self.lm.model_hash
            self._hash = hashlib.sha256(f"{base}|{self.prefix}".encode()).hexdigest()[:32] if self.prefix else base
        return self._hash

    @property
    def budget(self) -> dict[str, int] | None:
        if self._budget is None and self.budget_targets:
            from vlgap.cape.lm import budgets_from_targets

            self._budget = budgets_from_targets(self.lm.tokenizer, self.budget_targets)
        return self._budget

    def count_tokens(self, text: str) -> int:
        return len(self.lm.tokenizer.encode(text, add_special_tokens=False))

    def truncate(self, text: str, n: int) -> str:
        tok = self.lm.tokenizer
        return tok.decode(tok.encode(text, add_special_tokens=False)[:n])

    def rewrite_batch(self, texts: Sequence[str]) -> list[dict[str, Any]]:
        from vlgap.cape.lm import generate_six, sft_prompt

        prompts = [self.prefix + sft_prompt(t) for t in texts]
        dec = generate_six(self.lm, prompts, batch_size=self.batch_size, max_retries=self.max_retries,
                           seed=self.seed, budget=self.budget)
        return [result_dict(d.six, d.text, d.valid, d.retries, error=d.error, reasons=d.reasons) for d in dec]


def prompted_prefix(n_shots: int = 2) -> str:
    from vlgap.cape.lm import sft_prompt

    shots = "".join(f"{sft_prompt(x)}{y}\n\n" for x, y in few_shot_examples(n_shots))
    return INSTRUCTION + shots


def anchored_operator(name: str, adapter_dir: str | os.PathLike, base: str = "smollm2", *, device: str = "cpu",
                      dtype: str = "float32", **kw) -> LMOperator:
    """The anchored PE (or the third operator): a trained PE from `vlgap cape train` (a LoRA adapter over
    `base`, or a full-SFT model folder) on `device` in `dtype`."""
    from vlgap.cape.lm import load_trained, trained_pe
    from vlgap.runtime import runtime

    rt = runtime(device, dtype, spread=True)  # a bad option is said now, not when the model first loads
    device, dtype = rt.device, rt.dtype
    if trained_pe(adapter_dir) is None:
        raise VlgapError(f"operator {name!r} needs a trained PE; none at {str(adapter_dir)!r} (a LoRA adapter "
                         "folder or a full-SFT model folder: train one with `vlgap cape train` or run "
                         "`vlgap cape demo`)")
    return LMOperator(name, lambda: load_trained(adapter_dir, base, device=device, dtype=dtype), **kw)


def prompted_operator(name: str = "rewriter", model: str = "gemma3_270m", n_shots: int = 2, *, device: str = "cpu",
                      dtype: str = "float32", **kw) -> LMOperator:
    from vlgap.cape.lm import load_lm
    from vlgap.runtime import runtime

    rt = runtime(device, dtype, spread=True)
    device, dtype = rt.device, rt.dtype
    return LMOperator(name, lambda: load_lm(model, device=device, dtype=dtype), prefix=prompted_prefix(n_shots), **kw)


# ------------------------------------------------------------------------------------------------
# outside rewriters
# ------------------------------------------------------------------------------------------------


def _normalise(text: str) -> str:
    """The prompt as `rewrite` passes it on (whitespace collapsed): the lookup key of a precomputed file."""
    return " ".join(str(text).split())


def _six_or_invalid(output: Any, where: str) -> dict[str, Any]:
    """A result dict from an outside rewriter's output (the six parts as keys, or six-part text); an
    output that is not a valid six-part caption is an invalid result (counted, never dropped)."""
    from vlgap.cape.schema import SchemaError, parse_six, six_from_dict

    try:
        if isinstance(output, dict):
            six = six_from_dict(output, where=where)
        elif isinstance(output, str):
            six = parse_six(output)
        else:
            raise SchemaError(f"{where}: output must be an object with the six parts or six-part text, "
                              f"got {type(output).__name__}")
    except SchemaError as err:
        text = output if isinstance(output, str) else json.dumps(output, ensure_ascii=False)
        return result_dict(None, text, False, 0, error=str(err))
    return result_dict(six, six.to_text(), True, 0)


@checked_class
class PrecomputedOperator(Operator):
    """Rewrites made elsewhere (a large rewriter, an API), read from a JSONL file: one object per line
    with "input" (the prompt text), "output" (the six parts as keys, or six-part text) and "model".
    Optional "retries" (how many times the outside system retried) is kept. The model hash is the file's
    sha256, so the rewrite cache is keyed on the file's content: another file is another operator."""

    uses_lm = False

    def __init__(self, path: str | os.PathLike, name: str = "precomputed"):
        from vlgap.io_utils import jsonl_lines, sha256_of_file

        self.path = Path(path)
        self.name = name
        if not self.path.is_file():
            raise VlgapError(f"rewrites file {str(self.path)!r} does not exist (JSONL: input, output, model)")
        self.sha256 = sha256_of_file(self.path)
        self.table: dict[str, dict[str, Any]] = {}
        self.models: set[str] = set()
        for n, rec in jsonl_lines(self.path):
            where = f"{self.path.name} line {n}"
            if not isinstance(rec, dict):
                raise VlgapError(f"{where}: expected an object with \"input\", \"output\" and \"model\"")
            for k in ("input", "output", "model"):
                if k not in rec:
                    raise VlgapError(f"{where}: needs {k!r} (keys: input = prompt text, output = six parts "
                                     "or six-part text, model = who wrote it)")
            if not isinstance(rec["input"], str) or not rec["input"].strip():
                raise VlgapError(f"{where}: \"input\" must be a non-empty prompt text")
            key = _normalise(rec["input"])
            res = _six_or_invalid(rec["output"], where)
            res["retries"] = int(rec.get("retries", 0) or 0)
            res["model"] = str(rec["model"])
            if key in self.table and self.table[key]["text"] != res["text"]:
                raise VlgapError(f"{where}: input {key[:60]!r} appears twice with different outputs "
                                 "(keep one rewrite per prompt)")
            self.table[key] = res
            self.models.add(str(rec["model"]))
        if not self.table:
            raise VlgapError(f"rewrites file {str(self.path)!r} has no records")

    @property
    def model_hash(self) -> str:
        return f"sha256:{self.sha256}"

    def rewrite_batch(self, texts: Sequence[str]) -> list[dict[str, Any]]:
        out = []
        for t in texts:
            res = self.table.get(_normalise(t))
            if res is None:
                raise VlgapError(f"prompt {_normalise(t)[:80]!r} has no rewrite in {self.path.name} "
                                 f"({len(self.table)} inputs there); add a line with this \"input\"")
            out.append(dict(res))
        return out


@checked_class
class OpenAICompatibleOperator(Operator):
    """A chat-completions endpoint the user runs (`--endpoint http://127.0.0.1:8000/v1 --endpoint-lm NAME`):
    the six-part instruction and few-shot pairs as the system message, the prompt as the user message;
    the reply is parsed into the schema, an invalid reply is retried (temperature 0.7, seeded) up to
    `max_retries` times. Standard library only (urllib)."""

    uses_lm = False

    def __init__(self, endpoint: str, model: str, *, name: str = "openai-compatible", max_retries: int = 2,
                 seed: int = 0, timeout: float = 120.0, max_tokens: int = 512, n_shots: int = 2,
                 api_key: str | None = None):
        from vlgap.counts import check_count

        if not isinstance(endpoint, str) or not endpoint.startswith(("http://", "https://")):
            raise VlgapError(f"--endpoint {endpoint!r}: give the server's base URL, e.g. http://127.0.0.1:8000/v1")
        if not model:
            raise VlgapError("--endpoint-lm: name the LM the endpoint serves (as in its /v1/models)")
        self.endpoint, self.model, self.name = endpoint.rstrip("/"), model, name
        self.max_retries = check_count("max_retries", max_retries, 0, example=2)
        self.seed, self.timeout, self.max_tokens, self.api_key = seed, timeout, max_tokens, api_key
        shots = few_shot_examples(n_shots)
        self.system = INSTRUCTION.strip()
        self.shots = [m for x, y in shots for m in ({"role": "user", "content": x},
                                                    {"role": "assistant", "content": y})]

    @property
    def model_hash(self) -> str:
        # the served model's name and the prompt decide the outputs; the URL (host, port) does not
        blob = json.dumps({"model": self.model, "system": self.system, "shots": self.shots,
                           "max_tokens": self.max_tokens}, sort_keys=True)
        return "openai:" + hashlib.sha256(blob.encode()).hexdigest()[:32]

    def _ask(self, prompt: str, temperature: float, seed: int) -> str:
        import urllib.error
        import urllib.request

        body = {"model": self.model, "temperature": temperature, "seed": seed, "max_tokens": self.max_tokens,
                "messages": [{"role": "system", "content": self.system}, *self.shots,
                             {"role": "user", "content": prompt}]}
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        url = f"{self.endpoint}/chat/completions"
        req = urllib.request.Request(url, data=json.dumps(body).encode(), headers=headers, method="POST")
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                data = json.loads(resp.read().decode("utf-8"))
        except urllib.error.HTTPError as err:
            detail = err.read().decode("utf-8", "replace")[:200]
            raise VlgapError(f"endpoint {url} answered HTTP {err.code} ({detail}); check --endpoint-lm {self.model!r}") from None
        except (urllib.error.URLError, TimeoutError, OSError) as err:
            reason = getattr(err, "reason", err)
            raise VlgapError(f"endpoint {url} cannot be reached ({reason}); is the server running?") from None
        except ValueError as err:
            raise VlgapError(f"endpoint {url} did not answer JSON ({err})") from None
        try:
            content = data["choices"][0]["message"]["content"]
        except (KeyError, IndexError, TypeError):
            raise VlgapError(f"endpoint {url}: the reply has no choices[0].message.content "
                             "(is it an OpenAI-compatible chat-completions server?)") from None
        return content if isinstance(content, str) else ""

    def rewrite_batch(self, texts: Sequence[str]) -> list[dict[str, Any]]:
        out = []
        for t in texts:
            res = None
            for attempt in range(self.max_retries + 1):
                reply = self._ask(t, 0.0 if attempt == 0 else 0.7, self.seed + attempt)
                res = _six_or_invalid(reply, "reply")
                res["retries"] = attempt
                if res["valid"]:
                    break
            out.append(res)
        return out


def get_operator(name: str, *, adapter: str | os.PathLike | None = None, base: str = "smollm2",
                 rewriter_model: str = "gemma3_270m", rewrites: str | os.PathLike | None = None,
                 endpoint: str | None = None, model: str | None = None, device: str = "cpu",
                 dtype: str = "float32", **kw) -> Operator:
    """An operator by name. LM operators (pe, third: `adapter` = a trained PE, LoRA over `base` or a
    full-SFT model folder; rewriter: `rewriter_model`) load on `device` (vlgap.runtime, `spread` included) in
    `dtype` (float32 | bfloat16 | float16)."""
    if name == "template":
        return TemplateOperator()
    if name == "precomputed":
        if rewrites is None:
            raise VlgapError("operator 'precomputed' needs --rewrites FILE.jsonl (one object per line: "
                             "input, output, model)")
        return PrecomputedOperator(rewrites)
    if name == "openai-compatible":
        if endpoint is None or model is None:
            raise VlgapError("operator 'openai-compatible' needs --endpoint http://HOST:PORT/v1 and --endpoint-lm NAME")
        return OpenAICompatibleOperator(endpoint, model, **{k: v for k, v in kw.items()
                                                            if k in ("max_retries", "seed")})
    if name in ("pe", "third"):
        if adapter is None:
            raise VlgapError(f"operator {name!r} needs --adapter DIR (a LoRA adapter or full-SFT model saved by "
                             "`vlgap cape train`)")
        return anchored_operator(name, adapter, base=base, device=device, dtype=dtype, **kw)
    if name == "rewriter":
        return prompted_operator(name, model=rewriter_model, device=device, dtype=dtype, **kw)
    raise VlgapError(f"unknown operator {name!r}; valid: {', '.join(OPERATORS)}")


# ------------------------------------------------------------------------------------------------
# Cache + entry point
# ------------------------------------------------------------------------------------------------


def _key(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:24]


#: version of the rewrite cache files and their keys
CACHE_FORMAT = 2


class RewriteCache:
    """One JSON file per operator: {operator, model_hash, entries: {sha(input): result}}; rewritten
    atomically after every batch, so a killed run resumes at the next unfinished batch.

    Sealed under {operator, model hash, `settings` (decoding: retries, seed), format}: a file of
    another key is refused with the differences (it holds another model's work: use another cache
    folder); a file whose bytes changed, or an unsealed one, is said in one line and redone."""

    def __init__(self, folder: str | os.PathLike, operator: str, model_hash: str,
                 settings: dict[str, Any] | None = None):
        self.path = Path(folder) / f"{operator}.json"
        self.operator, self.model_hash = operator, model_hash
        self.key = {"format": CACHE_FORMAT, "operator": operator, "model_hash": model_hash, **(settings or {})}
        self.entries: dict[str, dict[str, Any]] = {}
        with folder_lock(self.path.parent):
            self.entries = self._read()

    def _read(self) -> dict[str, dict[str, Any]]:
        """The entries the file holds now (call under `io_utils.folder_lock`)."""
        from vlgap.reuse import check_artefact, read_verified

        verdict = check_artefact(self.path, self.key, verify_bytes=False)
        if verdict.status == "stale" and "format" not in " ".join(verdict.differences):
            shown = "; ".join(d if "model_hash" not in d else "model hash differs" for d in verdict.differences[:4])
            raise VlgapError(f"rewrite cache {str(self.path)!r} holds another operator's results ({shown}); "
                             "use another cache folder or delete the file")
        raw = read_verified(self.path, self.key, what="rewrite cache")
        if raw is None:
            return {}
        try:
            data = json.loads(raw)
        except ValueError as err:  # sealed, yet not JSON: written by a broken writer; redo
            print(f"vlgap: rewrite cache {self.path} is not valid JSON ({err}); recomputing", file=sys.stderr)
            data = {}
        return data.get("entries", {}) if isinstance(data, dict) else {}

    def get(self, text: str) -> dict[str, Any] | None:
        return self.entries.get(_key(text))

    def put(self, text: str, result: dict[str, Any]) -> None:
        self.entries[_key(text)] = {**result, "input": text}

    def save(self) -> None:
        from vlgap.io_utils import to_json
        from vlgap.reuse import write_artefact

        # another process may write this operator's results too (the CAPE lanes rewrite the prompted
        # rewriter's two splits side by side): under the folder's lock, what the file holds now is kept
        # beside this cache's entries, and the entries are written in key order, so the file is the same
        # bytes whichever process saved last
        with folder_lock(self.path.parent):
            self.entries = {**self._read(), **self.entries}
            doc = {"operator": self.operator, "model_hash": self.model_hash,
                   "entries": dict(sorted(self.entries.items()))}
            write_artefact(self.path, (to_json(doc) + "\n").encode(), self.key)


def check_prompts(texts: Sequence[str], op: Operator, max_input_tokens: int = MAX_INPUT_TOKENS,
                  truncate: bool = False) -> tuple[list[str], list[int]]:
    """Empty prompts are an error naming the line; prompts longer than `max_input_tokens` (operator's
    tokenizer) are an error unless truncate=True, which cuts them and reports which."""
    cleaned, cut = [], []
    for i, t in enumerate(texts):
        if not isinstance(t, str) or not t.strip():
            raise VlgapError(f"prompt {i + 1} is empty; every prompt needs words (one prompt per line)")
        t = " ".join(t.split())
        n = op.count_tokens(t) if op.uses_lm else len(t.split())
        if n > max_input_tokens:
            if not truncate:
                raise VlgapError(f"prompt {i + 1} has {n} tokens, more than the {max_input_tokens} this operator "
                                 "accepts; shorten it or pass --truncate to cut it")
            t = op.truncate(t, max_input_tokens)
            cut.append(i)
        cleaned.append(t)
    return cleaned, cut


def rewrite(op: Operator, texts: Sequence[str], *, cache_dir: str | os.PathLike | None = None,
            batch_size: int = 32, max_input_tokens: int = MAX_INPUT_TOKENS, truncate: bool = False,
            progress: Callable[[int, int], None] | None = None) -> list[dict[str, Any]]:
    """Rewrite every text with `op`, in order; cached results are reused, new ones saved per batch."""
    from vlgap.counts import check_count

    batch_size = check_count("batch_size", batch_size, 1, flag="--batch-size", example=16)
    max_input_tokens = check_count("max_input_tokens", max_input_tokens, 1, flag="--max-input-tokens", example=192)
    texts, cut = check_prompts(texts, op, max_input_tokens, truncate)
    settings = {"max_retries": getattr(op, "max_retries", None), "seed": getattr(op, "seed", None)}
    if getattr(op, "budget", None) is not None:  # decoding budgets change the outputs: part of the key
        settings["budget"] = op.budget
    cache = RewriteCache(cache_dir, op.name, op.model_hash, settings) if cache_dir is not None else None
    todo = [i for i, t in enumerate(texts) if cache is None or cache.get(t) is None]
    todo_unique = list(dict.fromkeys(texts[i] for i in todo))
    fresh: dict[str, dict[str, Any]] = {}
    for b in range(0, len(todo_unique), batch_size):
        chunk = todo_unique[b:b + batch_size]
        for t, res in zip(chunk, op.rewrite_batch(chunk)):
            fresh[t] = res
            if cache is not None:
                cache.put(t, res)
        if cache is not None:
            cache.save()
        if progress:
            progress(min(b + batch_size, len(todo_unique)), len(todo_unique))
    out = []
    for i, t in enumerate(texts):
        res = dict(fresh[t] if t in fresh else cache.get(t))  # type: ignore[union-attr]
        res.pop("input", None)
        res["truncated_input"] = i in cut
        out.append(res)
    return out
