"""The sweep's items (issue 43, item 2): which items cannot reach which n_f / n_c and why, said before
extraction; one item set for every cell, with what each cell could use on its own; the drops in the
console, sweep.json, dropped_items.jsonl and the report."""
from __future__ import annotations

import json

import numpy as np
import pytest

from conftest import write_video
from toy_encoders import ToyText, ToyVision
from vlgap.errors import VlgapError

#: per item: (frames, captions); None frames: the media is missing; "garbage": a file that is no video
ITEMS = {"ok0": (12, 4), "ok1": (9, 4), "short": (3, 4), "two_caps": (10, 2), "one_cap": (10, 1),
         "missing": (None, 4), "garbage": ("garbage", 4), "still": ("image", 1), "ok2": (8, 4), "ok3": (7, 4),
         "ok4": (6, 4), "ok5": (11, 4), "ok6": (10, 4), "ok7": (9, 4)}


def _words(i: int, j: int) -> str:
    rng = np.random.default_rng(100 * i + j)
    return " ".join(f"w{x}" for x in rng.integers(0, 50, 4))


@pytest.fixture
def own_folder(tmp_path):
    """A user's own folder: clips of different lengths (one of 3 frames), an image, a missing file, a file
    that is no video, items with 1 or 2 captions."""
    from PIL import Image

    rows = []
    for i, (item, (frames, caps)) in enumerate(ITEMS.items()):
        row = {"id": item, "captions": [_words(i, j) for j in range(caps)]}
        if frames == "image":
            Image.fromarray(np.full((16, 16, 3), 90, np.uint8)).save(tmp_path / "still.png")
            row["image"] = "still.png"
        elif frames == "garbage":
            (tmp_path / "garbage.mp4").write_bytes(b"this is not a video" * 10)
            row["video"] = "garbage.mp4"
        elif frames is None:
            row["video"] = "gone.mp4"
        else:
            write_video(tmp_path / "clips" / f"{item}.mp4", frames, size=16)
            row["video"] = f"clips/{item}.mp4"
        rows.append(row)
    man = tmp_path / "man.jsonl"
    man.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return man


def _naive_usable(item: str, n_f: int, n_c: int) -> bool:
    """The rule written out: readable media, at least n_f frames (an image is one frame by declaration,
    never short), at least n_c captions."""
    frames, caps = ITEMS[item]
    if frames in (None, "garbage"):
        return False
    return (frames == "image" or frames >= n_f) and caps >= n_c


def test_plan_names_each_item_what_it_has_and_the_cells_it_cannot_reach(own_folder, tmp_path):
    from vlgap.data.manifest import read_manifest
    from vlgap.probe.items import plan_items

    n_f, n_c = [1, 2, 4, 8], [1, 2, 4]
    plan = plan_items(read_manifest(own_folder), n_f, n_c, cache_dir=tmp_path / "cache")
    got = {(p.id, p.kind): p for p in plan.problems}
    assert set(got) == {("short", "frames"), ("ok3", "frames"), ("ok4", "frames"), ("two_caps", "captions"),
                        ("one_cap", "captions"), ("missing", "unreadable"), ("garbage", "unreadable"),
                        ("still", "captions")}
    assert got["short", "frames"].values == (4, 8) and got["short", "frames"].reason == "3 frames, fewer than n_f=4,8"
    assert got["two_caps", "captions"].values == (4,) and got["one_cap", "captions"].values == (2, 4)
    assert got["one_cap", "captions"].reason == "1 caption, fewer than n_c=2,4"
    assert got["missing", "unreadable"].reason == "media file not found: gone.mp4"  # relative to the manifest
    assert got["garbage", "unreadable"].reason.startswith("cannot decode garbage.mp4:")
    assert got["missing", "unreadable"].values == tuple(n_f)
    assert got["short", "frames"].cells() == "n_f=4,8 (every n_c)"
    # one item set: everything that misses some cell is left out of every cell
    assert plan.kept == [i for i in ITEMS if all(_naive_usable(i, f, c) for f in n_f for c in n_c)]
    # what each cell could have used on its own, against the rule written out
    for cell in plan.per_cell():
        assert cell["n"] == sum(_naive_usable(i, cell["n_f"], cell["n_c"]) for i in ITEMS), cell
    assert {(c["n_f"], c["n_c"]): c["n"] for c in plan.per_cell()}[1, 1] == 12  # all but the two unreadable
    # without --skip-bad: one line, the first item in manifest order, the others counted by reason
    msg = plan.refusal()
    assert msg.startswith("item 'short': its video has 3 frames but n_f=4 were requested") and "\n" not in msg
    assert msg.endswith("7 more items cannot reach every cell either (2 unreadable media, 2 too few frames, "
                        "3 too few captions)")
    lines = plan.lines()
    assert lines[0].startswith("items: 6 of 14 reach every cell (n_f up to 8, n_c up to 4); 8 items left out")
    assert "  too few frames: 'short' (3 frames, fewer than n_f=4,8), 'ok3' (7 frames, fewer than n_f=8), 'ok4' " \
           "(6 frames, fewer than n_f=8)" in lines
    assert lines[-1].startswith("  items each cell could use on its own (n_c = 1, 2, 4): n_f=1: 12, 10, 9;")


