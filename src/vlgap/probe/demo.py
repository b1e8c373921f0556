"""The main job (`make demo` / `vlgap demo`): the whole probe on the embedded default data.

Generates the procedural shapes videos (cached), extracts every layer of two real ImageNet encoders on
frames and two real language models on captions, sweeps n_f x n_c, fits the scaling law and writes
the report. Sized to finish within 10 minutes on a 2-core CPU from a clean cache; bigger runs come
from options or a TOML config (see `DemoConfig` fields).
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from vlgap.errors import VlgapError
from vlgap.keywords import renamed_fields
from vlgap.probe.sweep import SweepConfig
from vlgap.progress import counter, say
from vlgap.provenance import api_call
from vlgap.stage_times import stage


#: demo config keys that were renamed (TOML files and DemoConfig(...) keywords)
RENAMED_KEYS = {"bootstrap": "n_bootstrap", "permutations": "n_permutations"}


#: demo presets: the core probe, or the core plus the rest of Dynamic Reflections (probe/dr_full.py)
DEMO_PRESETS = ("default", "dr-full")


@renamed_fields(**RENAMED_KEYS)
@dataclass
class DemoConfig:
    n_videos: int = 192
    seed: int = 0
    n_frames_per_video: int = 32
    video_size: int = 128
    vision: list[str] = field(default_factory=lambda: ["mobilenet_v2", "efficientnet_lite0"])
    text: list[str] = field(default_factory=lambda: ["minilm", "smollm2"])
    n_frames: list[int] = field(default_factory=lambda: [1, 2, 4, 8])
    n_captions: list[int] = field(default_factory=lambda: [1, 2, 4, 8])
    k: int = 10
    metric: str = "mutual_knn"
    n_bootstrap: int = 200
    n_permutations: int = 200
    image_size: int | None = 160
    #: image encoders on video: mean | segments:S | meandiff (vlgap.features.temporal_pooling)
    temporal_pooling: str = "mean"
    device: str = "cpu"
    #: the vision encoders' number format (float32: their features exactly as the encoders compute them)
    dtype: str = "float32"
    #: the text encoders' number format: auto (vlgap.runtime.resolve_dtype, against `device` when the run
    #: starts): bfloat16 where the device computes it natively (SmolLM2 is most of the demo's compute and
    #: runs several times faster in bfloat16 on CPUs with AMX or AVX512-BF16), else float32 (bfloat16 is
    #: emulated there, several times slower); float32 | bfloat16 | float16 set it; None: `dtype`
    text_dtype: str | None = "auto"
    temporal: bool = True
    out: str = "runs/demo"
    cache_dir: str | None = None
    #: every encoder with random weights (speed tests only; labelled "random weights" everywhere)
    random_weights: bool = False
    #: "default" (the core probe) or "dr-full" (plus the rest of Dynamic Reflections: probe/dr_full.py)
    preset: str = "default"
    #: R random draws of each item's n_c captions, scores averaged (1: the first n_c, the paper)
    caption_draws: int = 1
    #: frame-sampling strategies run side by side: uniform (the paper) | random | stride:S | keyframes
    frame_sampling: list[str] = field(default_factory=lambda: ["uniform"])

    def check(self) -> "DemoConfig":
        """Counts checked before anything runs (one-line errors naming the key)."""
        from vlgap.counts import check_count, count_list, name_list

        for name in ("n_frames", "n_captions"):  # a string is a comma list, never its characters
            setattr(self, name, count_list(name, getattr(self, name), 1))
        for name in ("vision", "text"):
            setattr(self, name, name_list(name, getattr(self, name), example="mobilenet_v2,minilm"))
        for name, minimum in (("n_videos", 1), ("n_frames_per_video", 1), ("video_size", 8), ("k", 1),
                              ("n_bootstrap", 0), ("n_permutations", 0)):
            setattr(self, name, check_count(name, getattr(self, name), minimum,
                                            flag="--n-videos" if name == "n_videos" else None))
        from vlgap.data.sampling import parse_frame_samplings

        from vlgap.runtime import dtype_setting, parse_text_dtype

        # canonical, or auto until the run resolves it against its device (`resolve_formats`); text_dtype is
        # kept when equal to dtype: the demo's default is auto text, and "float32" says "not that"
        self.dtype = dtype_setting(self.dtype)
        self.text_dtype = parse_text_dtype(self.text_dtype, keep_auto=True)
        self.caption_draws = check_count("caption_draws", self.caption_draws, 1, flag="--caption-draws")
        self.frame_sampling = parse_frame_samplings(self.frame_sampling)
        if self.preset not in DEMO_PRESETS:
            raise VlgapError(f"demo preset {self.preset!r} is not known; use one of {', '.join(DEMO_PRESETS)}")
        return self


def check_keys(data: dict[str, Any]) -> None:
    """Every key of `data` a DemoConfig field: a renamed one says its new name, an unknown one the valid keys."""
    names = {f.name for f in fields(DemoConfig)}
    renamed = sorted(set(data) & set(RENAMED_KEYS))
    if renamed:
        raise VlgapError("config keys renamed: " + "; ".join(f"{k!r} is now {RENAMED_KEYS[k]!r}" for k in renamed))
    unknown = sorted(set(data) - names)
    if unknown:
        raise VlgapError(f"unknown config keys {unknown}; valid keys: {sorted(names)}")


def config_from(values: dict[str, Any] | None = None) -> DemoConfig:
    """DemoConfig's defaults with `values` (checked values: a TOML file's keys are checked field by field by
    vlgap.cli.config_file, which reads the file), then its own checks."""
    cfg = DemoConfig()
    data = dict(values or {})
    check_keys(data)
    for k, v in data.items():
        setattr(cfg, k, v)
    from vlgap.features.temporal_pooling import parse_mode

    cfg.temporal_pooling = parse_mode(cfg.temporal_pooling)
    return cfg.check()


def shapes_manifest(cfg: DemoConfig) -> Path:
    """Generate the shapes dataset once per (n, seed, frames, size) in the cache; reuse it afterwards."""
    from vlgap.data.shapes import cached_shapes_manifest

    with contextlib.ExitStack() as stack:
        bar: list = []

        def report(done: int, total: int) -> None:  # the bar opens only if videos are actually rendered
            if not bar:
                bar.append(stack.enter_context(counter("rendering shapes videos", total, unit="videos")))
            bar[0](done)

        return cached_shapes_manifest(cfg.n_videos, cfg.seed, cfg.n_frames_per_video, cfg.video_size,
                                      cfg.cache_dir, log=say, progress=report)


def resolve_formats(cfg: DemoConfig, log=say) -> tuple[DemoConfig, dict[str, Any]]:
    """The demo with its number formats resolved against its device (`auto` -> bfloat16 or float32:
    `vlgap.runtime.resolve_dtype`), said in one line through `log`, and the choices by config key (what
    the run folder records). Everything after this sees canonical names only: cache keys, the sweep's
    configuration, the run record."""
    from dataclasses import replace

    from vlgap.runtime import announce_formats, resolve_dtype

    cfg = cfg.check()
    vision = resolve_dtype(cfg.dtype, cfg.device, what="vision encoders" if cfg.text_dtype else "encoders")
    formats = {"dtype": vision}
    if cfg.text_dtype:
        formats["text_dtype"] = resolve_dtype(cfg.text_dtype, cfg.device, option="--text-dtype", what="text encoders")
    announce_formats(list(formats.values()), log)
    return replace(cfg, dtype=vision.dtype, text_dtype=formats["text_dtype"].dtype if cfg.text_dtype else None), formats


def sweep_and_sections(cfg: DemoConfig, sweep_cfg: SweepConfig, encoders: dict[str, Any], progress: bool = True):
    """The demo's sweep and (cfg.temporal) temporal sections: the same numbers and files as `run_sweep`
    then `run_temporal_sections`, in an order that keeps every core busy. First every forward pass, one
    encoder after another (each on all cores: the sweep's features, then the sections'); then what needs
    no encoder, side by side on every core (vlgap.side_work): the sweep's cells and laws beside each
    section's analysis and figures. Returns the SweepResult."""
    from vlgap.probe.sweep import finish_sweep, sweep_features
    from vlgap.side_work import side_pool

    prepared = sweep_features(sweep_cfg, cfg.out, progress=progress, claim=False, encoders=encoders)
    inputs = None
    if cfg.temporal:
        from vlgap.probe.temporal import temporal_features

        inputs = temporal_features(cfg, progress=progress, encoders=encoders)
    with side_pool() as pool:
        swept = pool.submit(finish_sweep, prepared)
        if inputs is not None:
            from vlgap.probe.temporal import finish_temporal_sections

            finish_temporal_sections(cfg, inputs, submit=pool.submit)
        return swept.result()


