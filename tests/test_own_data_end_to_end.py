"""A user's own folder through the tutorial (docs/own-data.md), with the bundled real models: clips of
several kinds (a 3-frame clip, a phone video with a display matrix, an odd-height VP9 clip, an item with
one caption) become a manifest (`vlgap import folder`), are swept on the CPU (the tutorial's line with
`--skip-bad`) and reported; the report lists every left-out item with its reason, keeps the rotated and
odd-sized clips (the rotated one upright), and prints no interval outside [0, 1]."""
from __future__ import annotations

import csv
import json
import re
import shlex

import numpy as np
import pytest

from in_process_cli import run_cli

pytestmark = pytest.mark.slow  # real MobileNetV2 and MiniLM on 15 clips: about half a minute on 2 cores


def _clip(path, frames: int, h: int, w: int, seed: int, *, codec: str = "mpeg4", rotation: int | None = None):
    """A clip of moving noise blocks (each clip its own), h x w pixels; rotation: a display matrix as a
    phone writes it (the picture is stored sideways and shown turned)."""
    import av

    rng = np.random.default_rng(seed)
    base = rng.integers(0, 255, (h, w, 3), dtype=np.uint8)
    with av.open(str(path), "w") as c:
        s = c.add_stream(codec, rate=8)
        s.width, s.height, s.pix_fmt = w, h, "yuv420p"
        if rotation is not None:
            if not hasattr(s, "set_display_rotation"):
                pytest.skip("this PyAV cannot write a display matrix (Stream.set_display_rotation)")
            s.set_display_rotation(rotation)
        for t in range(frames):
            img = np.roll(base, 2 * t, axis=1)
            for p in s.encode(av.VideoFrame.from_ndarray(img, format="rgb24")):
                c.mux(p)
        for p in s.encode():
            c.mux(p)


CAPTIONS = ["a {c} pattern drifts", "noise of {c} moves right", "{c} blocks slide", "a {c} texture moves"]
COLOURS = ["red", "blue", "green", "grey", "pink", "brown", "white", "black", "teal", "gold", "navy", "lime"]


@pytest.fixture
def my_folder(tmp_path):
    """The tutorial's layout: my_videos/ and my_captions.csv (id,caption; one row per caption)."""
    videos = tmp_path / "my_videos"
    videos.mkdir()
    rows = []
    for i, colour in enumerate(COLOURS):  # ordinary clips: 8 frames, 4 captions
        _clip(videos / f"clip{i:02d}.mp4", 8, 32, 48, i)
        rows += [(f"clip{i:02d}", c.format(c=colour)) for c in CAPTIONS]
    _clip(videos / "short.mp4", 3, 32, 48, 100)  # 3 frames: cannot give n_f = 4
    rows += [("short", c.format(c="olive")) for c in CAPTIONS]
    _clip(videos / "phone.mp4", 8, 32, 48, 101, rotation=-90)  # stored 48 wide, shown 32 wide and 48 high
    rows += [("phone", c.format(c="cyan")) for c in CAPTIONS]
    _clip(videos / "odd.webm", 8, 31, 48, 102, codec="libvpx-vp9")  # an odd height in 4:2:0
    rows += [("odd", c.format(c="plum")) for c in CAPTIONS]
    _clip(videos / "one caption.mp4", 8, 32, 48, 103)  # a name with a space, one caption only
    rows.append(("one caption", "a single caption of a violet pattern"))
    with open(tmp_path / "my_captions.csv", "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["id", "caption"])
        w.writerows(rows)
    return tmp_path


def _tutorial_lines() -> list[str]:
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "docs" / "own-data.md").read_text(encoding="utf-8")
    lines = [ln.strip() for ln in re.findall(r"^vlgap (?:import folder|sweep|report) .*$", text, flags=re.M)
             if "--device cuda" not in ln and "hf:" not in ln and "--id-column" not in ln]
    assert [ln.split()[1] for ln in lines] == ["import", "sweep", "report"], lines
    return lines


def test_own_clips_through_the_tutorial_to_a_report_that_names_what_was_left_out(my_folder, monkeypatch, capsys):
    from vlgap.data.manifest import read_manifest
    from vlgap.data.video import read_frames

    monkeypatch.chdir(my_folder)
    monkeypatch.setenv("VLGAP_CACHE", str(my_folder / "cache"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    import_line, sweep_line, report_line = _tutorial_lines()
    code, _, err = run_cli(monkeypatch, capsys, *shlex.split(import_line)[1:])
    assert code == 0, err
    man = read_manifest(my_folder / "my_data.jsonl")
    assert len(man) == 16 and {"short", "phone", "odd", "one caption"} <= set(man.ids)
    # the phone video is read upright: portrait frames, as ffmpeg shows it
    phone = next(it for it in man.items if it.id == "phone")
    frames, _ = read_frames(phone, np.array([0]))
    assert frames[0].shape[:2] == (48, 32)

    # the tutorial's line as written stops at the door and names the first item that falls short ...
    code, _, err = run_cli(monkeypatch, capsys, *shlex.split(sweep_line)[1:], "--bootstrap", "50",
                           "--permutations", "50")
    assert code == 2 and "'short'" in err and "3 frames" in err and "more item" in err
    assert not (my_folder / "runs" / "my_data" / "sweep.json").exists()
    # ... and the same with --skip-bad runs in the same folder, without --force
    code, out, err = run_cli(monkeypatch, capsys, *shlex.split(sweep_line)[1:], "--skip-bad", "--bootstrap", "50",
                             "--permutations", "50")
    assert code == 0, err
    said = out + err
    assert "short" in said and "one caption" in said
    run = my_folder / "runs" / "my_data"
    doc = json.loads((run / "sweep.json").read_text())
    dropped = {d["id"]: d for d in doc["items"]["dropped"]}
    assert set(dropped) == {"short", "one caption"}, dropped
    assert "frames" in dropped["short"]["reason"] and "caption" in dropped["one caption"]["reason"]
    assert {r["n"] for r in doc["rows"]} == {14}  # the rotated and odd-height clips kept, in every cell
    for r in doc["rows"]:
        for end in (r.get("ci_lo"), r.get("ci_hi")):
            assert end is None or end != end or 0.0 <= end <= 1.0, r
    # the report names them with their reasons and says where it came from
    code, _, err = run_cli(monkeypatch, capsys, *shlex.split(report_line)[1:])
    assert code == 0, err
    page = (run / "report.html").read_text()
    assert "<h2>Items</h2>" in page and "short" in page and "one caption" in page
    assert "run: command</td><td>vlgap sweep my_data.jsonl" in page and str(my_folder) not in page
    cells = page[page.index("<h3>Cells</h3>"):]
    cells = cells[:cells.index("</table>")]  # the score intervals (the law's parameters have ranges of their own)
    ends = re.findall(r"\[(-?\d+\.\d+), (-?\d+\.\d+)\]", cells)
    assert ends and all(0.0 <= float(lo) <= float(hi) <= 1.0 for lo, hi in ends), ends
