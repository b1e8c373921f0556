"""The one encoder interface: a batch in, one pooled vector per layer out.

Orchestration (`vlgap.features.extract`) owns frame sampling, sub-clip splitting, batching and
averaging; encoders only know how to preprocess pixels or tokenise text and how to run every layer.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, Literal

import numpy as np
import torch


class Encoder(ABC):
    #: registry name or user-facing id, e.g. "mobilenet_v2", "hf:/path/to/model"
    name: str
    modality: Literal["vision", "text"]
    #: one name per returned layer, in order (e.g. "features.3", "hidden_states.5")
    layer_names: list[str]
    device: torch.device
    dtype: torch.dtype

    @property
    def num_layers(self) -> int:
        return len(self.layer_names)

    @abstractmethod
    def record(self) -> dict[str, Any]:
        """Everything needed to reproduce the features: model id, revision or weight-file sha256,
        dtype, pooling, preprocessing, library versions. JSON-serialisable."""


class VisionEncoder(Encoder):
    modality = "vision"
    #: "image": frames are encoded one by one (n0 = 1); "video": clips of `native_clip_len` frames.
    kind: Literal["image", "video"]
    #: n0 in the paper: 1 for image models, e.g. 16 for VideoMAE.
    native_clip_len: int = 1

    @abstractmethod
    def preprocess(self, frames: np.ndarray) -> torch.Tensor:
        """uint8 frames [T, H, W, 3] (RGB) -> float tensor [T, 3, h, w] on the CPU, normalised as the
        model expects. Pure and thread-safe: it runs in background workers."""

    @property
    def preprocessor(self):
        """`preprocess` as a small picklable object holding no model (or None), so that other processes
        (Ray decoding tasks) can preprocess frames without loading the encoder."""
        return None

    @abstractmethod
    def forward_layers(self, x: torch.Tensor) -> list[torch.Tensor]:
        """image kind: x [B, 3, h, w]; video kind: x [B, n0, 3, h, w] (already on self.device/dtype).
        Returns one pooled tensor [B, D_l] per layer (widths may differ). Called under inference_mode."""


class TextEncoder(Encoder):
    modality = "text"

    @abstractmethod
    def encode(self, texts: list[str]) -> list[torch.Tensor]:
        """Encode strings (already joined captions) -> one [B, D_l] tensor per layer, pooled over tokens
        with the attention mask (mean by default, last token as an option). Padding never changes a vector."""
