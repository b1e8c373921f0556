"""The six-part caption schema of CAPE-T2V as a typed object: format, tolerant parse, strict validation.

    Short Caption: ...
    Dense Caption: ...
    Main Object: ...
    Background: ...
    Camera: ...
    Style: ...

`format_six` writes the fixed labels in the fixed order, one part per line. `parse_six` accepts what a
small LM produces around that (any case, bullets, markdown bold, extra spaces, label synonyms such as
"Subject:" or "Camera motion:", parts in any order) but never invents a part: a missing or empty part is a
`SchemaError` naming it. Pure Python, no model code.
"""
from __future__ import annotations

import os
import re
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any, Iterable

from vlgap.arguments import checked_class
from vlgap.errors import VlgapError
from vlgap.io_utils import jsonl_lines

PARTS = ("short_caption", "dense_caption", "main_object", "background", "camera", "style")
LABELS = {"short_caption": "Short Caption", "dense_caption": "Dense Caption", "main_object": "Main Object",
          "background": "Background", "camera": "Camera", "style": "Style"}
# extra label spellings an LM (or a captioner file) uses for the same part; matched case-insensitively
SYNONYMS = {
    "short_caption": ("short caption", "short", "caption", "summary", "short description", "title"),
    "dense_caption": ("dense caption", "dense", "detailed caption", "long caption", "description",
                      "detailed description", "dense description"),
    "main_object": ("main object", "main objects", "object", "objects", "subject", "main subject",
                    "main character"),
    "background": ("background", "setting", "scene", "environment", "backdrop"),
    "camera": ("camera", "camera motion", "camera movement", "camera work", "shot", "camera angle"),
    "style": ("style", "visual style", "render style", "look", "aesthetic"),
}
_LABEL_OF = {syn: part for part, syns in SYNONYMS.items() for syn in syns}
# "- **Main Object**: x", "1. main object - x", "MAIN OBJECT : x"
_LINE = re.compile(r"^\s*(?:[-*+•]\s+|\d+[.)]\s+)?(?:\*\*|__)?\s*([A-Za-z][A-Za-z ]{0,30}?)\s*(?:\*\*|__)?\s*"
                   r"[:\-–]\s*(?:\*\*|__)?\s*(.*)$")


class SchemaError(VlgapError):
    """A six-part text or record that misses a part or has a malformed one; `.part` names it."""

    def __init__(self, message: str, part: str | None = None):
        super().__init__(message)
        self.part = part


@checked_class
@dataclass(frozen=True)
class SixPart:
    short_caption: str
    dense_caption: str
    main_object: str
    background: str
    camera: str
    style: str

    def to_text(self) -> str:
        return format_six(self)

    def to_dict(self) -> dict[str, str]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any], where: str = "record") -> "SixPart":
        return six_from_dict(d, where=where)

    @classmethod
    def parse(cls, text: str) -> "SixPart":
        return parse_six(text)


def format_six(six: SixPart) -> str:
    """The canonical text: fixed labels, fixed order, one part per line, no trailing newline."""
    validate_six(six)
    return "\n".join(f"{LABELS[p]}: {getattr(six, p)}" for p in PARTS)


def _clean(value: str) -> str:
    value = re.sub(r"(\*\*|__)", "", value)
    return re.sub(r"\s+", " ", value).strip().strip('"').strip()


def parse_six(text: str) -> SixPart:
    """Tolerant parse of a six-part text; SchemaError naming the first missing or repeated part."""
    if not isinstance(text, str) or not text.strip():
        raise SchemaError("six-part text is empty; expected lines 'Short Caption: ...' to 'Style: ...'",
                          part=PARTS[0])
    found: dict[str, str] = {}
    current: str | None = None
    for raw in text.splitlines():
        if not raw.strip():
            continue
        m = _LINE.match(raw)
        part = _LABEL_OF.get(re.sub(r"\s+", " ", m.group(1).strip().lower())) if m else None
        if part is not None:
            if part in found and found[part]:
                raise SchemaError(f"part {LABELS[part]!r} appears twice; each part once", part=part)
            found[part] = _clean(m.group(2))
            current = part
        elif current is not None:  # a wrapped continuation line belongs to the part above it
            found[current] = _clean(f"{found[current]} {raw}")
    missing = [p for p in PARTS if p not in found]
    if missing:
        raise SchemaError(f"six-part text misses part {LABELS[missing[0]]!r} "
                          f"(missing: {', '.join(LABELS[p] for p in missing)}); every part needs its own "
                          f"'Label: value' line", part=missing[0])
    six = SixPart(**{p: found[p] for p in PARTS})
    validate_six(six)
    return six


