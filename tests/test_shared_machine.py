"""The guard behind `make test`'s parallel pass (tests/helpers/shared_machine.py): what it counts as needing the
machine alone, seen through the interpreter's real audit events, and what it leaves to tests running side by
side; and the marker set-up around it (pyproject.toml, Makefile, tests/conftest.py)."""
from __future__ import annotations

import ast
import fcntl
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from shared_machine import Guard

ROOT = Path(__file__).resolve().parents[1]
_HOOKED: list[Guard] = []  # audit hooks cannot be removed: one watching guard per process, retargeted per test


@pytest.fixture
def watch(tmp_path):
    """A guard over tmp_path/shared (with tmp_path/shared/own private), installed once per process, whose
    programs under tmp_path/own count as the test's stand-ins. watch(action) -> what it found (None: nothing)."""
    shared, own = tmp_path / "shared", tmp_path / "own"
    (shared / "own").mkdir(parents=True)
    (shared / "old").mkdir()
    (shared / "file").write_text("x")
    own.mkdir()
    if not _HOOKED:
        _HOOKED.append(Guard(shared=[]))
        sys.addaudithook(lambda event, args: _HOOKED[0](event, args))
    _HOOKED[0].__init__(shared=[shared], private=[shared / "own"], private_executables=[own])

    def run(action):
        guard = _HOOKED[0]
        guard.start("a test")
        try:
            action()
        finally:
            found = guard.stop()
        return found

    yield run, shared, own
    _HOOKED[0].__init__(shared=[])


def _script(path: Path) -> Path:
    path.write_text(f"#!{sys.executable}\nimport sys; sys.exit(0)\n")
    path.chmod(0o755)
    return path


def test_writes_into_a_shared_folder_are_found(watch):
    run, shared, _ = watch
    assert "writes" in run(lambda: (shared / "new.txt").write_text("x"))
    assert "writes" in run(lambda: open(shared / "file", "a").close())
    assert "writes" in run(lambda: os.close(os.open(shared / "raw", os.O_WRONLY | os.O_CREAT)))
    assert "makes" in run(lambda: (shared / "sub").mkdir())
    assert "rename" in run(lambda: os.replace(shared / "file", shared / "moved"))  # os.replace raises os.rename
    assert "remove" in run(lambda: (shared / "moved").unlink())


def test_an_exclusive_lock_in_a_shared_folder_is_found_a_shared_one_is_not(watch):
    run, shared, _ = watch

    def lock(kind):
        fd = os.open(shared / "old", os.O_RDONLY)
        try:
            fcntl.flock(fd, kind)
        finally:
            os.close(fd)

    assert "locks" in run(lambda: lock(fcntl.LOCK_EX))
    assert run(lambda: lock(fcntl.LOCK_SH)) is None


def test_reads_private_folders_and_folders_already_there_are_left_alone(watch, tmp_path):
    run, shared, _ = watch
    assert run(lambda: (shared / "file").read_text()) is None
    assert run(lambda: (shared / "old").mkdir(exist_ok=True)) is None
    assert run(lambda: (shared / "own" / "x").write_text("x")) is None
    assert run(lambda: (shared / "__pycache__").mkdir()) is None
    assert run(lambda: (tmp_path / "elsewhere.txt").write_text("x")) is None


@pytest.mark.serial  # its stand-ins' command lines look like Ray's to the suite's own guard too
def test_java_and_ray_are_found_a_tests_own_stand_in_is_not(watch, tmp_path):
    run, _, own = watch
    (tmp_path / "bin").mkdir()
    jvm = _script(tmp_path / "bin" / "java")  # outside the folder of stand-ins: counts as the real one
    stand_in = _script(own / "java")
    assert "Java VM" in run(lambda: subprocess.run([str(jvm), "-jar", "x.jar"], check=True))
    assert run(lambda: subprocess.run([str(stand_in), "-jar", "x.jar"], check=True)) is None
    helper = _script(tmp_path / "run_ray_extract.py")
    assert "Ray" in run(lambda: subprocess.run([sys.executable, str(helper)], check=True))
    assert "Ray" in run(lambda: subprocess.run([sys.executable, "-c", "pass", "--ray", "auto"], check=True))
    assert run(lambda: subprocess.run([sys.executable, "-c", "pass", "--array"], check=True)) is None


