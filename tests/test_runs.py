"""vlgap.runs: cells sealed and resumed, claims with liveness, run folders that refuse another
configuration, and the summary layer (t-intervals, item intervals, tables, frames)."""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest

from vlgap import reuse, runs
from vlgap.errors import VlgapError


# -- cells ---------------------------------------------------------------------------------------------

def test_a_cell_is_computed_once_sealed_and_read_back_verified(tmp_path):
    path = tmp_path / "cells" / "a.json"
    key = {"format": 1, "what": "cell", "seed": 0}
    calls = []

    def make():
        calls.append(1)
        return {"score": 0.25, "nan": float("nan"), "pair": (1, 2)}

    first = runs.cell(path, key, make)
    assert calls == [1] and first["pair"] == [1, 2] and math.isnan(first["nan"])  # as JSON reads it back
    assert reuse.check_artefact(path, key).ok  # sealed under its key
    again = runs.cell(path, key, make)
    assert calls == [1] and again["score"] == 0.25  # resumed: not computed again
    assert runs.cell(tmp_path / "cells" / "b.json", key, None) is None  # read only: a missing cell is None


def test_a_stale_or_corrupt_cell_is_recomputed_with_the_reason_said(tmp_path):
    path = tmp_path / "a.json"
    key = {"what": "cell", "k": 5}
    runs.write_cell(path, {"score": 1.0}, key)
    lines: list[str] = []
    # another key: stale, the differing setting named
    assert runs.read_cell(path, {"what": "cell", "k": 20}, what="test cell", report=lines.append) is None
    assert len(lines) == 1 and "test cell" in lines[0] and "stale" in lines[0] and "k: 5 -> 20" in lines[0]
    assert not path.exists() and not reuse.seal_path(path).exists()  # removed with its seal
    runs.write_cell(path, {"score": 1.0}, key)
    path.write_text(path.read_text().replace("1.0", "9.0"))  # edited by hand
    lines.clear()
    assert runs.cell(path, key, lambda: {"score": 2.0}, report=lines.append) == {"score": 2.0}
    assert "corrupt" in lines[0] and json.loads(path.read_text()) == {"score": 2.0}


def test_an_attached_file_that_fails_makes_the_whole_cell_recomputed(tmp_path):
    cell, matrix = tmp_path / "c.json", tmp_path / "c.npy"
    key = {"cell": 1}
    runs.write_cell(cell, {"score": 0.5}, key)
    reuse.write_artefact(matrix, b"matrix bytes", key)
    assert runs.read_cell(cell, key, attached={matrix: "score matrix"}) == {"score": 0.5}
    matrix.write_bytes(b"matrix bytez")
    lines: list[str] = []
    assert runs.read_cell(cell, key, attached={matrix: "score matrix"}, report=lines.append) is None
    assert lines and lines[0].startswith("score matrix") and "corrupt" in lines[0]
    assert not cell.exists() and not matrix.exists()  # the cell goes with its matrix


# -- claims --------------------------------------------------------------------------------------------

@pytest.fixture
def other_process():
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    yield proc
    proc.kill()
    proc.wait()


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid  # exited and reaped: no process holds this pid now (reuse within the test is unlikely)


def test_claim_writes_this_pid_and_release_gives_it_back(tmp_path):
    lock = tmp_path / "cells" / "a.lock"
    assert runs.claim(lock) and lock.read_text() == str(os.getpid())
    assert runs.lock_holder(lock) == os.getpid()
    assert not runs.claim(lock)  # held (by this very process): not taken twice
    runs.release(lock)
    assert not lock.exists() and runs.lock_holder(lock) is None


def test_a_killed_holders_lock_is_taken_over(tmp_path):
    lock = tmp_path / "a.lock"
    lock.write_text(str(_dead_pid()))
    assert runs.lock_holder(lock) is None
    assert runs.claim(lock) and lock.read_text() == str(os.getpid())


def test_a_live_holders_lock_is_respected(tmp_path, other_process):
    lock = tmp_path / "a.lock"
    lock.write_text(str(other_process.pid))
    assert runs.lock_holder(lock) == other_process.pid
    assert not runs.claim(lock) and lock.read_text() == str(other_process.pid)
    with runs.claimed(lock) as mine:
        assert not mine
    assert lock.read_text() == str(other_process.pid)  # not ours: not released by us
    path = tmp_path / "a.json"  # the cell of that lock is left to its holder
    assert runs.cell(path, {"k": 1}, lambda: pytest.fail("computed a held cell"), lock=True) is None


def test_an_empty_lock_being_written_counts_as_held(tmp_path):
    lock = tmp_path / "a.lock"
    lock.write_text("")
    assert runs.lock_holder(lock) == 0
    assert not runs.claim(lock) and lock.exists()
    lock.write_text("not a pid")  # unreadable: no live holder, taken over
    assert runs.claim(lock)


