"""Video models that exist only as remote code on the hub (VideoMAEv2), run only with trust_remote_code.

Their code is not transformers' own, so hidden states are read the timm way: a forward pre-hook on the
first block gives the embeddings (patch embedding plus position embedding), a forward hook on every block
its output. The layout is VideoMAEv2's (OpenGVLab/VideoMAEv2-*): a `blocks` list of transformer blocks,
pixels [B, C, T, H, W], `extract_features(pixel_values=...)`, n0 in `model_config["num_frames"]`. A
remote model of another layout is refused with a message, not guessed at.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from torch import nn

from vlgap.encoders.hf_families import Family, HFVisionEncoder, load_processor, resolve_pooling
from vlgap.errors import VlgapError

VIDEOMAE_V2 = Family("VideoMAEv2 (remote code)", ("(remote code)",), "video", False,
                     "hf:OpenGVLab/VideoMAEv2-Base --trust-remote-code", clip_len_key="model_config.num_frames",
                     note="remote code: runs only with --trust-remote-code")


class RemoteCodeVideoEncoder(HFVisionEncoder):
    """HFVisionEncoder whose hidden states come from hooks on the model's blocks."""

    def hidden_states(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        blocks = self._blocks
        states: list[torch.Tensor] = []
        handles = [blocks[0].register_forward_pre_hook(lambda _m, args: states.append(args[0]))]
        handles += [b.register_forward_hook(lambda _m, _a, out: states.append(out[0] if isinstance(out, tuple)
                                                                              else out)) for b in blocks]
        try:
            pixels = x.permute(0, 2, 1, 3, 4)  # [B, T, C, H, W] -> [B, C, T, H, W], VideoMAEv2's layout
            run = getattr(self.model, "extract_features", None) or self.model
            run(pixel_values=pixels)
        finally:
            for h in handles:
                h.remove()
        return tuple(states)

    @property
    def _blocks(self) -> nn.ModuleList:
        return find_blocks(self.model)


def find_blocks(model: nn.Module) -> nn.ModuleList:
    lists = [(name, m) for name, m in model.named_modules() if isinstance(m, nn.ModuleList)
             and name.split(".")[-1] == "blocks" and len(m)]
    if not lists:
        raise VlgapError(f"remote-code model {type(model).__name__} has no `blocks` list of transformer blocks: "
                         "vlgap reads VideoMAEv2-style remote models only")
    return max(lists, key=lambda nm: len(nm[1]))[1]


def load_remote_code_video(where: str, folder: Path | None, config, *, name: str, src: str, revision,
                           pooling, device: torch.device, dtype: torch.dtype, image_size, source: dict[str, Any],
                           trust_remote_code: bool = True) -> RemoteCodeVideoEncoder:
    from vlgap.encoders.hf_families import _check_weights_present, _config_value, _load_pretrained

    if not trust_remote_code:
        raise VlgapError(f"{src!r} runs custom code from its repository: pass --trust-remote-code "
                         "(trust_remote_code=True) only if you trust that code; vlgap never implies it")
    model_config = getattr(config, "model_config", None)
    n0 = (model_config or {}).get("num_frames") if isinstance(model_config, dict) else \
        _config_value(config, "num_frames")
    if not n0:
        raise VlgapError(f"{src!r} ({config.model_type}) is remote code without model_config.num_frames: "
                         "vlgap reads VideoMAEv2-style remote video models only")
    if folder is not None:
        _check_weights_present(folder, src)
    pooling = resolve_pooling(pooling, VIDEOMAE_V2, name)
    model = _load_pretrained(where, src, revision=revision, dtype=dtype, trust_remote_code=True)
    find_blocks(model)
    pre = load_processor(where, VIDEOMAE_V2, revision=revision, trust_remote_code=True)
    if image_size and int(image_size) != pre.image_size:
        raise VlgapError(f"{src!r} runs at its processor's size {pre.image_size}; drop --image-size")
    source = {**source, "trust_remote_code": True, "remote_class": type(model).__name__}
    return RemoteCodeVideoEncoder(name=name, model=model, family=VIDEOMAE_V2, preprocess=pre, n0=int(n0),
                                  pooling=pooling, prefix_tokens=0, device=device, dtype=dtype, source=source)

