"""What the encoders' forward passes were given, recorded on request, and those passes replayed alone.

A run's *floor* is the time of the bare forward passes of its encoders on its own inputs: what no
orchestration can go below on that machine. `benchmarks/demos.py` measures it in two steps:

1. The run executes with the trace on ($VLGAP_FORWARD_TRACE naming a file, or `forward_trace(path)`
   around it in one process). Every forward call of an encoder (`ImageModelEncoder.forward_layers`,
   `HFVisionEncoder.forward_layers`, the model call of `HFTextEncoder`) appends one JSON line: the
   encoder (name, modality, number format, device), the input's shape and dtype, for text the real
   token count of each row (an attention model's cost follows its padded length and mask), torch's
   thread count, and the call's own wall and CPU seconds in the run.
2. `vlgap.encoders.floor.replay` loads each traced encoder again and runs one forward pass per line on an input of the same
   shape and dtype (vision: normal noise, as preprocessed pixels are; text: token ids with the same
   lengths and right padding) under torch.inference_mode with the same thread count, and sums the
   times. For these models a forward pass's time depends on the shapes, not on the values.

Off by default: with no trace asked for, a forward call pays one environment lookup.
"""
from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from vlgap.errors import VlgapError

#: the environment variable that turns the trace on: the file that receives one JSON line per forward call
ENV = "VLGAP_FORWARD_TRACE"

_override: list[str | None] = []
_write_lock = threading.Lock()


def trace_target() -> str | None:
    """The trace file now in force (`forward_trace`'s, else $VLGAP_FORWARD_TRACE), None when tracing is off."""
    if _override:
        return _override[-1]
    return os.environ.get(ENV) or None


@contextmanager
def forward_trace(path: str | Path | None) -> Iterator[Path | None]:
    """Every encoder forward call inside the block appends its line to `path` (None: tracing off)."""
    _override.append(str(path) if path is not None else None)
    try:
        yield Path(path) if path is not None else None
    finally:
        _override.pop()


@contextmanager
def traced(encoder, inputs: Callable[[], dict[str, Any]]) -> Iterator[None]:
    """Around one forward call of `encoder`: with a trace in force, the call's line (`inputs()`: the
    shape, dtype, token lengths; asked only then) is appended when it returns; otherwise nothing."""
    path = trace_target()
    if path is None:
        yield
        return
    import torch

    described = inputs()
    wall, cpu = time.perf_counter(), time.process_time()
    yield
    line = {"encoder": spec_of(encoder), **described, "threads": torch.get_num_threads(),
            "wall_s": round(time.perf_counter() - wall, 6), "cpu_s": round(time.process_time() - cpu, 6)}
    text = json.dumps(line, separators=(",", ":")) + "\n"
    with _write_lock, open(path, "a", encoding="utf-8") as fh:
        fh.write(text)


def spec_of(encoder) -> dict[str, Any]:
    """What loads the same encoder again (`vlgap.encoders.registry.get_encoder` arguments)."""
    from vlgap.encoders._common import dtype_name

    spec = {"name": encoder.name, "modality": encoder.modality, "dtype": dtype_name(encoder.dtype),
            "device": str(encoder.device)}
    pooling = getattr(encoder, "pooling", None)
    if encoder.modality == "text" and pooling:
        spec["pooling"] = pooling
    pre = getattr(encoder, "preprocessor", None)
    if encoder.modality == "vision" and getattr(pre, "image_size", None):
        spec["image_size"] = int(pre.image_size)
    return spec


def read_trace(path: str | Path) -> list[dict[str, Any]]:
    """The trace's lines, in call order; a missing or damaged file is refused in one line."""
    p = Path(path)
    if not p.is_file():
        raise VlgapError(f"forward trace {p} not found: run with {ENV}={p} (or inside forward_trace) first")
    out = []
    for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
            rec["encoder"]["name"], rec["shape"]  # noqa: B018 - the fields replay needs
        except (ValueError, KeyError, TypeError):
            raise VlgapError(f"forward trace {p}, line {n}: not a trace line (JSON with encoder and shape)") from None
        out.append(rec)
    return out
