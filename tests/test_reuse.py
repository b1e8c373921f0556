"""The reuse rule (vlgap.reuse): keyed, checksummed artefacts, run folders, leftovers of kills."""
import json
import os
import time

import pytest

from vlgap import reuse
from vlgap.errors import VlgapError


def test_ok_then_flipped_byte_is_corrupt_and_recomputed(tmp_path, capsys):
    p = tmp_path / "a.bin"
    key = {"k": 5, "metric": "mutual_knn"}
    reuse.write_artefact(p, b"hello world", key)
    assert reuse.check_artefact(p, key).ok
    assert reuse.read_verified(p, key) == b"hello world"
    raw = bytearray(p.read_bytes())
    raw[3] ^= 0x01
    p.write_bytes(bytes(raw))
    v = reuse.check_artefact(p, key)
    assert v.status == "corrupt" and "checksum" in v.reason
    assert reuse.read_verified(p, key, what="cell") is None
    err = capsys.readouterr().err
    assert "cell" in err and "corrupt" in err and err.count("\n") == 1
    assert not p.exists() and not reuse.seal_path(p).exists()


def test_truncated_is_corrupt_by_size(tmp_path):
    p = tmp_path / "a.bin"
    reuse.write_artefact(p, b"x" * 100, {"a": 1})
    p.write_bytes(b"x" * 50)
    v = reuse.check_artefact(p, {"a": 1})
    assert v.status == "corrupt" and "size" in v.reason


def test_other_key_is_stale_with_named_differences(tmp_path):
    p = tmp_path / "cell.json"
    reuse.write_artefact(p, b"{}", {"k": 5, "metric": "mutual_knn", "n": 320, "seed": 0})
    v = reuse.check_artefact(p, {"k": 20, "metric": "cka", "n": 24, "seed": 0})
    assert v.status == "stale"
    assert v.differences == ["k: 5 -> 20", 'metric: "mutual_knn" -> "cka"', "n: 320 -> 24"]


def test_unsealed_and_missing(tmp_path):
    p = tmp_path / "x.npz"
    assert reuse.check_artefact(p, {}).status == "missing"
    p.write_bytes(b"abc")
    assert reuse.check_artefact(p, {}).status == "unsealed"
    assert reuse.read_verified(p, {}) is None and not p.exists()


def test_nested_key_differences():
    assert reuse.key_differences({"a": {"b": 1, "c": [1, 2]}}, {"a": {"b": 2, "c": [1, 2]}, "d": True}) == [
        "a.b: 1 -> 2", "d: (absent) -> true"]


def test_claim_run_folder(tmp_path):
    out = tmp_path / "run"
    assert reuse.claim_run_folder(out, "sweep", {"k": 5, "metric": "mutual_knn"}) is False
    assert reuse.claim_run_folder(out, "sweep", {"k": 5, "metric": "mutual_knn"}) is True
    with pytest.raises(VlgapError, match=r"another configuration \(k: 5 -> 20\).*--force"):
        reuse.claim_run_folder(out, "sweep", {"k": 20, "metric": "mutual_knn"})
    assert reuse.claim_run_folder(out, "sweep", {"k": 20, "metric": "mutual_knn"}, force=True) is False
    assert json.loads((out / reuse.RUN_RECORD).read_text())["config"]["k"] == 20
    # ignored keys do not count
    assert reuse.claim_run_folder(out, "sweep", {"k": 20, "metric": "mutual_knn", "progress": False},
                                  ignore=("progress",)) is True
    with pytest.raises(VlgapError, match="other than a vlgap wsv"):
        reuse.claim_run_folder(out, "wsv", {"k": 20})
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("user's file")
    with pytest.raises(VlgapError, match="not empty"):
        reuse.claim_run_folder(mine, "sweep", {})


def test_remove_stale_temporaries_only_own_old_names(tmp_path):
    sub = tmp_path / "chunks"
    sub.mkdir()
    old = sub / ".000-032.npz.0123456789ab.tmp"
    fresh = sub / ".000-064.npz.ba9876543210.tmp"
    foreign = sub / ".user.tmp"
    for f in (old, fresh, foreign):
        f.write_bytes(b"x")
    past = time.time() - 3600
    os.utime(old, (past, past))
    os.utime(foreign, (past, past))
    removed = reuse.remove_stale_temporaries(tmp_path, older_than=time.time() - 60)
    assert removed == [old]
    assert fresh.exists() and foreign.exists()


def _edit_seal(path, edit):
    sp = reuse.seal_path(path)
    sp.write_text(edit(sp.read_text()))


def _flip_hex(text: str, field: str) -> str:
    seal = json.loads(text)
    value = seal[field]
    seal[field] = ("0" if value[0] != "0" else "1") + value[1:]
    return json.dumps(seal)


def test_flipped_key_digest_in_a_seal_is_a_damaged_seal_with_its_reason(tmp_path, capsys):
    """Before: 'stale (made with other settings: )', an empty list of differences."""
    p = tmp_path / "cell.json"
    key = {"k": 5, "metric": "mutual_knn"}
    reuse.write_artefact(p, b"{}", key)
    _edit_seal(p, lambda t: _flip_hex(t, "key_sha256"))
    v = reuse.check_artefact(p, key)
    assert (v.status, v.reason) == ("corrupt", "its seal is damaged: key_sha256 does not match its key")
    assert reuse.read_verified(p, key, what="cell") is None
    err = capsys.readouterr().err
    assert "corrupt (its seal is damaged: key_sha256 does not match its key); recomputing" in err
    assert "made with other settings" not in err


def test_flipped_byte_inside_a_seals_key_is_not_reused(tmp_path, capsys):
    """Before: the seal's key_sha256 still matched the request, so the file was reused as cached."""
    from vlgap.runs import cell

    p = tmp_path / "cell.json"
    key = {"k": 5, "metric": "mutual_knn"}
    assert cell(p, key, lambda: {"score": 1.0}) == {"score": 1.0}
    _edit_seal(p, lambda t: t.replace('"k": 5', '"k": 7'))
    assert json.loads(reuse.seal_path(p).read_text())["key"]["k"] == 7
    v = reuse.check_artefact(p, key)
    assert v.status == "corrupt" and "key_sha256 does not match its key" in v.reason
    assert reuse.check_artefact(p, None).status == "corrupt"  # also when any key would do
    made = []
    assert cell(p, key, lambda: made.append(1) or {"score": 2.0}) == {"score": 2.0} and made == [1]
    assert "its seal is damaged" in capsys.readouterr().err
    assert reuse.check_artefact(p, key).ok  # resealed


def test_keys_with_numeric_dict_keys_keep_their_digest_through_the_seal(tmp_path):
    p = tmp_path / "a.bin"
    key = {"frames": {2: [0, 1], 10: [3]}, "shape": (3, 4)}
    reuse.write_artefact(p, b"x", key)
    assert reuse.check_artefact(p, key).ok


def test_verified_input_refuses_a_changed_sealed_file_and_accepts_an_unsealed_one(tmp_path):
    p = tmp_path / "sweep.csv"
    reuse.write_artefact(p, b"n_f,n_c,score\n1,1,0.5\n", {"run": 1})
    reuse.verified_input(p, "GRID")
    p.write_bytes(b"n_f,n_c,score\n1,1,0.9\n")
    with pytest.raises(VlgapError, match=r"^GRID .*sweep.csv: checksum mismatch.*no longer matches its seal; redo"):
        reuse.verified_input(p, "GRID", fix="redo")
    reuse.seal_path(p).unlink()
    reuse.verified_input(p, "GRID")  # the user's own table