def test_a_locked_cell_is_computed_by_its_claimer_and_released_also_on_error(tmp_path):
    path = tmp_path / "cells" / "a.json"
    with pytest.raises(KeyboardInterrupt):
        runs.cell(path, {"k": 1}, lambda: (_ for _ in ()).throw(KeyboardInterrupt()), lock=True)
    assert not runs.lock_path(path).exists()  # an interrupted worker gives its claim back
    assert runs.cell(path, {"k": 1}, lambda: {"v": 3}, lock=True) == {"v": 3}
    assert not runs.lock_path(path).exists()


def test_workers_counted_for_the_oversubscription_warning(tmp_path, other_process):
    (tmp_path / "cells").mkdir()
    assert runs.oversubscription_warning(tmp_path, 2, 2) is None  # this worker alone
    (tmp_path / "cells" / "a.lock").write_text(str(other_process.pid))
    (tmp_path / "cells" / "b.lock").write_text(str(_dead_pid()))
    (tmp_path / "cells" / "c.lock").write_text("")
    msg = runs.oversubscription_warning(tmp_path, 2, 2)
    assert msg.startswith("2 experiment workers") and msg.endswith("--threads 1")
    assert runs.oversubscription_warning(tmp_path, 1, 2) is None


# -- the run folder ------------------------------------------------------------------------------------

def test_the_folder_resumes_its_configuration_refuses_another_and_force_overwrites(tmp_path):
    out = tmp_path / "run"
    cfg = {"k": 5, "metric": "mutual_knn", "seeds": [0, 1]}
    assert runs.open_run_folder(out, "demo-kind", cfg) is False
    (out / "cells").mkdir()
    (out / "cells" / "x.json").write_text("{}")
    assert runs.open_run_folder(out, "demo-kind", cfg, clear=("cells",)) is True  # resumed: kept
    assert (out / "cells" / "x.json").exists()
    with pytest.raises(VlgapError) as err:
        runs.open_run_folder(out, "demo-kind", {**cfg, "k": 20, "seeds": [0]}, clear=("cells",))
    msg = str(err.value)
    assert "k: 5 -> 20" in msg and "seeds: [0,1] -> [0]" in msg and "--force" in msg and "\n" not in msg
    assert (out / "cells" / "x.json").exists()  # a refusal touches nothing
    assert runs.open_run_folder(out, "demo-kind", {**cfg, "k": 20}, force=True, clear=("cells",)) is False
    assert not (out / "cells").exists()  # taken over: nothing of the old configuration is resumed
    assert json.loads((out / reuse.RUN_RECORD).read_text())["config"]["k"] == 20


def test_a_folder_of_the_users_own_is_not_written_into(tmp_path):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("mine")
    with pytest.raises(VlgapError, match="not empty and holds no vlgap demo-kind run"):
        runs.open_run_folder(mine, "demo-kind", {"k": 5})
    assert sorted(p.name for p in mine.iterdir()) == ["notes.txt"]


def test_a_folder_of_an_older_vlgap_is_taken_over_with_a_note(tmp_path):
    out = tmp_path / "old"
    (out / "cells").mkdir(parents=True)
    (out / "config.json").write_text("{}")
    lines: list[str] = []
    assert runs.open_run_folder(out, "demo-kind", {"k": 5}, legacy=("config.json", "cells"), log=lines.append,
                                clear=("cells",)) is False
    assert "older vlgap" in lines[0] and not (out / "cells").exists()
    assert runs.open_run_folder(out, "demo-kind", {"k": 5}, legacy=("config.json",)) is True  # now its own


def test_leftover_temporaries_of_a_killed_run_are_removed(tmp_path):
    out = tmp_path / "run"
    runs.open_run_folder(out, "demo-kind", {"k": 5})
    leftover = out / "cells" / ".a.json.0123456789ab.tmp"
    leftover.parent.mkdir()
    leftover.write_text("half")
    os.utime(leftover, (1, 1))
    runs.open_run_folder(out, "demo-kind", {"k": 5})
    assert not leftover.exists()


# -- summaries -----------------------------------------------------------------------------------------

def test_t_interval_is_the_student_t_interval_of_scipy():
    from scipy import stats

    values = [0.31, 0.42, 0.37, 0.29]
    mean, ci = runs.t_interval(values)
    lo, hi = stats.t.interval(0.95, len(values) - 1, loc=np.mean(values), scale=stats.sem(values))
    assert mean == pytest.approx(0.3475) and ci == pytest.approx([lo, hi], abs=1e-12)
    lo90, hi90 = stats.t.interval(0.90, 3, loc=np.mean(values), scale=stats.sem(values))
    assert runs.t_interval(values, 0.90)[1] == pytest.approx([lo90, hi90], abs=1e-12)
    assert runs.t_interval([0.5]) == (0.5, None)  # one seed: no interval
    rec = runs.over_seeds(values, p_value_per_seed=[0.1, 0.2, 0.3, 0.4])
    assert rec["mean"] == mean and rec["t_ci"] == ci and rec["per_seed"] == values
    assert rec["p_value_per_seed"] == [0.1, 0.2, 0.3, 0.4]


