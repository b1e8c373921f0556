"""Copy what the WSV tests compare against from the documented runs into tests/fixtures/.

Usage:  python experiments/wsv_test_fixture.py [RESULTS_DIR] [OUT.json]
        (defaults: results/ and tests/fixtures/wsv_documented_runs.json, from the repository root)

Tests never read results/ (issue 31): tests/test_wsv_grounded.py reads this fixture instead. It holds,
for the converged run (results/wsv/) and the demo's short run (results/wsv-demo-1500-steps/), the recorded
configuration and cell counts, and for the short run the synthetic generator's per-seed CIDEr and attribute
accuracy of the demo's systems and their seed-0 cells (predictions, scores with their bootstrap interval, the
video tower's first logged loss), which `vlgap wsv demo` must reproduce. Before writing, it checks that each
summary's per-seed numbers are those of its cell files. Run it again after a documented run is replaced.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RUNS = {"converged": "wsv", "short_run": "wsv-demo-1500-steps"}
DEMO_SYSTEMS = ("wsv", "text_only", "oracle")  # vlgap.wsv.report.DEMO_SYSTEMS


def _summary_checked(folder: Path) -> dict:
    """summary.json, after checking its per-seed numbers against the cell files."""
    summary = json.loads((folder / "summary.json").read_text())
    for row in summary["rows"]:
        for k, seed in enumerate(row["seeds"]):
            cell = json.loads((folder / "cells" / f"{row['generator']}-{row['system']}-s{seed}.json").read_text())
            assert row["CIDEr"]["per_seed"][k] == cell["scores"]["CIDEr"]["score"], (folder, row["system"], seed)
            assert row["attributes"]["mean"]["per_seed"][k] == cell["scores"]["attributes"]["mean"]["accuracy"], \
                (folder, row["system"], seed)
    return summary


def build(results: Path) -> dict:
    out: dict = {"source": {name: f"results/{d}/ (summary.json, cells/)" for name, d in RUNS.items()},
                 "made_by": "experiments/wsv_test_fixture.py"}
    for name, d in RUNS.items():
        s = _summary_checked(results / d)
        out[name] = {"config": s["config"], "n_cells": s["n_cells"], "n_cells_planned": s["n_cells_planned"]}
    short = results / RUNS["short_run"]
    rows = {r["system"]: r for r in json.loads((short / "summary.json").read_text())["rows"]
            if r["generator"] == "synthetic"}
    out["short_run"]["per_seed"] = {s: {"CIDEr": rows[s]["CIDEr"]["per_seed"],
                                        "attributes": rows[s]["attributes"]["mean"]["per_seed"]}
                                    for s in DEMO_SYSTEMS}
    cells = {}
    for s in DEMO_SYSTEMS:
        c = json.loads((short / "cells" / f"synthetic-{s}-s0.json").read_text())
        cells[s] = {"predictions": c["predictions"], "CIDEr": c["scores"]["CIDEr"],
                    "attributes": c["scores"]["attributes"]["mean"]}
        if "head" in c["loss_curves"]:  # the video tower's first logged loss (not trained by the oracle)
            cells[s]["head_loss_first"] = c["loss_curves"]["head"][0]
    out["short_run"]["seed0_cells"] = cells
    return out


def main() -> None:
    results = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "results"
    dest = Path(sys.argv[2]) if len(sys.argv) > 2 else ROOT / "tests" / "fixtures" / "wsv_documented_runs.json"
    dest.write_text(json.dumps(build(results), indent=1, sort_keys=True) + "\n")
    print(dest)


if __name__ == "__main__":
    main()
