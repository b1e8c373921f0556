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
