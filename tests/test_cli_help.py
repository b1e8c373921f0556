"""`vlgap demo --help` says what the demo does: its real default size and the [demo] TOML table."""
from typer.testing import CliRunner

from vlgap.cli import run as cli_run
from vlgap.cli._app import app
from vlgap.probe.demo import DemoConfig


def test_demo_help_names_the_real_default_and_the_toml_table():
    assert cli_run._DEMO_DEFAULT_VIDEOS == DemoConfig().n_videos
    out = CliRunner().invoke(app, ["demo", "--help"], env={"COLUMNS": "200", "NO_COLOR": "1"}).output
    flat = " ".join(out.split())
    assert f"default {DemoConfig().n_videos}" in flat
    assert "[demo]" in flat


def _help(*path: str) -> str:
    out = CliRunner().invoke(app, [*path, "--help"], env={"COLUMNS": "200", "NO_COLOR": "1"}).output
    return " ".join(out.replace("│", " ").split())


def test_help_lists_the_interval_methods_a_command_offers_and_what_out_is():
    assert "bca | percentile: bca:" in _help("gap") and "simultaneous" not in _help("gap")
    assert "basic | percentile | simultaneous: basic:" in _help("layer-search")
    assert "--ci-method" not in _help("sweep") and "0.95 only" in _help("sweep")
    assert "folder: the run folder" in _help("sweep")
    assert "File to write: the per-item scores" in _help("caption-eval")
    assert "File: the predictions" in _help("wsv", "caption")
