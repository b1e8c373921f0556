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


def refused(capsys, *args) -> str:
    """`vlgap ARGS...` in-process must be refused as bad input: exit code 2, exactly one line on stderr
    starting "error: ", no traceback. Returns that line."""
    import pytest

    from vlgap.cli import main

    old = sys.argv
    sys.argv = ["vlgap", *map(str, args)]
    try:
        with pytest.raises(SystemExit) as ei:
            main()
    finally:
        sys.argv = old
    err = capsys.readouterr().err
    assert ei.value.code == 2, err
    assert err.count("\n") == 1 and err.startswith("error: ") and "Traceback" not in err, err
    return err.strip()


_BUILT: dict = {}


def build_once(monkeypatch) -> None:
    """Build the click command of `vlgap.cli.app` once per test session, instead of at every entry-point call
    (70 ms each), for this test's entry-point calls: for tests that run the entry point hundreds of times
    (tests/test_cli_common.py). The command stays the app's as it was first built."""
    import typer.main

    from vlgap.cli import app

    build = typer.main.get_command
    built = _BUILT.get(id(app)) or _BUILT.setdefault(id(app), build(app))
    monkeypatch.setattr(typer.main, "get_command", lambda typer_app: built if typer_app is app else build(typer_app))
