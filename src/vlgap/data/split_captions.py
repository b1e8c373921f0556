"""Split one detailed caption per item into n shorter ones (the paper's PVD captions, Fig 8 and App. A.3),
so that a sweep's n_c runs over parts of one caption instead of independent captions.

Two splitters:
- `rule`: sentences (and semicolons) first; while there are fewer than n pieces the longest piece is
  cut at the clause boundary nearest its middle (a comma, or before "and then", "then", "while",
  "before", "after", "as", "which", "and"), else at the phrase boundary nearest its middle (before an
  article or preposition), and as a last resort at the word boundary nearest its middle; while
  there are more than n, the two adjacent pieces with the fewest words are joined. The parts use the
  caption's own words, in order, and nothing else.
- `lm:<model>`: App. A.3's instructions (the paper lists them: exactly n captions, each a different
  subset of the details, no summarising, short alt-text phrases, nothing hallucinated) as a prompt to
  any causal LM (`smollm2` offline, a local folder or a hub id; chat template when the tokenizer has
  one), greedy batched decoding, one caption per output line.

Every split is validated (`check_split`): exactly n non-empty parts, every content word of the caption
in some part (coverage), and at most `tolerance` x (the caption's content words) content words in the
parts that the caption does not have (invention). An invalid split is never used silently: with
on_invalid="fallback" the rule split replaces it (if that is valid), "skip" leaves the item out,
"error" stops; each case is listed in the split report (<out>.split_report.json) and its summary.
"""
from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from vlgap.errors import VlgapError

#: which caption of an item is split: the longest, the first, or all captions joined into one text
SOURCES = ("longest", "first", "all")
ON_INVALID = ("fallback", "skip", "error")
#: share of the caption's content words that the parts may add (an LM rewording "slides" as "moves")
DEFAULT_TOLERANCE = 0.1

#: function words that carry no content of their own: everything else counts as a content word
STOPWORDS = frozenset("""
a an the this that these those there here it its it's they them their he she his her we you i one
is are was were be been being am has have had do does did will would can could may might shall should
and or but nor so yet then than also too as while when where which who whom whose what how
of in on at to from by with into onto over under about against between through during before after
for up out off down above below near via per
not no very just only still even again all any each every some such both either neither own same
""".split())

#: App. A.3's instructions for the LM splitter ({caption}, {n})
A3_PROMPT = ("Here is a detailed description of a video:\n\"{caption}\"\n\n"
             "Split it into exactly {n} short captions. Each caption must contain a different subset of the "
             "details in the description. Do not summarise: no caption should repeat all of the information. "
             "Write each caption like alt text, as short phrases. Use only details that the description states: "
             "do not hallucinate or infer anything new. Answer with the {n} captions only, one per line, "
             "numbered 1 to {n}.")

_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")
_SENTENCE_END = re.compile(r"(?<=[.!?;])\s+")
_CONNECTIVES = ("in which", "and then", "then", "while", "before", "after", "as", "which", "but")
_PHRASE_STARTS = ("a", "an", "the", "on", "in", "at", "near", "with", "from", "to", "into")
_NUMBERING = re.compile(r"^\s*(?:\(?\d+[.):]|[-*\u2022])\s*")


def _stem(word: str) -> str:
    # plural / third-person s only: "moves" and "move", "shapes" and "shape" count as one word
    if word.endswith("'s"):
        word = word[:-2]
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        word = word[:-1]
    return word


def content_words(text: str) -> list[str]:
    """The caption's content words, lower-cased and stemmed (plural s), in order of appearance, once each."""
    out = []
    for w in _WORD.findall(text.lower()):
        if w in STOPWORDS:
            continue
        s = _stem(w)
        if s not in out:
            out.append(s)
    return out


