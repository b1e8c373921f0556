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
