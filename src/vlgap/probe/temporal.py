"""Does alignment see temporal order? Three probes (Dynamic Reflections sec. 8) plus the controls the
paper lacked, each reported with N and an interval, and `run_temporal_sections`, which runs them all
for `vlgap demo`.

1. Test of Time (`vlgap.probe.test_of_time`): tie-aware mutual k-NN at k = 1, 2, 3 on the 180
   generated items and which related caption each space ranks nearest (`vlgap.metrics.ties`).
2. Reorder (`vlgap.probe.reorder`, VideoComp style): positives against negatives that tell the same
   events in another order (`vlgap.data.reorder` reads the triples; `vlgap.metrics.conditions`
   bootstraps the paired drop).
3. Frame order (`vlgap.probe.frame_order`): ordered frames against reversed or shuffled frames.

The names of those modules are re-exported here, so `from vlgap.probe.temporal import X` keeps working.
"""
from __future__ import annotations

from concurrent.futures import Future
from pathlib import Path
from typing import Any

from vlgap.data.reorder import ReorderTriple, read_reorder_json, reorder_triples
from vlgap.data.shapes import cached_shapes_manifest
from vlgap.data.test_of_time import RELATIONS, tot_dataset
from vlgap.features.source import FeatureOptions, FeatureSource
from vlgap.io_utils import atomic_write_json
from vlgap.metrics.conditions import (KnnCondition, PairedDifference, Space, compare_conditions,
                                      frame_order_difference, reorder_drop)
from vlgap.metrics.ties import (TIE_TOLERANCE, cosine_similarities, nearest_related, tie_aware_mutual_knn,
                                tie_aware_neighbours, tot_alignment, tot_alignment_from_sims)
from vlgap.probe.cross_model import run_cross_alignment
from vlgap.probe.frame_order import (finish_frame_order, frame_order_features, run_frame_order,
                                     write_frame_order_section)
from vlgap.probe.reorder import finish_reorder, reorder_features, run_reorder, write_reorder_section
from vlgap.probe.test_of_time import (RELATION_LABELS, analyse_test_of_time, finish_tot, run_test_of_time, tot_features,
                                      write_test_of_time_section)
from vlgap.progress import stderr_console
from vlgap.stage_times import stage

__all__ = [
    "RELATIONS", "RELATION_LABELS", "TIE_TOLERANCE", "FeatureOptions", "FeatureSource", "KnnCondition",
    "PairedDifference", "ReorderTriple", "Space", "analyse_test_of_time", "compare_conditions",
    "cosine_similarities", "frame_order_difference", "nearest_related", "read_reorder_json", "reorder_drop",
    "finish_temporal_sections", "reorder_triples", "run_cross_alignment", "run_frame_order", "run_reorder",
    "run_temporal_sections", "temporal_features",
    "run_test_of_time", "tie_aware_mutual_knn", "tie_aware_neighbours", "tot_alignment",
    "tot_alignment_from_sims", "tot_dataset", "write_frame_order_section", "write_reorder_section",
    "write_test_of_time_section",
]


def run_temporal_sections(cfg, result=None, progress: bool = True, encoders: dict[str, Any] | None = None,
                          n_bootstrap: int | None = None) -> dict[str, Any]:
    """Called by `vlgap demo` after the sweep: Test of Time, reorder and frame-order sections (and the
    vision x vision matrix when there are two or more vision encoders), written under cfg.out. Sized for
    the demo: n_f = 8 (or the largest swept n_f below it), cached features reused, each encoder loaded at
    most once, frame-order controls of image encoders checked on a few videos. The two halves,
    `temporal_features` (every forward pass) and `finish_temporal_sections` (analyses, figures), may run
    apart: `vlgap demo` runs the second side by side with the sweep's cells (vlgap.side_work)."""
    return finish_temporal_sections(cfg, temporal_features(cfg, progress=progress, encoders=encoders),
                                    n_bootstrap=n_bootstrap)


