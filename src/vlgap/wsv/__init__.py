"""Text-only video captioning after WSV: captions -> synthetic videos -> latents -> polisher -> prompter -> LM.

Layers (imports point down): pure torch modules and losses (`models`), adapters (`reader` and `generate`:
text-to-video; `latents`: MobileNet / diffusers VAE latents and the atomic cache; `parts`: the generator,
latent encoder and video-text model chosen by spec strings, their records and the per-caption generation
cache; `lm`: tokenizers, transformers, peft),
orchestration (`train`: stages, checkpoints, resume; `evaluate`: scores and the
falsifier; `experiment`: the protocol; `report`: the demo), and `api` behind `vlgap wsv` (cli/wsv.py).
"""
