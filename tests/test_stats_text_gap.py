"""Caption sets (length matching, embedding through a TextEncoder), file inputs, gap() and the CLI."""
import json
import zlib

import numpy as np
import pytest
import torch

from in_process_cli import run_cli  # tests/helpers
from vlgap.encoders.base import TextEncoder
from vlgap.errors import VlgapError
from vlgap.stats import text_sets
from vlgap.stats.gap import gap
from vlgap.stats.inputs import load_item_set
from vlgap.stats.text_sets import auto_bin_width, embed_texts, length_match, length_match_texts, token_lengths


class BagOfWordsEncoder(TextEncoder):
    """Deterministic stand-in for a real text model: layer 0 = hashed bag of words, layer 1 = its
    normalised version. Enough to exercise batching, layer choice and the gap pipeline."""

    name = "bag-of-words"
    layer_names = ["bow", "bow.normalised"]
    device = torch.device("cpu")
    dtype = torch.float32

    def __init__(self, dim=32):
        self.dim = dim
        self.calls = []

    def encode(self, texts):
        self.calls.append(len(texts))
        out = torch.zeros(len(texts), self.dim)
        for i, t in enumerate(texts):
            for w in t.lower().split():
                out[i, zlib.crc32(w.encode()) % self.dim] += 1.0
        return [out, out / out.norm(dim=1, keepdim=True)]

    def record(self):
        return {"name": self.name, "dim": self.dim}


SHAPES = ["circle", "square", "triangle", "star", "hexagon"]
COLOURS = ["red", "blue", "green", "yellow"]


def terse_captions(n, seed):
    rng = np.random.default_rng(seed)
    return [f"a {rng.choice(COLOURS)} {rng.choice(SHAPES)}" + " moving" * int(rng.integers(0, 3)) for _ in range(n)]


def wordy_captions(n, seed):
    rng = np.random.default_rng(seed)
    return [f"the picture shows a {rng.choice(COLOURS)} {rng.choice(SHAPES)} drifting slowly"
            + " across the frame" * int(rng.integers(0, 2)) for _ in range(n)]


# ---------------------------------------------------------------------------------------------
# length matching
# ---------------------------------------------------------------------------------------------

def test_length_match_keeps_the_common_histogram():
    la = [3, 3, 3, 5, 5, 9]
    lb = [3, 5, 5, 5, 7]
    match = length_match(la, lb, bin_width=1, seed=0)
    assert (match.n_a_kept, match.n_b_kept) == (3, 3)
    assert (match.n_a_before, match.n_b_before) == (6, 5)
    kept_a = sorted(np.asarray(la)[match.index_a])
    kept_b = sorted(np.asarray(lb)[match.index_b])
    assert kept_a == kept_b == [3, 5, 5]
    assert match.bins == [[3, 3, 1], [5, 5, 2]]
    assert list(match.index_a) == sorted(match.index_a)
    # seeded: same seed, same subsample
    assert list(length_match(la, lb, bin_width=1, seed=0).index_a) == list(match.index_a)


def test_length_match_with_wider_bins_and_auto_width():
    match = length_match([1, 2, 3, 4, 10], [2, 3, 11, 12], bin_width=2, seed=0)
    # bins of width 2: {2,3} -> [2,3] on both sides; {10,11} -> one each; 12 and 1 and 4 unmatched
    assert match.bins == [[2, 3, 2], [10, 11, 1]]
    assert auto_bin_width(np.arange(0, 100)) == 5
    assert auto_bin_width(np.array([5, 6, 7])) == 1


def test_length_match_texts_uses_whitespace_words_or_a_tokenizer():
    a = ["one two", "one two three", "a b c d e f g h"]
    b = ["x y", "x y z", "p q r", "only"]
    match = length_match_texts(a, b, bin_width=1, seed=1)
    assert match.n_a_kept == match.n_b_kept == 2
    assert match.length_unit == "whitespace words"
    assert list(token_lengths(a, tokenizer=list)) == [7, 13, 15]  # any callable: len(callable(text))
    with pytest.raises(VlgapError, match="kept 0 of 2 / 2"):
        length_match_texts(["a b c", "a b c"], ["a", "b"], bin_width=1)
    with pytest.raises(VlgapError, match="caption 1 is empty"):
        length_match_texts(["fine", "  "], ["x", "y"])


# ---------------------------------------------------------------------------------------------
# embedding
# ---------------------------------------------------------------------------------------------

def test_embed_texts_batches_and_selects_a_layer():
    enc = BagOfWordsEncoder()
    texts = terse_captions(10, 0)
    emb = embed_texts(texts, enc, batch_size=4)
    assert enc.calls == [4, 4, 2]
    assert emb.array.shape == (10, 32) and emb.layer == "bow.normalised"
    np.testing.assert_allclose(np.linalg.norm(emb.array, axis=1), 1.0, rtol=1e-6)
    first = embed_texts(texts, enc, layer="bow")
    assert first.layer == "bow" and first.array.sum() == pytest.approx(sum(len(t.split()) for t in texts))
    with pytest.raises(VlgapError, match="out of range"):
        embed_texts(texts, enc, layer=5)
    with pytest.raises(VlgapError, match="not a layer"):
        embed_texts(texts, enc, layer="pooler")


