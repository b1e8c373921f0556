"""The WSV protocol end to end: data with checked disjointness, cells (generator x system x seed), the
falsifier, tables and the demo report (orchestration; resumable cell by cell through `vlgap.runs`).

World: scenes of the shapes world drawn by seed. Training corpus: the ten captions of each training
scene (text only: the scenes' videos are never rendered for training). Each caption goes through the
text-to-video generator (caption reader + renderer in the generator's style) into a synthetic video and
its latent. Evaluation: other scenes (disjoint by id and by exact caption text, both checked and
reported) rendered in the "real" style, scored against their ten captions. Unlabelled real latents (a
third disjoint scene set) feed only the polisher's optional distribution term. The supervised oracle
ceiling learns from the corpus captions paired with their own scenes rendered in the evaluation style
(never an evaluation scene: checked in hygiene.json); the chance floor gives each evaluation video a
random training caption. Every cell is scored with the caption metrics and the grounded per-attribute
accuracy (each caption read back into a scene spec and checked against the video's true spec) and keeps
its per-stage loss curves; the summary places each text-only system between chance and the oracle.
Every cell's result is sealed in cells/<generator>-<system>-s<seed>.json (the floor:
cells/chance-s<seed>.json); a re-run skips finished cells, and an unfinished cell resumes from its
checkpoint.

The stages, one module each: `config` (systems, defaults, ExperimentConfig), `prepare` (scenes, corpus,
latents), `cells` (training and scoring a cell, the chance floor, cell keys), `inversion` (the T2V
inversion check of each cell), `runner` (`run_experiment`), `summary` (rows, tables, frames).
"""
from vlgap.runs.claims import oversubscription_warning
from vlgap.runs.summaries import t_interval
from vlgap.wsv.convergence import STILL_FALLING, late_fall, validation_curve
from vlgap.wsv.experiment.cells import (CELL_FORMAT, _cell_key, _grounded, _oracle_parts, _read_cell,
                                        _row_cell_key, _trained, _write_cell, bundle_history, chance_cell,
                                        loss_curves, mean_curve, run_cell)
from vlgap.wsv.experiment.config import (CAPTION_STAGE_LR, CAPTION_STEPS, DEFAULT_SYSTEMS, EXPERIMENT_DEFAULTS,
                                         MAX_CAPTION_STEPS, SMOLLM2_TRAIN, SYSTEM_NAMES, TEXT_ONLY_SYSTEMS,
                                         ExperimentConfig, _log_default, split_system, system_label)
from vlgap.wsv.experiment.inversion import (INVERSION_FORMAT, _chance_inversions, _inversion_file,
                                            _inversion_key, _inversions, check_heldout_pairing,
                                            heldout_synthetic_specs, inversion_cell, inversion_result)
from vlgap.wsv.experiment.prepare import (SCENE_SETS, VIDEO_SET_STYLE_SEEDS, Prepared, _hash, _Lazy, embed_captions,
                                          experiment_scenes, prepare, render_set, render_video_set)
from vlgap.wsv.experiment.runner import run_experiment
from vlgap.wsv.experiment.summary import (_ci, _generator_label, _inversion_row, _place, _summary_row, summarise,
                                          summary_frame, summary_html, summary_markdown, summary_tables,
                                          summary_tables_frame)
from vlgap.wsv.parts import LEGACY_MOBILENET_GRID, MOBILENET_GRID, PART_DEFAULTS, SETTING_DEFAULTS

__all__ = [
    "CAPTION_STAGE_LR", "CAPTION_STEPS", "CELL_FORMAT", "DEFAULT_SYSTEMS", "EXPERIMENT_DEFAULTS", "INVERSION_FORMAT",
    "LEGACY_MOBILENET_GRID", "MAX_CAPTION_STEPS", "MOBILENET_GRID", "PART_DEFAULTS", "SCENE_SETS", "SETTING_DEFAULTS",
    "SMOLLM2_TRAIN", "STILL_FALLING", "SYSTEM_NAMES", "TEXT_ONLY_SYSTEMS", "VIDEO_SET_STYLE_SEEDS", "ExperimentConfig",
    "Prepared", "bundle_history", "chance_cell", "check_heldout_pairing", "embed_captions", "experiment_scenes",
    "heldout_synthetic_specs", "inversion_cell", "inversion_result", "late_fall", "loss_curves", "mean_curve",
    "oversubscription_warning", "prepare", "render_set", "render_video_set", "run_cell", "run_experiment",
    "split_system", "summarise", "summary_frame", "summary_html", "summary_markdown", "summary_tables",
    "summary_tables_frame", "system_label", "t_interval", "validation_curve",
    # used by the demo and the tests
    "_cell_key", "_chance_inversions", "_ci", "_generator_label", "_grounded", "_hash", "_inversion_file",
    "_inversion_key", "_inversion_row", "_inversions", "_Lazy", "_log_default", "_oracle_parts", "_place",
    "_read_cell", "_row_cell_key", "_summary_row", "_trained", "_write_cell",
]
