"""What a float32 result depends on besides the code and the seed: the CPU and the kernels torch picks for it.

Training is bit-exact on one machine kind, but another CPU's kernels (AVX-512 against AVX2 blocking, oneDNN's
choices by cache size) round differently from the first step, and a trained model then drifts as a new seed
would. Records carry this so a reader can tell a platform difference from a code change."""
from __future__ import annotations

import platform
from functools import lru_cache


@lru_cache(maxsize=1)
def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def numeric_platform() -> dict[str, str | int]:
    """CPU model, machine, torch version, the vector instruction set torch's CPU kernels use, torch threads."""
    import torch

    return {"cpu": cpu_model(), "machine": platform.machine(), "torch": str(torch.__version__),
            "torch_cpu_capability": torch.backends.cpu.get_cpu_capability(), "threads": torch.get_num_threads()}


#: the vector extensions a time or a number format depends on, as torch's CPU probe names them -> as docs write them
_EXTENSIONS = (("avx2", "AVX2"), ("fma3", "FMA"), ("avx512_f", "AVX-512"), ("avx512_vnni", "AVX512-VNNI"),
               ("avx512_bf16", "AVX512-BF16"), ("amx_bf16", "AMX-BF16"), ("amx_fp16", "AMX-FP16"))


@lru_cache(maxsize=1)
def cpu_capabilities() -> dict:
    """torch's view of this CPU (name, cores, which vector extensions it has), {} where torch cannot say."""
    try:
        import torch

        probe = getattr(getattr(torch._C, "_cpu", None), "_get_cpu_capability", None)
        return dict(probe()) if probe is not None else {}
    except Exception:  # noqa: BLE001 - a private torch probe that changed only leaves the extensions out
        return {}


def cpu_extensions() -> list[str]:
    """This CPU's vector extensions that matter for speed, e.g. ["AVX2", "FMA", "AVX-512", "AVX512-BF16"];
    from /proc/cpuinfo where torch's probe is missing; on ARM the NEON/SVE/BF16 flags."""
    caps = cpu_capabilities()
    if caps:
        return [label for key, label in _EXTENSIONS if caps.get(key)]
    flags: set[str] = set()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.split(":")[0].strip() in ("flags", "Features"):
                    flags = set(line.split(":", 1)[1].split())
                    break
    except OSError:
        return []
    linux = {"avx2": "AVX2", "fma": "FMA", "avx512f": "AVX-512", "avx512_vnni": "AVX512-VNNI",
             "avx512_bf16": "AVX512-BF16", "amx_bf16": "AMX-BF16", "amx_fp16": "AMX-FP16",
             "asimd": "NEON", "sve": "SVE", "bf16": "BF16"}
    return [label for key, label in linux.items() if key in flags]


def gpu_names() -> list[str]:
    """The visible CUDA GPUs' names ([] without torch or CUDA)."""
    try:
        import torch

        if not torch.cuda.is_available():
            return []
        return [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    except Exception:  # noqa: BLE001 - no driver, no GPU to name
        return []


def machine_summary() -> dict:
    """{cpu, cores, extensions, gpus, torch, summary}: the machine a time or a result was measured on;
    `summary` is the one line reports and benchmarks print, e.g. "AMD EPYC (2 cores; AVX2 FMA AVX-512
    AVX512-BF16)" or "... + 1x NVIDIA H100 80GB HBM3"."""
    import os

    ext = cpu_extensions()
    gpus = gpu_names()
    cores = os.cpu_count() or 0
    try:
        import torch

        torch_version = str(torch.__version__)
    except ImportError:
        torch_version = "not installed"
    summary = f"{cpu_model()} ({cores} cores; {' '.join(ext) if ext else 'vector extensions unknown'})"
    if gpus:
        from collections import Counter

        summary += " + " + ", ".join(f"{n}x {name}" for name, n in Counter(gpus).items())
    return {"cpu": cpu_model(), "cores": cores, "extensions": ext, "gpus": gpus, "torch": torch_version,
            "summary": summary}
