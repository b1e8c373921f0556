"""Bundle: every trainable part of one WSV system (video tower, polisher, prompter, LM, the text-only
memory bank) and captioning with it; `autocast`, the mixed precision its modules run in."""
from __future__ import annotations

import numpy as np
import torch

from vlgap.counts import check_count
from vlgap.errors import VlgapError
from vlgap.wsv.train_config import WSVConfig
from vlgap.wsv.train_data import TrainData


class Bundle(torch.nn.Module):
    """Every trainable part of one system (absent parts are None)."""

    def __init__(self, cfg: WSVConfig, data: TrainData, lm=None, video_text=None):
        super().__init__()
        from vlgap.wsv.lm import build_pretrained_lm, build_scratch_lm
        from vlgap.wsv.models import Polisher, PrefixMLP, Prompter, VideoHead

        c, f, h, w = data.latents.shape[1:]
        self.cfg, self.latent_shape, self.text_dim = cfg, (c, f, h, w), data.text_emb.shape[1]
        torch.manual_seed(cfg.seed)
        if lm is None:
            if cfg.lm == "scratch":
                lm = build_scratch_lm(data.captions, n_layer=cfg.lm_layers, n_embd=cfg.lm_dim, n_head=cfg.lm_heads,
                                      n_positions=cfg.max_len + cfg.n_prompts + 8)
            else:
                lm = build_pretrained_lm(cfg.lm, lora_r=cfg.lora_r)
        self.lm = lm
        self.__dict__["video_text"] = video_text  # frozen, loaded from its spec: not part of the state dict
        stages = cfg.stages()
        self.head = VideoHead(c, self.text_dim) if "head" in stages else None
        self.polisher = Polisher(c, cfg.polisher_hidden, cfg.polisher_blocks) if "polisher" in stages else None
        if cfg.system == "text_only":
            self.prompter = PrefixMLP(self.text_dim, lm.d_model, cfg.n_prompts)
        else:
            self.prompter = Prompter(c, (f, h, w), lm.d_model, cfg.n_prompts, cfg.prompter_dim, cfg.prompter_layers)
        self.null_prefix = torch.nn.Parameter(torch.zeros(1, cfg.n_prompts, lm.d_model)) \
            if "lm_pretrain" in stages else None
        self.register_buffer("memory", torch.from_numpy(np.ascontiguousarray(data.text_emb, np.float32))
                             if cfg.system == "text_only" else torch.zeros(0))

    def embed_video(self, z: torch.Tensor) -> torch.Tensor:
        """The frozen video-text model's embedding of latents: the trained tower, or CLIP over VAE frames."""
        if self.head is not None:
            return self.head(z)
        if self.video_text is None:
            raise VlgapError(f"system {self.cfg.system!r} with video_text {self.cfg.video_text!r} needs its video-text "
                             "model: build it with vlgap.wsv.parts.build_video_text and pass video_text=")
        return self.video_text.embed_latents(z)

    @property
    def device(self) -> torch.device:
        return next(self.parameters()).device

    def autocast(self):
        return autocast(self.cfg.dtype, self.device)

    # ---- inference -------------------------------------------------------------------------
    def prompts_from_latents(self, z: torch.Tensor, polish: bool = False) -> torch.Tensor:
        from vlgap.wsv.models import check_latents

        check_latents(z, self.latent_shape[0], "captioner", self.latent_shape[1:])
        if self.cfg.system == "text_only":
            e = self.embed_video(z).float()
            w = torch.softmax(e @ self.memory.T / self.cfg.decap_temperature, dim=-1)
            return self.prompter(torch.nn.functional.normalize(w @ self.memory, dim=-1))
        if polish:
            if self.polisher is None:
                raise VlgapError(f"system {self.cfg.system!r} has no polisher to apply at inference")
            z = self.polisher(z)
        return self.prompter(z)

    @torch.no_grad()
    def caption(self, latents: np.ndarray, polish: bool = False, batch_size: int = 64,
                max_new_tokens: int | None = None, beam: int = 1) -> list[str]:
        """Greedy (beam=1, with a key/value cache) or beam-search captions, batched."""
        batch_size = check_count("batch_size", batch_size, 1, flag="--batch-size", example=64)
        beam = check_count("beam", beam, 1, flag="--beam", example=3)
        max_new_tokens = check_count("max_new_tokens", max_new_tokens, 1, example=40, allow_none=True)
        self.eval()
        out: list[str] = []
        for i in range(0, len(latents), batch_size):
            z = torch.from_numpy(np.ascontiguousarray(latents[i:i + batch_size], np.float32)).to(self.device)
            n_new = max_new_tokens or self.cfg.max_len
            with self.autocast():
                prompts = self.prompts_from_latents(z, polish)
                ids = self.lm.generate(prompts, n_new) if beam <= 1 else self.lm.beam_search(prompts, beam, n_new)
            out.extend(self.lm.tokenizer.decode(r) for r in ids)
        return out


def autocast(dtype: str, device):
    """Mixed precision in `dtype` on the device (float32: off): weights stay float32, matmuls and
    convolutions run in bfloat16 / float16."""
    from vlgap.runtime import parse_dtype, torch_dtype

    dev = torch.device(device)
    return torch.autocast(device_type=dev.type, dtype=torch_dtype(dtype), enabled=parse_dtype(dtype) != "float32")
