"""The inputs and key names the field's caption libraries use (issue 23, item 1): list-aligned
predictions and references (Hugging Face evaluate, torchmetrics, aac-metrics), pandas columns, and
pycocoevalcap's result names; refusals show the accepted forms."""
from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

import vlgap
from vlgap.errors import VlgapError

PREDS = ["a man is riding a horse on the beach", "a cat sits on a red mat", "two dogs play in the snow"]
REFS = [["a man rides a horse along the beach", "a person on a horse"], ["a cat on a mat"],
        ["dogs playing in snow", "two dogs in the snow"]]
METRICS = "bleu,rouge,cider"


@pytest.fixture(scope="module")
def keyed():
    return vlgap.caption_eval({f"v{i}": p for i, p in enumerate(PREDS)},
                              {f"v{i}": r for i, r in enumerate(REFS)}, metrics=METRICS)


def _scores(result) -> dict:
    return {k: result[k]["score"] for k in result.metrics()}


def test_list_aligned_inputs_score_like_the_id_keyed_ones(keyed):
    assert _scores(vlgap.caption_eval(PREDS, REFS, metrics=METRICS)) == _scores(keyed)


def test_one_reference_per_item_as_a_list_of_strings():
    single = [r[0] for r in REFS]
    res = vlgap.caption_eval(PREDS, single, metrics=METRICS)
    assert _scores(res) == _scores(vlgap.caption_eval(PREDS, [[r] for r in single], metrics=METRICS))


def test_pandas_columns_numpy_arrays_and_tuples(keyed):
    pd = pytest.importorskip("pandas")
    df = pd.DataFrame({"prediction": PREDS, "references": REFS}, index=["v0", "v1", "v2"])
    assert _scores(vlgap.caption_eval(df["prediction"], df["references"], metrics=METRICS)) == _scores(keyed)
    assert _scores(vlgap.caption_eval(np.array(PREDS), tuple(REFS), metrics=METRICS)) == _scores(keyed)
    rows = pd.DataFrame({"id": ["v0", "v1", "v2"], "caption": PREDS})
    assert _scores(vlgap.caption_eval(rows, {f"v{i}": r for i, r in enumerate(REFS)}, metrics=METRICS)) == _scores(keyed)


def test_series_align_by_index_not_by_position():
    pd = pytest.importorskip("pandas")
    preds = pd.Series(PREDS, index=["v0", "v1", "v2"])
    refs = pd.Series(REFS[::-1], index=["v2", "v1", "v0"])
    assert _scores(vlgap.caption_eval(preds, refs, metrics=METRICS)) == _scores(vlgap.caption_eval(PREDS, REFS, metrics=METRICS))


def test_lists_of_different_lengths_are_refused():
    with pytest.raises(VlgapError, match="3 predictions but 2 reference lists; give one reference list"):
        vlgap.caption_eval(PREDS, REFS[:2], metrics=METRICS)


@pytest.mark.parametrize("pred, refs, forms", [
    (PREDS, 5, "accepted references: a list of reference lists"),
    ([1, 2, 3], REFS, "accepted predictions: a list of captions"),
    (PREDS, [[1, 2], [3], [4]], "row 0: got list, expected an object .*accepted references: a list of reference"),
    (3.5, REFS, "accepted predictions: a list of captions"),
])
def test_a_refused_input_shows_the_accepted_forms(pred, refs, forms):
    with pytest.raises(VlgapError, match=forms):
        vlgap.caption_eval(pred, refs, metrics="bleu")


def test_pycocoevalcap_key_names(keyed):
    coco = keyed.coco()
    assert list(coco) == ["Bleu_1", "Bleu_2", "Bleu_3", "Bleu_4", "ROUGE_L", "CIDEr"]
    assert keyed["Bleu_4"] is keyed["BLEU-4"] and keyed["ROUGE_L"] is keyed["ROUGE-L"]
    assert keyed["CIDEr-D"] is keyed["CIDEr"] and "Bleu_1" in keyed and keyed.get("ROUGE_L") is keyed["ROUGE-L"]
    assert keyed["CIDEr"]["variant"] == "CIDEr-D"
    assert "Bleu_4" not in json.loads(json.dumps(keyed))  # aliases answer lookups, the JSON stays as it was


def test_coco_names_hold_pycocoevalcaps_own_numbers(keyed):
    pytest.importorskip("pycocoevalcap")
    from pycocoevalcap.bleu.bleu import Bleu
    from pycocoevalcap.cider.cider import Cider
    from pycocoevalcap.rouge.rouge import Rouge

    from vlgap.captions.evaluate import tokenize_data
    from vlgap.captions.io import load_captions

    hyps, refs = tokenize_data(load_captions(PREDS, REFS))
    gts, res = dict(enumerate(refs)), {i: [h] for i, h in enumerate(hyps)}
    bleu, _ = Bleu(4).compute_score(gts, res, verbose=0)
    expected = {**{f"Bleu_{n}": bleu[n - 1] for n in range(1, 5)}, "ROUGE_L": Rouge().compute_score(gts, res)[0],
                "CIDEr": Cider().compute_score(gts, res)[0]}
    for name, value in expected.items():
        assert keyed.coco()[name] == pytest.approx(value, abs=1e-9), name


def test_cli_reads_list_aligned_json_files(tmp_path, keyed):
    from vlgap.cli import app

    (tmp_path / "preds.json").write_text(json.dumps(PREDS))
    (tmp_path / "refs.json").write_text(json.dumps(REFS))
    out = CliRunner().invoke(app, ["caption-eval", "--pred", str(tmp_path / "preds.json"), "--refs",
                                   str(tmp_path / "refs.json"), "--metrics", METRICS, "--json"])
    assert out.exit_code == 0, out.output
    got = json.loads(out.output)
    assert {k: got[k]["score"] for k in keyed.metrics()} == _scores(keyed)
    (tmp_path / "short.json").write_text(json.dumps(REFS[:1]))
    out = CliRunner().invoke(app, ["caption-eval", "--pred", str(tmp_path / "preds.json"), "--refs",
                                   str(tmp_path / "short.json"), "--metrics", METRICS])
    assert "3 predictions but 1 reference lists" in str(out.exception)
