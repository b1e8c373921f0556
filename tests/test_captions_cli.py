"""`vlgap caption-eval`: JSON keys, per-item CSV, paired comparison, one-line errors (exit 2)."""
from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from vlgap.cli import app

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "captions"))
from corpus import make_corpus, make_system_b  # noqa: E402


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("captions")
    refs, preds = make_corpus(60, 5, seed=4)
    keys = list(refs)
    (d / "pred.json").write_text(json.dumps([{"image_id": i, "caption": preds[k]} for i, k in enumerate(keys)]))
    (d / "refs.json").write_text(json.dumps({"annotations": [{"image_id": i, "caption": c}
                                                             for i, k in enumerate(keys) for c in refs[k]]}))
    other = make_system_b(refs, preds)
    (d / "other.jsonl").write_text("".join(json.dumps({"id": i, "caption": other[k]}) + "\n" for i, k in enumerate(keys)))
    return d


def test_json_output_keys(files):
    res = CliRunner().invoke(app, ["caption-eval", "--pred", str(files / "pred.json"), "--refs", str(files / "refs.json"),
                                   "--metrics", "bleu,rouge,cider,sacrebleu", "--bootstrap", "200", "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert out["n"] == 60
    for key in ("BLEU-1", "BLEU-2", "BLEU-3", "BLEU-4", "ROUGE-L", "CIDEr", "SacreBLEU"):
        assert set(out[key]) >= {"score", "ci"}
        lo, hi = out[key]["ci"]
        assert lo <= out[key]["score"] <= hi
    assert out["SacreBLEU"]["signature"].startswith("nrefs:5|case:mixed|eff:no|tok:13a|smooth:exp|version:")


def test_table_and_per_item_csv(files, tmp_path):
    path = tmp_path / "items.csv"
    res = CliRunner().invoke(app, ["caption-eval", "--pred", str(files / "pred.json"), "--refs", str(files / "refs.json"),
                                   "--metrics", "bleu,cider", "--out", str(path)])
    assert res.exit_code == 0, res.output
    assert "CIDEr" in res.output and "N = 60" in res.output
    rows = list(csv.DictReader(path.open()))
    assert len(rows) == 60 and list(rows[0]) == ["id", "BLEU-1", "BLEU-2", "BLEU-3", "BLEU-4", "CIDEr"]


def test_paired_comparison(files):
    res = CliRunner().invoke(app, ["caption-eval", "--pred", str(files / "other.jsonl"), "--refs", str(files / "refs.json"),
                                   "--compare", str(files / "pred.json"), "--metrics", "cider", "--bootstrap", "300",
                                   "--permutations", "300", "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert out["systems"] == ["other", "pred"]
    assert out["CIDEr"]["difference"] == pytest.approx(out["CIDEr"]["other"] - out["CIDEr"]["pred"])
    assert {"ci", "p_value"} <= set(out["CIDEr"])


def test_bad_input_is_one_line_and_exit_code_2(files, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps([{"image_id": 0, "caption": "a"}, {"image_id": 0, "caption": "b"}]))
    proc = subprocess.run([sys.executable, "-c", "from vlgap.cli import main; main()", "caption-eval",
                           "--pred", str(bad), "--refs", str(files / "refs.json"), "--metrics", "bleu"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert "several predictions: 0" in proc.stderr and "--on-duplicate first" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_api_old_keyword_spellings_name_the_new_ones():
    from vlgap.captions.evaluate import caption_eval, compare_captions
    from vlgap.errors import VlgapError

    preds, refs = {"1": "a dog runs"}, {"1": ["a dog is running"]}
    with pytest.raises(VlgapError, match="'bootstrap' is now n_bootstrap"):
        caption_eval(preds, refs, ["bleu"], bootstrap=10)
    with pytest.raises(VlgapError, match="'permutations' is now n_permutations"):
        compare_captions(preds, preds, refs, ["bleu"], permutations=10)
