"""dr-full sections of issue 22 items 5 and 6 (registered with vlgap.probe.dr_full):
70_downstream (weighted k-NN and linear probes on the shapes videos' spec labels, per encoder and per layer,
correlated with alignment) and 71_intrinsic_dimension (d_v per layer and the sweep's alpha vs 2 / d_v).
Both reuse the demo's cached shapes videos and features (same FeatureOptions as the demo sweep)."""
from __future__ import annotations

from pathlib import Path

from vlgap.probe.dr_full import section

#: shapes-world labels for the proxies: the scene's backdrop (18 classes), the first object's shape (8)
#: and the first event's kind (an "action" class, like Kinetics / SSv2)
DEMO_LABELS = ("background", "shape", "first_event")


def _source(cfg, progress: bool):
    from vlgap.features.source import FeatureOptions, FeatureSource

    return FeatureSource(FeatureOptions(cache_dir=cfg.cache_dir, device=cfg.device, dtype=cfg.dtype,
                                       text_dtype=getattr(cfg, "text_dtype", None),
                                        image_size=cfg.image_size, progress=progress,
                                        temporal_pooling=getattr(cfg, "temporal_pooling", "mean"),
                                        random_weights=bool(getattr(cfg, "random_weights", False))))


def _manifest(cfg):
    from vlgap.data.shapes import cached_shapes_manifest
    from vlgap.progress import say

    return cached_shapes_manifest(cfg.n_videos, cfg.seed, cfg.n_frames_per_video, cfg.video_size, cfg.cache_dir, log=say)


def _n_f(cfg) -> int:
    return max([v for v in cfg.n_frames if v <= 8] or [min(cfg.n_frames)])


@section("70_downstream")
def downstream_section(cfg, result, progress: bool = True) -> None:
    from vlgap.probe.proxies import downstream_proxies, write_proxies_section

    res = downstream_proxies(_manifest(cfg), list(cfg.vision), cfg.text[-1], task="knn-classify,linear-probe",
                             labels=list(DEMO_LABELS), n_f=_n_f(cfg), n_c=max(cfg.n_captions),
                             alignment_k=min(cfg.k, 10), n_bootstrap=min(max(cfg.n_bootstrap, 100), 500),
                             seed=cfg.seed, features=_source(cfg, progress))
    write_proxies_section(res, Path(cfg.out))


@section("71_intrinsic_dimension")
def intrinsic_section(cfg, result, progress: bool = True) -> None:
    from vlgap.probe.intrinsic import run_intrinsic_dimension

    run_intrinsic_dimension(_manifest(cfg), list(cfg.vision), n_f=_n_f(cfg), method="twonn", sweep_dir=cfg.out,
                            n_bootstrap=200, seed=cfg.seed, features=_source(cfg, progress), out=cfg.out)
