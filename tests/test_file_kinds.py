"""Files are named by their bytes before their extension is trusted, and library refusals reach the user
as vlgap's own one line (issue 44): numpy's "load it with allow_pickle" for a text or gzip file named
.npy, torch's many-line weights_only advice for a checkpoint of other objects."""
from __future__ import annotations

import gzip
import io
import json
import pickle

import numpy as np
import pytest
from in_process_cli import refused

from vlgap.errors import VlgapError
from vlgap.file_kinds import load_npy, sniff, torch_load_plain


def test_sniff_names_the_content(tmp_path):
    import torch
    from safetensors.numpy import save_file

    files = {"a.npy": None, "a.npz": None, "a.safetensors": None, "a.pt": None, "p.pkl": pickle.dumps([1]),
             "g.gz": gzip.compress(b"1 2 3\n", mtime=0), "t.txt": "\ufeff0.1 0.2\n3 4\n".encode(), "e.bin": b"",
             "u.bin": bytes(range(256))}
    np.save(tmp_path / "a.npy", np.zeros((2, 2)))
    np.savez(tmp_path / "a.npz", x=np.zeros((2, 2)))
    save_file({"x": np.zeros((2, 2), np.float32)}, str(tmp_path / "a.safetensors"))
    torch.save({"feats": torch.zeros(2, 1, 2)}, tmp_path / "a.pt")
    for name, data in files.items():
        if data is not None:
            (tmp_path / name).write_bytes(data)
    assert {name: sniff(tmp_path / name) for name in files} == {
        "a.npy": "npy", "a.npz": "zip", "a.safetensors": "safetensors", "a.pt": "zip", "p.pkl": "pickle",
        "g.gz": "gzip", "t.txt": "text", "e.bin": "empty", "u.bin": "unknown"}


@pytest.mark.parametrize("content, named", [(b"0.1 0.2\n0.3 0.4\n", "a text file"),
                                            (gzip.compress(b"0.1 0.2\n", mtime=0), "a gzip-compressed file"),
                                            (pickle.dumps(np.zeros((2, 2))), "a Python pickle"),
                                            (b"", "an empty file")])
def test_a_foreign_file_named_npy_is_named_for_what_it_is(tmp_path, capsys, content, named):
    bad, good = tmp_path / "x.npy", tmp_path / "y.npy"
    bad.write_bytes(content)
    np.save(good, np.random.default_rng(0).normal(size=(6, 3)))
    err = refused(capsys, "align", bad, good)
    assert f"{bad}: named .npy but its bytes are {named}, not a .npy array" in err
    assert "allow_pickle" not in err and "pickled data" not in err


def test_an_archive_named_npy_and_an_array_named_npz(tmp_path):
    from vlgap.features.arrays import read_layers

    np.savez(tmp_path / "z.npz", layer_0=np.zeros((4, 2)))
    (tmp_path / "z.npz").rename(tmp_path / "z.npy")
    with pytest.raises(VlgapError, match=r"named .npy but its bytes are a zip archive .*; rename it .npz"):
        read_layers(tmp_path / "z.npy")
    np.save(tmp_path / "a.npy", np.zeros((4, 2)))
    (tmp_path / "a.npy").rename(tmp_path / "a.npz")
    with pytest.raises(VlgapError, match=r"named .npz but its bytes are a .npy array, not a zip archive .*rename it .npy"):
        read_layers(tmp_path / "a.npz")


def test_object_arrays_are_refused_without_numpy_s_advice(tmp_path):
    p = tmp_path / "o.npy"
    np.save(p, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(VlgapError) as ei:
        load_npy(p, "score matrix")
    assert "an array of Python objects (dtype object), which vlgap does not load as score matrix" in str(ei.value)
    assert "allow_pickle" not in str(ei.value)
    q = tmp_path / "o.npz"
    np.savez(q, x=np.array([{"a": 1}], dtype=object))
    from vlgap.features.arrays import read_layers

    with pytest.raises(VlgapError, match="an array of the .npz holds Python objects") as ei:
        read_layers(q)
    assert "allow_pickle" not in str(ei.value)


class Custom:
    pass


def test_a_checkpoint_of_other_objects_is_one_line_naming_the_class(tmp_path, capsys):
    import torch

    p = tmp_path / "feats.pt"
    torch.save({"feats": torch.zeros(4, 2, 3), "extra": Custom()}, p)
    with pytest.raises(VlgapError) as ei:
        torch_load_plain(str(p), str(p))
    msg = str(ei.value)
    assert "\n" not in msg and "weights_only" not in msg and "trust" not in msg
    assert msg.startswith(f"{p}: holds Python objects other than tensors") and "Custom" in msg
    good = tmp_path / "y.npy"
    np.save(good, np.zeros((4, 3)))
    err = refused(capsys, "align", p, good)
    assert "holds Python objects other than tensors" in err and "Custom" in err
    p.write_bytes(b"PK\x03\x04 truncated")
    with pytest.raises(VlgapError, match=r"not a readable torch file \(\w+: .*\)$"):
        torch_load_plain(str(p), str(p))
    buf = io.BytesIO()
    torch.save({"w": torch.ones(2)}, buf)
    buf.seek(0)
    assert torch.equal(torch_load_plain(buf, "in memory")["w"], torch.ones(2))


def test_skip_bad_in_a_probe_names_what_it_left_out(tiny_dataset, tmp_path, capsys):
    """--skip-bad in a probe (temporal, cross-vision, ...): the item is said on stderr and kept in
    FeatureSource.skipped, not named only in the cache entry's bad_items.jsonl."""
    from toy_encoders import ToyVision

    from vlgap.features.source import FeatureOptions, FeatureSource

    rows = [json.loads(line) for line in tiny_dataset.read_text().splitlines()]
    rows.append({"id": "ghost", "video": "media/ghost.mp4", "captions": ["x"]})
    man = tiny_dataset.parent / "bad.jsonl"
    man.write_text("".join(json.dumps(r) + "\n" for r in rows))
    src = FeatureSource(FeatureOptions(cache_dir=tmp_path / "c", skip_bad=True, progress=False),
                        encoders={"toy": ToyVision()})
    for _ in range(2):  # computed, then from the cache: said both times a run reads it, once per run
        src._said.clear()
        fs = src.vision(man, "toy", 2)
        assert "ghost" not in fs.ids
        err = " ".join(capsys.readouterr().err.split())
        assert "--skip-bad left 1 item(s) out of toy n_f=2: ghost: media file not found" in err
    assert [(s["id"], s["encoder"], s["features"]) for s in src.skipped] == [("ghost", "toy", "n_f=2")] * 2
