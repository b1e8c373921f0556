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

`auto` (the default where vlgap picks a format for speed: the demo's text encoders, the CAPE demo's LMs,
WSV's LM rows) is resolved once, against the run's device, by `resolve_dtype`: bfloat16 where the device
computes it natively (a CUDA GPU with `torch.cuda.is_bf16_supported()`; a CPU with AMX-BF16 or
AVX512-BF16, as torch reports them), otherwise float32. On Apple's GPUs (MPS) it is float32: only the
newest Apple GPUs have bfloat16 arithmetic and torch does not say which one it runs on, and float16 (which
every Apple GPU computes) rounds too coarsely for a default chosen for speed. The environment variable
`VLGAP_NATIVE_BF16` (1 or 0) overrides the hardware probe, e.g. to measure the float32 path on a machine
with native bfloat16. Below the boundary only canonical names travel: caches, keys and records never hold
the word `auto`. An explicit bfloat16 on a device without native support runs, with one warning line per
process that names the faster choice (`warn_slow_bfloat16`).
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any, Callable

from vlgap.errors import VlgapError

#: canonical dtype names, in the order the help lists them
DTYPES = ("float32", "bfloat16", "float16")
#: every accepted spelling -> its canonical name
DTYPE_ALIASES = {
    "float32": "float32", "fp32": "float32", "float": "float32", "f32": "float32",
    "bfloat16": "bfloat16", "bf16": "bfloat16",
    "float16": "float16", "fp16": "float16", "half": "float16", "f16": "float16",
}
#: the dtype setting resolved per device (`resolve_dtype`)
AUTO = "auto"
#: the environment variable that overrides the hardware probe of `auto`: 1 native bfloat16, 0 not
NATIVE_BF16_ENV = "VLGAP_NATIVE_BF16"
DEVICES = ("cpu", "cuda", "cuda:N", "mps", "auto", "spread")
SPREAD = "spread"

DEVICE_HELP = ("cpu | cuda | cuda:N | mps | auto (the first CUDA GPU, else MPS, else the CPU); "
               "see docs/models.md#devices-and-dtypes")
SPREAD_DEVICE_HELP = ("cpu | cuda | cuda:N | mps | auto (the first CUDA GPU, else MPS, else the CPU) | "
                      "spread (a large model over every GPU); see docs/models.md#devices-and-dtypes")
DTYPE_HELP = ("float32 | bfloat16 (bf16) | float16 (fp16) | auto (bfloat16 where the device computes it natively, "
              "else float32); see docs/models.md#devices-and-dtypes")


def _valid(what: str, spread: bool) -> str:
    if what == "dtype":
        return ("float32 (fp32, float), bfloat16 (bf16), float16 (fp16, half), auto (bfloat16 where the device "
                "computes it natively, else float32)")
    out = "cpu, cuda, cuda:N, mps, auto (the first CUDA GPU, else MPS, else the CPU)"
    return out + (", spread (a large model over every GPU)" if spread else "")


def invalid(what: str, value: Any, reason: str | None = None, *, spread: bool = False,
            option: str | None = None) -> VlgapError:
    """The one error for a bad device or dtype: the value, why (when there is more to say than 'unknown'),
    and what is valid. what: "device" or "dtype"; option: the flag that set it (default --device / --dtype)."""
    why = f" ({reason})" if reason else ""
    return VlgapError(f"{what} {str(value)!r} ({option or '--' + what}) is not valid here{why}; "
                      f"valid: {_valid(what, spread)}")


def dtype_setting(value: Any = None, *, option: str = "--dtype") -> str:
    """A dtype as a configuration holds it before its run resolves it: the canonical name, or `AUTO`
    (left for `resolve_dtype` against the run's device); None -> float32. option: the flag named by the
    error for a bad value."""
    if value is None:
        return "float32"
    key = str(value).strip().lower().removeprefix("torch.")
    if key == AUTO:
        return AUTO
    if key not in DTYPE_ALIASES:
        raise invalid("dtype", value, option=option)
    return DTYPE_ALIASES[key]


def parse_dtype(value: Any = None, *, option: str = "--dtype", device: Any = None) -> str:
    """The canonical name (float32 | bfloat16 | float16) of a dtype name, alias or torch dtype; None ->
    float32; "auto" -> what `resolve_dtype` makes of it on `device` (None: the CPU, vlgap's default
    device). option: the flag named by the error for a bad value."""
    name = dtype_setting(value, option=option)
    return resolve_dtype(name, device, option=option).dtype if name == AUTO else name


def parse_text_dtype(value: Any, dtype: Any = None, *, device: Any = None, keep_auto: bool = False) -> str | None:
    """The text encoders' number format (`text_dtype`, `--text-dtype`), canonical, or None where it is
    not set (None or "", as a TOML file leaves it) or, `dtype` given, where it equals `dtype` (the
    vision encoders' format: then no setting of its own). "auto" is resolved on `device` (see
    `parse_dtype`), or kept as "auto" with `keep_auto` (a configuration whose run resolves it)."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    text = dtype_setting(value, option="--text-dtype")
    if text == AUTO:
        if keep_auto:
            return AUTO
        text = resolve_dtype(AUTO, device, option="--text-dtype").dtype
    return None if dtype is not None and text == parse_dtype(dtype, device=device) else text


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
    # without torch where nothing needs checking: a Ray driver (check=False) never imports torch, whose
    # import (1-4 s on 2 cores) would delay its encoder actors' start (docs/cluster.md)
    if text == "cpu":
        return "cpu"
    plain = re.fullmatch(r"cuda(?::(\d+))?|mps", text)
    if plain and not check:
        return "mps" if text == "mps" else f"cuda:{int(plain.group(1) or 0)}"
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
    """Parse a device and a dtype at once (a Runtime passes through, re-checked for `spread`); "auto" as
    the dtype is resolved on that device (`resolve_dtype`). An explicit bfloat16 on a device that does
    not compute it natively is said once per process (`warn_slow_bfloat16`): this is where models load."""
    if isinstance(device, Runtime):
        if device.spread and not spread:
            raise invalid("device", SPREAD, "only loaders of large text models and LMs spread a model over GPUs")
        return device if dtype is None else Runtime(device.device, parse_dtype(dtype, device=device.device))
    dev = parse_device(device, spread=spread, check=check)
    out = Runtime(dev, parse_dtype(dtype, device=dev))
    if out.dtype == "bfloat16" and check:
        warn_slow_bfloat16(resolve_dtype(out.dtype, dev))
    return out


# -- auto: bfloat16 where the device computes it natively ---------------------------------------------

#: torch's names of the CPU features that compute bfloat16 natively, and how vlgap says them
_CPU_BF16 = (("amx_bf16", "AMX-BF16"), ("avx512_bf16", "AVX512-BF16"))


def forced_native_bfloat16() -> bool | None:
    """What `VLGAP_NATIVE_BF16` says (True: 1, False: 0), or None where it is unset or empty."""
    raw = os.environ.get(NATIVE_BF16_ENV)
    if raw is None or not raw.strip():
        return None
    value = raw.strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off"):
        return False
    raise VlgapError(f"{NATIVE_BF16_ENV}={raw!r} is not valid; valid: 1 (the device computes bfloat16 natively: "
                     "auto is bfloat16), 0 (it does not: auto is float32), or unset (ask the hardware)")


def _cpu_capability() -> dict | None:
    """torch's report of this CPU's features (vlgap.platform_info; None where this torch has none)."""
    from vlgap.platform_info import cpu_capabilities

    return cpu_capabilities()


def cpu_native_bfloat16() -> tuple[bool, str]:
    """(does this CPU compute bfloat16 natively, why in words), from torch's report of its features:
    AMX-BF16 or AVX512-BF16 on x86. Where torch does not report them (an older torch, an aarch64 CPU)
    the answer is no: float32 is the safe choice there."""
    import platform

    cap = _cpu_capability()
    if cap is None:
        return False, "torch does not report whether this CPU computes bfloat16 natively"
    have = [label for key, label in _CPU_BF16 if cap.get(key)]
    if have:
        return True, f"this CPU computes bfloat16 natively: {', '.join(have)}"
    if not any(key in cap for key, _ in _CPU_BF16):
        return False, f"torch does not report bfloat16 support for this {platform.machine() or 'CPU'} CPU"
    try:
        import torch

        kernels = f"; torch's kernels use {torch.backends.cpu.get_cpu_capability()}"
    except Exception:  # noqa: BLE001
        kernels = ""
    return False, f"this CPU has no native bfloat16 (no AMX-BF16 or AVX512-BF16{kernels})"


def native_bfloat16(device: Any = None) -> tuple[bool, str]:
    """(does `device` compute bfloat16 natively, why in words). `VLGAP_NATIVE_BF16` (1 / 0) overrides the
    probe on every device; a CUDA GPU answers through `torch.cuda.is_bf16_supported()`, the CPU through
    `cpu_native_bfloat16`; MPS is no (see the module's docstring)."""
    forced = forced_native_bfloat16()
    if forced is not None:
        return forced, (f"{NATIVE_BF16_ENV}=1 says this device computes bfloat16 natively" if forced else
                        f"{NATIVE_BF16_ENV}=0 says this device has no native bfloat16")
    dev = _device_kind(device)
    if dev.startswith("cuda"):
        import torch

        try:
            try:  # native only: newer torch also says True where bfloat16 is emulated, unless asked not to
                ok = bool(torch.cuda.is_bf16_supported(including_emulation=False))
            except TypeError:  # an older torch: no emulation to count
                ok = bool(torch.cuda.is_bf16_supported())
            name = torch.cuda.get_device_name(int(dev.partition(":")[2] or 0))
        except Exception:  # noqa: BLE001 (a driver that cannot answer: unknown, so no)
            return False, "this GPU does not say whether it computes bfloat16"
        return ok, f"this GPU ({name}) {'computes bfloat16 natively' if ok else 'has no native bfloat16'}"
    if dev == "mps":
        return False, "on Apple GPUs float32 is the safe choice (bfloat16 arithmetic only on the newest ones)"
    return cpu_native_bfloat16()


def _device_kind(device: Any) -> str:
    """The device `resolve_dtype` asks about: the parsed device (its syntax only: a driver may name a GPU it
    lacks), `auto` resolved here, `spread` as its first GPU."""
    dev = parse_device(device, spread=True, check=False)
    if dev == AUTO:
        return resolve_auto()
    if dev == SPREAD:
        return "cuda:0" if _cuda_available() else "cpu"
    return dev


@dataclass(frozen=True)
class DtypeChoice:
    """A number format a run uses: `dtype` (canonical), whether it was asked as `auto`, whether the device
    computes bfloat16 natively and why (`native_bfloat16`), what the format is for (`what`, e.g. "text
    encoders") and the option that sets it (`option`)."""

    dtype: str
    auto: bool
    native: bool
    why: str
    device: str = "cpu"
    what: str = "models"
    option: str = "--dtype"

    @property
    def slow(self) -> bool:
        """An explicit bfloat16 on a CPU or GPU that does not compute it natively (emulated: slower than
        float32)."""
        return self.dtype == "bfloat16" and not self.auto and not self.native and not self.device.startswith("mps")

    def line(self) -> str:
        """This format in words for the start of a run: "text encoders: bfloat16 (auto: this CPU computes
        bfloat16 natively: AVX512-BF16)", or "vision encoders: float32" where it was set; for a slow choice,
        the warning (`warning`)."""
        if self.slow:
            return self.warning()
        return f"{self.what}: {self.dtype}" + (f" (auto: {self.why})" if self.auto else "")

    def warning(self) -> str:
        """The one line for an explicit bfloat16 the device emulates, naming the faster choice."""
        return (f"warning: {self.what} in bfloat16, though {self.why}: emulated, several times slower than "
                f"float32 here; {self.option} auto (or float32) is the faster choice")

    def record(self) -> dict[str, Any]:
        """What a run folder records of it (never the word auto as the format)."""
        return {"dtype": self.dtype, "asked": AUTO if self.auto else self.dtype, "why": self.why}

    def changed(self, out: Any, kind: str, recorded: str) -> str:
        """The refusal of a run folder whose run used `recorded` where `auto` now resolves otherwise."""
        fix = ""
        if recorded in ("bfloat16", "float32"):
            fix = f"set {NATIVE_BF16_ENV}={int(recorded == 'bfloat16')} (auto then resolves as it did there) or "
        return (f"{out} holds a {kind} run whose {self.what} ran in {recorded}, but auto resolves to {self.dtype} on "
                f"this machine ({self.why}). To resume that run here, {fix}pass {self.option} {recorded}; to start "
                f"a {self.dtype} run, choose another --out or pass --force")


def resolve_dtype(value: Any, device: Any = None, *, option: str = "--dtype", what: str = "models") -> DtypeChoice:
    """The one resolution of `auto`: bfloat16 where `device` (None: the CPU) computes it natively
    (`native_bfloat16`), else float32. Any other value is canonicalised and returned with what is known
    of the device, so a run can say which format it uses and why (`DtypeChoice.line`)."""
    name = dtype_setting(value, option=option)
    dev = _device_kind(device) if device is not None else "cpu"
    native, why = native_bfloat16(dev)
    dtype = ("bfloat16" if native else "float32") if name == AUTO else name
    return DtypeChoice(dtype, name == AUTO, native, why, dev, what, option)


_warned: list[str] = []  # the process's slow-bfloat16 warning, once


def warn_slow_bfloat16(choice: DtypeChoice, log: Callable[[str], None] | None = None) -> bool:
    """Say `choice.warning()` once per process (not in worker processes, whose parent said it) where the
    choice is slow; True when it was said now."""
    import multiprocessing

    if not choice.slow or _warned or multiprocessing.parent_process() is not None:
        return False
    _warned.append(choice.warning())
    (log or _say)(choice.warning())
    return True


def announce_formats(choices: list[DtypeChoice] | tuple[DtypeChoice, ...], log: Callable[[str], None] | None = None) -> None:
    """The number formats of a run, said once when it starts: one line with every format and why
    ("vision encoders: float32 (as set by --dtype); text encoders: bfloat16 (auto: ...)"), and for an
    explicit bfloat16 the device emulates, the one warning line instead of its part."""
    log = log or _say
    plain = [c.line() for c in choices if not c.slow]
    if plain:
        log("; ".join(plain))
    for c in choices:
        if c.slow:
            warn_slow_bfloat16(c, log)


def _say(line: str) -> None:
    from vlgap.progress import say

    say(line)
