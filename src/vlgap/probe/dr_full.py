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
SECTION_MODULES: list[str] = ["vlgap.probe.cross_figures"]

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


def run_dr_full_sections(cfg, result, progress: bool = True) -> list[str]:
    """Run every registered section in name order; returns their names."""
    from vlgap.progress import say

    done = []
    for name, fn in sections().items():
        say(f"dr-full: {name}")
        fn(cfg, result, progress)
        done.append(name)
    return done
