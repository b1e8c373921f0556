"""transformers' TrainingArguments as CAPE's SFT uses them (a module of its own: Trainer pickles its
arguments into every checkpoint, so the class must be importable by name, and importing transformers'
trainer is too slow for vlgap.cape.lm's import)."""
from __future__ import annotations

from transformers import TrainingArguments


class OneModelArguments(TrainingArguments):
    """Never wraps a one-device model in DataParallel: Trainer's own rule replicates it over every visible
    GPU, which is not what `--device cuda` asks for (a model too large for one GPU is spread by its
    device_map instead, and Trainer then runs it as one model-parallel piece)."""

    @property
    def n_gpu(self) -> int:
        return min(super().n_gpu, 1)