def test_interval_over_items_is_the_bootstrap_of_the_mean_with_the_small_n_rule():
    values = np.arange(20, dtype=float)
    rec = runs.over_items(values, n_bootstrap=500, seed=3)
    assert rec["mean"] == 9.5 and rec["n"] == 20 and rec["reason"] is None
    assert 6.5 < rec["ci"][0] < 9.5 < rec["ci"][1] < 12.5  # the mean's SE here is about 1.3
    assert runs.over_items(values, n_bootstrap=500, seed=3) == rec  # seeded
    few = runs.over_items([1.0, 2.0, 3.0], n_bootstrap=100)
    assert few["ci"] is None and "n too small" in few["reason"]


TABLES = [{"title": "Scores", "header": ["system", "CIDEr"], "rows": [["wsv", "0.512 [0.431, 0.593]"],
                                                                     ["a<b", "n/a"]]},
          {"title": "Loss", "header": ["system", "final"], "rows": [["wsv", "1.20"]]}]


def test_tables_as_markdown_html_and_a_long_frame():
    md = runs.tables_markdown(TABLES)
    assert md.splitlines()[:5] == ["Scores:", "", "| system | CIDEr |", "|---|---|", "| wsv | 0.512 [0.431, 0.593] |"]
    assert "Loss:" in md and md.count("|---|---|") == 2
    html = runs.tables_html(TABLES)
    assert html.startswith("<p>Scores.</p><table><thead><tr><th>system</th><th>CIDEr</th></tr></thead>")
    assert "<td>a&lt;b</td>" in html and html.count("<table>") == 2
    frame = runs.tables_frame(TABLES)
    assert list(frame.columns) == ["table", "title", "row", "column", "value"] and len(frame) == 6
    cell = frame[(frame["table"] == 0) & (frame["row"] == 1) & (frame["column"] == "system")]
    assert cell["value"].tolist() == ["a<b"]
    assert runs.interval_text((0.5, [0.25, 0.75]), 2) == "0.50 [0.25, 0.75]"
    assert runs.interval_text({"mean": 0.5, "t_ci": None}) == "0.500"


def test_interval_frame_is_long_with_one_row_per_metric():
    records = [{"system": "wsv", "metric": "CIDEr", **runs.over_seeds([0.4, 0.5, 0.6])},
               {"system": "wsv", "metric": "BLEU-4", **runs.over_seeds([0.2])},
               {"system": "chance", "metric": "CIDEr", "mean": 0.1, "ci": [0.05, 0.15], "n": 60}]
    frame = runs.interval_frame(records, names=("system",))
    assert list(frame.columns) == ["system", "metric", "mean", "ci_low", "ci_high", "n"]
    assert frame["n"].tolist() == [3, 1, 60]
    cider = frame.iloc[0]
    assert cider["mean"] == pytest.approx(0.5) and cider["ci_low"] == pytest.approx(runs.t_interval([.4, .5, .6])[1][0])
    assert math.isnan(frame.iloc[1]["ci_low"]) and frame.iloc[2]["ci_high"] == 0.15


WORKER = """
import sys, time
from pathlib import Path
from vlgap import runs

out = Path(sys.argv[1])
for i in range(6):
    def make(i=i):
        with open(out / "computed.log", "a") as f:  # one line per computation, by whom
            f.write(f"{i} {sys.argv[2]}\\n")
        time.sleep(0.2)
        return {"cell": i}
    runs.cell(out / "cells" / f"c{i}.json", {"cell": i}, make, lock=True)
"""


def test_two_worker_processes_share_the_cells_each_computed_once(tmp_path):
    procs = [subprocess.Popen([sys.executable, "-c", WORKER, str(tmp_path), name]) for name in ("a", "b")]
    assert [p.wait(timeout=120) for p in procs] == [0, 0]
    lines = (tmp_path / "computed.log").read_text().split("\n")[:-1]
    assert sorted(int(ln.split()[0]) for ln in lines) == list(range(6))  # every cell, none twice
    assert all(runs.read_cell(tmp_path / "cells" / f"c{i}.json", {"cell": i}) == {"cell": i} for i in range(6))
    assert not list((tmp_path / "cells").glob("*.lock"))  # every claim given back


def test_a_cell_another_worker_is_still_sealing_is_left_alone(tmp_path):
    """Between writing a cell and sealing it, its holder's file is unsealed: a worker that looks at it
    before claiming must neither remove it nor compute it (that made a cell computed twice)."""
    path = tmp_path / "cells" / "c0.json"
    path.parent.mkdir()
    path.write_text('{"cell": 0}\n')  # written, seal not yet
    runs.lock_path(path).write_text(str(os.getppid()))  # held by a live process
    made = []
    assert runs.cell(path, {"cell": 0}, lambda: made.append(1) or {"cell": 0}, lock=True) is None
    assert path.exists() and not made
    assert runs.peek_cell(path, {"cell": 0}) is None and path.exists()
    write_cell = runs.write_cell(path, {"cell": 0}, {"cell": 0})  # the holder seals it
    assert runs.peek_cell(path, {"cell": 0}) == write_cell == {"cell": 0}
