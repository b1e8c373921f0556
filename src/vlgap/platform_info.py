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
