"""Label-forced batched decoding of a causal LM into the six-part schema (CAPE's prompt enhancer).

Label-forced decoding runs one `generate()` call per batch with a logits processor that writes each
label itself ("Dense Caption:" ...) and lets the model write each part up to its line end; a part that
reaches its token budget is ended by force and marked truncated (the output is then not `valid` and is
retried with sampling). The six labels therefore always appear, in order, each with a non-empty part.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import torch

from vlgap.cape.schema import LABELS, PARTS, SchemaError, SixPart, parse_six
from vlgap.encoders.causal_lm import LoadedLM, model_device
from vlgap.errors import VlgapError

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
        self._mixed_in: torch.Tensor | None = None  # mixed ids inside the model's vocabulary, on its device
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
                    mixed, not_word = self._masks(scores)
                    if len(mixed):
                        scores[r, mixed] = float("-inf")
                    if n == 0:  # a part starts with a word-like token: never empty, never a bare line break
                        scores[r, not_word] = float("-inf")
                    if self.eos is not None:
                        scores[r, self.eos] = float("-inf")
        return scores

    def _masks(self, scores: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(mixed ids, not-word mask) built once on the scores' device and vocabulary size: a model on a
        GPU gets its masks there (no host-device copy per token)."""
        vocab = scores.shape[1]
        if (self._not_word is None or self._not_word.shape[0] != vocab
                or self._not_word.device != scores.device):
            self._not_word = torch.ones(vocab, dtype=torch.bool, device=scores.device)
            self._not_word[self._word[self._word < vocab].to(scores.device)] = False
            self._mixed_in = self._mixed[self._mixed < vocab].to(scores.device)
        return self._mixed_in, self._not_word  # type: ignore[return-value]

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
            enc = {k: v.to(lm.device or model_device(model)) for k, v in enc.items()}
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
