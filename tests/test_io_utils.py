"""Atomic writes: whole-or-nothing, and the permissions a plain `open(path, "w")` would give."""
from __future__ import annotations

import io
import os
import stat

import pytest

from vlgap.io_utils import atomic_write_bytes, atomic_write_json, atomic_write_text

pytestmark = pytest.mark.skipif(os.name != "posix", reason="POSIX permission bits")


def mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.fixture
def umask():
    old = os.umask(0o022)
    yield lambda m: os.umask(m)
    os.umask(old)


@pytest.mark.parametrize("mask", [0o022, 0o077, 0o002, 0o027])
def test_new_file_gets_the_mode_a_plain_write_gets(tmp_path, umask, mask):
    umask(mask)
    with open(tmp_path / "plain.txt", "w") as f:  # the reference: what the kernel gives a normal write
        f.write("x")
    atomic_write_text(tmp_path / "atomic.txt", "x")
    atomic_write_json(tmp_path / "sub" / "a.json", {"a": 1})
    assert mode(tmp_path / "atomic.txt") == mode(tmp_path / "plain.txt") == 0o666 & ~mask
    assert mode(tmp_path / "sub" / "a.json") == 0o666 & ~mask
    assert (tmp_path / "atomic.txt").read_text() == "x"


def test_replaced_file_keeps_its_mode_and_no_temp_is_left(tmp_path, umask):
    umask(0o022)
    p = tmp_path / "m.jsonl"
    p.write_text("old")
    os.chmod(p, 0o640)
    atomic_write_bytes(p, b"new")
    assert p.read_bytes() == b"new" and mode(p) == 0o640
    os.chmod(p, 0o600)
    atomic_write_text(p, "newer")
    assert p.read_text() == "newer" and mode(p) == 0o600
    assert sorted(x.name for x in tmp_path.iterdir()) == ["m.jsonl"]


def test_symlink_is_written_through(tmp_path, umask):
    umask(0o022)
    target = tmp_path / "real.json"
    target.write_text("{}")
    os.chmod(target, 0o664)
    link = tmp_path / "link.json"
    link.symlink_to(target)
    atomic_write_text(link, "[1]")
    assert link.is_symlink() and target.read_text() == "[1]" and mode(target) == 0o664


def test_failed_write_leaves_the_old_file_and_no_temp(tmp_path):
    p = tmp_path / "a.bin"
    p.write_bytes(b"keep")
    with pytest.raises(TypeError):
        atomic_write_bytes(p, "not bytes")  # type: ignore[arg-type]
    assert p.read_bytes() == b"keep" and sorted(x.name for x in tmp_path.iterdir()) == ["a.bin"]


# ---- the one writer refuses what it would destroy, and says OS errors in one line (issue 44) ---------

import errno  # noqa: E402
import socket  # noqa: E402

from vlgap import io_utils  # noqa: E402
from vlgap.errors import PathError, VlgapError  # noqa: E402


def no_temporaries(folder) -> bool:
    return not [p.name for p in folder.rglob(".*.tmp")]


@pytest.fixture
def never_replace(monkeypatch):
    """os.replace fails the test: a refusal must come before anything is renamed over a target."""
    def replace(src, dst, *a, **k):
        raise AssertionError(f"os.replace({src}, {dst}) reached: the target would have been destroyed")

    monkeypatch.setattr(os, "replace", replace)


def test_a_fifo_a_socket_a_folder_and_a_loop_are_refused_by_name(tmp_path, never_replace):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    sock_path = tmp_path / "sock"
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(sock_path))
    folder = tmp_path / "folder"
    folder.mkdir()
    (tmp_path / "loop-a").symlink_to(tmp_path / "loop-b")
    (tmp_path / "loop-b").symlink_to(tmp_path / "loop-a")
    try:
        cases = [(fifo, "is a named pipe (FIFO), not a regular file"), (sock_path, "is a socket, not a regular file"),
                 (folder, "is a folder, expected a file"), (tmp_path / "loop-a", "a loop of symbolic links (ELOOP)"),
                 (tmp_path / "loop-a" / "x.json", "a loop of symbolic links (ELOOP)")]
        for target, words in cases:
            with pytest.raises(PathError) as ei:
                atomic_write_text(target, "x")
            assert str(ei.value).startswith(f"cannot write {target}") and words in str(ei.value)
            assert "\n" not in str(ei.value)
        assert stat.S_ISFIFO(os.lstat(fifo).st_mode) and stat.S_ISSOCK(os.lstat(sock_path).st_mode)
        assert no_temporaries(tmp_path)
    finally:
        sock.close()


def test_a_device_through_a_symlink_is_refused_and_stays_a_device(tmp_path, never_replace):
    """Issue 44: `caption-eval --out /dev/full` replaced the device with a file (here through a link, with
    os.replace disarmed: a regression fails the test instead of destroying the device)."""
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full")
    link = tmp_path / "out.json"
    link.symlink_to("/dev/full")
    with pytest.raises(PathError, match=r"out.json \(-> /dev/full\): it is a character device, not a regular file"):
        atomic_write_json(link, {"a": 1})
    assert stat.S_ISCHR(os.stat("/dev/full").st_mode)


@pytest.mark.parametrize("code, words", [(errno.ENOSPC, "no space left on the device (ENOSPC)"),
                                         (errno.EDQUOT, "disk quota exceeded (EDQUOT)"),
                                         (errno.EIO, "input/output error on the device (EIO)")])