def prepare_inputs(cfg: DemoConfig, sweep_cfg: SweepConfig, encoders: dict[str, Any]) -> Path:
    """The demo's shapes videos (rendered, or from the cache) and, beside the rendering, what the first
    forward passes would otherwise wait for: the encoders that will run, loaded (all of them when the
    videos are new, else those whose sweep features are missing; each in torch's thread count of this
    thread, as it would load on first use), and the Test of Time videos."""
    import torch

    from vlgap.side_work import side_pool

    cached = Path(sweep_cfg.manifest).is_file()
    names = missing_encoders(sweep_cfg) if cached else [*sweep_cfg.vision, *sweep_cfg.text]
    with side_pool(2, torch_threads=torch.get_num_threads()) as pool:
        loads = [encoders[n] for n in names if hasattr(encoders.get(n), "preload")]
        if loads:
            pool.submit(_staged, "load encoders", lambda: [enc.preload() for enc in loads])
        if cfg.temporal:
            from vlgap.data.test_of_time import tot_dataset

            pool.submit(_staged, "Test of Time videos", tot_dataset, cfg.seed, 128, cfg.cache_dir)
        with stage("shapes videos"):
            return shapes_manifest(cfg)


def missing_encoders(cfg) -> list[str]:
    """The sweep's encoders (in extraction order) whose features are not all in the cache yet: those
    the run will load."""
    from vlgap.data.manifest import read_manifest
    from vlgap.features.source import FeatureOptions, FeatureSource

    man = read_manifest(cfg.manifest)
    src = FeatureSource(FeatureOptions(cache_dir=cfg.cache_dir, device=cfg.device, dtype=cfg.dtype,
                                       text_dtype=cfg.text_dtype, image_size=cfg.image_size,
                                       text_pooling=cfg.text_pooling, temporal_pooling=cfg.temporal_pooling,
                                       random_weights=bool(cfg.random_weights)))
    wanted = [(v, "n_f", cfg.n_frames) for v in cfg.vision] + [(t, "n_c", cfg.n_captions) for t in cfg.text]
    return [name for name, param, values in wanted if not all(src.is_cached(man, name, param, x) for x in values)]


