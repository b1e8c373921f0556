"""The feature store broken on purpose: flipped and truncated bytes, lost seals, changed settings, runs
killed at each stage, degenerate items, bad counts. Whatever is broken is reported in one line and
recomputed (or refused with the error a fresh run gives); results equal an uninterrupted run."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from toy_encoders import ToyText, ToyVision
from vlgap import reuse
from vlgap.errors import VlgapError
from vlgap.features import chunk_steps
from vlgap.features import store as store_mod
from vlgap.features.extract import extract, load_features

HELPERS = Path(__file__).parent / "helpers"
N_F = [1, 3, 8]


@pytest.fixture
def videos(tmp_path):
    """12 short videos of 8..19 frames (none shorter than n_f = 8)."""
    from conftest import write_video

    rows = []
    for i in range(12):
        write_video(tmp_path / "m" / f"v{i}.mp4", 8 + i, size=16)
        rows.append({"id": f"v{i}", "video": f"m/v{i}.mp4", "captions": [f"clip {i}", f"video {i}"]})
    man = tmp_path / "man.jsonl"
    man.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return man


@pytest.fixture(autouse=True)
def small_chunks(monkeypatch):
    monkeypatch.setattr(chunk_steps, "CHUNK_FRAMES", 16)  # 2 items per chunk at n_f = 8: many chunks


class Interrupted(Exception):
    pass


def _interrupted_run(man, cache, monkeypatch, after: int, n_frames=N_F, **kw):
    """A run that stops right after its `after`-th chunk write (as a kill would), leaving chunks."""
    written = {"n": 0}
    original = store_mod.Entry.write_chunk

    def write_then_stop(self, *args, **kwargs):
        original(self, *args, **kwargs)
        written["n"] += 1
        if written["n"] == after:
            raise Interrupted

    monkeypatch.setattr(store_mod.Entry, "write_chunk", write_then_stop)
    with pytest.raises(Interrupted):
        extract(man, "toy", n_frames=n_frames, cache_dir=cache, loaded_encoder=ToyVision(), progress=False, **kw)
    monkeypatch.setattr(store_mod.Entry, "write_chunk", original)


def _run(man, cache, **kw):
    return extract(man, "toy", n_frames=kw.pop("n_frames", N_F), cache_dir=cache, loaded_encoder=ToyVision(),
                   progress=False, **kw)


def _assert_same(a, b):
    assert sorted(a.features) == sorted(b.features)
    for v in a.features:
        assert a.features[v].ids == b.features[v].ids
        for x, y in zip(a.features[v].layers, b.features[v].layers):
            np.testing.assert_array_equal(x, y)


def _chunks(cache):
    return sorted(Path(cache).glob("features/*/*/*/chunks/*.npz"))


def _flip(path: Path, at: float = 0.5) -> None:
    data = bytearray(path.read_bytes())
    data[int(len(data) * at)] ^= 0xFF
    path.write_bytes(bytes(data))


def _one_line_reports(err: str, word: str) -> list[str]:
    lines = [line for line in err.splitlines() if word in line]
    assert lines, err
    assert "Traceback" not in err
    return lines


# -- chunks -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("damage", ["flip", "truncate", "seal"])
def test_damaged_chunk_is_reported_and_recomputed(videos, tmp_path, monkeypatch, capfd, damage):
    clean = _run(videos, tmp_path / "clean")
    cache = tmp_path / "c"
    _interrupted_run(videos, cache, monkeypatch, after=6)
    chunk = _chunks(cache)[0]
    if damage == "flip":  # a flipped byte used to crash every later run with BadZipFile
        _flip(chunk)
    elif damage == "truncate":
        chunk.write_bytes(chunk.read_bytes()[:100])
    else:
        reuse.seal_path(chunk).unlink()
    capfd.readouterr()
    again = _run(videos, cache)
    err = capfd.readouterr().err
    word = {"flip": "corrupt", "truncate": "corrupt", "seal": "unsealed"}[damage]
    lines = _one_line_reports(err, word)
    assert str(chunk.name) in lines[0] and "recomputing" in lines[0]
    assert 0 < again.chunks_computed < again.chunks_total  # the intact chunks were reused
    _assert_same(again, clean)


def test_chunk_sealed_under_another_key_is_not_reused(videos, tmp_path, monkeypatch, capfd):
    cache = tmp_path / "c"
    _interrupted_run(videos, cache, monkeypatch, after=4)
    chunk = _chunks(cache)[0]
    seal = json.loads(reuse.seal_path(chunk).read_text())
    seal["key"]["format"] = 0  # made by an older store format
    seal["key_sha256"] = reuse.key_digest(seal["key"])
    reuse.seal_path(chunk).write_text(json.dumps(seal))
    capfd.readouterr()
    again = _run(videos, cache)
    lines = _one_line_reports(capfd.readouterr().err, "stale")
    assert "format: 0 -> 1" in lines[0]
    _assert_same(again, _run(videos, tmp_path / "clean"))


# -- finished entries ---------------------------------------------------------------------------------

@pytest.mark.parametrize("damage", ["flip", "truncate", "seal", "stale"])
def test_damaged_features_file_is_reported_and_recomputed(videos, tmp_path, capfd, damage):
    cache = tmp_path / "c"
    first = _run(videos, cache, n_frames=[3])
    f = first.features[3].path / "features.safetensors"
    if damage == "flip":
        _flip(f, 0.9)
    elif damage == "truncate":
        f.write_bytes(f.read_bytes()[: f.stat().st_size // 2])
    elif damage == "seal":
        reuse.seal_path(f).unlink()
    else:
        seal = json.loads(reuse.seal_path(f).read_text())
        seal["key"]["dataset"] = "another"
        seal["key_sha256"] = reuse.key_digest(seal["key"])
        reuse.seal_path(f).write_text(json.dumps(seal))
    with pytest.raises(VlgapError, match="not complete"):
        load_features(videos, "toy", "n_f", 3, cache_dir=cache)
    capfd.readouterr()
    again = _run(videos, cache, n_frames=[3])
    word = {"flip": "corrupt", "truncate": "corrupt", "seal": "unsealed", "stale": "stale"}[damage]
    lines = _one_line_reports(capfd.readouterr().err, word)
    assert "features.safetensors" in lines[0] and "recomputing" in lines[0]
    assert again.computed == [3]
    _assert_same(again, first)
    assert reuse.check_artefact(f, store_mod.FeatureKey(
        again.features[3].record["encoder_key"], again.features[3].record["dataset"]["fingerprint"], "n_f", 3
    ).seal_key()).ok


def _text_run(man, cache, n_captions=(1, 2)):
    return extract(man, "toy_txt", n_captions=list(n_captions), cache_dir=cache, loaded_encoder=ToyText(),
                   progress=False)


def _unseal_as_before_seals(res) -> None:
    """Turn each entry into what a store of an earlier version wrote: a COMPLETE file, no seal."""
    for fs in res.features.values():
        f = fs.path / "features.safetensors"
        reuse.seal_path(f).unlink()
        (fs.path / "COMPLETE").write_text(json.dumps({"sha256": reuse.sha256_of_file(f)}) + "\n")


def test_entry_written_before_seals_is_adopted_or_recomputed(videos, tmp_path, capfd):
    """Stores of earlier versions (a COMPLETE file with the features' sha256, no seal) stay readable:
    text entries are adopted when the checksum matches; vision entries of that age are recomputed, their
    frames having been decoded by an earlier video reader (phone videos sideways)."""
    cache = tmp_path / "c"
    text = _text_run(videos, cache)
    vision = _run(videos, cache, n_frames=[1])
    _unseal_as_before_seals(text)
    _unseal_as_before_seals(vision)
    _flip(text.features[2].path / "features.safetensors", 0.9)  # this one's checksum no longer matches
    capfd.readouterr()
    again = _text_run(videos, cache)
    err = capfd.readouterr().err
    assert again.computed == [2]  # n_c=1 adopted without recomputing, n_c=2 recomputed
    assert "COMPLETE" in _one_line_reports(err, "corrupt")[0]
    assert reuse.seal_path(text.features[1].path / "features.safetensors").is_file()
    assert not (text.features[1].path / "COMPLETE").exists()
    _assert_same(again, text)
    seen = _run(videos, cache, n_frames=[1])
    assert seen.computed == [1]
    assert "earlier video reader" in _one_line_reports(capfd.readouterr().err, "stale")[0]
    _assert_same(seen, vision)


def test_vision_features_of_an_earlier_video_reader_are_recomputed(videos, tmp_path, monkeypatch, capfd):
    """Vision entries and chunks sealed before the decoding joined the key (phone videos were decoded
    sideways) are stale: said in one line naming `decoding`, recomputed in place; `vlgap cache --check`
    calls them stale; text entries, which decode nothing, are reused."""
    from vlgap import check_cache
    from vlgap.data.frame_convert import DECODING

    cache = tmp_path / "c"
    text = _text_run(videos, cache, n_captions=[1])
    vision = _run(videos, cache, n_frames=[1])
    _interrupted_run(videos, cache, monkeypatch, after=2, n_frames=[3])
    f = vision.features[1].path / "features.safetensors"
    old_key = {k: v for k, v in reuse.read_seal(f)["key"].items() if k != "decoding"}
    reuse.seal_file(f, old_key)  # as an earlier vlgap sealed it
    chunk = _chunks(cache)[0]
    chunk_key = {k: v for k, v in reuse.read_seal(chunk)["key"].items() if k != "decoding"}
    reuse.seal_file(chunk, chunk_key)
    found = {x.path: x for x in check_cache(cache).findings}
    assert found[str(f)].status == "stale" and "decoding" in found[str(f)].reason
    assert found[str(chunk)].status == "stale" and f"decoding: (absent) -> {DECODING}" in found[str(chunk)].reason
    capfd.readouterr()
    again = _run(videos, cache, n_frames=[1, 3])
    lines = _one_line_reports(capfd.readouterr().err, "stale")
    assert any(f"decoding: (absent) -> {DECODING}" in line and "features.safetensors" in line for line in lines)
    assert 1 in again.computed and reuse.read_seal(f)["key"]["decoding"] == DECODING
    assert _text_run(videos, cache, n_captions=[1]).computed == []
    _assert_same(again, _run(videos, tmp_path / "clean", n_frames=[1, 3]))
    assert text.features[1].path.is_dir()


@pytest.mark.parametrize("change", [
    {"dtype": "float16"}, {"image_size": 32}, {"pooling": "cls"}, {"temporal_pooling": "meandiff"},
    {"frame_order": "reversed"}, {"n_frames": [6]}, {"shard": "0/2"},
])
def test_every_setting_is_part_of_the_key(videos, tmp_path, monkeypatch, change):
    """Neither a finished entry nor the chunks of an interrupted run are reused under other settings."""
    _run(videos, tmp_path / "finished", n_frames=[5])
    _interrupted_run(videos, tmp_path / "chunks", monkeypatch, after=3, n_frames=[5])  # 3 of 4 chunks
    kw = dict(change)
    values = kw.pop("n_frames", [5])
    for cache in (tmp_path / "finished", tmp_path / "chunks"):
        res = extract(videos, "toy", n_frames=values, cache_dir=cache, loaded_encoder=ToyVision(), progress=False,
                      **kw)
        assert res.computed == values and res.chunks_computed == res.chunks_total


# -- runs killed at each stage (SIGKILL, then a new run) -------------------------------------------------

def _killed_at(man, cache, pause):
    env = dict(os.environ, PYTHONPATH=f"{HELPERS}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    proc = subprocess.Popen([sys.executable, str(HELPERS / "run_toy_extract.py"), str(man), str(cache), "0", pause],
                            env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = proc.stdout.readline()  # "PAUSED ...", or EOF if the helper died
    assert line.startswith("PAUSED"), proc.stderr.read() if proc.poll() is not None else line
    proc.send_signal(signal.SIGKILL)
    proc.wait()


@pytest.mark.parametrize("stage", ["features-temp", "unsealed", "chunks-left"])
def test_kill_at_each_stage_then_resume_equals_uninterrupted(videos, tmp_path, monkeypatch, capfd, stage):
    cache = tmp_path / "killed"
    _killed_at(videos, cache, stage)
    entry_dirs = sorted(p for p in cache.glob("features/*/*/*") if p.is_dir())
    temps = [p for p in cache.rglob(".*.tmp") if reuse.TEMP_RE.match(p.name)]
    if stage == "features-temp":  # the temporary features file is on disk, full size
        assert temps and temps[0].stat().st_size > 1000
    if stage == "chunks-left":  # the entry is sealed and its chunks are still there
        assert _chunks(cache) and any(reuse.seal_path(d / "features.safetensors").exists() for d in entry_dirs)
    from vlgap.cache_check import check_cache

    found = check_cache(cache)
    assert found.remaining and not found.ok  # `vlgap cache --check` names the leftovers
    monkeypatch.setattr(reuse, "PROCESS_START", time.time())  # a new run starts after the killed one
    again = extract(videos, "toy", n_frames=N_F, cache_dir=cache, loaded_encoder=ToyVision(), progress=False,
                    batch_size=4, allow_repeated_frames=True)
    assert "Traceback" not in capfd.readouterr().err
    assert not [p for p in cache.rglob(".*.tmp")], "temporaries of the killed run were left behind"
    assert not _chunks(cache), "chunks beside finished entries were left behind"
    assert check_cache(cache).ok
    clean = extract(videos, "toy", n_frames=N_F, cache_dir=tmp_path / "clean", loaded_encoder=ToyVision(),
                    progress=False, batch_size=4)
    _assert_same(again, clean)


# -- degenerate items ---------------------------------------------------------------------------------------

@pytest.fixture
def one_frame(tmp_path, videos):
    """The 12 videos plus a one-frame video and a still image."""
    from PIL import Image

    from conftest import write_video

    write_video(tmp_path / "m" / "single.mp4", 1, size=16)
    Image.fromarray(np.full((16, 16, 3), 90, np.uint8)).save(tmp_path / "m" / "still.png")
    rows = [json.loads(line) for line in videos.read_text().splitlines()]
    rows.insert(3, {"id": "single", "video": "m/single.mp4", "captions": ["one frame"]})
    rows.append({"id": "still", "image": "m/still.png", "captions": ["a still image"]})
    man = tmp_path / "one.jsonl"
    man.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return man


def test_video_with_fewer_frames_than_n_f_is_refused_by_default(one_frame, tmp_path):
    with pytest.raises(VlgapError) as err:
        _run(one_frame, tmp_path / "c", n_frames=[2, 4])
    msg = str(err.value)
    assert "\n" not in msg
    assert "item 'single'" in msg and "1 frame" in msg and "n_f=2" in msg
    assert "--allow-repeated-frames" in msg and "--skip-bad" in msg
    ok = _run(one_frame, tmp_path / "c", n_frames=[1])  # n_f=1 needs one frame: nothing repeats
    assert ok.n == 14 and not ok.repeated_frames


def test_allowed_repeated_frames_are_warned_counted_and_recorded(one_frame, tmp_path, capfd):
    res = _run(one_frame, tmp_path / "c", n_frames=[2, 4], allow_repeated_frames=True)
    err = capfd.readouterr().err
    warnings = [line for line in err.splitlines() if "warning" in line and "repeat" in line]
    assert len(warnings) == 1 and "'single'" in warnings[0] and "n_f=2,4" in warnings[0]  # one line per item
    assert "repeated frames in 1 item " in res.summary()
    assert res.n == 14 and "still" in res.features[4].ids  # a still image is one frame by declaration
    for v in (2, 4):
        rec = json.loads((res.features[v].path / "record.json").read_text())
        assert rec["repeated_frames"] == [{"id": "single", "frames": 1, "n_f": v}]
        assert rec["sampling"]["frame_indices"]["single"] == [0] * v
    # the cached entry is refused without the flag, with the error a fresh run gives
    with pytest.raises(VlgapError) as cached:
        _run(one_frame, tmp_path / "c", n_frames=[2, 4])
    with pytest.raises(VlgapError) as fresh:
        _run(one_frame, tmp_path / "fresh", n_frames=[2, 4])
    assert str(cached.value) == str(fresh.value)
    # --skip-bad alone leaves the short video out and lists it, cached or fresh alike
    skipped = _run(one_frame, tmp_path / "c", n_frames=[2, 4], skip_bad=True)
    fresh_skip = _run(one_frame, tmp_path / "fresh2", n_frames=[2, 4], skip_bad=True)
    assert skipped.computed == [] and [b["id"] for b in skipped.bad_items] == ["single"]
    assert "single" not in skipped.features[2].ids and skipped.n == 13
    _assert_same(skipped, fresh_skip)
    assert skipped.bad_items == fresh_skip.bad_items


def _with_ghost(man: Path) -> Path:
    rows = [json.loads(line) for line in man.read_text().splitlines()]
    rows.insert(5, {"id": "ghost", "video": "m/ghost.mp4", "captions": ["x"]})
    out = man.with_name("ghost.jsonl")
    out.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return out


def test_skip_bad_cached_entry_is_refused_without_skip_bad(videos, tmp_path):
    man = _with_ghost(videos)
    with pytest.raises(VlgapError) as fresh:
        _run(man, tmp_path / "fresh", n_frames=[3])
    res = _run(man, tmp_path / "c", n_frames=[3], skip_bad=True)
    assert [b["id"] for b in res.bad_items] == ["ghost"]
    with pytest.raises(VlgapError) as cached:  # used to exit 0 with the skip applied
        _run(man, tmp_path / "c", n_frames=[3])
    assert str(cached.value) == str(fresh.value)
    assert "item 'ghost'" in str(fresh.value) and "--skip-bad" in str(fresh.value)
    with pytest.raises(VlgapError, match="item 'ghost'"):
        load_features(man, "toy", "n_f", 3, cache_dir=tmp_path / "c")
    assert load_features(man, "toy", "n_f", 3, cache_dir=tmp_path / "c", skip_bad=True).n == 12
    # text entries alike ('ghost' has one caption)
    with pytest.raises(VlgapError) as tfresh:
        extract(man, "toyt", n_captions=[2], cache_dir=tmp_path / "tf", loaded_encoder=ToyText(), progress=False)
    extract(man, "toyt", n_captions=[2], cache_dir=tmp_path / "t", loaded_encoder=ToyText(), progress=False,
            skip_bad=True)
    with pytest.raises(VlgapError) as tcached:
        extract(man, "toyt", n_captions=[2], cache_dir=tmp_path / "t", loaded_encoder=ToyText(), progress=False)
    assert str(tcached.value) == str(tfresh.value)


def test_chunks_of_a_skip_bad_run_are_refused_without_skip_bad(videos, tmp_path, monkeypatch):
    man = _with_ghost(videos)
    with pytest.raises(VlgapError) as fresh:
        _run(man, tmp_path / "fresh")
    _interrupted_run(man, tmp_path / "c", monkeypatch, after=9, skip_bad=True)  # chunks listing 'ghost'
    encoded = []
    monkeypatch.setattr(ToyVision, "forward_layers",
                        lambda self, x: encoded.append(1) or pytest.fail("encoded before refusing"))
    with pytest.raises(VlgapError) as resumed:
        _run(man, tmp_path / "c")
    assert str(resumed.value) == str(fresh.value) and not encoded


# -- count options ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("kw", [{"batch_size": 0}, {"workers": 0}, {"threads": 0}, {"ray_workers": -1},
                                {"batch_size": 2.5}, {"image_size": 0}])
def test_count_options_are_one_line_errors(videos, tmp_path, kw):
    name = next(iter(kw))
    with pytest.raises(VlgapError, match=rf"^{name}={kw[name]!r}: need an integer >= 1, e\.g\. \d+$"):
        _run(videos, tmp_path, **kw)
    with pytest.raises(VlgapError, match=rf"^{name}="):
        extract(videos, "toyt", n_captions=[1], cache_dir=tmp_path, loaded_encoder=ToyText(), progress=False, **kw)


def test_cli_batch_size_zero_is_one_line_exit_2(videos, tmp_path):
    for flags in (["--n-frames", "2"], ["--n-captions", "1"]):
        r = subprocess.run([sys.executable, "-c", "from vlgap.cli import main; main()", "extract", str(videos),
                            "-e", "mobilenet_v2", *flags, "--batch-size", "0", "--cache-dir", str(tmp_path)],
                           capture_output=True, text=True)
        assert r.returncode == 2, r.stderr
        lines = [line for line in r.stderr.splitlines() if line.strip()]
        assert lines == ["error: --batch-size=0: need an integer >= 1, e.g. 32"], r.stderr


# -- vlgap cache --check / --prune -----------------------------------------------------------------------

def test_cache_check_names_and_prunes_what_is_broken(videos, tmp_path, monkeypatch):
    from vlgap import check_cache

    cache = tmp_path / "c"
    good = _run(videos, cache, n_frames=[1])
    bad = _run(videos, cache, n_frames=[3])
    _interrupted_run(videos, cache, monkeypatch, after=5)  # resumable chunks of n_f=8 ...
    _flip(bad.features[3].path / "features.safetensors", 0.9)
    chunks = _chunks(cache)
    _flip(chunks[0])                                       # ... one of them corrupt
    stray = good.features[1].path / ".features.safetensors.0123456789ab.tmp"
    stray.write_bytes(b"x" * 100)
    old = time.time() - 3600
    os.utime(stray, (old, old))
    orphan_chunk = good.features[1].path / "chunks" / "0000000-0000002.npz"  # beside a finished entry
    orphan_chunk.parent.mkdir()
    orphan_chunk.write_bytes(b"leftover")
    res = check_cache(cache)
    by_path = {f.path: f for f in res.findings}
    assert by_path[str(good.features[1].path / "features.safetensors")].status == "ok"
    assert by_path[str(bad.features[3].path / "features.safetensors")].status == "corrupt"
    assert by_path[str(chunks[0])].status == "corrupt"
    assert all(by_path[str(c)].status == "resumable" for c in chunks[1:])
    assert by_path[str(stray)].status == "orphaned" and by_path[str(orphan_chunk)].status == "orphaned"
    assert len(res.remaining) == 4
    d = res.to_dict()
    assert d["counts"]["corrupt"] == 2 and json.dumps(d)
    pruned = check_cache(cache, prune=True)
    assert pruned.ok and all(f.removed for f in pruned.problems)
    assert not stray.exists() and not orphan_chunk.parent.exists() and not chunks[0].exists()
    assert not bad.features[3].path.exists()  # the corrupt entry went, record and all
    after = check_cache(cache)
    assert after.ok and not after.problems
    # what was pruned is recomputed; the rest reused, results equal a clean run
    again = _run(videos, cache)
    assert sorted(again.computed) == [3, 8]
    _assert_same(again, _run(videos, tmp_path / "clean"))


def test_cache_cli_check_prune_json(videos, tmp_path):
    cache = tmp_path / "c"
    res = _run(videos, cache, n_frames=[1])
    _flip(res.features[1].path / "features.safetensors", 0.9)
    cli = [sys.executable, "-c", "from vlgap.cli import main; main()", "cache"]
    r = subprocess.run([*cli, "--check", "--cache-dir", str(cache), "--json"], capture_output=True, text=True)
    assert r.returncode == 1, r.stderr
    d = json.loads(r.stdout)
    assert d["counts"] == {"corrupt": 1} and d["remaining"] == 1
    r = subprocess.run([*cli, "--prune", "--cache-dir", str(cache)], capture_output=True, text=True)
    assert r.returncode == 0 and "removed" in r.stdout, r.stderr
    r = subprocess.run([*cli, "--cache-dir", str(cache)], capture_output=True, text=True)
    assert r.returncode == 0 and "nothing to verify" in r.stdout  # the only entry was pruned


def test_cache_check_models_and_other_sealed_artefacts(tmp_path):
    from vlgap import check_cache

    cache = tmp_path / "c"
    done = cache / "models" / "gguf-0123456789abcdef"
    done.mkdir(parents=True)
    (done / "vlgap_gguf.json").write_text(json.dumps({"gguf_sha256": "0123456789abcdef" + "0" * 48}))
    unfinished = cache / "models" / "gguf-fedcba9876543210"
    unfinished.mkdir()
    (unfinished / "model.safetensors").write_bytes(b"half")
    conversion_tmp = cache / "models" / ".gguf-fedcba9876543210.k2j3.tmp"
    conversion_tmp.mkdir()
    cell = cache / "runs" / "cell.json"  # another module's sealed artefact under the root
    reuse.write_artefact(cell, b'{"score": 0.5}', {"cell": 1})
    lost = cache / "runs" / "lost.bin"
    reuse.write_artefact(lost, b"x", {"k": 1})
    lost.unlink()
    res = check_cache(cache)
    by_path = {f.path: f for f in res.findings}
    assert by_path[str(done)].status == "ok" and by_path[str(cell)].status == "ok"
    assert by_path[str(unfinished)].status == by_path[str(conversion_tmp)].status == "orphaned"
    assert by_path[str(reuse.seal_path(lost))].status == "orphaned"
    cell.write_bytes(b'{"score": 0.9}')
    assert {f.path: f.status for f in check_cache(cache).findings}[str(cell)] == "corrupt"
    pruned = check_cache(cache, prune=True)
    assert pruned.ok and done.is_dir() and not unfinished.exists() and not conversion_tmp.exists()
    assert not cell.exists() and not reuse.seal_path(cell).exists() and not reuse.seal_path(lost).exists()


def test_sweep_passes_allow_repeated_frames_on(one_frame, tmp_path):
    from vlgap.probe.sweep import SweepConfig, run_sweep

    def cfg(**kw):
        return SweepConfig(manifest=str(one_frame), vision=["toy"], text=["toyt"], n_frames=[2], n_captions=[1],
                           k=3, n_bootstrap=0, n_permutations=0, fit=False, cache_dir=str(tmp_path / "c"), **kw)

    encoders = {"toy": ToyVision(), "toyt": ToyText()}
    with pytest.raises(VlgapError, match="'single'.*--allow-repeated-frames"):
        run_sweep(cfg(), tmp_path / "run", progress=False, encoders=encoders)
    res = run_sweep(cfg(allow_repeated_frames=True), tmp_path / "run2", progress=False, encoders=encoders)
    assert res.rows[0]["n"] == 14
    assert "allow_repeated_frames" not in cfg().to_dict()  # older folders' configs stay equal


def test_two_processes_on_one_entry_wait_for_each_other(videos, tmp_path):
    """A second extraction of the same entry waits while the first holds it (one line says so), then
    resumes from the first's chunks when that one dies, and equals an uninterrupted run: two processes
    never write the same entry at once (one would remove chunks the other still needs)."""
    cache = tmp_path / "shared"
    env = dict(os.environ, PYTHONPATH=f"{HELPERS}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    first = subprocess.Popen([sys.executable, str(HELPERS / "run_toy_extract.py"), str(videos), str(cache), "0", "1"],
                             env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert first.stdout.readline().startswith("PAUSED"), first.stderr.read()
    second = subprocess.Popen([sys.executable, str(HELPERS / "run_toy_extract.py"), str(videos), str(cache), "0"],
                              env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True)
    waiting = second.stderr.readline()  # printed before it blocks on the first's lock
    assert "waiting for another vlgap process" in waiting, waiting
    assert second.poll() is None  # still waiting while the first holds the entry
    first.send_signal(signal.SIGKILL)
    first.wait()
    out, err = second.communicate(timeout=300)
    assert second.returncode == 0 and "DONE 12" in out, err
    again = extract(videos, "toy", n_frames=N_F, cache_dir=cache, loaded_encoder=ToyVision(), progress=False,
                    batch_size=4, allow_repeated_frames=True)
    assert again.computed == []  # the second process finished every entry
    clean = extract(videos, "toy", n_frames=N_F, cache_dir=tmp_path / "clean", loaded_encoder=ToyVision(),
                    progress=False, batch_size=4)
    _assert_same(again, clean)
