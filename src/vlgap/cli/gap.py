"""CLI commands: gap."""
from vlgap.cli._app import app  # noqa: F401
