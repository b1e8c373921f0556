"""What a test may do only when no other test runs beside it.

`make test` runs the fast suite in two passes: the tests not marked `serial` on every core (pytest-xdist, one
worker process per core), then the `serial` ones alone, one after another, in one process. A test is `serial`
when it uses something the whole machine shares: it starts Ray or a Java VM (each takes every core and fixed
ports; METEOR's JVM keeps 2 GB until its process ends), or writes into a folder every process of the user
shares (the user's vlgap cache, the converted-models folder, the repository's own tree).

`Guard` watches each test through Python's audit hooks (sys.addaudithook: the events the interpreter raises
when a process is started, a file is opened for writing, a folder is made or renamed, a socket is bound or a
file is locked). A test not marked `serial` that does one of these things fails at teardown with what it did,
so a new test that needs the machine to itself cannot slip into the parallel pass. The hook sees only this
process: a subprocess's own actions are judged by its command line (a `--ray` argument, a Ray helper script),
and a long-lived one's work for a later test is reported through `Guard.uses` (tests/conftest.py does so for
METEOR's JVM, which one test starts and the next ones reuse).
"""
from __future__ import annotations

import os
from pathlib import Path

#: Executables that take the machine: Ray's head processes (started by ray.init) and the Java VM.
MACHINE_EXECUTABLES = {"java": "starts a Java VM", "gcs_server": "starts Ray", "raylet": "starts Ray"}
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
#: event -> (argument holding the path written, argument holding the folder descriptor it is relative to)
_PATH_EVENTS = {"os.rename": (1, 3),  # os.replace raises os.rename too
                "os.remove": (0, 1), "os.rmdir": (0, 1), "shutil.rmtree": (0, 1), "os.symlink": (1, 2),
                "os.link": (1, 3), "os.truncate": (0, None)}
_LOCK_EX = 2  # fcntl.LOCK_EX


def _text(path) -> str | None:
    if isinstance(path, int):
        return None
    try:
        return os.path.abspath(os.fsdecode(path))
    except (TypeError, ValueError):
        return None


def _beside(path, dir_fd):
    """A path relative to a folder descriptor (shutil.rmtree removes entries so) as a full path."""
    if not isinstance(dir_fd, int) or dir_fd < 0 or isinstance(path, int) or os.path.isabs(os.fsdecode(path)):
        return path
    try:
        return os.path.join(os.readlink(f"/proc/self/fd/{dir_fd}"), os.fsdecode(path))
    except OSError:
        return None


def _roots(paths) -> tuple[str, ...]:
    """Each folder as given and as resolved (a home folder behind a link), with a trailing separator."""
    out = set()
    for p in paths:
        for q in (os.path.abspath(p), os.path.realpath(p)):
            out.add(q.rstrip(os.sep) + os.sep)
    return tuple(sorted(out))


class Guard:
    """Records, for the test now running, the first thing it did that needs the machine to itself.

    shared: folders no test may write into unless it is `serial`; private: folders inside them that are no
    test's business (pytest's own cache; compiled Python, __pycache__, is always left alone);
    private_executables: folders whose programs are the test's own stand-ins (a fake `java` under tmp_path)."""

    def __init__(self, shared, private=(), private_executables=()):
        self.shared = _roots(shared)
        self.private = _roots(private)
        self.own_programs = _roots(private_executables)
        self.test: str | None = None
        self.found: str | None = None

    # ---- the audit hook: fast, never raises, never calls anything that raises an audit event itself ----
    def __call__(self, event: str, args: tuple) -> None:
        if self.test is None or self.found is not None:
            return
        try:
            if event == "open":
                self._open(args)
            elif event == "os.mkdir":
                path = _beside(args[0], args[2])
                if path is not None and not os.path.isdir(path):  # mkdir(exist_ok=True) of one there writes nothing
                    self._write(path, "makes")
            elif event in _PATH_EVENTS:
                where, dir_fd = _PATH_EVENTS[event]
                self._write(_beside(args[where], args[dir_fd] if dir_fd is not None else None), event.split(".")[-1])
            elif event == "subprocess.Popen":
                self._process(args[0], args[1])
            elif event == "socket.bind":
                self._bind(args[1])
            elif event == "fcntl.flock":
                self._lock(*args)
        except Exception:  # noqa: BLE001 - an audit hook must never break the code it watches
            pass

    def _open(self, args) -> None:
        path, mode, flags = args
        writes = (flags is not None and flags & _WRITE_FLAGS) or (isinstance(mode, str) and any(c in mode for c in "wax+"))
        if writes:
            self._write(path, "writes")

    def _write(self, path, how: str) -> None:
        p = _text(path)
        if p is None or os.sep + "__pycache__" + os.sep in p or p.endswith(os.sep + "__pycache__"):
            return
        q = p + os.sep
        if any(q.startswith(r) for r in self.private):
            return
        if any(q.startswith(r) for r in self.shared):
            self.found = f"{how} {p} (a folder every process shares)"

    def _process(self, executable, argv) -> None:
        args = [os.fsdecode(a) for a in ([argv] if isinstance(argv, (str, bytes, os.PathLike)) else list(argv or []))]
        program = os.fsdecode(executable) if executable is not None else (args[0] if args else "")
        name = os.path.basename(program)
        if name in MACHINE_EXECUTABLES:
            path = os.path.abspath(program) + os.sep
            if not any(path.startswith(r) for r in self.own_programs):
                self.found = f"{MACHINE_EXECUTABLES[name]} ({program})"
                return
        for a in args:
            if a == "--ray" or (a.endswith(".py") and os.path.basename(a).startswith("run_ray")):
                self.found = f"starts a process that starts Ray ({' '.join(args[:4])} ...)"
                return

    def _bind(self, address) -> None:
        if isinstance(address, tuple) and len(address) >= 2 and isinstance(address[1], int) and address[1] != 0:
            self.found = f"binds the fixed port {address[1]}"

    def _lock(self, fd, operation) -> None:
        if not operation & _LOCK_EX:
            return
        try:
            path = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            return
        self._write(path, "locks")

    def uses(self, program, argv) -> None:
        """What a process started earlier does for the test now running (METEOR's JVM outlives the test that
        started it): judged as if the test had started it."""
        if self.test is not None and self.found is None:
            self._process(program, argv)

    # ---- around each test ----
    def start(self, test: str) -> None:
        self.test, self.found = test, None

    def stop(self) -> str | None:
        found, self.test, self.found = self.found, None, None
        return found

