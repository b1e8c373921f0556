"""CLI commands: probe."""
from vlgap.cli._app import app  # noqa: F401
