"""The class of every command group of the CLI (`vlgap`, `vlgap wsv`, `vlgap cape`): what happens between
the command line and a command's body, the same for every command."""
from __future__ import annotations

from typer.core import TyperGroup

from vlgap.cli.declarations import guard, refuse_empty_paths
from vlgap.cli.options import _command_path, refuse_old_spellings
from vlgap.errors import VlgapError


def _raw_values(cmd, ctx, args) -> dict:
    """The command line's values as typed, by parameter name, before click converts them (an empty
    `--out ''` would become the path "."); {} where the line does not parse (click then says why)."""
    try:
        sub = type(ctx)(cmd, parent=ctx, resilient_parsing=True)
        return cmd.make_parser(sub).parse_args(list(args))[0]
    except Exception:  # noqa: BLE001 - click's own parse reports a bad line
        return {}


class VocabGroup(TyperGroup):
    """The class of every command group: a subcommand's old spellings (RENAMES) are refused with the new
    name before the subcommand parses its options (so they need no hidden option of their own); its values
    are checked against their declarations (vlgap.cli.declarations) before its body runs; and click's
    refusal of a value ("--k abc": not an integer) is one line naming the option, as every other refusal."""

    def resolve_command(self, ctx, args):
        name, cmd, rest = super().resolve_command(ctx, args)
        if name is not None and not getattr(cmd, "commands", None):
            path = " ".join(_command_path(ctx) + [name])
            refuse_old_spellings(path, rest)
            refuse_empty_paths(path, cmd.params, _raw_values(cmd, ctx, rest))
            guard(cmd, path)
        return name, cmd, rest

    def invoke(self, ctx):
        try:  # typer >= 0.20 carries its own click
            from typer._click.exceptions import NoArgsIsHelpError, UsageError
        except ImportError:  # pragma: no cover
            from click.exceptions import NoArgsIsHelpError, UsageError
        try:
            return super().invoke(ctx)
        except NoArgsIsHelpError:
            raise
        except UsageError as err:
            where = " ".join(["vlgap", *_command_path(err.ctx or ctx)])
            raise VlgapError(" ".join(err.format_message().split()) + f" (see `{where} --help`)") from None
