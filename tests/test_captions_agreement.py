"""Kendall tau-b / tau-c as the human-judgment protocols compute them (vlgap.captions.agreement's own
pair counting against scipy and a hand count) and Flickr8k's official files read as the CLIPScore
paper's flickr8k_example reads them (vlgap.captions.flickr8k)."""
from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from vlgap.captions.agreement import concordance, kendall_tau_b, kendall_tau_c
from vlgap.errors import VlgapError


def test_hand_counted_example():
    # pairs of x = 1 2 3 4 4, y = 1 3 2 4 4: 8 concordant, 1 discordant ((1, 2)), one pair tied on
    # both sides; tau-b = 7 / sqrt(9 * 9); tau-c with m = 4 levels: 2 * 7 / (5^2 * 3/4) = 56/75
    x, y = [1, 2, 3, 4, 4], [1, 3, 2, 4, 4]
    assert concordance(x, y)[:4] == (5, 7, 1, 1)
    assert kendall_tau_b(x, y) == pytest.approx(7 / 9, abs=1e-15)
    assert kendall_tau_c(x, y) == pytest.approx(56 / 75, abs=1e-15)
    # Flickr8k-Expert's shape: one metric score per candidate, three ratings each (metric ties)
    metric, ratings = [0.2] * 3 + [0.7] * 3, [1, 2, 1, 4, 3, 4]
    # 9 cross-candidate pairs, all concordant; within a candidate the metric ties: S = 9, m = 2
    assert kendall_tau_c(metric, ratings) == pytest.approx(2 * 9 / (36 * 1 / 2), abs=1e-15)


@pytest.mark.parametrize("shape", ["few-few", "few-many", "many-few", "many-many", "constant"])
def test_equal_scipy_kendalltau_b_and_c(shape):
    rng = np.random.default_rng(len(shape))
    for trial in range(40):
        n = int(rng.integers(2, 400))
        few = lambda: rng.integers(1, int(rng.integers(2, 6)), n).astype(float)  # noqa: E731
        many = lambda: rng.normal(size=n).round(int(rng.integers(1, 4)))  # noqa: E731  (some ties)
        x, y = {"few-few": (few(), few()), "few-many": (few(), many()), "many-few": (many(), few()),
                "many-many": (many(), many()), "constant": (np.ones(n), many())}[shape]
        if shape == "many-many" and trial % 2:
            x = rng.permutation(n).astype(float)  # > 64 levels on both sides: the merge count
            y = rng.permutation(n).astype(float)
        for variant, fn in (("b", kendall_tau_b), ("c", kendall_tau_c)):
            ours, ref = fn(x, y), stats.kendalltau(x, y, variant=variant).statistic
            assert (np.isnan(ours) and np.isnan(ref)) or ours == pytest.approx(ref, abs=1e-12), (trial, variant)


def _flickr8k_files(folder):
    folder.mkdir()
    refs = {img: [f"a {w} on the {p} {img[:4]}" for w, p in [("dog", "grass"), ("cat", "mat"), ("boy", "beach"),
                                                   ("man", "road"), ("bird", "tree")]]
            for img in ["1000_aa", "2000_bb", "3000_cc"]}
    refs["2000_bb"][2] = "Two  dogs   run . "  # whitespace collapsed when read
    (folder / "Flickr8k.token.txt").write_text("".join(
        f"{img}.jpg#{k}\t{c}\n" for img, caps in refs.items() for k, c in enumerate(caps)))
    # candidate caption ids point at other images' references, as in the official file
    (folder / "ExpertAnnotations.txt").write_text(
        "1000_aa.jpg\t2000_bb.jpg#2\t1\t2\t1\n"
        "1000_aa.jpg\t1000_aa.jpg#0\t4\t4\t4\n"       # the image's own reference: left out (SPICE)
        "2000_bb.jpg\t3000_cc.jpg#1\t3\t3\t4\n"
        "3000_cc.jpg\t1000_aa.jpg#3\t2\t1\t1\n")
    (folder / "CrowdFlowerAnnotations.txt").write_text(
        "1000_aa.jpg\t1000_aa.jpg#0\t1.0\t3\t0\n"     # a reference of its own image: removed from its refs
        "2000_bb.jpg\t1000_aa.jpg#1\tnan\t0\t0\n"
        "3000_cc.jpg\t2000_bb.jpg#2\t0.333333\t1\t2\n")
    return refs


