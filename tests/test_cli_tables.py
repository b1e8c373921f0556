"""Console tables never cut a value (issue 23, item 6): at 80 columns (a narrow terminal, or a log:
Rich's width when output is piped) every interval and every encoder name is printed whole."""
from __future__ import annotations

import io
import json
import re

import pytest
from rich.console import Console
from rich.table import Table
from typer.testing import CliRunner

from vlgap.cli import app
from vlgap.cli.tables import fits, row_lines

INTERVAL = re.compile(r"\[[-+0-9.eE]+, [-+0-9.eE]+\]")


def _console(width: int) -> tuple[Console, io.StringIO]:
    buf = io.StringIO()
    return Console(file=buf, width=width, color_system=None), buf


def _assert_whole(text: str, values: list[str]) -> None:
    assert "…" not in text
    for value in values:
        assert value in text, f"{value!r} is not printed whole in:\n{text}"
    for line in text.splitlines():  # an opened interval closes on its own line
        assert line.count("[") == line.count("]"), line


SWEEP_ROWS = [
    {"vision": "mobilenet_v2", "vision_weights": "random weights", "text": "minilm", "n_f": 8, "n_c": 8,
     "score": 0.41234, "ci_lo": 0.39123, "ci_hi": 0.43311, "p_value": 0.001, "x_layer": 3, "y_layer": 5, "n": 192,
     "chance": 0.0521},
    {"vision": "efficientnet_lite0", "text": "smollm2", "n_f": 1, "n_c": 2, "score": 0.11234, "ci_lo": -0.01234,
     "ci_hi": 0.13311, "p_value": 0.25, "x_layer": 0, "y_layer": 11, "n": 192, "chance": 0.0521},
]


def test_sweep_table_at_80_columns_prints_every_interval_and_name_whole(monkeypatch):
    import vlgap.cli.run as run_cli

    console, buf = _console(80)
    monkeypatch.setattr(run_cli, "console", console)
    run_cli._print_rows(SWEEP_ROWS)
    out = buf.getvalue()
    _assert_whole(out, ["[0.391, 0.433]", "[-0.012, 0.133]", "mobilenet_v2 (random weights)",
                        "efficientnet_lite0", "smollm2", "0.412", "0.052"])
    assert all(len(line) <= 80 for line in out.splitlines())


def test_sweep_table_on_a_wide_console_is_a_table(monkeypatch):
    import vlgap.cli.run as run_cli

    console, buf = _console(200)
    monkeypatch.setattr(run_cli, "console", console)
    run_cli._print_rows(SWEEP_ROWS)
    out = buf.getvalue()
    assert "┃ vision" in out  # the drawn table, unchanged where it fits
    _assert_whole(out, ["[0.391, 0.433]", "mobilenet_v2 (random weights)"])


def test_temporal_difference_table_at_80_columns(monkeypatch):
    import vlgap.cli.temporal as temporal_cli

    console, buf = _console(80)
    monkeypatch.setattr(temporal_cli, "console", console)
    rows = [{"vision": "efficientnet_lite0", "text": "sentence-transformers-minilm", "n": 256, "name_a": "ordered",
             "score_a": 0.3012, "name_b": "shuffled", "score_b": 0.2811, "difference": 0.0201,
             "ci": [0.0101, 0.0302], "p_value": 0.004, "x_layer_name": "blocks.6", "y_layer_name": "layer.5"}]
    temporal_cli._print_differences(rows, "frame order: ordered vs shuffled")
    _assert_whole(buf.getvalue(), ["efficientnet_lite0", "sentence-transformers-minilm", "blocks.6 / layer.5"])
    assert INTERVAL.search(buf.getvalue())


def test_row_fallback_breaks_only_between_fields():
    table = Table(title="t")
    for col in ("a", "b", "c"):
        table.add_column(col)
    table.add_row("x" * 30, "[0.123456, 0.654321]", "y" * 100)
    console, _ = _console(40)
    assert not fits(table, console)
    assert row_lines(table, 40) == ["t", "a " + "x" * 30, "  b [0.123456, 0.654321]", "  c " + "y" * 100]


@pytest.fixture
def narrow(monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")  # what Rich uses for a pipe, set explicitly


def test_caption_eval_tables_at_80_columns(tmp_path, narrow):
    base_preds = ["a man with a very long description is riding a brown horse on the beach at sunset",
                  "a small cat sits on a red mat in the kitchen", "two dogs play in the snow"]
    base_refs = [["a man rides a horse on a beach", "a person on a horse"], ["a cat on a mat"], ["dogs playing in snow"]]
    # 12 items: intervals need at least vlgap.stats.MIN_ITEMS_FOR_INTERVAL (10) items
    preds = [f"{p} number {i}" for i in range(4) for p in base_preds]
    refs = [r for _ in range(4) for r in base_refs]
    (tmp_path / "p.json").write_text(json.dumps(preds))
    (tmp_path / "q.json").write_text(json.dumps(preds[::-1]))
    (tmp_path / "r.json").write_text(json.dumps(refs))
    base = ["caption-eval", "--pred", str(tmp_path / "p.json"), "--refs", str(tmp_path / "r.json"),
            "--metrics", "bleu,rouge,cider", "--bootstrap", "50", "--confidence", "0.9"]
    single = CliRunner().invoke(app, base)
    assert single.exit_code == 0, single.output
    assert len(INTERVAL.findall(single.output)) == 6
    _assert_whole(single.output, [])
    pair = CliRunner().invoke(app, base + ["--compare", str(tmp_path / "q.json"), "--permutations", "50"])
    assert pair.exit_code == 0, pair.output
    assert len(INTERVAL.findall(pair.output)) == 6
    _assert_whole(pair.output, [])


def test_compare_tables_at_80_columns(tmp_path, narrow):
    paired = tmp_path / "paired.csv"
    paired.write_text("item,system,score\n" + "".join(
        f"{i},a-very-long-system-name-for-the-baseline,{0.1 * i:.2f}\n{i},another-long-system-name,{0.1 * i + 0.05 * (i % 3):.2f}\n"
        for i in range(12)))
    res = CliRunner().invoke(app, ["compare", str(paired), "--bootstrap", "200", "--permutations", "200",
                                   "--ci-method", "percentile"])
    assert res.exit_code == 0, res.output
    assert len(INTERVAL.findall(res.output)) == 3
    _assert_whole(res.output, ["a-very-long-system-name-for-the-baseline", "another-long-system-name"])
    fact = tmp_path / "fact.csv"
    fact.write_text("item,a,b,score\n" + "".join(
        f"{i},{a},{b},{i + 0.5 * a + 0.25 * b + 0.1 * (i % 2) * a * b:.3f}\n"
        for i in range(12) for a in (0, 1) for b in (0, 1)))
    res = CliRunner().invoke(app, ["compare", str(fact), "--factorial", "--bootstrap", "200", "--permutations", "200"])
    assert res.exit_code == 0, res.output
    assert len(INTERVAL.findall(res.output)) == 7
    _assert_whole(res.output, [])