def test_repeated_frames_keep_short_videos_and_counts_are_remembered(own_folder, tmp_path, monkeypatch):
    from vlgap.data import frame_counts as F
    from vlgap.data.manifest import read_manifest
    from vlgap.probe.items import plan_items

    man = read_manifest(own_folder)
    plan = plan_items(man, [1, 4], [1], allow_repeated_frames=True, cache_dir=tmp_path / "cache")
    assert plan.repeated == [{"id": "short", "frames": 3, "n_f": [4]}]
    assert "short" in plan.kept and {p.id for p in plan.problems} == {"missing", "garbage"}
    # the counts are kept under the manifest's fingerprint: a rerun does not open the files again ...
    asked = []
    real = F.probe
    monkeypatch.setattr(F, "probe", lambda it, need, base=None: (asked.append(it.id), real(it, need, base))[1])
    plan_items(man, [1, 4], [1], cache_dir=tmp_path / "cache")
    assert asked == []
    # ... unless it needs more than it was told: a container's count below a new need is decoded
    plan_items(man, [1, 16], [1], cache_dir=tmp_path / "cache")
    assert sorted(asked) == sorted(i for i, (f, _) in ITEMS.items() if isinstance(f, int) and f < 16 and i != "short")


def test_stride_sampling_that_cannot_fit_is_its_own_reason(own_folder, tmp_path):
    from vlgap.data.manifest import read_manifest
    from vlgap.probe.items import plan_items

    plan = plan_items(read_manifest(own_folder), [2, 4], [1], frame_sampling=["uniform", "stride:3"],
                      cache_dir=tmp_path / "cache")
    wide = {p.id: p for p in plan.problems if p.kind == "sampling"}
    # stride:3 with n_f=4 spans 10 frames: the 6 to 9-frame clips cannot place it (the 3-frame one is short)
    assert set(wide) == {"ok1", "ok2", "ok3", "ok4", "ok7", "short"} and wide["ok3"].values == (4,)
    assert wide["short"].values == (2,)  # its n_f=4 is the frames rule's
    assert wide["ok3"].frame_sampling == "stride:3" and "under stride:3" in wide["ok3"].cells()
    cells = {(c["frame_sampling"], c["n_f"]): c["n"] for c in plan.per_cell()}
    assert cells["uniform", 4] - cells["stride:3", 4] == 5


def _cfg(man, tmp_path, **kw):
    from vlgap.probe.sweep import SweepConfig

    base = dict(vision=["tv"], text=["tt"], n_frames=[1, 2, 4], n_captions=[1, 2, 4], k=3, n_bootstrap=0,
                n_permutations=0, seed=0, cache_dir=str(tmp_path / "cache"), fit=False)
    return SweepConfig(str(man), **{**base, **kw})


