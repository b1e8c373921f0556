"""Where models run and in which number format: the one parser of `--device` and `--dtype`.

Every API function and CLI command that takes a device or a dtype passes the value through `parse_device`
/ `parse_dtype` (or `runtime()`, both at once) where it receives it; the layers below take the canonical
value. A bad value is refused with one line that names it and lists what is valid (`invalid`).

Devices (`DEVICES`)
    cpu         the CPU (the default)
    cuda        the first CUDA GPU, canonical "cuda:0"
    cuda:N      CUDA GPU N (refused when this machine has fewer GPUs)
    mps         Apple's Metal GPU
    auto        the first CUDA GPU when there is one, else MPS when available, else the CPU; resolved when
                parsed, so it means the same everywhere (encoders, metrics, WSV, CAPE, split-captions)
    spread      one large model spread over every visible GPU by accelerate (`device_map="auto"`; the CPU
                when no GPU is visible). Only loaders that can spread a model accept it: the text encoders
                (hf:, gguf:, smollm2, gemma3_270m) and the causal LMs of CAPE and split-captions
                (`vlgap.encoders.causal_lm`); elsewhere it is refused by name. Inputs go to the device
                of the model's first module.

Dtypes (`DTYPES`): canonical names float32 | bfloat16 | float16, with the aliases fp32, float, f32 ->
float32; bf16 -> bfloat16; fp16, half, f16 -> float16 (and torch dtypes). Caches, keys and records hold the
canonical name only, so `bf16` and `bfloat16` share one cache entry.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from vlgap.errors import VlgapError

#: canonical dtype names, in the order the help lists them
DTYPES = ("float32", "bfloat16", "float16")
#: every accepted spelling -> its canonical name
DTYPE_ALIASES = {
    "float32": "float32", "fp32": "float32", "float": "float32", "f32": "float32",
    "bfloat16": "bfloat16", "bf16": "bfloat16",
    "float16": "float16", "fp16": "float16", "half": "float16", "f16": "float16",
}
DEVICES = ("cpu", "cuda", "cuda:N", "mps", "auto", "spread")
SPREAD = "spread"

DEVICE_HELP = ("cpu | cuda | cuda:N | mps | auto (the first CUDA GPU, else MPS, else the CPU); "
               "see docs/models.md#devices-and-dtypes")
SPREAD_DEVICE_HELP = ("cpu | cuda | cuda:N | mps | auto (the first CUDA GPU, else MPS, else the CPU) | "
                      "spread (a large model over every GPU); see docs/models.md#devices-and-dtypes")
DTYPE_HELP = "float32 | bfloat16 (bf16) | float16 (fp16)"


def _valid(what: str, spread: bool) -> str:
    if what == "dtype":
        return "float32 (fp32, float), bfloat16 (bf16), float16 (fp16, half)"
    out = "cpu, cuda, cuda:N, mps, auto (the first CUDA GPU, else MPS, else the CPU)"
    return out + (", spread (a large model over every GPU)" if spread else "")


def invalid(what: str, value: Any, reason: str | None = None, *, spread: bool = False,
            option: str | None = None) -> VlgapError:
    """The one error for a bad device or dtype: the value, why (when there is more to say than 'unknown'),
    and what is valid. what: "device" or "dtype"; option: the flag that set it (default --device / --dtype)."""
    why = f" ({reason})" if reason else ""
    return VlgapError(f"{what} {str(value)!r} ({option or '--' + what}) is not valid here{why}; "
                      f"valid: {_valid(what, spread)}")


def parse_dtype(value: Any = None, *, option: str = "--dtype") -> str:
    """The canonical name (float32 | bfloat16 | float16) of a dtype name, alias or torch dtype; None ->
    float32. option: the flag named by the error for a bad value."""
    if value is None:
        return "float32"
    key = str(value).strip().lower().removeprefix("torch.")
    if key not in DTYPE_ALIASES:
        raise invalid("dtype", value, option=option)
    return DTYPE_ALIASES[key]


def parse_text_dtype(value: Any, dtype: Any = None) -> str | None:
    """The text encoders' number format (`text_dtype`, `--text-dtype`), canonical, or None where it is
    not set (None or "", as a TOML file leaves it) or, `dtype` given, where it equals `dtype` (the
    vision encoders' format: then no setting of its own)."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    text = parse_dtype(value, option="--text-dtype")
    return None if dtype is not None and text == parse_dtype(dtype) else text


def torch_dtype(value: Any = None):
    """The torch dtype of a dtype name, alias or torch dtype (see `parse_dtype`)."""
    import torch

    return getattr(torch, parse_dtype(value))


def _cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


def _mps_available() -> bool:
    import torch

    mps = getattr(torch.backends, "mps", None)
    return bool(mps is not None and mps.is_available())


def resolve_auto() -> str:
    """What `auto` means, everywhere: the first CUDA GPU, else MPS, else the CPU."""
    if _cuda_available():
        return "cuda:0"
    if _mps_available():
        return "mps"
    return "cpu"


def parse_device(value: Any = None, *, spread: bool = False, check: bool = True) -> str:
    """The canonical device ("cpu", "cuda:N", "mps", or "spread" where `spread=True`) of a device name or
    torch device; None -> "cpu"; "auto" -> `resolve_auto()`. check: refuse a device this machine lacks
    (False: syntax only, for a driver that sends work to other machines; "auto" then stays "auto")."""
    if value is None:
        return "cpu"
    text = str(value).strip().lower()
    if text == SPREAD:
        if not spread:
            raise invalid("device", value, "only loaders of large text models and LMs spread a model over GPUs")
        return SPREAD
    if text == "auto":
        return resolve_auto() if check else "auto"
    import torch

    try:
        dev = torch.device(text)
    except (RuntimeError, TypeError):
        raise invalid("device", value, spread=spread) from None
    if dev.type not in ("cpu", "cuda", "mps"):
        raise invalid("device", value, spread=spread)
    if dev.type == "cpu":
        return "cpu"
    if dev.type == "mps":
        if check and not _mps_available():
            raise invalid("device", value, "MPS is not available here", spread=spread)
        return "mps"
    index = dev.index or 0
    if check:
        if not _cuda_available():
            raise invalid("device", value, "no CUDA GPU is visible here", spread=spread)
        n = torch.cuda.device_count()
        if index >= n:
            raise invalid("device", value, f"this machine has {n} CUDA GPU(s), cuda:0 to cuda:{n - 1}", spread=spread)
    return f"cuda:{index}"


@dataclass(frozen=True)
class Runtime:
    """A canonical (device, dtype) pair; build it with `runtime()`."""

    device: str = "cpu"
    dtype: str = "float32"

    @property
    def torch_dtype(self):
        return torch_dtype(self.dtype)

    @property
    def spread(self) -> bool:
        return self.device == SPREAD

    @property
    def torch_device(self):
        """Where inputs go: the device, or for `spread` the first GPU (the CPU when there is none)."""
        import torch

        if self.spread:
            return torch.device("cuda", 0) if _cuda_available() else torch.device("cpu")
        return torch.device(self.device)


def runtime(device: Any = None, dtype: Any = None, *, spread: bool = False, check: bool = True) -> Runtime:
    """Parse a device and a dtype at once (a Runtime passes through, re-checked for `spread`)."""
    if isinstance(device, Runtime):
        if device.spread and not spread:
            raise invalid("device", SPREAD, "only loaders of large text models and LMs spread a model over GPUs")
        return device if dtype is None else Runtime(device.device, parse_dtype(dtype))
    return Runtime(parse_device(device, spread=spread, check=check), parse_dtype(dtype))
