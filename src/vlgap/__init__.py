"""vlgap: how close are vision and language?

The Python API mirrors the CLI. Names are resolved lazily so that `import vlgap` stays fast and
does not import torch until a function that needs it is called.
"""
from __future__ import annotations

import importlib
import importlib.metadata

try:  # one source of truth: the installed distribution's metadata (pyproject.toml's version)
    __version__ = importlib.metadata.version("vlgap")
except importlib.metadata.PackageNotFoundError:  # a source tree on sys.path that was never installed
    __version__ = "0+unknown"

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
    "caption_diversity": "vlgap.probe.caption_diversity:caption_diversity",
    "caption_groups": "vlgap.data.shapes.caption_groups:caption_groups",
    "split_captions": "vlgap.data.split_captions:split_captions",
    "split_caption_scaling": "vlgap.probe.split_scaling:split_caption_scaling",
    "rule_split": "vlgap.data.split_captions:rule_split",
    "check_split": "vlgap.data.split_captions:check_split",
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
    # downstream proxies on frozen features and intrinsic dimension (Dynamic Reflections Fig 2, App. B)
    "downstream_proxies": "vlgap.probe.proxies:downstream_proxies",
    "knn_classify_cv": "vlgap.metrics.proxies:knn_classify_cv",
    "linear_probe_cv": "vlgap.metrics.proxies:linear_probe_cv",
    "weighted_knn_predict": "vlgap.metrics.proxies:weighted_knn_predict",
    "retrieval_scores": "vlgap.metrics.proxies:retrieval_scores",
    "intrinsic_dimension": "vlgap.metrics.intrinsic_dim:intrinsic_dimension",
    "run_intrinsic_dimension": "vlgap.probe.intrinsic:run_intrinsic_dimension",
    "write_report": "vlgap.probe.report:write_report",
    # issue 22 items 1-2: caption draws and frame-sampling strategies
    "draw_captions": "vlgap.data.sampling:draw_captions",
    "combine_draws": "vlgap.metrics.draws:combine_draws",
    "sample_frames": "vlgap.data.sampling:sample_frames",
    "keyframe_info": "vlgap.data.video:keyframe_info",
    # distribution gap
    "gap": "vlgap.stats.gap:gap",
    "mmd2": "vlgap.stats.mmd:mmd2",
    "compare": "vlgap.stats.paired:compare",
    "mmd_test": "vlgap.stats.mmd:mmd_test",
    "c2st": "vlgap.stats.c2st:c2st",
    "frechet_distance": "vlgap.stats.frechet:frechet_distance",
    "witness": "vlgap.stats.witness:witness",
    "bootstrap_ci": "vlgap.stats.resampling:bootstrap_ci",
    "sign_flip_inference": "vlgap.stats.resampling:sign_flip_inference",
    # prompt enhancer (CAPE-T2V)
    "SixPart": "vlgap.cape.schema:SixPart",
    "parse_six": "vlgap.cape.schema:parse_six",
    "format_six": "vlgap.cape.schema:format_six",
    "get_operator": "vlgap.cape.operators:get_operator",
    "cape_rewrite": "vlgap.cape.operators:rewrite",
    "cape_train": "vlgap.cape.lm:train_lora",
    "cape_load_lm": "vlgap.cape.lm:load_lm",
    "cape_load_trained": "vlgap.cape.lm:load_trained",
    "cape_experiment": "vlgap.cape.experiment:run_experiment",
    "cape_two_by_two": "vlgap.cape.analysis:two_by_two",
    "cape_scores": "vlgap.cape.scores:analyse_scores",
    "cape_load_scores": "vlgap.cape.scores:load_cells",
    "cape_controls": "vlgap.cape.controls:controls_from_run",
    "surface_overlap": "vlgap.cape.controls:surface_overlap",
    "caption_set_permutation_test": "vlgap.cape.controls:caption_set_permutation_test",
    "witness_regression": "vlgap.cape.controls:witness_regression",
    "PrecomputedOperator": "vlgap.cape.operators:PrecomputedOperator",
    "OpenAICompatibleOperator": "vlgap.cape.operators:OpenAICompatibleOperator",
    "score_attributes": "vlgap.cape.generator:score_attributes",
    # caption metrics
    "caption_eval": "vlgap.captions.evaluate:caption_eval",
    "compare_captions": "vlgap.captions.evaluate:compare_captions",
    "ptb_tokenize": "vlgap.captions.ptb_tokenize:ptb_tokenize",
    "metric_agreement": "vlgap.captions.human:metric_agreement",
    "load_clip": "vlgap.captions.clip_model:load_clip",
    "build_bertscore_baseline": "vlgap.captions.bertscore:build_baseline",
    # text-only video captioning after WSV
    "read_caption": "vlgap.wsv.reader:read_caption",
    "wsv_train": "vlgap.wsv.api:train_system",
    "wsv_caption": "vlgap.wsv.api:caption_manifest",
    "wsv_eval": "vlgap.wsv.api:evaluate_predictions",
    "wsv_gap": "vlgap.wsv.api:gap_for_model",
    "wsv_invert": "vlgap.wsv.api:invert_model",
    "wsv_demo": "vlgap.wsv.report:run_demo",
    "wsv_experiment": "vlgap.wsv.experiment:run_experiment",
    "wsv_latent_gap": "vlgap.wsv.evaluate:latent_gap",
    "wsv_grounded_score": "vlgap.wsv.evaluate:grounded_score",
}

__all__ = sorted(_API) + ["__version__"]


def __getattr__(name: str):
    target = _API.get(name)
    if target is None:
        raise AttributeError(f"module 'vlgap' has no attribute {name!r}")
    module_name, attr = target.split(":")
    value = getattr(importlib.import_module(module_name), attr)
    if callable(value) and not isinstance(value, type):
        # the door of the Python API: arguments checked against the type hints first, one line naming the
        # argument and what would be valid (vlgap.arguments), as the CLI checks its options
        from vlgap.arguments import checked

        value = checked(value, name)
    globals()[name] = value
    return value


def __dir__():
    return __all__
