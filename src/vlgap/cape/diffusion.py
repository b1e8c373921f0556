"""For users with a GPU and a diffusers text-to-video/image model: rewrite the fine-tuning captions with
the deployed PE (JSONL export for a training script) and put the same PE in front of a pipeline at
inference, so both sides of the conditioning come from one operator."""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from vlgap.cape.operators import Operator, rewrite
from vlgap.errors import VlgapError
from vlgap.io_utils import atomic_write_text, jsonl_lines


def export_captions(src: str | os.PathLike, dst: str | os.PathLike, op: Operator, *,
                    caption_key: str = "caption", cache_dir: str | os.PathLike | None = None) -> int:
    """Read JSONL records with a caption, write them back with `caption` replaced by the operator's
    six-part text and the original kept under `source_caption` (plus `valid`, `retries`)."""
    src = Path(src)
    if not src.is_file():
        raise VlgapError(f"caption file {str(src)!r} does not exist")
    recs = []
    for n, rec in jsonl_lines(src):
        if not isinstance(rec, dict) or not isinstance(rec.get(caption_key), str) or not rec[caption_key].strip():
            raise VlgapError(f"{src.name} line {n}: needs a non-empty {caption_key!r} string")
        recs.append(rec)
    if not recs:
        raise VlgapError(f"caption file {str(src)!r} has no records")
    res = rewrite(op, [r[caption_key] for r in recs], cache_dir=cache_dir)
    lines = [json.dumps({**r, caption_key: x["text"], "source_caption": r[caption_key], "valid": x["valid"],
                         "retries": x["retries"], "operator": op.name, "operator_model_hash": op.model_hash})
             for r, x in zip(recs, res)]
    atomic_write_text(dst, "\n".join(lines) + "\n")
    return len(lines)


class PromptEnhancedPipeline:
    """Wraps any diffusers pipeline: `__call__(prompt, **kw)` rewrites the prompt(s) with the operator and
    passes the six-part text(s) on; `last_rewrites` keeps what was sent."""

    def __init__(self, pipeline: Any, op: Operator, cache_dir: str | os.PathLike | None = None):
        self.pipeline, self.op, self.cache_dir = pipeline, op, cache_dir
        self.last_rewrites: list[dict[str, Any]] = []

    def __call__(self, prompt: str | list[str], **kwargs: Any) -> Any:
        prompts = [prompt] if isinstance(prompt, str) else list(prompt)
        self.last_rewrites = rewrite(self.op, prompts, cache_dir=self.cache_dir)
        texts = [r["text"] for r in self.last_rewrites]
        return self.pipeline(prompt=texts[0] if isinstance(prompt, str) else texts, **kwargs)
