"""benchmarks/demos.py keeps the rows it does not rerun, each with exactly the header's columns."""
import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def load_demos():
    spec = importlib.util.spec_from_file_location("bench_demos", ROOT / "benchmarks" / "demos.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_kept_rows_have_the_header_columns(tmp_path):
    demos = load_demos()
    n_cols = len(demos.HEADER.strip("|").split("|"))
    old = "| `vlgap demo` | cold | 151 | 264 | 2026-12-05 07:51 | 2 cores, X | 2.7 → 2.0 | kept apart | 0 |"
    new = "| `vlgap cape demo` | cold | 187 | 282 | 2026-12-05 08:01 | 2 cores, X | 1.7 → 1.2 | kept apart | `abc1234` | 0 |"
    table = tmp_path / "table.md"
    table.write_text("\n".join(["# Demo timings", "", demos.HEADER, demos.RULE, old, new, ""]))
    rows = demos.read_rows(table)
    for line in rows.values():
        assert len(line.strip().strip("|").split("|")) == n_cols, line
    assert "| n/a | 0 |" in rows[("`vlgap demo`", "cold")]          # the missing commit, as n/a
    assert rows[("`vlgap cape demo`", "cold")] == new                  # a current row kept as it was


def test_the_committed_table_is_well_formed():
    demos = load_demos()
    n_cols = len(demos.HEADER.strip("|").split("|"))
    text = (ROOT / "results" / "demo-timings" / "table.md").read_text()
    rows = [line for line in text.splitlines() if line.startswith("| `vlgap")]
    assert rows
    for line in rows:
        assert len(line.strip().strip("|").split("|")) == n_cols, line