def test_flickr8k_official_files_as_the_clipscore_protocol(tmp_path):
    from vlgap.captions.flickr8k import read_flickr8k

    refs = _flickr8k_files(tmp_path / "Flickr8k_text")
    rows, references, report = read_flickr8k(tmp_path / "Flickr8k_text" / "ExpertAnnotations.txt")
    assert [(r["item"], r["caption"], float(r["rating"])) for r in rows] == [
        ("1000_aa", "Two dogs run .", 1.0), ("1000_aa", "Two dogs run .", 2.0), ("1000_aa", "Two dogs run .", 1.0),
        ("2000_bb", "a cat on the mat 3000", 3.0), ("2000_bb", "a cat on the mat 3000", 3.0),
        ("2000_bb", "a cat on the mat 3000", 4.0), ("3000_cc", "a man on the road 1000", 2.0),
        ("3000_cc", "a man on the road 1000", 1.0), ("3000_cc", "a man on the road 1000", 1.0)]
    assert report["candidates_in_references_left_out"] == 1 and report["reported_as"] == "kendall_tau_c"
    assert references["1000_aa"] == refs["1000_aa"] and references["2000_bb"][2] == "Two dogs run ."
    rows, references, report = read_flickr8k(tmp_path / "Flickr8k_text" / "CrowdFlowerAnnotations.txt")
    assert [float(r["rating"]) for r in rows] == [1.0, 0.333333] and report["nan_ratings_left_out"] == 1
    assert references["1000_aa"] == refs["1000_aa"][1:] and len(references["3000_cc"]) == 5
    (tmp_path / "Flickr8k_text" / "Flickr8k.token.txt").unlink()
    with pytest.raises(VlgapError, match="cannot read .*Flickr8k.token.txt"):
        read_flickr8k(tmp_path / "Flickr8k_text" / "ExpertAnnotations.txt")


def test_caption_eval_agreement_on_flickr8k_files_without_predictions(tmp_path):
    import vlgap

    _flickr8k_files(tmp_path / "t")
    res = vlgap.caption_eval(None, None, "rouge", human=tmp_path / "t" / "ExpertAnnotations.txt", n_bootstrap=0)
    agree = res["human_agreement"]
    assert agree["n_rows"] == 9 and agree["n_items"] == 3 and agree["reported_as"] == "kendall_tau_c"
    # the same rows scored one by one: ROUGE-L of each candidate against its image's references
    from vlgap.captions.flickr8k import read_flickr8k

    rows, references, _ = read_flickr8k(tmp_path / "t" / "ExpertAnnotations.txt")
    per = vlgap.caption_eval([r["caption"] for r in rows], [references[r["item"]] for r in rows], "rouge",
                             per_item=True)["per_item"]
    scores, ratings = [p["ROUGE-L"] for p in per], [float(r["rating"]) for r in rows]
    got = agree["metrics"]["ROUGE-L"]
    assert got["kendall_tau_c"]["value"] == pytest.approx(stats.kendalltau(scores, ratings, variant="c").statistic)
    assert got["kendall_tau_b"]["value"] == pytest.approx(stats.kendalltau(scores, ratings, variant="b").statistic)
    with pytest.raises(VlgapError, match="pass the predictions"):
        vlgap.caption_eval(None, None, "rouge")


def test_cli_human_agreement_from_flickr8k_files_without_pred(tmp_path, monkeypatch, capsys):
    import json

    from in_process_cli import run_cli

    _flickr8k_files(tmp_path / "t")
    human = tmp_path / "t" / "ExpertAnnotations.txt"
    code, out, err = run_cli(monkeypatch, capsys, "caption-eval", "--human", human, "--metrics", "rouge,cider",
                             "--json")
    assert code == 0, err
    agree = json.loads(out)["human_agreement"]
    assert agree["n_rows"] == 9 and set(agree["metrics"]) == {"ROUGE-L", "CIDEr"}
    code, out, err = run_cli(monkeypatch, capsys, "caption-eval", "--human", human, "--metrics", "rouge")
    assert code == 0, err
    assert "Kendall tau-c" in out and "papers report kendall_tau_c" in out and "1 candidate(s) equal to a reference" in out
