"""Thin command line: every command calls a function of the Python API and formats its result."""
import sys

from rich.console import Console

from vlgap.errors import VlgapError
from vlgap.cli._app import app

# Importing a module registers its commands on `app`.
from vlgap.cli import data as _data  # noqa: F401,E402
from vlgap.cli import probe as _probe  # noqa: F401,E402
from vlgap.cli import gap as _gap  # noqa: F401,E402
from vlgap.cli import captions as _captions  # noqa: F401,E402
from vlgap.cli import run as _run  # noqa: F401,E402
from vlgap.cli import temporal as _temporal  # noqa: F401,E402
from vlgap.cli import wsv as _wsv  # noqa: F401,E402
from vlgap.cli import cape as _cape  # noqa: F401,E402
from vlgap.cli import caption_studies as _caption_studies  # noqa: F401,E402
from vlgap.cli import intrinsic as _intrinsic  # noqa: F401,E402
from vlgap.cli import models as _models  # noqa: F401,E402


def main() -> None:
    from vlgap.memory import reuse_freed_memory

    reuse_freed_memory()  # every command's model and k-NN work, see vlgap.memory
    try:
        import contextvars

        contextvars.copy_context().run(_run)  # a command's settings (--trust-remote-code) end with it
    except VlgapError as err:
        from rich.markup import escape

        # the message is text, not markup: `pip install "vlgap[meteor]"` keeps its brackets
        Console(stderr=True).print(f"[bold red]error:[/] {escape(str(err))}", highlight=False, soft_wrap=True)
        sys.exit(2)


def _run() -> None:
    from vlgap.provenance import set_command

    set_command()  # what reports and records name as the command that produced them (this context only)
    app()
