"""vlgap: how close are vision and language?

The Python API mirrors the CLI. Names are resolved lazily so that `import vlgap` stays fast and
does not import torch until a function that needs it is called.
"""
from __future__ import annotations

import importlib

__version__ = "0.1.0"

# public name -> "module:attribute"
_API = {
    # alignment probe (metrics on arrays, layer search, scaling law)
    "align": "vlgap.metrics.layer_search:align",
    "layer_search": "vlgap.metrics.layer_search:layer_search",
    "precompute_layers": "vlgap.metrics.layer_search:precompute_layers",
    "prepare_features": "vlgap.metrics.prepare:prepare_features",
    "read_layers": "vlgap.features.arrays:read_layers",
    "fit_scaling": "vlgap.scaling:fit_scaling",
    # datasets and features
    "read_manifest": "vlgap.data.manifest:read_manifest",
    "import_dataset": "vlgap.data.importers:import_dataset",
    "import_vatex": "vlgap.data.importers:import_vatex",
    "import_msrvtt": "vlgap.data.importers:import_msrvtt",
    "import_msvd": "vlgap.data.importers:import_msvd",
    "extract": "vlgap.features.extract:extract",
    "reuse_freed_memory": "vlgap.memory:reuse_freed_memory",
    "load_features": "vlgap.features.extract:load_features",
    "check_cache": "vlgap.cache_check:check_cache",
    "pool_frames": "vlgap.features.temporal_pooling:pool_frames",
    "get_encoder": "vlgap.encoders.registry:get_encoder",
    "list_encoders": "vlgap.encoders.registry:list_encoders",
    "hf_families": "vlgap.encoders.hf_families:family_table",
    "generate_shapes": "vlgap.data.shapes:generate_shapes",
    "generate_test_of_time": "vlgap.data.test_of_time:generate_test_of_time",
    "write_real_manifest": "vlgap.data.real:write_real_manifest",
    "render_scene": "vlgap.data.shapes:render",
    "spec_from_dict": "vlgap.data.shapes:spec_from_dict",
    "write_captions": "vlgap.data.shapes:write_captions",
    "sweep": "vlgap.probe.sweep:run_sweep",
    "test_of_time": "vlgap.probe.test_of_time:run_test_of_time",
    "reorder_probe": "vlgap.probe.reorder:run_reorder",
    "frame_order_controls": "vlgap.probe.frame_order:run_frame_order",
    "reorder_drop": "vlgap.metrics.conditions:reorder_drop",
    "frame_order_difference": "vlgap.metrics.conditions:frame_order_difference",
    "read_reorder_json": "vlgap.data.reorder:read_reorder_json",
    "FeatureOptions": "vlgap.features.source:FeatureOptions",
    "FeatureSource": "vlgap.features.source:FeatureSource",
    "cross_alignment": "vlgap.probe.cross_model:cross_alignment",
    "cross_vision": "vlgap.probe.cross_model:run_cross_alignment",
    # the paper's cross-model figures (Figs 7, 10, 11, 12) from a sweep
    "cross_model_figures": "vlgap.probe.cross_model_report:run_cross_model_figures",
    "caption_gain_fit": "vlgap.probe.cross_figures:caption_gain_fit",
    "best_score_matrix": "vlgap.probe.cross_figures:best_score_matrix",
    "best_n_f": "vlgap.probe.cross_figures:best_n_f",
    "fit_line": "vlgap.stats.line_fit:fit_line",
    "downstream": "vlgap.probe.downstream:downstream",
    "holm": "vlgap.probe.downstream:holm",
    "loo_linear": "vlgap.probe.downstream:loo_linear",
    "write_report": "vlgap.probe.report:write_report",
    # distribution gap
    "gap": "vlgap.stats.gap:gap",
    "mmd2": "vlgap.stats.mmd:mmd2",
    "compare": "vlgap.stats.paired:compare",
    "mmd_test": "vlgap.stats.mmd:mmd_test",
    "c2st": "vlgap.stats.c2st:c2st",
    "frechet_distance": "vlgap.stats.frechet:frechet_distance",
    "witness": "vlgap.stats.witness:witness",
    "bootstrap_ci": "vlgap.stats.resampling:bootstrap_ci",
    # prompt enhancer (CAPE-T2V)
    "SixPart": "vlgap.cape.schema:SixPart",
    "parse_six": "vlgap.cape.schema:parse_six",
    "format_six": "vlgap.cape.schema:format_six",
    "get_operator": "vlgap.cape.operators:get_operator",
    "cape_rewrite": "vlgap.cape.operators:rewrite",
    "cape_train": "vlgap.cape.lm:train_lora",
    "cape_experiment": "vlgap.cape.experiment:run_experiment",
    "cape_two_by_two": "vlgap.cape.analysis:two_by_two",
    "score_attributes": "vlgap.cape.generator:score_attributes",
    # caption metrics
    "caption_eval": "vlgap.captions.evaluate:caption_eval",
    "compare_captions": "vlgap.captions.evaluate:compare_captions",
    "ptb_tokenize": "vlgap.captions.ptb_tokenize:ptb_tokenize",
    # text-only video captioning after WSV
    "read_caption": "vlgap.wsv.reader:read_caption",
    "wsv_train": "vlgap.wsv.api:train_system",
    "wsv_caption": "vlgap.wsv.api:caption_manifest",
    "wsv_eval": "vlgap.wsv.api:evaluate_predictions",
    "wsv_gap": "vlgap.wsv.api:gap_for_model",
    "wsv_demo": "vlgap.wsv.report:run_demo",
    "wsv_experiment": "vlgap.wsv.experiment:run_experiment",
    "wsv_latent_gap": "vlgap.wsv.evaluate:latent_gap",
}

__all__ = sorted(_API) + ["__version__"]


def __getattr__(name: str):
    target = _API.get(name)
    if target is None:
        raise AttributeError(f"module 'vlgap' has no attribute {name!r}")
    module_name, attr = target.split(":")
    value = getattr(importlib.import_module(module_name), attr)
    globals()[name] = value
    return value


def __dir__():
    return __all__
