"""A WSV training run's configuration: the systems, their stages, and every setting (WSVConfig).

Systems: "wsv" (polished synthetic latents -> prompter -> LM), "wsv_mmd" (polisher also matched to
unlabelled real latents), "no_polisher" (raw synthetic latents), "frozen_lm" (LM pretrained on the
corpus, then frozen), "text_only" (caption embedding + Gaussian noise -> prefix MLP -> LM, CapDec-style),
"oracle" (the supervised ceiling: the no-polisher captioner on latents of each caption's own video).
See vlgap.wsv.train for how the stages run.
"""
from __future__ import annotations

from dataclasses import dataclass

from vlgap.counts import check_count
from vlgap.errors import VlgapError
from vlgap.wsv.parts import CAPTION_LR, PART_DEFAULTS, SETTING_DEFAULTS

#: version of checkpoint.pt / model.pt keys: a change makes older checkpoints start over
WSV_FORMAT = 2

SYSTEMS = ("wsv", "wsv_mmd", "no_polisher", "frozen_lm", "text_only", "oracle")
STAGES = {"wsv": ("head", "polisher", "caption"), "wsv_mmd": ("head", "polisher", "caption"),
          "no_polisher": ("caption",), "frozen_lm": ("head", "polisher", "lm_pretrain", "caption"),
          "text_only": ("head", "caption"),
          # supervised ceiling: the same prompter + LM on latents of the captions' own real-style videos
          "oracle": ("caption",)}


@dataclass
class WSVConfig:
    system: str = "wsv"
    seed: int = 0
    head_steps: int = 300
    polisher_steps: int = 300
    lm_pretrain_steps: int = 400
    caption_steps: int = 800
    batch_size: int = 32
    lr: float = CAPTION_LR
    head_lr: float = 1e-3
    polisher_lr: float = 5e-4
    n_prompts: int = 8
    prompter_dim: int = 64
    prompter_layers: int = 2
    polisher_hidden: int = 32
    polisher_blocks: int = 2
    lm: str = SETTING_DEFAULTS["lm"]  # scratch | smollm2 | hf:<hub id or folder> (a bare folder: the older spelling)
    lm_layers: int = 3
    lm_dim: int = 128
    lm_heads: int = 4
    lora_r: int | None = SETTING_DEFAULTS["lora_r"]  # pretrained LMs: LoRA rank, 0 trains every weight (default: 0 for hf:, 8 otherwise)
    video_text: str = PART_DEFAULTS["video_text"]  # the polisher's frozen video-text model: latent-tower (stage head) | clip
    dtype: str = SETTING_DEFAULTS["dtype"]  # compute dtype of every model (trained modules: autocast over float32 weights)
    mmd_weight: float = 0.0  # wsv_mmd: weight of the distribution term
    noise_std: float = 0.025  # text_only: per-dimension noise on unit caption embeddings (noise norm ~0.5)
    decap_temperature: float = 0.01
    temperature: float = 0.07
    max_len: int = 48
    checkpoint_every: int = 100
    # caption stage: the loss on held-out pairs (TrainData.val_*) every val_every steps, recorded in the
    # history as ("val", step, loss); 0: never (nothing is recorded without held-out pairs either)
    val_every: int = 50
    # with validation pairs: the caption stage ends with the weights of its validation step of lowest loss
    # (early stopping by the best checkpoint; the history keeps every step)
    keep_best: bool = True
    # caption stage, with validation pairs: above caption_steps, train on past caption_steps until the held-out
    # loss has converged (its lowest point improved by at most STILL_FALLING over the last fifth of the steps
    # so far, checked at each validation: vlgap.wsv.convergence), at most this many steps; 0: exactly
    # caption_steps
    max_caption_steps: int = 0

    def __post_init__(self):
        if self.system not in SYSTEMS:
            raise VlgapError(f"unknown system {self.system!r}; valid: {', '.join(SYSTEMS)}")
        # a stage of this system with no steps would write an untrained model; unused stages may be 0
        from vlgap.runtime import parse_dtype
        from vlgap.wsv.lm import check_lm_spec

        check_lm_spec(self.lm)
        self.dtype = parse_dtype(self.dtype)  # canonical: bf16 and bfloat16 train (and key) one model
        if self.video_text not in ("latent-tower", "clip"):
            raise VlgapError(f"video_text {self.video_text!r} is not valid; valid: latent-tower, clip")
        if self.lora_r is None:  # the paper fine-tunes GPT-2 fully; the bundled SmolLM2 keeps its LoRA default
            self.lora_r = 0 if self.lm.startswith("hf:") else 8
        for stage in ("head", "polisher", "lm_pretrain", "caption"):
            name = f"{stage}_steps"
            used = stage in self.stages()
            setattr(self, name, check_count(name, getattr(self, name), 1 if used else 0,
                                            flag="--" + name.replace("_", "-"), example=300))
        for name, minimum, example in (("batch_size", 1, 32), ("checkpoint_every", 1, 100), ("n_prompts", 1, 8),
                                       ("prompter_dim", 1, 64), ("prompter_layers", 1, 2),
                                       ("polisher_hidden", 1, 32), ("polisher_blocks", 0, 2), ("lm_layers", 1, 3),
                                       ("lm_dim", 1, 128), ("lm_heads", 1, 4), ("lora_r", 0, 8), ("max_len", 4, 48),
                                       ("val_every", 0, 50), ("max_caption_steps", 0, 6000)):
            setattr(self, name, check_count(name, getattr(self, name), minimum,
                                            flag="--" + name.replace("_", "-"), example=example))
        if self.max_caption_steps and self.max_caption_steps < self.caption_steps:
            raise VlgapError(f"max_caption_steps {self.max_caption_steps} is below caption_steps {self.caption_steps}: "
                             "give at least caption_steps (training goes on past it until converged), or 0")
        if self.max_caption_steps and not self.val_every:
            raise VlgapError("max_caption_steps needs val_every > 0: convergence is judged on the held-out loss")
        if self.system == "wsv_mmd" and self.mmd_weight <= 0:
            self.mmd_weight = 1.0

    def stages(self) -> tuple[str, ...]:
        """The system's stages; a pretrained video-text model (clip) replaces the trained tower (head)."""
        if self.video_text != "latent-tower":
            return tuple(s for s in STAGES[self.system] if s != "head")
        return STAGES[self.system]

    def steps_of(self, stage: str) -> int:
        return {"head": self.head_steps, "polisher": self.polisher_steps, "lm_pretrain": self.lm_pretrain_steps,
                "caption": self.caption_steps}[stage]
