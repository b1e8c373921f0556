"""The one Typer application; command modules register on it by importing `app`."""
import typer

from vlgap.cli.group import VocabGroup

app = typer.Typer(
    name="vlgap",
    help="How close are vision and language? Alignment probes, distribution gaps and caption metrics.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    cls=VocabGroup,
)


def _print_version(value: bool) -> None:
    if value:
        from vlgap import __version__

        typer.echo(f"vlgap {__version__}")
        raise typer.Exit()


@app.callback()
def _root(version: bool = typer.Option(False, "--version", is_eager=True, callback=_print_version,
                                       help="Print vlgap's version (the installed package's metadata) and exit.")):
    """How close are vision and language? Alignment probes, distribution gaps and caption metrics."""
