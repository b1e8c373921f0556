"""CAPE-T2V prompt enhancer: six-part schema (schema), shapes-world data (world), LMs with label-forced
decoding and LoRA SFT (lm), operators with a resumable cache (operators), a scoreable generator
(generator), the 2x2 analysis (analysis), the experiment (experiment), diffusers helpers (diffusion)."""