def _staged(name: str, fn, *args, **kwargs):
    with stage(name):
        return fn(*args, **kwargs)


def run_fields(cfg: DemoConfig) -> dict[str, Any]:
    """The configuration a demo folder records; options at their defaults are left out, so folders
    written before they existed keep an equal configuration."""
    from dataclasses import asdict

    out = asdict(cfg)
    if out.get("caption_draws") == 1:
        del out["caption_draws"]
    if out.get("frame_sampling") == ["uniform"]:
        del out["frame_sampling"]
    return out


#: where a demo writes the wall and CPU seconds of its stages (vlgap.stage_times; benchmarks/demos.py reads it)
STAGE_TIMINGS = "stage_timings.json"



@api_call("vlgap.demo")
def run_demo(cfg: DemoConfig, progress: bool = True, *, force: bool = False) -> Path:
    """The demo into cfg.out: a folder holding another demo configuration is refused with the
    differences (`force` takes it over; every cell is keyed, so nothing is mixed either way). The
    stages' wall and CPU seconds go to cfg.out/stage_timings.json."""
    from vlgap.stage_times import recording

    with recording() as times:
        report = _run_demo(cfg, progress, force=force)
    times.write(Path(cfg.out) / STAGE_TIMINGS)
    return report


def _run_demo(cfg: DemoConfig, progress: bool, *, force: bool) -> Path:
    from vlgap.data.manifest import read_manifest
    from vlgap.data.shapes.write import shapes_manifest_path
    from vlgap.probe.report import write_report
    from vlgap.probe.items import check_sweep
    from vlgap.probe.sweep import claim_sweep_folder, data_record, lazy_encoders

    cfg, formats = resolve_formats(cfg)  # auto -> bfloat16 | float32 on this device, said once
    manifest = shapes_manifest_path(cfg.n_videos, cfg.seed, cfg.n_frames_per_video, cfg.video_size, cfg.cache_dir)
    sweep_cfg = SweepConfig(manifest=str(manifest), vision=list(cfg.vision), text=list(cfg.text),
                            n_frames=list(cfg.n_frames), n_captions=list(cfg.n_captions), k=cfg.k, metric=cfg.metric,
                            n_bootstrap=cfg.n_bootstrap, n_permutations=cfg.n_permutations, seed=cfg.seed, device=cfg.device,
                            dtype=cfg.dtype, text_dtype=cfg.text_dtype, image_size=cfg.image_size, temporal_pooling=cfg.temporal_pooling,
                            cache_dir=cfg.cache_dir, random_weights=bool(cfg.random_weights),
                            caption_draws=cfg.caption_draws, frame_sampling=list(cfg.frame_sampling))
    # each encoder loads once, for the sweep and the temporal sections together
    encoders = lazy_encoders(sweep_cfg)
    prepare_inputs(cfg, sweep_cfg, encoders)
    man = read_manifest(manifest)
    record = {**run_fields(cfg), "data": data_record(man)}
    check_sweep(sweep_cfg, man)  # every check before the folder records anything
    claim_sweep_folder(Path(cfg.out), "demo", record, force=force, ignore=("out", "cache_dir"), formats=formats)
    import time

    started = time.perf_counter()
    result = sweep_and_sections(cfg, sweep_cfg, encoders, progress=progress)
    if cfg.preset == "dr-full":
        from vlgap.probe.dr_full import run_dr_full_sections

        run_dr_full_sections(cfg, result, progress=progress, core_seconds=time.perf_counter() - started)
    with stage("report"):
        return write_report(cfg.out, progress=progress)
