"""CLI commands: data."""
from vlgap.cli._app import app  # noqa: F401