def test_a_failed_write_is_one_line_naming_the_path_and_leaves_nothing(tmp_path, monkeypatch, code, words):
    target = tmp_path / "out" / "result.json"
    target.parent.mkdir()
    target.write_text("old")

    def full(fd, data):
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(os, "write", full)
    with pytest.raises(PathError) as ei:
        atomic_write_json(target, {"a": 1})
    assert str(ei.value) == f"cannot write {target}: {words}"
    assert isinstance(ei.value, VlgapError) and isinstance(ei.value, OSError) and ei.value.errno == code
    assert target.read_text() == "old" and no_temporaries(tmp_path)


@pytest.mark.parametrize("error, words", [(PermissionError(errno.EACCES, "Permission denied"), "permission denied (EACCES)"),
                                          (OSError(errno.EROFS, "Read-only file system"), "read-only file system (EROFS)"),
                                          (PermissionError(errno.EPERM, "Operation not permitted"),
                                           "operation not permitted (an immutable or protected file or folder?) (EPERM)")])
def test_a_folder_that_refuses_the_temporary_is_one_line(tmp_path, monkeypatch, error, words):
    """A read-only, immutable or foreign folder (tests run as root, whom a chmod does not stop: the
    temporary's creation fails as the kernel would make it fail)."""
    def refuse(path):
        raise error

    monkeypatch.setattr(io_utils, "_open_temp_beside", refuse)
    with pytest.raises(PathError) as ei:
        atomic_write_bytes(tmp_path / "figures" / "a.png", b"png")
    assert str(ei.value) == f"cannot write {tmp_path / 'figures' / 'a.png'}: {words}"


def test_a_file_where_a_folder_goes_is_one_line(tmp_path):
    figures = tmp_path / "figures"
    figures.write_text("not a folder")
    for target in (figures / "a.png", figures / "sub" / "a.png"):
        with pytest.raises(PathError) as ei:
            atomic_write_bytes(target, b"png")
        assert str(ei.value) == f"cannot write {target}: {figures} is a file, not a folder"
    with pytest.raises(PathError) as ei:
        io_utils.make_folder(figures / "sub")
    assert str(ei.value) == f"cannot create folder {figures / 'sub'}: {figures} is a file, not a folder"
    with pytest.raises(PathError, match=f"cannot create folder {figures}: {figures} is a file, not a folder"):
        io_utils.make_folder(figures)
    assert figures.read_text() == "not a folder"


def test_a_failure_while_renaming_removes_the_temporary(tmp_path, monkeypatch):
    def cross_device(src, dst):
        raise OSError(errno.EXDEV, "Invalid cross-device link", str(src))

    monkeypatch.setattr(os, "replace", cross_device)
    with pytest.raises(PathError, match="cannot write .*a.json: "):
        atomic_write_json(tmp_path / "a.json", [1])
    assert list(tmp_path.iterdir()) == []


def test_an_empty_path_is_refused():
    for empty in ("", "."):
        with pytest.raises(PathError, match="an empty path; name a file"):
            atomic_write_text(empty, "x")


def test_a_cache_root_that_is_a_file_is_refused(tmp_path, monkeypatch):
    f = tmp_path / "cache-file"
    f.write_text("x")
    monkeypatch.setenv("VLGAP_CACHE", str(f))
    with pytest.raises(PathError, match=rf"VLGAP_CACHE={f}: is a file, expected a folder .*unset it"):
        io_utils.cache_root()
    with pytest.raises(PathError, match=rf"cache folder {f}: is a file, expected a folder"):
        io_utils.cache_root(f)
    monkeypatch.setenv("VLGAP_CACHE", str(tmp_path / "new"))
    assert io_utils.cache_root() == tmp_path / "new"


def test_a_pathless_writer_error_keeps_callers_that_tolerate_oserror_working(tmp_path, monkeypatch):
    """PathError is an OSError: code that lets a cache index go unwritten (gguf_cache) still does."""
    monkeypatch.setattr(os, "write", lambda fd, data: (_ for _ in ()).throw(OSError(errno.ENOSPC, "full")))
    try:
        atomic_write_json(tmp_path / "index.json", {})
    except OSError as err:
        assert err.filename == str(tmp_path / "index.json")
    else:
        raise AssertionError("no error")


def test_a_path_error_survives_a_trip_to_a_worker_process():
    import pickle

    err = PathError("cannot write x.json: no space left on the device (ENOSPC)", errno.ENOSPC, "x.json")
    back = pickle.loads(pickle.dumps(err))
    assert (type(back), str(back), back.errno, back.filename) == (PathError, str(err), errno.ENOSPC, "x.json")


class FullFile(io.StringIO):
    """A file on a full disk: opening works, writing fails with ENOSPC (as the kernel fails it)."""

    def write(self, text):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def test_a_log_is_appended_through_the_same_checks(tmp_path, monkeypatch, never_replace):
    log = tmp_path / "run" / "library.log"
    io_utils.append_text(log, "one\n")
    io_utils.append_text(log, "two\n")
    assert log.read_text() == "one\ntwo\n"
    fifo = tmp_path / "fifo.log"
    os.mkfifo(fifo)
    with pytest.raises(PathError, match="is a named pipe"):  # opening it to append would block forever
        io_utils.open_for_append(fifo)
    monkeypatch.setattr(io_utils, "open", lambda *a, **k: FullFile(), raising=False)
    with pytest.raises(PathError) as ei:
        io_utils.append_text(log, "three\n")
    assert str(ei.value) == f"cannot write {log}: no space left on the device (ENOSPC)"


def test_library_output_to_a_full_disk_is_one_line(tmp_path, monkeypatch):
    from vlgap.cape.runlog import library_output_to

    monkeypatch.setattr(io_utils, "open", lambda *a, **k: FullFile(), raising=False)
    with pytest.raises(PathError) as ei:
        with library_output_to(tmp_path / "lib.log"):
            print("a library's line")
    assert str(ei.value) == f"cannot write the log {tmp_path / 'lib.log'}: no space left on the device (ENOSPC)"
