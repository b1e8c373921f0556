"""TrainData: the pairs a WSV system trains on (captions, their synthetic latents and caption embeddings),
optional unlabelled real latents and held-out validation pairs, checked and fingerprinted."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from vlgap.errors import VlgapError


@dataclass
class TrainData:
    """Training pairs: caption i with its synthetic latent i and caption embedding i (unit norm)."""

    captions: list[str]
    latents: np.ndarray  # [N, C, F, H, W] float32
    text_emb: np.ndarray  # [N, D] float32, L2-normalised
    real_unlabelled: np.ndarray | None = None  # [M, C, F, H, W], only for the distribution term
    meta: dict[str, Any] = field(default_factory=dict)
    parts: dict[str, Any] | None = None  # records of the generator, latent encoder and video-text model used
    # held-out pairs never trained on (the validation loss): captions, the latents the system reads for
    # them (the same kind as `latents`) and their caption embeddings
    val_captions: list[str] | None = None
    val_latents: np.ndarray | None = None
    val_text_emb: np.ndarray | None = None

    def check(self) -> None:
        n = len(self.captions)
        if n == 0:
            raise VlgapError("the training corpus is empty: give at least one caption")
        if self.latents.ndim != 5 or len(self.latents) != n:
            raise VlgapError(f"latents must be [N={n}, C, F, H, W], got {list(self.latents.shape)}")
        if self.text_emb.ndim != 2 or len(self.text_emb) != n:
            raise VlgapError(f"caption embeddings must be [N={n}, D], got {list(self.text_emb.shape)}")
        if self.real_unlabelled is not None and self.real_unlabelled.shape[1:] != self.latents.shape[1:]:
            raise VlgapError(f"unlabelled real latents {list(self.real_unlabelled.shape[1:])} and synthetic latents "
                             f"{list(self.latents.shape[1:])} differ in shape; encode both with one latent encoder")
        if self.val_captions is not None:
            m = len(self.val_captions)
            if m == 0 or self.val_latents is None or self.val_text_emb is None:
                raise VlgapError("validation pairs need captions, latents and caption embeddings (at least one)")
            if self.val_latents.shape != (m, *self.latents.shape[1:]):
                raise VlgapError(f"validation latents must be [N={m}, {', '.join(map(str, self.latents.shape[1:]))}] "
                                 f"(the training latents' shape), got {list(self.val_latents.shape)}")
            if self.val_text_emb.shape != (m, self.text_emb.shape[1]):
                raise VlgapError(f"validation caption embeddings must be [N={m}, {self.text_emb.shape[1]}], got "
                                 f"{list(self.val_text_emb.shape)}")

    def fingerprint(self) -> str:
        import hashlib

        h = hashlib.sha256()
        h.update("\n".join(self.captions).encode())
        arrays = [self.latents, self.text_emb, self.real_unlabelled]
        if self.val_captions is not None:  # only then: data without validation pairs keep their fingerprint
            h.update(("\nval\n" + "\n".join(self.val_captions)).encode())
            arrays += [self.val_latents, self.val_text_emb]
        for arr in arrays:  # every number that training reads
            if arr is None:
                h.update(b"none")
                continue
            arr = np.ascontiguousarray(arr, np.float32)
            h.update(f"{arr.shape}".encode())
            h.update(arr.tobytes())
        return h.hexdigest()[:16]