@dataclass
class SplitCheck:
    """Validation of one split: `valid`, and why not (`reasons`)."""

    valid: bool
    n_parts: int
    missing: list[str] = field(default_factory=list)
    invented: list[str] = field(default_factory=list)
    allowed_invented: int = 0
    reasons: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def check_split(caption: str, parts: Sequence[str], n_parts: int, tolerance: float = DEFAULT_TOLERANCE) -> SplitCheck:
    """Do `parts` split `caption` into `n_parts` pieces that cover it and invent (almost) nothing?"""
    if not 0.0 <= tolerance <= 1.0:
        raise VlgapError(f"invention tolerance must lie in [0, 1], got {tolerance}")
    reasons = []
    parts = [str(p) for p in parts]
    if len(parts) != n_parts:
        reasons.append(f"{len(parts)} parts, {n_parts} asked")
    empty = [i for i, p in enumerate(parts) if not content_words(p)]
    if empty:
        reasons.append(f"part(s) {empty} have no content word")
    source = content_words(caption)
    in_parts = set().union(*(content_words(p) for p in parts)) if parts else set()
    missing = [w for w in source if w not in in_parts]
    invented = sorted(in_parts - set(source))
    allowed = int(tolerance * len(source))
    if missing:
        reasons.append(f"caption words in no part: {', '.join(missing[:8])}")
    if len(invented) > allowed:
        reasons.append(f"{len(invented)} content words not in the caption (at most {allowed} allowed): "
                       f"{', '.join(invented[:8])}")
    return SplitCheck(not reasons, len(parts), missing, invented, allowed, reasons)


# ------------------------------------------------------------------------------------------------ rule splitter


def _tidy(piece: str) -> str:
    piece = piece.strip().strip(",;:").strip()
    return piece[:1].upper() + piece[1:]


def _cut_tiers(piece: str) -> list[list[tuple[int, int]]]:
    """(end of the left part, start of the right part), best first: clause boundaries (punctuation,
    connectives, "and"), then phrase boundaries (before an article or preposition), then any word boundary."""
    clause = [(m.start(), m.end()) for m in re.finditer(r"[,;:]\s+", piece)]
    for word in (*_CONNECTIVES, "and"):
        clause += [(m.start(), m.end()) for m in re.finditer(rf"\s+(?={re.escape(word)}\b)", piece)]
    # a phrase starts before its first function word: "circle | on a background", not "circle on | a ..."
    phrase = [(m.start(), m.end()) for m in re.finditer(rf"\s+(?=(?:{'|'.join(_PHRASE_STARTS)})\b)", piece)
              if (piece[:m.start()].split() or [""])[-1].lower() not in _PHRASE_STARTS]
    words = [(m.start(), m.end()) for m in re.finditer(r"\s+", piece)]
    return [sorted(set(clause)), sorted(set(phrase)), words]


def _cut(piece: str) -> tuple[str, str] | None:
    mid = len(piece) / 2
    for tier in _cut_tiers(piece):
        points = [(a, b) for a, b in tier if content_words(piece[:a]) and content_words(piece[b:])]
        if points:
            a, b = min(points, key=lambda ab: (abs((ab[0] + ab[1]) / 2 - mid), ab[0]))
            return piece[:a], piece[b:]
    return None


def rule_split(caption: str, n_parts: int) -> list[str]:
    """The caption in `n_parts` pieces of its own words (fewer only when it has fewer words than that)."""
    if n_parts < 1:
        raise VlgapError(f"--parts must be at least 1, got {n_parts}")
    pieces = [p for p in (_tidy(s) for s in _SENTENCE_END.split(caption.strip())) if p]
    while len(pieces) < n_parts:
        order = sorted(range(len(pieces)), key=lambda i: -len(pieces[i].split()))
        for i in order:
            cut = _cut(pieces[i])
            if cut is not None:
                pieces[i:i + 1] = [_tidy(cut[0]), _tidy(cut[1])]
                break
        else:
            break  # single words everywhere: cannot split further
    while len(pieces) > n_parts:
        sizes = [len(pieces[i].split()) + len(pieces[i + 1].split()) for i in range(len(pieces) - 1)]
        i = sizes.index(min(sizes))
        left, right = pieces[i], pieces[i + 1]
        if left[-1:] not in ".!?;,":  # a clause joined back: comma and lower case, as before the cut
            left, right = left + ",", right[:1].lower() + right[1:]
        pieces[i:i + 2] = [f"{left} {right}"]
    return pieces


# ------------------------------------------------------------------------------------------------ LM splitter

#: generator: full user prompts -> completions (one string each)
Generator = Callable[[list[str]], list[str]]


def a3_prompt(caption: str, n_parts: int) -> str:
    return A3_PROMPT.format(caption=" ".join(caption.split()), n=n_parts)


def parse_lm_parts(completion: str) -> list[str]:
    """One part per non-empty output line, numbering and bullets removed."""
    out = []
    for line in completion.splitlines():
        line = _NUMBERING.sub("", line).strip().strip('"').strip()
        if line:
            out.append(line)
    return out


