"""CLI commands: captions."""
from vlgap.cli._app import app  # noqa: F401
