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

import time
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
from vlgap.probe.frame_order import run_frame_order, write_frame_order_section
from vlgap.probe.reorder import run_reorder, write_reorder_section
from vlgap.probe.test_of_time import (RELATION_LABELS, analyse_test_of_time, run_test_of_time,
                                      write_test_of_time_section)
from vlgap.progress import stderr_console

__all__ = [
    "RELATIONS", "RELATION_LABELS", "TIE_TOLERANCE", "FeatureOptions", "FeatureSource", "KnnCondition",
    "PairedDifference", "ReorderTriple", "Space", "analyse_test_of_time", "compare_conditions",
    "cosine_similarities", "frame_order_difference", "nearest_related", "read_reorder_json", "reorder_drop",
    "reorder_triples", "run_cross_alignment", "run_frame_order", "run_reorder", "run_temporal_sections",
    "run_test_of_time", "tie_aware_mutual_knn", "tie_aware_neighbours", "tot_alignment",
    "tot_alignment_from_sims", "tot_dataset", "write_frame_order_section", "write_reorder_section",
    "write_test_of_time_section",
]


def run_temporal_sections(cfg, result=None, progress: bool = True, encoders: dict[str, Any] | None = None,
                          n_bootstrap: int | None = None) -> dict[str, Any]:
    """Called by `vlgap demo` after the sweep: Test of Time, reorder and frame-order sections (and the
    vision x vision matrix when there are two or more vision encoders), written under cfg.out. Sized for
    the demo: n_f = 8 (or the largest swept n_f below it), cached features reused, each encoder loaded at
    most once, frame-order controls of image encoders checked on a few videos."""
    out = Path(cfg.out)
    n_f = max([v for v in cfg.n_frames if v <= 8] or [min(cfg.n_frames)])
    n_c = max(cfg.n_captions)
    boot = n_bootstrap if n_bootstrap is not None else max(200, int(getattr(cfg, "n_bootstrap", 200)))
    src = FeatureSource(FeatureOptions(cache_dir=cfg.cache_dir, device=cfg.device, dtype=cfg.dtype,
                                       text_dtype=getattr(cfg, "text_dtype", None),
                                       image_size=cfg.image_size, progress=progress,
                                       temporal_pooling=getattr(cfg, "temporal_pooling", "mean"),
                                       random_weights=bool(getattr(cfg, "random_weights", False))),
                       encoders=encoders)
    timings: dict[str, float] = {}
    summary: dict[str, Any] = {}
    manifest = cached_shapes_manifest(cfg.n_videos, cfg.seed, cfg.n_frames_per_video, cfg.video_size, cfg.cache_dir,
                                      log=stderr_console.print)

    t = time.perf_counter()
    summary["test_of_time"] = run_test_of_time(cfg.vision, cfg.text, n_f=n_f, seed=cfg.seed, out=out, features=src,
                                               n_bootstrap=max(boot, 1000))
    timings["test_of_time"] = time.perf_counter() - t
    t = time.perf_counter()
    summary["reorder"] = run_reorder(manifest, cfg.vision, cfg.text, n_f=n_f, k=5, n_bootstrap=boot, seed=cfg.seed,
                                     out=out, features=src)
    timings["reorder"] = time.perf_counter() - t
    t = time.perf_counter()
    summary["frame_order"] = run_frame_order(manifest, cfg.vision, cfg.text, n_f=n_f, n_c=n_c, k=cfg.k,
                                             n_bootstrap=boot, seed=cfg.seed, image_check_items=16, out=out,
                                             features=src)
    timings["frame_order"] = time.perf_counter() - t
    if len(cfg.vision) >= 2:
        t = time.perf_counter()
        summary["cross_vision"] = run_cross_alignment(manifest, cfg.vision, n_f=n_f, k=cfg.k, n_bootstrap=boot,
                                                      seed=cfg.seed, out=out, features=src)
        timings["cross_vision"] = time.perf_counter() - t
    summary["seconds"] = {name: round(s, 1) for name, s in timings.items()}
    atomic_write_json(out / "temporal" / "summary.json", summary)
    stderr_console.print("temporal sections: " + ", ".join(f"{k} {v:.0f} s" for k, v in summary["seconds"].items()))
    return summary