# ---------------------------------------------------------------------------------------------
# file inputs
# ---------------------------------------------------------------------------------------------

def test_array_files(tmp_path):
    from safetensors.torch import save_file

    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    np.save(tmp_path / "x.npy", x)
    np.savez(tmp_path / "x.npz", feats=x)
    np.savez(tmp_path / "two.npz", a=x, b=x)
    save_file({"emb": torch.from_numpy(x).to(torch.bfloat16)}, str(tmp_path / "x.safetensors"))
    save_file({"a": torch.zeros(2, 2), "b": torch.zeros(2, 2)}, str(tmp_path / "two.safetensors"))
    np.save(tmp_path / "flat.npy", np.zeros(5))
    for name in ("x.npy", "x.npz", "x.safetensors"):
        np.testing.assert_array_equal(load_item_set(tmp_path / name).array, x)
    with pytest.raises(VlgapError, match="holds 2 layers .*choose one with --layer"):
        load_item_set(tmp_path / "two.npz")
    with pytest.raises(VlgapError, match="holds 2 layers"):
        load_item_set(tmp_path / "two.safetensors")
    # a layer picked by name or index; a platonic-rep file and an [L, N, D] array read as layers
    np.testing.assert_array_equal(load_item_set(tmp_path / "two.npz", layer="b").array, x)
    np.testing.assert_array_equal(load_item_set(tmp_path / "two.npz", layer=-1).array, x)
    torch.save({"feats": torch.from_numpy(np.stack([x, 2 * x], axis=1))}, tmp_path / "p.pt")
    np.testing.assert_array_equal(load_item_set(tmp_path / "p.pt", layer=1).array, 2 * x)
    with pytest.raises(VlgapError, match="layer 5 out of range"):
        load_item_set(tmp_path / "p.pt", layer=5)
    with pytest.raises(VlgapError, match=r"shape \(5,\)"):
        load_item_set(tmp_path / "flat.npy")
    (tmp_path / "x.bak").write_text("")
    with pytest.raises(VlgapError, match="unknown input type"):
        load_item_set(tmp_path / "x.bak")


def test_caption_files(tmp_path):
    (tmp_path / "a.txt").write_text("a red circle\nthe blue square\n\n")
    assert load_item_set(tmp_path / "a.txt").texts == ["a red circle", "the blue square"]
    (tmp_path / "gap.txt").write_text("a red circle\n\nthe blue square\n")
    with pytest.raises(VlgapError, match="line 2: empty line"):
        load_item_set(tmp_path / "gap.txt")
    (tmp_path / "c.jsonl").write_text('{"caption": "a star"}\n{"caption": "two stars", "id": 3}\n')
    assert load_item_set(tmp_path / "c.jsonl").texts == ["a star", "two stars"]
    (tmp_path / "bad.jsonl").write_text('{"caption": "a star"}\n{"text": "no caption"}\n')
    with pytest.raises(VlgapError, match="line 2: expected an object with a string field"):
        load_item_set(tmp_path / "bad.jsonl")
    with pytest.raises(VlgapError, match="no such file"):
        load_item_set(tmp_path / "missing.txt")


# ---------------------------------------------------------------------------------------------
# gap()
# ---------------------------------------------------------------------------------------------

def test_gap_on_arrays_reports_every_key():
    rng = np.random.default_rng(0)
    res = gap(rng.normal(size=(40, 4)), rng.normal(size=(30, 4)) + 1.0, n_permutations=99, n_bootstrap=200,
              c2st=True, c2st_permutations=9, fd=True)
    out = res.to_dict()
    for key in ("mmd2_unbiased", "mmd2_biased", "p_value", "ci", "n_a", "n_b", "kernel", "bandwidth", "c2st", "fd"):
        assert key in out, key
    assert set(out["c2st"]) >= {"accuracy", "auc", "p_value"}
    assert (out["n_a"], out["n_b"]) == (40, 30)
    assert out["p_value"] == pytest.approx(0.01)
    assert "witness" not in out
    assert res.verdict().startswith("A and B differ")


def test_gap_on_caption_sets_with_length_matching_and_witness():
    enc = BagOfWordsEncoder()
    a = terse_captions(80, 1) + [f"the picture shows a red {s} drifting slowly" for s in SHAPES]
    b = wordy_captions(80, 2) + ["a blue star", "a green circle"]
    res = gap(a, b, encoder=enc, n_permutations=199, n_bootstrap=200, length_match=True, bin_width=1, top_k=3)
    lm = res.length_match
    assert lm["n_a_kept"] == lm["n_b_kept"] == res.n_a == res.n_b
    assert lm["n_a_kept"] < 85
    assert set(res.witness) == {"a", "b"} and len(res.witness["a"]) == 3
    for item in res.witness["a"]:  # indices point into the caller's lists, not the subsample
        assert a[item["index"]] == item["label"]
    for item in res.witness["b"]:
        assert b[item["index"]] == item["label"]
    full = gap(a, b, encoder=enc, n_permutations=199, n_bootstrap=0)
    assert full.n_a == 85 and full.p_value == pytest.approx(1 / 200)
    assert full.embedding["layer"] == "bow.normalised"