def test_sweep_on_own_folder_refuses_at_the_door_then_lists_every_drop(own_folder, tmp_path, capsys):
    from vlgap.probe.report import write_report
    from vlgap.probe.sweep import run_sweep

    encs = {"tv": ToyVision(), "tt": ToyText()}
    run = tmp_path / "run"
    with pytest.raises(VlgapError, match=r"^item 'short': its video has 3 frames but n_f=4 .*; 5 more items cannot "
                                         r"reach every cell either \(2 unreadable media, 3 too few captions\)$"):
        run_sweep(_cfg(own_folder, tmp_path), run, progress=False, encoders=encs)
    assert not run.exists()  # refused before the folder recorded anything
    capsys.readouterr()
    res = run_sweep(_cfg(own_folder, tmp_path, skip_bad=True), run, progress=False, encoders=encs)  # no --force
    err = capsys.readouterr().err
    # the plan is said before extraction, each item with its reason
    assert err.index("items: 8 of 14 reach every cell") < err.index("features ready")
    assert "too few captions: 'two_caps' (2 captions, fewer than n_c=4), 'one_cap' (1 caption, fewer than " \
           "n_c=2,4), 'still' (1 caption, fewer than n_c=2,4)" in err
    assert "N = 8 of 14 items (6 left out of every cell, see dropped_items.jsonl)" in err
    kept = [i for i in ITEMS if all(_naive_usable(i, f, c) for f in (1, 2, 4) for c in (1, 2, 4))]
    assert {r["n"] for r in res.rows} == {len(kept)} == {8}
    doc = json.loads((run / "sweep.json").read_text())["items"]
    assert (doc["n_items"], doc["n_kept"], doc["n_dropped"], doc["item_set"]) == (14, 8, 6, "common")
    assert doc["by_reason"] == {"unreadable": ["missing", "garbage"], "frames": ["short"],
                                "captions": ["two_caps", "one_cap", "still"]}
    by_id = {d["id"]: d for d in doc["dropped"]}
    assert by_id["short"]["cannot_reach"] == "n_f=4 (every n_c)" and by_id["short"]["left_out_of"].startswith("every")
    assert {(c["n_f"], c["n_c"]): c["n"] for c in doc["per_cell"]} == {
        (f, c): sum(_naive_usable(i, f, c) for i in ITEMS) for f in (1, 2, 4) for c in (1, 2, 4)}
    assert res.items == doc and [d["id"] for d in res.dropped] == ["short", "two_caps", "one_cap", "missing",
                                                                   "garbage", "still"]
    lines = [json.loads(x) for x in (run / "dropped_items.jsonl").read_text().splitlines()]
    assert lines == res.dropped and lines[0]["reason"] == "too few frames: 3 frames, fewer than n_f=4"
    page = write_report(run, progress=False).read_text()
    assert "<h2>Items</h2><p>8 of 14 items of the manifest in every cell; 6 left out of every cell.</p>" in page
    assert "<td>too few frames</td><td>short</td><td>3 frames, fewer than n_f=4</td><td>n_f=4 (every n_c)</td>" in page
    assert "n_f=1 n_c=1: 12" in page


def test_extraction_drops_the_plan_did_not_foresee_are_named(own_folder, tmp_path, monkeypatch):
    """A file whose header reads but whose frames do not decode is found by extraction: it is named with
    the reason extraction recorded, not a vague "missing from some feature set"."""
    from vlgap.data import frame_counts as F
    from vlgap.probe.sweep import run_sweep

    real = F.probe
    monkeypatch.setattr(F, "probe", lambda it, need, base=None: F.MediaCount(10) if it.id == "garbage"
                        else real(it, need, base))
    res = run_sweep(_cfg(own_folder, tmp_path, skip_bad=True, n_captions=[1]), tmp_path / "run", progress=False,
                    encoders={"tv": ToyVision(), "tt": ToyText()})
    rec = next(d for d in res.dropped if d["id"] == "garbage")
    assert rec["problems"][0]["kind"] == "extraction" and rec["problems"][0]["values"] == [1, 2, 4]
    assert rec["reason"].startswith("refused during extraction: tv: ") and "garbage.mp4" in rec["reason"]


def test_too_few_items_for_k_is_refused_before_the_folder(own_folder, tmp_path):
    from vlgap.probe.sweep import run_sweep

    with pytest.raises(VlgapError, match=r"only 8 of 14 items reach every cell of this grid \(2 unreadable media, "
                                         r"1 too few frames, 3 too few captions\); k=7 needs more than k\+1"):
        run_sweep(_cfg(own_folder, tmp_path, skip_bad=True, k=7), tmp_path / "run", progress=False,
                  encoders={"tv": ToyVision(), "tt": ToyText()})
    assert not (tmp_path / "run").exists()
