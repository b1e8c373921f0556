"""`vlgap demo --preset dr-full`: the demo plus the rest of Dynamic Reflections, one report section each.

Each section is a function `(cfg: DemoConfig, result: SweepResult, progress: bool) -> None` that reuses
the demo's cached data and features where it can and writes its own `sections/<name>.json` through
`vlgap.probe.report.write_section` (the report includes sections in name order). A section registers
itself with `@section("name")` in its own module, and that module is listed in `SECTION_MODULES`. Each
section is sized to a minute or so on a 2-core CPU so that the whole preset stays within 10 minutes.
"""
from __future__ import annotations

import importlib
from typing import Any, Callable

#: modules that hold dr-full sections (imported when the preset runs)
SECTION_MODULES: list[str] = ["vlgap.probe.dr_draws_sampling", "vlgap.probe.dr_captions", "vlgap.probe.dr_proxies",
                               "vlgap.probe.cross_model_report"]

SectionFn = Callable[[Any, Any, bool], None]
_SECTIONS: dict[str, SectionFn] = {}


def section(name: str) -> Callable[[SectionFn], SectionFn]:
    """Register a dr-full section under `name` (also its order in the preset: sorted by name)."""
    def register(fn: SectionFn) -> SectionFn:
        _SECTIONS[name] = fn
        return fn
    return register


def sections() -> dict[str, SectionFn]:
    for mod in SECTION_MODULES:
        importlib.import_module(mod)
    return dict(sorted(_SECTIONS.items()))


#: what one section may take on a quiet 2-core CPU, and the whole preset (the core demo included)
SECTION_BUDGET_S = 90.0
PRESET_BUDGET_S = 600.0


def run_dr_full_sections(cfg, result, progress: bool = True, *, only=None, core_seconds: float | None = None
                         ) -> list[str]:
    """Run every registered section in name order (`only`: just these names); returns their names.
    Each section is timed: RUN_DIR/dr_full/timings.json and the report section "89_dr_full_timings"
    list the seconds against the budgets (a section over SECTION_BUDGET_S, or the preset with the core
    demo over PRESET_BUDGET_S, is flagged there and on stderr)."""
    import time

    from vlgap.errors import VlgapError
    from vlgap.progress import say

    registered = sections()
    if only is not None:
        unknown = sorted(set(only) - set(registered))
        if unknown:
            raise VlgapError(f"dr-full sections {', '.join(unknown)} are not registered; registered: "
                             f"{', '.join(registered) or 'none'}")
        registered = {name: fn for name, fn in registered.items() if name in set(only)}
    done, seconds = [], {}
    for name, fn in registered.items():
        say(f"dr-full: {name}")
        t0 = time.perf_counter()
        fn(cfg, result, progress)
        seconds[name] = round(time.perf_counter() - t0, 1)
        if seconds[name] > SECTION_BUDGET_S:
            say(f"dr-full: {name} took {seconds[name]:.0f} s, over its {SECTION_BUDGET_S:.0f} s budget")
        done.append(name)
    write_timings(cfg.out, seconds, core_seconds)
    return done


def write_timings(run_dir, seconds: dict[str, float], core_seconds: float | None = None) -> None:
    """dr_full/timings.json and the "89_dr_full_timings" report section."""
    import html
    from pathlib import Path

    from vlgap.io_utils import atomic_write_json
    from vlgap.probe.report import html_table, write_section

    total = sum(seconds.values()) + (core_seconds or 0.0)
    atomic_write_json(Path(run_dir) / "dr_full" / "timings.json",
                      {"sections": seconds, "core_seconds": core_seconds, "total_seconds": round(total, 1),
                       "section_budget_s": SECTION_BUDGET_S, "preset_budget_s": PRESET_BUDGET_S})
    rows = [[name, s, "over budget" if s > SECTION_BUDGET_S else "ok"] for name, s in seconds.items()]
    if core_seconds is not None:
        rows.insert(0, ["core demo (features, sweep, law fits, temporal sections)", round(core_seconds, 1), ""])
    rows.append(["total" + ("" if core_seconds is not None else " (sections only)"), round(total, 1),
                 "over the 10-minute budget" if core_seconds is not None and total > PRESET_BUDGET_S else ""])
    body = ("<p>" + html.escape(f"Wall-clock seconds of each dr-full section on this machine (budget about "
                                f"{SECTION_BUDGET_S:.0f} s a section on a quiet 2-core CPU, {PRESET_BUDGET_S:.0f} s "
                                "for the whole preset); a shared machine runs slower.") + "</p>"
            + html_table(["part", "seconds", ""], rows, nd=1))
    write_section(run_dir, "89_dr_full_timings", "dr-full preset: time per section", body, [])
