"""Extraction orchestration and the feature cache: values, reuse, shards, resume after SIGKILL, bad items."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from toy_encoders import ToyText, ToyVision
from vlgap.data.manifest import read_manifest
from vlgap.data.sampling import frame_indices, join_captions
from vlgap.data.video import read_frames
from vlgap.errors import VlgapError
from vlgap.features.extract import extract, load_features

HELPERS = Path(__file__).parent / "helpers"


def _reference_image_features(enc, item, n_f):
    """Naive: decode exactly the n_f sampled frames, encode each, average."""
    from vlgap.data.video import count_frames

    frames, _ = read_frames(item, frame_indices(count_frames(item), n_f))
    layers = enc.forward_layers(enc.preprocess(frames))
    return [layer.mean(0).numpy() for layer in layers]


def test_image_encoder_features_equal_naive_per_item(tiny_dataset, tmp_path):
    enc = ToyVision()
    # v0 (5 frames) and the frame folder (4) are shorter than n_f=8: kept with repeats when allowed
    res = extract(tiny_dataset, "toy", n_frames=[1, 2, 4, 8], cache_dir=tmp_path / "c", loaded_encoder=enc, progress=False,
                  allow_repeated_frames=True)
    man = read_manifest(tiny_dataset)
    assert res.n == len(man) == 8
    for n_f in (1, 2, 4, 8):
        fs = res.features[n_f]
        assert fs.ids == man.ids
        assert [l.shape for l in fs.layers] == [(8, 3), (8, 8), (8, 8)]
        for i, item in enumerate(man.items):
            ref = _reference_image_features(enc, item, n_f)
            for li in range(3):
                np.testing.assert_allclose(fs.layers[li][i], ref[li], rtol=1e-5, atol=1e-6)
        # the record says how to reproduce, including every item's frame indices
        assert fs.record["sampling"]["frame_indices"]["v3"] == frame_indices(31, n_f).tolist()
        assert fs.record["value"] == n_f and "versions" in fs.record


def test_video_encoder_subclips_are_averaged(tiny_dataset, tmp_path):
    enc = ToyVision(kind="video", n0=4)
    res = extract(tiny_dataset, "toyv", n_frames=[2, 4, 8], cache_dir=tmp_path, loaded_encoder=enc, progress=False,
                  allow_repeated_frames=True)
    item = read_manifest(tiny_dataset).items[3]
    idx = frame_indices(31, 8)
    frames, _ = read_frames(item, idx)
    px = enc.preprocess(frames)
    clips = px.reshape(2, 4, *px.shape[1:])  # two consecutive sub-clips of n0=4
    ref = [layer.mean(0).numpy() for layer in enc.forward_layers(clips)]
    for li in range(3):
        np.testing.assert_allclose(res.features[8].layers[li][3], ref[li], rtol=1e-5, atol=1e-6)
    with pytest.raises(VlgapError, match=r"nearest valid values: \[4, 8\]"):
        extract(tiny_dataset, "toyv", n_frames=[6], cache_dir=tmp_path, loaded_encoder=enc, progress=False)


def test_text_features_and_cache_reuse(tiny_dataset, tmp_path):
    enc = ToyText()
    res = extract(tiny_dataset, "toyt", n_captions=[1, 3], cache_dir=tmp_path, loaded_encoder=enc, progress=False)
    man = read_manifest(tiny_dataset)
    text = join_captions(man.items[2].captions, 3)
    np.testing.assert_array_equal(res.features[3].layers[0][2], enc.encode([text])[0][0].numpy())
    assert sorted(res.computed) == [1, 3]
    # second call: everything comes from the cache, no model needed at all
    again = extract(tiny_dataset, "toyt", n_captions=[3, 1], cache_dir=tmp_path, loaded_encoder=None, progress=False)
    assert again.computed == []
    np.testing.assert_array_equal(again.features[3].layers[1], res.features[3].layers[1])
    fs = load_features(tiny_dataset, "toyt", "n_c", 1, cache_dir=tmp_path)
    np.testing.assert_array_equal(fs.layers[0], res.features[1].layers[0])


def test_too_many_captions_and_skip_bad(tiny_dataset, tmp_path):
    with pytest.raises(VlgapError, match="item 'v0' has 3 captions but n_c=5.*--skip-bad"):
        extract(tiny_dataset, "toyt", n_captions=[5], cache_dir=tmp_path, loaded_encoder=ToyText(), progress=False)


def test_bad_video_error_and_reported_skip(tiny_dataset, tmp_path):
    rows = [json.loads(l) for l in tiny_dataset.read_text().splitlines()]
    rows.insert(2, {"id": "ghost", "video": "media/ghost.mp4", "captions": ["x"]})
    (tiny_dataset.parent / "broken.mp4").write_bytes(b"garbage")
    rows.append({"id": "broken", "video": "broken.mp4", "captions": ["x"]})
    man = tiny_dataset.parent / "bad.jsonl"
    man.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(VlgapError, match="item 'ghost': media file not found.*--skip-bad"):
        extract(man, "toy", n_frames=[2], cache_dir=tmp_path, loaded_encoder=ToyVision(), progress=False)
    res = extract(man, "toy", n_frames=[2], cache_dir=tmp_path, loaded_encoder=ToyVision(), progress=False, skip_bad=True)
    assert res.n == 8 and res.n_requested == 10
    assert [b["id"] for b in res.bad_items] == ["ghost", "broken"]
    fs = res.features[2]
    assert "ghost" not in fs.ids and (fs.path / "bad_items.jsonl").is_file()
    assert "skipped 2 bad items" in res.summary()


def test_unknown_encoder_name_is_clear(tiny_dataset, tmp_path):
    pytest.importorskip("vlgap.encoders.registry")
    with pytest.raises(VlgapError, match="no-such-model"):
        extract(tiny_dataset, "no-such-model", n_frames=[1], cache_dir=tmp_path, progress=False)


def test_shards_assemble_and_refuse_incomplete(tiny_dataset, tmp_path):
    enc = ToyVision()
    full = extract(tiny_dataset, "toy", n_frames=[4], cache_dir=tmp_path / "full", loaded_encoder=enc, progress=False)
    extract(tiny_dataset, "toy", n_frames=[4], cache_dir=tmp_path / "sh", loaded_encoder=enc, progress=False, shard="0/3")
    with pytest.raises(VlgapError, match=r"shards \['1/3', '2/3'\] are not finished"):
        load_features(tiny_dataset, "toy", "n_f", 4, cache_dir=tmp_path / "sh")
    for i in (2, 1):
        extract(tiny_dataset, "toy", n_frames=[4], cache_dir=tmp_path / "sh", loaded_encoder=enc, progress=False, shard=f"{i}/3")
    fs = load_features(tiny_dataset, "toy", "n_f", 4, cache_dir=tmp_path / "sh")
    assert fs.ids == full.features[4].ids
    for a, b in zip(fs.layers, full.features[4].layers):
        np.testing.assert_array_equal(a, b)
    with pytest.raises(VlgapError, match=r"--shard 3/3: need n >= 1 and 0 <= i < n"):
        extract(tiny_dataset, "toy", n_frames=[4], cache_dir=tmp_path, loaded_encoder=enc, shard="3/3")


def test_corrupted_features_file_is_never_read(tiny_dataset, tmp_path):
    res = extract(tiny_dataset, "toy", n_frames=[1], cache_dir=tmp_path, loaded_encoder=ToyVision(), progress=False)
    f = res.features[1].path / "features.safetensors"
    data = f.read_bytes()
    f.write_bytes(data[: len(data) // 2])  # truncated behind our back
    with pytest.raises(VlgapError, match="not complete"):
        load_features(tiny_dataset, "toy", "n_f", 1, cache_dir=tmp_path)
    again = extract(tiny_dataset, "toy", n_frames=[1], cache_dir=tmp_path, loaded_encoder=ToyVision(), progress=False)
    assert again.computed == [1]
    np.testing.assert_array_equal(again.features[1].layers[1], res.features[1].layers[1])


@pytest.mark.slow  # > 5 s on 2 cores: make test-slow (the fast suite keeps a cheaper test of the same module)
def test_sigkill_mid_run_then_resume_equals_uninterrupted(tmp_path):
    from conftest import write_video

    rows = []
    for i in range(24):
        write_video(tmp_path / "m" / f"v{i}.mp4", 6 + i, size=16)
        rows.append({"id": f"v{i}", "video": f"m/v{i}.mp4", "captions": ["c"]})
    man = tmp_path / "man.jsonl"
    man.write_text("".join(json.dumps(r) + "\n" for r in rows))
    env = dict(os.environ, PYTHONPATH=f"{HELPERS}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    script = HELPERS / "run_toy_extract.py"
    cache = tmp_path / "killed"
    # the helper pauses right after its 4th chunk file and says so: kill it there (an event, no polling)
    proc = subprocess.Popen([sys.executable, str(script), str(man), str(cache), "0", "4"], env=env,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = proc.stdout.readline()          # returns at "PAUSED 4", or at EOF if the helper died
    assert line.strip() == "PAUSED 4", proc.stderr.read() if proc.poll() is not None else line
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL
    assert not list(cache.glob("features/*/*/*/.features.safetensors.seal.json")), "killed too late: nothing left to resume"
    assert len(list(cache.glob("features/*/*/*/chunks/*.npz"))) == 4
    done = subprocess.run([sys.executable, str(script), str(man), str(cache), "0"], env=env, capture_output=True, text=True)
    assert "DONE 24" in done.stdout, done.stderr
    clean = subprocess.run([sys.executable, str(script), str(man), str(tmp_path / "clean"), "0"], env=env,
                           capture_output=True, text=True)
    assert "DONE 24" in clean.stdout, clean.stderr
    for n_f in (1, 3, 8):
        a = load_features(man, "toy", "n_f", n_f, cache_dir=cache, allow_repeated_frames=True)
        b = load_features(man, "toy", "n_f", n_f, cache_dir=tmp_path / "clean", allow_repeated_frames=True)
        assert a.ids == b.ids
        for x, y in zip(a.layers, b.layers):
            np.testing.assert_array_equal(x, y)  # exactly equal, not just close


def test_frame_order_controls(tiny_dataset, tmp_path):
    """Reversed/shuffled orders permute the sampled frames; a clip model sees the difference, a mean over
    frames of an image model cannot (order-invariant by construction)."""
    vid = ToyVision(kind="video", n0=4)
    kw = dict(cache_dir=tmp_path, loaded_encoder=vid, progress=False)
    ordered = extract(tiny_dataset, "toyv", n_frames=[4], **kw).features[4]
    reversed_ = extract(tiny_dataset, "toyv", n_frames=[4], frame_order="reversed", **kw).features[4]
    assert reversed_.record["sampling"]["frame_indices"]["v3"] == frame_indices(31, 4)[::-1].tolist()
    assert not np.allclose(ordered.layers[1], reversed_.layers[1])  # the projection sees order
    np.testing.assert_allclose(ordered.layers[0], reversed_.layers[0], rtol=1e-5)  # mean colour does not
    shuffled = extract(tiny_dataset, "toyv", n_frames=[4], frame_order="shuffled", **kw).features[4]
    idx = shuffled.record["sampling"]["frame_indices"]["v3"]
    assert sorted(idx) == frame_indices(31, 4).tolist()
    img = extract(tiny_dataset, "toy", n_frames=[4], frame_order="reversed", cache_dir=tmp_path,
                  loaded_encoder=ToyVision(), progress=False).features[4]
    ref = extract(tiny_dataset, "toy", n_frames=[4], cache_dir=tmp_path, loaded_encoder=ToyVision(),
                  progress=False).features[4]
    np.testing.assert_allclose(img.layers[1], ref.layers[1], rtol=1e-5, atol=1e-6)
    with pytest.raises(VlgapError, match="frame_order must be one of"):
        extract(tiny_dataset, "toy", n_frames=[4], frame_order="backwards", **kw)


def test_item_without_captions_error_and_skip(tiny_dataset, tmp_path):
    rows = [json.loads(l) for l in tiny_dataset.read_text().splitlines()]
    rows[1]["captions"] = []
    man = tiny_dataset.parent / "nocap.jsonl"
    man.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(VlgapError, match="item 'v1'.*has no captions.*--skip-bad"):
        extract(man, "toyt", n_captions=[1], cache_dir=tmp_path, loaded_encoder=ToyText(), progress=False)
    res = extract(man, "toyt", n_captions=[1], cache_dir=tmp_path, loaded_encoder=ToyText(), progress=False,
                  skip_bad=True)
    assert res.n == 7 and [b["id"] for b in res.bad_items] == ["v1"]


def test_decoding_plans():
    from vlgap.features.extract import decoding_plan

    # the encoder's threads take every core: lock-step, one codec thread, preprocessing by the encoder's thread
    assert decoding_plan("n_f", "cpu", 2, cpus=2) == {"decode_threads": 1, "ahead": 0, "preprocess_in_workers": False}
    assert decoding_plan("n_f", "cpu", 4, cpus=16) == {"decode_threads": 1, "ahead": 2, "preprocess_in_workers": True}
    assert decoding_plan("n_f", "cuda:0", 8, cpus=8) == {"decode_threads": None, "ahead": 2,
                                                         "preprocess_in_workers": True}
    assert decoding_plan("n_c", "cpu", 2, cpus=2)["ahead"] == 2  # text: unchanged


def test_decoding_plans_give_the_same_features(tiny_dataset, tmp_path, monkeypatch, one_thread):
    """Lock-step decoding with preprocessing in the encoder's thread, and decoding ahead in worker threads
    with preprocessing there: the same pixels, the same batches, the same features bit for bit."""
    from vlgap.encoders.registry import get_encoder
    from vlgap.features import extract as ex

    enc = get_encoder("mobilenet_v2", random_weights=True, image_size=64)
    plans = {"lockstep": {"decode_threads": 1, "ahead": 0, "preprocess_in_workers": False},
             "ahead": {"decode_threads": None, "ahead": 2, "preprocess_in_workers": True}}
    seen, out = [], {}
    for name, plan in plans.items():
        monkeypatch.setattr(ex, "decoding_plan", lambda *a, plan=plan, **k: seen.append(plan) or plan)
        out[name] = extract(tiny_dataset, "mobilenet_v2", n_frames=[4], cache_dir=tmp_path / name, loaded_encoder=enc,
                            random_weights=True, image_size=64, batch_size=8, progress=False,
                            allow_repeated_frames=True).features[4]
    assert seen == list(plans.values())
    a, b = out.values()
    assert a.ids == b.ids and len(a.layers) == 19
    for x, y in zip(a.layers, b.layers):
        np.testing.assert_array_equal(x, y)


def test_chunk_preprocessed_batch_by_batch_gives_the_same_features(tmp_path, monkeypatch, one_thread):
    """Lock-step decoding of same-size videos preprocesses a chunk's frames batch by batch (batches that
    straddle items, two n_f sharing frames); decoding ahead preprocesses item by item in the workers:
    the same features bit for bit, and each path is the one taken."""
    from vlgap.data.shapes import generate_shapes
    from vlgap.encoders.registry import get_encoder
    from vlgap.features import chunk_steps as cs
    from vlgap.features import extract as ex

    man = generate_shapes(tmp_path / "data", 5, seed=1, n_frames=12, size=48)
    enc = get_encoder("mobilenet_v2", random_weights=True, image_size=64)
    plans = {"lockstep": {"decode_threads": 1, "ahead": 0, "preprocess_in_workers": False},
             "ahead": {"decode_threads": None, "ahead": 2, "preprocess_in_workers": True}}
    real, joined, out = cs.chunk_frames, {}, {}
    for name, plan in plans.items():
        monkeypatch.setattr(ex, "decoding_plan", lambda *a, plan=plan, **k: plan)
        monkeypatch.setattr(cs, "chunk_frames", lambda *a, name=name: joined.setdefault(name, real(*a)))
        out[name] = extract(man, "mobilenet_v2", n_frames=[3, 4], cache_dir=tmp_path / name, loaded_encoder=enc,
                            random_weights=True, image_size=64, batch_size=5, progress=False).features
    union = len(np.union1d(frame_indices(12, 3), frame_indices(12, 4)))  # frames both n_f need, once
    assert joined["lockstep"].dtype == np.uint8 and joined["lockstep"].shape == (5 * union, 48, 48, 3)
    assert joined["ahead"] is None  # float pixels from the workers: joined as before
    for v in (3, 4):
        a, b = out["lockstep"][v], out["ahead"][v]
        assert a.ids == b.ids and len(a.layers) == 19
        for x, y in zip(a.layers, b.layers):
            np.testing.assert_array_equal(x, y)


def test_chunk_frames_only_joins_framewise_uint8_frames_of_one_size():
    from vlgap.encoders.registry import get_encoder
    from vlgap.features.chunk_steps import chunk_frames

    enc = get_encoder("mobilenet_v2", random_weights=True, image_size=64)
    a, b = np.zeros((2, 8, 8, 3), np.uint8), np.ones((3, 8, 8, 3), np.uint8)
    joined = chunk_frames(enc, [a, b])
    assert joined.shape == (5, 8, 8, 3) and (joined[2:] == 1).all() and (joined[:2] == 0).all()
    assert chunk_frames(enc, [a, np.zeros((2, 8, 6, 3), np.uint8)]) is None  # two sizes
    assert chunk_frames(enc, [a, b.astype(np.float32)]) is None  # pixels preprocessed elsewhere
    assert chunk_frames(ToyVision(), [a, b]) is None  # no frame-wise preprocessor declared


def test_chunk_mean_pooling_equals_each_items_own_mean_bit_for_bit(one_thread):
    """Mean pooling of a whole chunk at once ([items, n_f, D].mean(1)) gives each item exactly its own
    f[rows].mean(0): positions repeated and out of order, two n_f, items of different frame counts."""
    import torch

    from vlgap.features.chunk_steps import Decoded, VisionSteps

    enc, rng = ToyVision(), np.random.default_rng(0)
    steps = VisionSteps([3, 5], 1, False)
    payload = []
    for n in (4, 7, 5, 6):
        frames = rng.integers(0, 256, (n, 8, 8, 3), dtype=np.uint8)
        pos = {3: rng.integers(0, n, 3), 5: rng.permutation(np.r_[np.arange(n), 0, 0][:5])}
        payload.append((frames, pos, pos))
    ids = [f"i{k}" for k in range(len(payload))]
    out, _ = steps.encode_chunk(enc, Decoded({3: ids, 5: ids}, {3: [], 5: []}, payload), batch_size=3)
    with torch.inference_mode():
        feats = steps._forward(enc, torch.cat([enc.preprocess(p[0]) for p in payload]), 3)
    offsets = np.cumsum([0] + [len(p[0]) for p in payload])
    for v in (3, 5):
        for f, got in zip(feats, out[v]):
            want = np.stack([f[torch.as_tensor(offsets[k] + p[1][v])].mean(0).numpy() for k, p in enumerate(payload)])
            np.testing.assert_array_equal(got, want)