def test_a_fixed_port_is_found_port_zero_is_not(watch):
    run, _, _ = watch

    def bind(port):
        with socket.socket() as s:
            s.bind(("127.0.0.1", port))
            return s.getsockname()[1]

    assert run(lambda: bind(0)) is None
    guard = _HOOKED[0]
    guard.start("a test")
    guard("socket.bind", (None, ("127.0.0.1", 8265)))  # a real fixed bind would hold a port other runs may want
    assert "8265" in guard.stop()
    assert guard.stop() is None  # reset between tests


def test_only_the_first_finding_of_a_test_is_kept_and_nothing_outside_a_test(watch):
    run, shared, _ = watch

    def two():
        (shared / "a").write_text("x")
        (shared / "b").mkdir()

    assert run(two).split()[1] == str(shared / "a")
    guard = _HOOKED[0]
    (shared / "c").write_text("x")  # no test running: not recorded
    guard.start("a test")
    assert guard.stop() is None


def test_the_serial_marker_is_registered_and_make_test_runs_both_passes():
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert re.search(r'"serial: ', pyproject) and re.search(r'"pytest-xdist>=', pyproject)
    recipe = re.search(r"^test: .*\n((?:\t.*\n)+)", (ROOT / "Makefile").read_text(encoding="utf-8"), re.M).group(1)
    passes = re.findall(r'-m "([^"]+)"', recipe)
    assert passes == ["not slow and not serial", "not slow and serial"], passes
    assert "-n " in recipe.split("not serial")[1].split("\n")[0]  # the first pass on every core
    assert "make test\n" in (ROOT / ".ci" / "run").read_text(encoding="utf-8")


def _marked_serial(node) -> bool:
    return any("pytest.mark.serial" in ast.unparse(d) for d in getattr(node, "decorator_list", []))


def test_every_test_that_starts_ray_in_process_is_serial():
    """A fixture calling ray.init (raylet and gcs_server in the test's own process): every test that takes it is
    `serial`, by its own marker or its module's pytestmark; the guard would otherwise fail it in the parallel
    pass, and only on the runs that reach it."""
    unmarked, seen = [], set()
    for path in sorted(Path(__file__).parent.glob("test_*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        functions = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
        starters = {f.name for f in functions
                    if any(isinstance(n, ast.Call) and ast.unparse(n.func) == "ray.init" for n in ast.walk(f))}
        seen |= starters
        module = any(isinstance(n, ast.Assign) and "pytest.mark.serial" in ast.unparse(n.value)
                     and any(isinstance(t, ast.Name) and t.id == "pytestmark" for t in n.targets) for n in tree.body)
        for f in functions:
            takes = {a.arg for a in f.args.args} & starters
            if f.name.startswith("test_") and takes and not (module or _marked_serial(f)):
                unmarked.append(f"{path.name}::{f.name} ({', '.join(sorted(takes))})")
    assert "ray_cluster" in seen  # the scan finds the suite's Ray fixtures
    assert not unmarked, f"tests that start Ray in process without @pytest.mark.serial: {unmarked}"


def test_this_process_has_its_own_cache_and_a_worker_its_share_of_the_cores():
    """tests/conftest.py: $VLGAP_CACHE is this process's own temporary folder, $VLGAP_MODELS unset (models/
    of that cache links the user's conversions), and a pytest-xdist worker computes with cores // workers
    torch threads."""
    import tempfile

    import torch

    from vlgap.encoders.gguf_cache import models_dir
    from vlgap.io_utils import cache_root
    from vlgap.runs.claims import available_cores

    root = cache_root()
    assert root.name.startswith("vlgap-test-cache-") and root.parent == Path(tempfile.gettempdir()), root
    assert "VLGAP_MODELS" not in os.environ and models_dir() == root / "models" and models_dir().is_dir()
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "0") or 0)
    if os.environ.get("PYTEST_XDIST_WORKER") and workers >= 2:
        assert torch.get_num_threads() == max(1, available_cores() // workers)
