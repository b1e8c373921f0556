"""OS errors are one line, never a traceback, and no output replaces what is not a regular file (issue 44).

Disk full on --out, --cache-dir and a sweep's folder (os.write fails with ENOSPC for files under one
folder, as a full file system fails it), standard output on a full device or a closed pipe, a report
folder whose `figures` is a file or whose `report.html` is a folder, an immutable figures folder, `cache
--prune` on an entry it cannot remove, a loop of symbolic links or a device as --out, VLGAP_CACHE naming a
file, an empty --out. Each case printed a traceback (or replaced a device node) before.
"""
from __future__ import annotations

import errno
import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from in_process_cli import refused, run_cli

from vlgap import io_utils

pytestmark = pytest.mark.skipif(os.name != "posix", reason="POSIX files, devices and /proc")


@pytest.fixture
def full_disk(monkeypatch):
    """`full_disk(folder)`: from now on, every os.write into a file under `folder` fails with ENOSPC."""
    real = os.write
    folders: list[str] = []

    def write(fd, data):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            target = ""
        if any(target.startswith(f) for f in folders):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(fd, data)

    monkeypatch.setattr(os, "write", write)
    return lambda folder: folders.append(str(Path(folder).resolve()))


def captions(tmp_path):
    pred, refs = tmp_path / "pred.json", tmp_path / "refs.json"
    pred.write_text(json.dumps({"1": "a red circle moves left", "2": "the blue square"}))
    refs.write_text(json.dumps({"1": ["a red circle moving left"], "2": ["a blue square"]}))
    return pred, refs


def failed(monkeypatch, capsys, *args) -> str:
    """`vlgap ARGS` exits 2 with its last line on stderr an error (progress lines may come before), no
    traceback: that line."""
    code, _, err = run_cli(monkeypatch, capsys, *args)
    assert code == 2 and "Traceback" not in err, err
    last = err.strip().splitlines()[-1]
    assert last.startswith("error: "), err
    return last


def temporaries(folder: Path) -> list[str]:
    return [p.name for p in folder.rglob(".*.tmp")]


# ---- disk full -------------------------------------------------------------------------------------

def test_disk_full_on_out(tmp_path, capsys, full_disk):
    pred, refs = captions(tmp_path)
    out = tmp_path / "o" / "per_item.csv"
    full_disk(tmp_path / "o")
    err = refused(capsys, "caption-eval", "--pred", pred, "--refs", refs, "--metrics", "bleu", "--out", out)
    assert err == f"error: cannot write {out}: no space left on the device (ENOSPC)"
    assert not out.exists() and temporaries(tmp_path) == []


def test_disk_full_on_the_cache_dir(tmp_path, capsys, full_disk):
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("a red ball\na blue cube\n")
    cache = tmp_path / "cache"
    full_disk(cache)
    err = refused(capsys, "cape", "rewrite", prompts, "--operator", "template", "--cache-dir", cache)
    assert err == f"error: cannot write {cache / 'template.json'}: no space left on the device (ENOSPC)"
    assert temporaries(tmp_path) == []


def test_disk_full_on_a_run_folder(tmp_path, full_disk):
    """The first write of a run folder (its record) fails as the disk is full: one line naming it."""
    from vlgap.errors import PathError
    from vlgap.runs.folder import open_run_folder

    full_disk(tmp_path / "run")
    with pytest.raises(PathError) as ei:
        open_run_folder(tmp_path / "run", "sweep", {"k": 5})
    assert str(ei.value) == f"cannot write {tmp_path / 'run' / 'run_config.json'}: no space left on the device (ENOSPC)"
    assert temporaries(tmp_path) == []


# ---- standard output ---------------------------------------------------------------------------------

def _vlgap(*args, stdout=subprocess.PIPE):
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src")}
    return subprocess.run([sys.executable, "-c", "from vlgap.cli import main; main()", *args], stdout=stdout,
                          stderr=subprocess.PIPE, text=True, env=env, timeout=120)


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full")
def test_stdout_on_a_full_device_is_one_line():
    with open("/dev/full", "w") as full:
        r = _vlgap("encoders", stdout=full)
    assert r.returncode == 2
    assert r.stderr == "error: cannot write to standard output: no space left on the device (ENOSPC)\n"