def test_gap_input_errors():
    rng = np.random.default_rng(1)
    with pytest.raises(VlgapError, match="needs captions on both sides"):
        gap(rng.normal(size=(5, 2)), rng.normal(size=(5, 2)), length_match=True)
    with pytest.raises(VlgapError, match="width 2 but B has width 3"):
        gap(rng.normal(size=(5, 2)), rng.normal(size=(5, 3)))
    with pytest.raises(VlgapError, match="1 caption"):
        gap(["only one caption"], ["two", "captions"], encoder=BagOfWordsEncoder())


# ---------------------------------------------------------------------------------------------
# CLI
# ---------------------------------------------------------------------------------------------

def test_cli_gap_json_and_verdict(tmp_path, monkeypatch, capsys):
    rng = np.random.default_rng(2)
    np.save(tmp_path / "a.npy", rng.normal(size=(30, 3)))
    np.save(tmp_path / "b.npy", rng.normal(size=(30, 3)))
    np.save(tmp_path / "same.npy", np.load(tmp_path / "a.npy")[::-1])  # the same items: surely no gap
    np.save(tmp_path / "wide.npy", rng.normal(size=(30, 4)))
    code, out, _ = run_cli(monkeypatch, capsys, "gap", tmp_path / "a.npy", tmp_path / "b.npy",
                           "--permutations", 99, "--bootstrap", 100, "--json", "--fd")
    assert code in (0, None)
    data = json.loads(out)
    assert data["n_a"] == 30 and data["kernel"] == "rbf" and len(data["ci"]) == 2 and "fd" in data
    code, out, _ = run_cli(monkeypatch, capsys, "gap", tmp_path / "a.npy", tmp_path / "same.npy",
                           "--permutations", 99, "--bootstrap", 100, "--kernel", "cmmd")
    assert "no significant difference at alpha=0.05" in " ".join(out.split())
    code, out, err = run_cli(monkeypatch, capsys, "gap", tmp_path / "a.npy", tmp_path / "wide.npy")
    assert code == 2 and "width 3 but B has width 4" in " ".join(err.split())


def test_cli_gap_on_caption_files(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(text_sets, "load_text_encoder", lambda *a, **k: BagOfWordsEncoder())
    (tmp_path / "a.txt").write_text("\n".join(terse_captions(40, 3)) + "\n")
    (tmp_path / "b.jsonl").write_text("\n".join(json.dumps({"caption": c}) for c in wordy_captions(40, 4)) + "\n")
    code, out, _ = run_cli(monkeypatch, capsys, "gap", tmp_path / "a.txt", tmp_path / "b.jsonl",
                           "--permutations", 99, "--bootstrap", 100, "--json", "--top-k", 2)
    data = json.loads(out)
    assert data["p_value"] == pytest.approx(0.01)
    assert len(data["witness"]["a"]) == 2 and data["witness"]["b"][0]["label"]


def test_cli_compare(tmp_path, monkeypatch, capsys):
    path = tmp_path / "cells.csv"
    rng = np.random.default_rng(5)
    lines = ["item,a,b,score"] + [f"{i},{a},{b},{rng.normal() + 2 * a}" for i in range(20) for a in (0, 1) for b in (0, 1)]
    path.write_text("\n".join(lines) + "\n")
    code, out, _ = run_cli(monkeypatch, capsys, "compare", path, "--factorial", "--json", "--permutations", 999)
    data = json.loads(out)
    assert data["main_a"]["p_value"] == pytest.approx(1 / 1000)
    code, out, err = run_cli(monkeypatch, capsys, "compare", path)
    assert code == 2 and "missing column(s) ['system']" in " ".join(err.split())


@pytest.mark.slow
def test_minilm_embeds_captions():
    try:
        from vlgap.encoders import registry  # noqa: F401
    except ImportError:
        pytest.skip("vlgap.encoders.registry is not available yet")
    try:
        enc = text_sets.load_text_encoder("minilm")
    except VlgapError as err:
        pytest.skip(f"minilm is not installed: {err}")
    texts = ["a red circle moves left", "a blue square rests", "the picture shows a green star"]
    emb = embed_texts(texts, enc, batch_size=2)
    assert emb.array.shape == (3, 384)
    assert np.all(np.isfinite(emb.array))
    res = gap(terse_captions(20, 0), wordy_captions(20, 1), encoder=enc, n_permutations=99, n_bootstrap=100)
    assert res.p_value == pytest.approx(0.01)


def test_old_keyword_spellings_name_the_new_ones():
    a, b = np.zeros((5, 2)), np.ones((5, 2))
    with pytest.raises(VlgapError, match="'permutations' is now n_permutations"):
        gap(a, b, kernel="rbf", permutations=1000, bootstrap=1000)
    with pytest.raises(VlgapError, match="'bootstrap' is now n_bootstrap"):
        gap(a, b, bootstrap=1000)
