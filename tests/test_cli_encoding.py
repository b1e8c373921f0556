"""`--encoding` on the commands that read captions, prompts and annotations: a Latin-1 file is read as
Latin-1 when the user says so (its door check included), refused in one line naming file, line and byte
otherwise, and an unknown encoding is refused naming the option."""
from __future__ import annotations

import json

import pytest
from in_process_cli import refused, run_cli

from vlgap.errors import VlgapError
from vlgap.paths import check_encoding, read_text_utf8, text_encoding


def test_text_encoding_decodes_every_read_inside_and_ends_with_the_block(tmp_path):
    f = tmp_path / "l1.txt"
    f.write_bytes("caf\xe9\n".encode("latin-1"))
    with pytest.raises(VlgapError, match=r"not UTF-8 text at line 1 \(byte 0xe9 at offset 3\).*--encoding"):
        read_text_utf8(f)
    with text_encoding("cp1252"):
        assert read_text_utf8(f) == "caf\u00e9\n"
    with pytest.raises(VlgapError, match="not UTF-8"):  # the setting ended with the block
        read_text_utf8(f)
    g = tmp_path / "u8.txt"
    g.write_bytes("\u65e5\u672c\n".encode("utf-8"))
    with text_encoding("ascii"), pytest.raises(VlgapError, match=r"not ascii text at line 1 \(byte 0xe6"):
        read_text_utf8(g)


@pytest.mark.parametrize("name, message", [("klingon", "not a text encoding Python knows"),
                                           ("base64", "binary codec")])
def test_unknown_or_binary_encodings_are_refused(name, message):
    with pytest.raises(VlgapError, match=message):
        check_encoding(name)
    assert check_encoding("CP1252") == "cp1252" and check_encoding("latin1") == "iso8859-1"


def test_caption_eval_reads_a_latin1_prediction_file_with_encoding(tmp_path, capsys, monkeypatch):
    pred = tmp_path / "pred.json"
    pred.write_bytes(json.dumps({"1": "un caf\u00e9 noir"}, ensure_ascii=False).encode("latin-1"))
    refs = tmp_path / "refs.json"
    refs.write_bytes(json.dumps({"1": ["un caf\u00e9 noir", "une tasse de caf\u00e9"]}, ensure_ascii=False)
                     .encode("latin-1"))  # --encoding is the encoding of every text file the command reads
    err = refused(capsys, "caption-eval", "--pred", pred, "--refs", refs, "--metrics", "bleu", "--bootstrap", "0")
    assert "not UTF-8 text at line 1" in err and str(pred) in err
    code, out, err = run_cli(monkeypatch, capsys, "caption-eval", "--pred", pred, "--refs", refs, "--metrics",
                             "bleu", "--bootstrap", "0", "--encoding", "latin-1", "--json")
    assert code == 0, err
    assert json.loads(out)["BLEU-1"]["score"] == pytest.approx(1.0)
    assert "--encoding 'klingon'" in refused(capsys, "caption-eval", "--pred", pred, "--refs", refs, "--encoding",
                                             "klingon")
