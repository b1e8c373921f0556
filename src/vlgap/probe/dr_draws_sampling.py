"""dr-full sections 50 and 51 (issue 22, items 1 and 2): caption draws and frame-sampling strategies on
the demo's shapes videos, each a small sweep in RUN_DIR/dr_full/<name> that reuses the demo's cached
features (the first-n_c text features, the uniform vision features) and adds only what is new.

- 50_caption_draws: one vision x text pair at the demo's largest n_f, n_c in {1, 2}: the paper's first
  n_c captions beside the mean over R random draws with its combined interval (vlgap.metrics.draws).
- 51_frame_sampling: the same pair at the demo's largest n_c over every n_f, sampled uniformly (the
  paper), at random, with a stride and at key frames (scene changes on these videos); one n_f curve
  per strategy.
"""
from __future__ import annotations

import html
from pathlib import Path
from typing import Any

from vlgap.probe.dr_full import section

#: random caption draws in section 50 and resamples in both sections (sized to ~a minute on 2 CPU cores)
SECTION_DRAWS = 5
SECTION_BOOTSTRAP = 100
SECTION_STRATEGIES = ("uniform", "random", "stride:4", "keyframes")


def _sub_sweep(cfg, name: str, *, n_frames: list[int], n_captions: list[int], progress: bool,
               encoders: dict[str, Any] | None, **extra):
    from vlgap.probe.demo import shapes_manifest
    from vlgap.probe.sweep import SweepConfig, run_sweep

    sweep_cfg = SweepConfig(manifest=str(shapes_manifest(cfg)), vision=[cfg.vision[0]], text=[cfg.text[0]],
                            n_frames=n_frames, n_captions=n_captions, k=cfg.k, metric=cfg.metric,
                            n_bootstrap=min(SECTION_BOOTSTRAP, cfg.n_bootstrap), n_permutations=0, seed=cfg.seed,
                            device=cfg.device, dtype=cfg.dtype, text_dtype=getattr(cfg, "text_dtype", None),
                            image_size=cfg.image_size,
                            temporal_pooling=cfg.temporal_pooling, cache_dir=cfg.cache_dir,
                            random_weights=bool(cfg.random_weights), fit=False, **extra)
    return run_sweep(sweep_cfg, Path(cfg.out) / "dr_full" / name, progress=progress, encoders=encoders, force=True)


def caption_draws_section(cfg, result=None, progress: bool = True, encoders: dict[str, Any] | None = None,
                          n_draws: int = SECTION_DRAWS) -> dict[str, Any]:
    """Section 50: first n_c captions vs the mean over `n_draws` random draws. Returns the rows."""
    from vlgap.formatting import interval, number
    from vlgap.probe.report import html_table, write_section

    n_f = max(cfg.n_frames)
    n_cs = [v for v in (1, 2) if v <= max(cfg.n_captions)]
    first = _sub_sweep(cfg, "50_caption_draws_first", n_frames=[n_f], n_captions=n_cs, progress=progress,
                       encoders=encoders)
    drawn = _sub_sweep(cfg, "50_caption_draws", n_frames=[n_f], n_captions=n_cs, progress=progress,
                       encoders=encoders, caption_draws=n_draws)
    rows = []
    for a, b in zip(sorted(first.rows, key=lambda r: r["n_c"]), sorted(drawn.rows, key=lambda r: r["n_c"])):
        rows.append([a["n_c"], number(a["score"]), interval([a["ci_lo"], a["ci_hi"]]), number(b["score"]),
                     number(b["draw_sd"]), interval([b.get("ci_items_lo"), b.get("ci_items_hi")]),
                     interval([b["ci_lo"], b["ci_hi"]]), " ".join(number(s) for s in b["draw_scores"])])
    v, t = cfg.vision[0], cfg.text[0]
    body = ("<p>" + html.escape(
        f"Dynamic Reflections uses the first n_c captions of each video (a random one for single-caption runs). "
        f"Here {v} × {t} at n_f={n_f}: the first n_c captions beside the mean over {n_draws} random draws of "
        f"each video's n_c captions (seeded). The draws' interval combines the item bootstrap "
        f"({min(SECTION_BOOTSTRAP, cfg.n_bootstrap)} resamples, the same on every draw) with the between-draw "
        f"variance (half-widths sqrt(h² + (t·s/√R)²), vlgap.metrics.draws); 'items only' holds the draws fixed.")
        + "</p>" + html_table(["n_c", "first n_c", "CI", f"mean of {n_draws} draws", "draw SD",
                                "CI items only", "CI items + draws", "per-draw scores"], rows))
    write_section(cfg.out, "50_caption_draws", "Caption draws: which captions are drawn", body, [],
                  random_weights=[v, t] if cfg.random_weights else None)
    return {"first": first.rows, "drawn": drawn.rows}


def frame_sampling_section(cfg, result=None, progress: bool = True, encoders: dict[str, Any] | None = None,
                           strategies: tuple[str, ...] = SECTION_STRATEGIES) -> list[dict]:
    """Section 51: the n_f curve under each frame-sampling strategy. Returns the rows."""
    from vlgap.formatting import interval, number
    from vlgap.probe.report import frame_sampling_figure, html_table, save_figure, write_section

    n_c = max(cfg.n_captions)
    # a stride too long for these videos is left out (said in the section), not failed
    longest = max(cfg.n_frames)
    usable = [s for s in strategies if not s.startswith("stride:")
              or (longest - 1) * int(s.split(":")[1]) + 1 <= cfg.n_frames_per_video]
    res = _sub_sweep(cfg, "51_frame_sampling", n_frames=list(cfg.n_frames), n_captions=[n_c], progress=progress,
                     encoders=encoders, frame_sampling=usable)
    v, t = cfg.vision[0], cfg.text[0]
    rel = save_figure(frame_sampling_figure(res.rows, f"{v} × {t}"), cfg.out, "figures/51_frame_sampling.png")
    table = html_table(["strategy", "n_f", "score", "CI", "best layers (v, t)"],
                       [[r["frame_sampling"], r["n_f"], number(r["score"]), interval([r["ci_lo"], r["ci_hi"]]),
                         f"{r['x_layer']}, {r['y_layer']}"]
                        for r in sorted(res.rows, key=lambda r: (usable.index(r["frame_sampling"]), r["n_f"]))])
    skipped = [s for s in strategies if s not in usable]
    body = ("<p>" + html.escape(
        f"Dynamic Reflections samples n_f frames uniformly over the video; the critique asks whether the strategy "
        f"changes the frame gains. {v} × {t} at n_c={n_c}, the {cfg.n_videos} shapes videos of "
        f"{cfg.n_frames_per_video} frames: uniform, random (seeded per video), a fixed stride (centred) and key "
        f"frames (the container's, completed by scene-change scores).")
        + (html.escape(f" Left out (longer than the videos at n_f={longest}): {', '.join(skipped)}.") if skipped else "")
        + "</p>" + table)
    write_section(cfg.out, "51_frame_sampling", "Frame sampling: uniform, random, stride, key frames", body, [rel],
                  random_weights=[v, t] if cfg.random_weights else None)
    return res.rows


@section("50_caption_draws")
def _section_50(cfg, result, progress: bool) -> None:
    caption_draws_section(cfg, result, progress)


@section("51_frame_sampling")
def _section_51(cfg, result, progress: bool) -> None:
    frame_sampling_section(cfg, result, progress)
