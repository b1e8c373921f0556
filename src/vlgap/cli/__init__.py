"""Thin command line: every command calls a function of the Python API and formats its result."""
import sys

from rich.console import Console

from vlgap.errors import VlgapError
from vlgap.cli._app import app
from vlgap.cli.streams import StdoutError, closed_pipe, guarded_stdout, os_error_line

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

        with guarded_stdout():
            contextvars.copy_context().run(_run)  # a command's settings (--trust-remote-code) end with it
    except StdoutError as err:
        if closed_pipe(err):
            sys.exit(1)
        _error_line(str(err))
    except VlgapError as err:
        _error_line(str(err))
    except OSError as err:  # one that no writer of ours said: a line when it names its file, else a bug
        line = os_error_line(err)
        if line is None:
            raise
        _error_line(line)


def _error_line(message: str) -> None:
    """The one error line (exit 2); the message is text, not Rich markup ("[demo]" is printed as it is)."""
    from rich.markup import escape

    Console(stderr=True).print(f"[bold red]error:[/] {escape(message)}", highlight=False, soft_wrap=True)
    sys.exit(2)


def _run() -> None:
    from vlgap.provenance import set_command

    set_command()  # what reports and records name as the command that produced them (this context only)
    app()
