"""The installed `vlgap` entry point run in this process, as a user's command line runs it."""
from __future__ import annotations

import sys


def run_cli(monkeypatch, capsys, *args) -> tuple[int, str, str]:
    """`vlgap ARGS...` in-process: (exit code, stdout, stderr)."""
    from vlgap.cli import main

    monkeypatch.setattr(sys, "argv", ["vlgap", *map(str, args)])
    code = 0
    try:
        main()
    except SystemExit as exc:
        code = exc.code or 0
    captured = capsys.readouterr()
    return code, captured.out, captured.err