def validate_six(six: SixPart, max_words: dict[str, int] | None = None) -> None:
    """SchemaError naming the first malformed part: empty, not text, holds another part's label, or too
    long (`max_words`, optional per part)."""
    for p in PARTS:
        v = getattr(six, p)
        if not isinstance(v, str):
            raise SchemaError(f"part {LABELS[p]!r} must be text, got {type(v).__name__}", part=p)
        if not re.search(r"[A-Za-z0-9]", v):
            raise SchemaError(f"part {LABELS[p]!r} is empty; it needs at least one word", part=p)
        if "\n" in v:
            raise SchemaError(f"part {LABELS[p]!r} spans several lines; one line per part", part=p)
        if max_words and p in max_words and len(v.split()) > max_words[p]:
            raise SchemaError(f"part {LABELS[p]!r} has {len(v.split())} words; at most {max_words[p]}", part=p)


def six_from_dict(d: dict[str, Any], where: str = "record") -> SixPart:
    """SixPart from a dict keyed by part names (or labels/synonyms); SchemaError naming a missing part."""
    if not isinstance(d, dict):
        raise SchemaError(f"{where}: expected an object with keys {', '.join(PARTS)}, got {type(d).__name__}")
    norm: dict[str, Any] = {}
    for k, v in d.items():
        key = str(k).strip().lower().replace("_", " ")
        part = _LABEL_OF.get(key)
        if part is not None and part not in norm:
            norm[part] = v
    missing = [p for p in PARTS if p not in norm or not isinstance(norm[p], str) or not norm[p].strip()]
    if missing:
        raise SchemaError(f"{where}: part {missing[0]!r} is missing or empty (need all of {', '.join(PARTS)})",
                          part=missing[0])
    six = SixPart(**{p: _clean(norm[p]) for p in PARTS})
    try:
        validate_six(six)
    except SchemaError as err:
        raise SchemaError(f"{where}: {err}", part=err.part) from None
    return six


def read_targets_jsonl(path: str | os.PathLike) -> list[dict[str, Any]]:
    """Targets written by a captioner for user data: JSONL, one object per video with an "id", an
    optional "input" (or "inputs": {kind: text}) and the six parts either as top-level keys, under
    "target" (an object), or as a six-part text under "target". Errors name the line and the part."""
    path = Path(path)
    if not path.is_file():
        raise VlgapError(f"target file {str(path)!r} does not exist")
    out = []
    for n, rec in jsonl_lines(path):
        where = f"{path.name} line {n}"
        if not isinstance(rec, dict):
            raise VlgapError(f"{where}: expected a JSON object")
        tgt = rec.get("target", rec)
        if isinstance(tgt, str):
            try:
                six = parse_six(tgt)
            except SchemaError as err:
                raise SchemaError(f"{where}: {err}", part=err.part) from None
        else:
            six = six_from_dict(tgt, where=where)
        out.append({"id": str(rec.get("id", n)), "target": six,
                    **{k: rec[k] for k in ("input", "inputs", "spec") if k in rec}})
    if not out:
        raise VlgapError(f"target file {str(path)!r} has no records")
    return out


def field_names() -> tuple[str, ...]:
    return tuple(f.name for f in fields(SixPart))


def texts_of(sixes: Iterable[SixPart]) -> list[str]:
    return [format_six(s) for s in sixes]


def six_part_text(res: dict) -> str:
    """A rewrite result as six-part text: its parts with their labels when all six are present, else
    the raw text the operator returned (an invalid rewrite is kept as written, and counted invalid)."""
    if all(res.get(p) for p in PARTS):
        return "\n".join(f"{LABELS[p]}: {res[p]}" for p in PARTS)
    return res["text"]
