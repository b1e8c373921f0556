"""benchmarks/demos.py keeps the rows it does not rerun (those of other machines too), each with exactly
the header's columns, and names the machine, the date and the commit of every row."""
import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def load_demos():
    spec = importlib.util.spec_from_file_location("bench_demos", ROOT / "benchmarks" / "demos.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _cells(line):
    return [c.strip() for c in line.strip().strip("|").split("|")]


def test_kept_rows_have_the_header_columns(tmp_path):
    demos = load_demos()
    n_cols = len(demos.COLUMNS)
    oldest = "| `vlgap demo` | cold | 151 | 264 | 2026-12-05 07:51 | 2 cores, X | 2.7 → 2.0 | kept apart | 0 |"
    older = "| `vlgap cape demo` | cold | 187 | 282 | 2026-12-05 08:01 | 2 cores, X | 1.7 → 1.2 | kept apart | `abc1234` | 0 |"
    current = ("| `vlgap demo` | cold | Y (2 cores; AVX2 FMA) | 190 | 300 | 110 | 1.73 | 2026-12-06 10:00 | 1.0 → 1.1 "
               "| vision float32, text float32 (defaults) | kept apart | `def5678` | 0 |")
    table = tmp_path / "table.md"
    table.write_text("\n".join(["# Demo timings", "", demos.HEADER, demos.RULE, oldest, older, current, ""]))
    rows = demos.read_rows(table)
    assert len(rows) == 3  # the same command and cache on two machines: two rows
    for line in rows.values():
        assert len(_cells(line)) == n_cols, line
    by = {k: dict(zip(demos.COLUMNS, _cells(v))) for k, v in rows.items()}
    old = "n/a (not recorded)"
    first = by[("`vlgap demo`", "cold", "2 cores, X", old)]
    assert first["commit"] == "n/a" and first["floor s"].startswith("n/a") and first["wall s"] == "151"
    assert by[("`vlgap cape demo`", "cold", "2 cores, X", old)]["commit"] == "`abc1234`"
    key = ("`vlgap demo`", "cold", "Y (2 cores; AVX2 FMA)", "vision float32, text float32 (defaults)")
    assert rows[key] == current  # a current row kept as it was


def test_a_run_in_other_formats_on_the_same_machine_keeps_its_own_row(tmp_path):
    demos = load_demos()
    line = ("| `vlgap demo` | cold | Y (2 cores; AVX2 FMA) | 190 | 300 | 110 | 1.73 | 2026-12-06 10:00 | 1.0 → 1.1 "
            "| {} | kept apart | `def5678` | 0 |")
    table = tmp_path / "table.md"
    table.write_text("\n".join(["# Demo timings", "", demos.HEADER, demos.RULE,
                                line.format("vision float32, text bfloat16 (defaults)"),
                                line.format("vision float32, text float32 (VLGAP_NATIVE_BF16=0)"), ""]))
    assert len(demos.read_rows(table)) == 2


def test_the_committed_table_is_well_formed_and_names_every_machine():
    demos = load_demos()
    text = (ROOT / "results" / "demo-timings" / "table.md").read_text()
    rows = [line for line in text.splitlines() if line.startswith("| `vlgap")]
    assert rows
    for line in rows:
        cells = dict(zip(demos.COLUMNS, _cells(line)))
        assert len(_cells(line)) == len(demos.COLUMNS), line
        assert "cores" in cells["machine"] and ("AVX" in cells["machine"] or "GPU" in cells["machine"]), line
        assert cells["date (UTC)"][:4].isdigit() and cells["commit"].startswith("`"), line


def test_formats_are_read_from_the_run_folder(tmp_path):
    import json

    demos = load_demos()
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "run_config.json").write_text(json.dumps({"config": {"dtype": "float32",
                                                                            "text_dtype": "bfloat16"}}))
    assert demos.formats_of(tmp_path / "a") == "vision float32, text bfloat16"
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "config.json").write_text(json.dumps({"dtype": "float32"}))
    assert demos.formats_of(tmp_path / "b") == "float32"
    assert demos.formats_of(tmp_path / "none").startswith("n/a")
    # the resolved formats as vlgap.runs.folder records them win over the configuration's own keys, also
    # in a run folder one level down (the WSV demo's)
    (tmp_path / "c" / "run").mkdir(parents=True)
    (tmp_path / "c" / "run" / "run_config.json").write_text(json.dumps({"config": {
        "dtype": "auto", "formats": {"lm_dtype": {"dtype": "float32", "asked": "auto", "why": "no native bfloat16"}}}}))
    assert demos.formats_of(tmp_path / "c") == "lm float32"
