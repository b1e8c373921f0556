"""A traced run's floor: its encoders' forward passes replayed alone (`vlgap.encoders.forward_trace` says what
the trace holds and how `benchmarks/demos.py` uses it)."""
from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

from vlgap.errors import VlgapError


@dataclass
class EncoderFloor:
    """One encoder's share of a floor: its traced calls replayed."""

    spec: dict[str, Any]
    calls: int = 0
    items: int = 0
    wall_s: float = 0.0
    cpu_s: float = 0.0
    #: the same calls' own seconds inside the traced run (contention and warm-up included)
    traced_wall_s: float = 0.0


@dataclass
class Floor:
    encoders: list[EncoderFloor] = field(default_factory=list)
    #: seconds spent loading the encoders for the replay (not part of the floor)
    load_s: float = 0.0

    @property
    def wall_s(self) -> float:
        return sum(e.wall_s for e in self.encoders)

    @property
    def cpu_s(self) -> float:
        return sum(e.cpu_s for e in self.encoders)

    @property
    def traced_wall_s(self) -> float:
        return sum(e.traced_wall_s for e in self.encoders)

    def to_dict(self) -> dict[str, Any]:
        return {"wall_s": round(self.wall_s, 2), "cpu_s": round(self.cpu_s, 2),
                "traced_wall_s": round(self.traced_wall_s, 2), "load_s": round(self.load_s, 2),
                "encoders": [{"encoder": e.spec["name"], "dtype": e.spec["dtype"], "calls": e.calls, "items": e.items,
                              "wall_s": round(e.wall_s, 2), "cpu_s": round(e.cpu_s, 2),
                              "traced_wall_s": round(e.traced_wall_s, 2)} for e in self.encoders]}


def _key(spec: dict[str, Any]) -> str:
    return json.dumps(spec, sort_keys=True)


def replay_input(encoder, rec: dict[str, Any], generator):
    """An input of the traced call's shape and dtype for `encoder`: (kind, tensors)."""
    import torch

    shape = [int(s) for s in rec["shape"]]
    if rec["encoder"]["modality"] == "vision":
        dtype = getattr(torch, str(rec.get("dtype", "float32")).replace("torch.", ""))
        x = torch.randn(shape, generator=generator, dtype=torch.float32).to(dtype=dtype)
        return x.to(encoder.device)
    batch, width = shape
    lengths = [int(n) for n in rec.get("lengths") or [width] * batch]
    if len(lengths) != batch or max(lengths, default=0) > width:
        raise VlgapError(f"forward trace line for {rec['encoder']['name']}: lengths {lengths} do not fit shape {shape}")
    vocab = int(getattr(encoder.model.config, "vocab_size", 0) or 1000)
    ids = torch.randint(min(100, vocab - 1), vocab, (batch, width), generator=generator)
    mask = (torch.arange(width).unsqueeze(0) < torch.tensor(lengths).unsqueeze(1)).long()
    pad = encoder.tokenizer.pad_token_id if encoder.tokenizer.pad_token_id is not None else 0
    ids = ids.masked_fill(mask == 0, int(pad))
    return {"input_ids": ids.to(encoder.device), "attention_mask": mask.to(encoder.device)}


def replay(records: list[dict[str, Any]], *, load=None, log=None) -> Floor:
    """The floor of a traced run: every line's forward pass again, on a fresh input of its shape, with
    its thread count, under inference_mode; the encoders are loaded once each (`load(spec)`, default
    `get_encoder`), their loading is timed apart. Calls run in trace order, so an encoder's first call
    here is its first call there."""
    import torch

    from vlgap.memory import reuse_freed_memory
    from vlgap.parallel import torch_threads

    reuse_freed_memory()  # as extraction does (vlgap.memory): a forward pass's allocations cost the same
    if load is None:
        def load(spec):
            from vlgap.encoders.registry import get_encoder

            opts = {k: spec[k] for k in ("pooling", "image_size") if spec.get(k)}
            return get_encoder(spec["name"], device=spec["device"], dtype=spec["dtype"], **opts)
    floor = Floor()
    loaded: dict[str, Any] = {}
    shares: dict[str, EncoderFloor] = {}
    generator = torch.Generator().manual_seed(0)
    for rec in records:
        spec = rec["encoder"]
        key = _key(spec)
        if key not in loaded:
            t = time.perf_counter()
            loaded[key] = load(spec)
            floor.load_s += time.perf_counter() - t
            shares[key] = EncoderFloor(spec)
            floor.encoders.append(shares[key])
            if log:
                log(f"floor: {spec['name']} ({spec['dtype']}) loaded, replaying its calls")
        enc, share = loaded[key], shares[key]
        x = replay_input(enc, rec, generator)
        with torch_threads(int(rec.get("threads") or torch.get_num_threads())), torch.inference_mode():
            wall, cpu = time.perf_counter(), time.process_time()
            if spec["modality"] == "vision":
                enc.forward_layers(x)
            else:
                enc.forward_tokens(x["input_ids"], x["attention_mask"])
            share.wall_s += time.perf_counter() - wall
            share.cpu_s += time.process_time() - cpu
        share.calls += 1
        share.items += int(rec["shape"][0])
        share.traced_wall_s += float(rec.get("wall_s") or 0.0)
    return floor