def test_stdout_to_a_closed_pipe_is_quiet():
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src")}
    p = subprocess.Popen([sys.executable, "-c", "from vlgap.cli import main; main()", "encoders"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    p.stdout.read(10)
    p.stdout.close()  # the reader goes away, as `| head -c 10` does
    err = p.stderr.read().decode()
    assert p.wait(timeout=120) == 1 and "Traceback" not in err and "Exception ignored" not in err, err


# ---- report folders ---------------------------------------------------------------------------------

def sweep_folder(root: Path) -> Path:
    """A sweep folder as `vlgap sweep` writes it, reduced to sweep.json (no seals: a copy of one)."""
    rows = [{"vision": "vis", "text": "txt", "n_f": nf, "n_c": nc, "score": 0.3 + 0.01 * nf + 0.02 * nc,
             "ci_lo": 0.2, "ci_hi": 0.5, "p_value": float("nan"), "null_mean": float("nan"), "x_layer": 1,
             "y_layer": 0, "x_layer_name": "", "y_layer_name": "", "n": 40, "k": 5, "chance": 5 / 39,
             "metric": "mutual_knn"} for nf in (1, 2) for nc in (1, 2)]
    run = root / "run"
    run.mkdir()
    (run / "sweep.json").write_text(json.dumps({"rows": rows, "config": {}, "description": "copied"}))
    return run


def test_a_report_folder_whose_figures_is_a_file(tmp_path, capsys, monkeypatch):
    run = sweep_folder(tmp_path)
    (run / "figures").write_text("mine")
    err = failed(monkeypatch, capsys, "report", run)
    assert err.startswith(f"error: cannot write {run / 'figures'}/") and err.endswith(
        f": {run / 'figures'} is a file, not a folder")
    assert (run / "figures").read_text() == "mine"


def test_a_report_folder_whose_report_html_is_a_folder(tmp_path, capsys, monkeypatch):
    run = sweep_folder(tmp_path)
    (run / "report.html").mkdir()
    assert failed(monkeypatch, capsys, "report", run) == (
        f"error: cannot write {run / 'report.html'}: is a folder, expected a file")


def test_an_immutable_figures_folder(tmp_path, capsys, monkeypatch):
    """chattr +i (or a read-only mount): creating a file there fails with EPERM (made so here: tests
    run as root, whom permissions do not stop)."""
    run = sweep_folder(tmp_path)
    real = io_utils._open_temp_beside

    def immutable(path):
        if path.parent.name == "figures":
            raise PermissionError(errno.EPERM, "Operation not permitted", str(path))
        return real(path)

    monkeypatch.setattr(io_utils, "_open_temp_beside", immutable)
    err = failed(monkeypatch, capsys, "report", run)
    assert err.startswith(f"error: cannot write {run / 'figures'}/") and "operation not permitted" in err


# ---- cache --------------------------------------------------------------------------------------------

def test_cache_prune_on_an_entry_it_cannot_remove(tmp_path, monkeypatch, capsys):
    from vlgap import reuse

    cache = tmp_path / "cache"
    cell = cache / "runs" / "cell.json"
    reuse.write_artefact(cell, b'{"score": 0.5}', {"cell": 1})
    cell.write_bytes(b'{"score": 0.9}')  # corrupt: --prune removes it
    real = Path.unlink

    def unlink(self, *a, **k):
        if self.name == "cell.json":
            raise PermissionError(errno.EACCES, "Permission denied", str(self))
        return real(self, *a, **k)

    monkeypatch.setattr(Path, "unlink", unlink)
    code, out, err = run_cli(monkeypatch, capsys, "cache", "--cache-dir", cache, "--prune")
    text = " ".join(out.split())
    assert code == 1 and "Traceback" not in err
    assert "could not remove it: permission denied (EACCES)" in text
    assert "1 stale, corrupt or orphaned could not be removed" in text and cell.exists()


def test_cache_run_of_an_empty_or_data_folder_is_not_everything_verified(tmp_path, capsys, monkeypatch):
    empty, data = tmp_path / "empty", tmp_path / "data"
    for folder in (empty, data, tmp_path / "c"):
        folder.mkdir()
    (data / "man.jsonl").write_text('{"id": "v1", "video": "v1.mp4", "captions": ["a"]}\n')
    for folder in (empty, data):
        err = refused(capsys, "cache", "--cache-dir", tmp_path / "c", "--run", folder)
        assert f"--run {folder}: holds no vlgap run" in err and "nothing to verify" in err
    code, out, _ = run_cli(monkeypatch, capsys, "cache", "--cache-dir", tmp_path / "c")
    assert code == 0 and "nothing to verify" in out and "everything verified" not in out


def test_vlgap_cache_naming_a_file(tmp_path, monkeypatch, capsys):
    f = tmp_path / "not-a-folder"
    f.write_text("x")
    monkeypatch.setenv("VLGAP_CACHE", str(f))
    assert refused(capsys, "cache").startswith(f"error: VLGAP_CACHE={f}: is a file, expected a folder")


# ---- what --out may name ----------------------------------------------------------------------------

def test_a_device_a_fifo_a_loop_and_an_empty_path_as_out(tmp_path, capsys):
    pred, refs = captions(tmp_path)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    line = ["caption-eval", "--pred", pred, "--refs", refs, "--metrics", "bleu", "--out"]
    assert "is a named pipe (FIFO), expected a file" in refused(capsys, *line, fifo)
    assert f"--out {tmp_path / 'a'}: a loop of symbolic links (ELOOP)" in refused(capsys, *line, tmp_path / "a")
    assert "--out: an empty path" in refused(capsys, *line, "")
    assert "RUN_DIR: an empty path" in refused(capsys, "report", "")
    if os.path.exists("/dev/full"):
        assert "--out /dev/full: is a character device, expected a file" in refused(capsys, *line, "/dev/full")
        assert stat.S_ISCHR(os.stat("/dev/full").st_mode)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


# ---- the entry point -----------------------------------------------------------------------------------

def test_an_os_error_naming_its_file_is_one_line_and_one_without_is_a_bug(tmp_path, monkeypatch, capsys):
    from vlgap.probe import report

    def denied(*a, **k):
        raise PermissionError(errno.EACCES, "Permission denied", "/somewhere/sweep.json")

    monkeypatch.setattr(report, "write_report", denied)
    run = sweep_folder(tmp_path)
    assert refused(capsys, "report", run) == "error: /somewhere/sweep.json: permission denied (EACCES)"

    def bug(*a, **k):
        raise OSError(errno.EINVAL, "Invalid argument")

    monkeypatch.setattr(report, "write_report", bug)
    with pytest.raises(OSError):  # no file named: a bug, which keeps its traceback
        run_cli(monkeypatch, capsys, "report", run)