def lm_generator(model: str = "smollm2", *, device: str = "cpu", batch_size: int = 8,
                 max_new_tokens: int | None = None, lm=None) -> Generator:
    """Greedy batched generation with a causal LM (`vlgap.encoders.causal_lm.load_lm`: smollm2, gemma3_270m, a
    folder or a hub id, on `device`: vlgap.runtime, `spread` included; or an already loaded `lm`). Prompts go
    through the chat template when there is one."""
    import torch

    from vlgap.cape.decoding import ensure_pad
    from vlgap.encoders.causal_lm import load_lm

    loaded = lm if lm is not None else load_lm(model, device=device)
    tok, net = loaded.tokenizer, loaded.model
    ensure_pad(tok)
    tok.padding_side = "left"

    def formatted(prompt: str) -> str:
        if getattr(tok, "chat_template", None):
            return tok.apply_chat_template([{"role": "user", "content": prompt}], tokenize=False,
                                           add_generation_prompt=True)
        return prompt + "\n1."

    def generate(prompts: list[str]) -> list[str]:
        out: list[str] = []
        for s in range(0, len(prompts), batch_size):
            texts = [formatted(p) for p in prompts[s:s + batch_size]]
            enc = tok(texts, return_tensors="pt", padding=True, add_special_tokens=False)
            enc = {k: v.to(loaded.device or net.device) for k, v in enc.items()}
            budget = max_new_tokens or min(512, 16 + 2 * int(enc["input_ids"].shape[1]))
            with torch.inference_mode():
                gen = net.generate(**enc, do_sample=False, max_new_tokens=budget, pad_token_id=tok.pad_token_id,
                                   eos_token_id=tok.eos_token_id, repetition_penalty=1.1)
            for row, text in zip(gen[:, enc["input_ids"].shape[1]:], texts):
                body = tok.decode(row, skip_special_tokens=True)
                out.append(body if getattr(tok, "chat_template", None) else "1." + body)
        return out

    generate.model_hash = loaded.model_hash  # type: ignore[attr-defined]
    return generate


# ------------------------------------------------------------------------------------------------ manifests


def source_caption(captions: Sequence[str], source: str, item_id: str) -> str:
    if not captions:
        raise VlgapError(f"item {item_id!r} has no caption to split")
    if source == "longest":
        return max(captions, key=len)
    if source == "first":
        return captions[0]
    if source == "all":
        return " ".join(c.strip() if c.strip()[-1:] in ".!?" else c.strip() + "." for c in captions)
    raise VlgapError(f"unknown caption source {source!r}; valid: {', '.join(SOURCES)}")


def parse_splitter(splitter: str) -> tuple[str, str | None]:
    """"rule" -> ("rule", None); "lm:smollm2" -> ("lm", "smollm2")."""
    if splitter == "rule":
        return "rule", None
    if splitter.startswith("lm:") and splitter[3:].strip():
        return "lm", splitter[3:].strip()
    raise VlgapError(f"splitter {splitter!r}: use rule or lm:<model> (lm:smollm2, lm:/path/to/folder, lm:org/name)")


