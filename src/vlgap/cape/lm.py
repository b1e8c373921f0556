"""Causal LMs for the prompt enhancer, by the names they always had: loading (`vlgap.encoders.causal_lm`,
the one causal-LM loader), label-forced six-part decoding (`vlgap.cape.decoding`) and supervised
fine-tuning (`vlgap.cape.finetune`). Device and dtype: `vlgap.runtime` (docs/models.md#devices-and-dtypes).
"""
from __future__ import annotations

from vlgap.cape.decoding import (BUDGET_FACTOR, BUDGET_SLACK, FIELD_BUDGET, PROMPT_PREFIX, REPEAT_LIMIT,  # noqa: F401
                                 REPEAT_NGRAM, Decoded, LabelForcer, _parse_checked, budgets_from_targets, ensure_pad,
                                 failure_reason, generate_six, token_classes)
from vlgap.cape.finetune import (LORA_ALPHA, LORA_LAYERS_HELP, LORA_MODULES, LORA_MODULES_HELP,  # noqa: F401
                                 SFT_FORMAT, _check_trained_files, _layer_indices, _precision, _spread, check_folder,
                                 check_lora_targets, collate, encode_pairs, load_adapter, load_trained, lora_model,
                                 parse_lora_layers, parse_lora_modules, seal_folder, sft_key, sft_prompt, train_lora,
                                 trained_pe)
from vlgap.encoders.causal_lm import BUNDLED, LoadedLM, lm_source, load_lm, model_device  # noqa: F401
from vlgap.encoders.causal_lm import bundled_folder as _bundled_folder  # noqa: F401
from vlgap.runtime import DTYPE_HELP as _DTYPE_WORDS, SPREAD_DEVICE_HELP as DEVICE_HELP  # noqa: F401

DTYPE_HELP = f"{_DTYPE_WORDS}: the LM's weights for SFT and rewriting"