def _demo_n(cfg) -> tuple[int, int]:
    """The sections' n_f (8, or the largest swept n_f below it) and n_c (the largest swept)."""
    return max([v for v in cfg.n_frames if v <= 8] or [min(cfg.n_frames)]), max(cfg.n_captions)


def temporal_features(cfg, progress: bool = True, encoders: dict[str, Any] | None = None) -> dict[str, Any]:
    """Every feature the demo's temporal sections analyse (extracted, or read from the cache)."""
    n_f, n_c = _demo_n(cfg)
    src = FeatureSource(FeatureOptions(cache_dir=cfg.cache_dir, device=cfg.device, dtype=cfg.dtype,
                                       text_dtype=getattr(cfg, "text_dtype", None),
                                       image_size=cfg.image_size, progress=progress,
                                       temporal_pooling=getattr(cfg, "temporal_pooling", "mean"),
                                       random_weights=bool(getattr(cfg, "random_weights", False))),
                       encoders=encoders)
    manifest = cached_shapes_manifest(cfg.n_videos, cfg.seed, cfg.n_frames_per_video, cfg.video_size, cfg.cache_dir,
                                      log=stderr_console.print)
    out: dict[str, Any] = {"src": src, "manifest": manifest}
    with stage("temporal: test of time, features"):
        out["test_of_time"] = tot_features(cfg.vision, cfg.text, n_f=n_f, seed=cfg.seed, features=src)
    with stage("temporal: reorder, features"):
        out["reorder"] = reorder_features(manifest, cfg.vision, cfg.text, n_f=n_f, features=src)
    with stage("temporal: frame order, features"):
        out["frame_order"] = frame_order_features(manifest, cfg.vision, cfg.text, n_f=n_f, n_c=n_c,
                                                  image_check_items=16, features=src)
    return out


def finish_temporal_sections(cfg, inputs: dict[str, Any], n_bootstrap: int | None = None,
                             submit=None) -> dict[str, Any]:
    """The sections' analyses, JSON files and report sections from `temporal_features`' output, and
    out/temporal/summary.json. `submit(fn, *args, **kwargs) -> Future` (e.g. a side pool's) runs them
    side by side; none: one after another, here."""
    out = Path(cfg.out)
    n_f, _ = _demo_n(cfg)
    boot = n_bootstrap if n_bootstrap is not None else max(200, int(getattr(cfg, "n_bootstrap", 200)))
    submit = submit or _now
    sections = {
        "test_of_time": submit(_timed, "temporal: test of time", finish_tot, inputs["test_of_time"],
                               n_bootstrap=max(boot, 1000), seed=cfg.seed, out=out),
        "reorder": submit(_timed, "temporal: reorder", finish_reorder, inputs["reorder"], k=5, n_bootstrap=boot,
                          seed=cfg.seed, out=out),
        "frame_order": submit(_timed, "temporal: frame order", finish_frame_order, inputs["frame_order"], k=cfg.k,
                              n_bootstrap=boot, seed=cfg.seed, out=out)}
    if len(cfg.vision) >= 2:  # the sweep's features (cached): no encoder runs
        sections["cross_vision"] = submit(_timed, "temporal: vision x vision", run_cross_alignment,
                                          inputs["manifest"], cfg.vision, n_f=n_f, k=cfg.k, n_bootstrap=boot,
                                          seed=cfg.seed, out=out, features=inputs["src"])
    summary: dict[str, Any] = {name: fut.result() for name, fut in sections.items()}
    summary["seconds"] = {name: round(float(summary[name].get("seconds", 0.0)), 1) for name in sections}
    atomic_write_json(out / "temporal" / "summary.json", summary)
    stderr_console.print("temporal sections: " + ", ".join(f"{k} {v:.0f} s" for k, v in summary["seconds"].items()))
    return summary


def _timed(name: str, fn, *args, **kwargs):
    with stage(name):
        return fn(*args, **kwargs)


def _now(fn, *args, **kwargs) -> Future:
    """fn's result as a finished Future: run here, now (an error stops the sections at once)."""
    fut: Future = Future()
    fut.set_result(fn(*args, **kwargs))
    return fut
