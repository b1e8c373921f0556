"""Atomic writes: whole-or-nothing, and the permissions a plain `open(path, "w")` would give."""
from __future__ import annotations

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