def split_captions(manifest: str | Path, out: str | Path, *, parts: int, splitter: str = "rule",
                   source: str = "longest", tolerance: float = DEFAULT_TOLERANCE, on_invalid: str = "fallback",
                   generator: Generator | None = None, device: str = "cpu", batch_size: int = 8,
                   max_new_tokens: int | None = None, progress: bool = False) -> dict[str, Any]:
    """Write a manifest (`out`, JSONL) whose items' captions are `parts` pieces of one caption of each item
    of `manifest` (see the module docstring); the split report goes to `<out>.split_report.json` and is
    returned: counts of ok / fallback / skipped items and every invalid split with its reasons.
    generator: for lm: splitters, a callable prompts -> completions instead of loading the model."""
    from vlgap.counts import check_count
    from vlgap.data.manifest import read_manifest, write_manifest
    from vlgap.io_utils import atomic_write_json

    from vlgap.runtime import parse_device

    parts = check_count("parts", parts, 1, flag="--parts", example=10)
    device = parse_device(device, spread=True)
    if source not in SOURCES:
        raise VlgapError(f"unknown caption source {source!r}; valid: {', '.join(SOURCES)}")
    if on_invalid not in ON_INVALID:
        raise VlgapError(f"--on-invalid {on_invalid!r}: use one of {', '.join(ON_INVALID)}")
    kind, model = parse_splitter(splitter)
    man = read_manifest(manifest)
    out = Path(out)
    if out.resolve() == Path(manifest).resolve():
        raise VlgapError(f"{out}: the split manifest must not overwrite its source manifest")
    originals = [source_caption(it.captions, source, it.id) for it in man.items]
    rule = [rule_split(c, parts) for c in originals]
    if kind == "lm":
        if max_new_tokens is None:  # room for the caption's words restated once, plus numbering (~1.3 tokens a word)
            max_new_tokens = 24 + 8 * parts + 2 * max(len(c.split()) for c in originals)
        gen = generator or lm_generator(model, device=device, batch_size=batch_size, max_new_tokens=max_new_tokens)
        prompts = [a3_prompt(c, parts) for c in originals]
        completions = []
        from vlgap.progress import counter

        with counter(f"splitting captions with {model}", len(prompts), "captions", progress) as report:
            for s in range(0, len(prompts), batch_size):
                completions += list(gen(prompts[s:s + batch_size]))
                report(len(completions))
        if len(completions) != len(prompts):
            raise VlgapError(f"the LM splitter returned {len(completions)} completions for {len(prompts)} prompts")
        proposed = [parse_lm_parts(c) for c in completions]
    else:
        proposed = rule
    items, records = [], []
    counts = {"ok": 0, "fallback": 0, "skipped": 0}
    for it, caption, cand, rule_parts in zip(man.items, originals, proposed, rule):
        check = check_split(caption, cand, parts, tolerance)
        rec: dict[str, Any] = {"id": it.id, "caption": caption}
        if check.valid:
            status, chosen = "ok", cand
        else:
            rec.update(splitter=splitter, parts=list(cand), **check.to_dict())
            if on_invalid == "error":
                raise VlgapError(f"item {it.id!r}: the {splitter} split is invalid ({'; '.join(check.reasons)}); "
                                 "use --on-invalid fallback or skip to go on")
            fallback = check_split(caption, rule_parts, parts, tolerance) if kind == "lm" else None
            if on_invalid == "fallback" and fallback is not None and fallback.valid:
                status, chosen = "fallback", rule_parts
            else:
                status, chosen = "skipped", None
                if on_invalid == "fallback":
                    rec["fallback"] = ("the rule split is invalid too: " + "; ".join(fallback.reasons)
                                       if fallback is not None else "no fallback for the rule splitter itself")
            rec["status"] = status
            records.append(rec)
        counts[status] += 1
        if chosen is not None:
            meta = dict(it.meta or {})
            meta["split"] = {"source_caption": caption, "splitter": splitter if status == "ok" else "rule",
                             "status": status, "parts": parts, "source": source}
            items.append(replace(it, captions=tuple(chosen), meta=meta))
    if not items:
        raise VlgapError(f"no item of {man.path} could be split into {parts} valid parts "
                         f"(first problem: {records[0]['id']}: {'; '.join(records[0]['reasons'])})")
    write_manifest(items, out)
    report = {"manifest": str(man.path), "out": str(out), "splitter": splitter, "parts": parts, "source": source,
              "tolerance": tolerance, "on_invalid": on_invalid, "n_items": len(man), "n_written": len(items),
              **{f"n_{k}": v for k, v in counts.items()}, "invalid": records}
    if kind == "lm":
        report["model_hash"] = getattr(gen, "model_hash", None)
        report["prompt"] = A3_PROMPT
    atomic_write_json(Path(str(out) + ".split_report.json"), report)
    return report


def split_summary(report: dict[str, Any]) -> str:
    """One paragraph for the console: counts, then the first invalid splits with their reasons."""
    lines = [f"{report['out']}: {report['n_written']} of {report['n_items']} items split into {report['parts']} parts "
             f"by {report['splitter']} ({report['n_ok']} valid, {report['n_fallback']} replaced by the rule split, "
             f"{report['n_skipped']} skipped)"]
    for rec in report["invalid"][:5]:
        lines.append(f"  {rec['id']}: {rec['status']}: {'; '.join(rec['reasons'])}")
    if len(report["invalid"]) > 5:
        lines.append(f"  ... {len(report['invalid']) - 5} more in {report['out']}.split_report.json")
    return "\n".join(lines)


def read_split_report(out: str | Path) -> dict[str, Any]:
    return json.loads(Path(str(out) + ".split_report.json").read_text())
