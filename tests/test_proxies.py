"""Downstream proxies on frozen features: weighted k-NN (hand-computed vote, known accuracies), linear probe,
retrieval ranks, manifest labels, the per-layer orchestration and `vlgap downstream --task`."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest
from typer.testing import CliRunner

from vlgap.cli import app
from vlgap.errors import VlgapError
from vlgap.metrics.proxies import (knn_classify_cv, linear_probe_cv, retrieval_scores, weighted_knn_predict,
                                   wilson_interval)

runner = CliRunner()


def test_weighted_vote_by_hand_depends_on_temperature():
    # test point [1, 0]: class 0 at cosine 1.0, class 1 at cosines 0.8 and 0.6 (k = 3 takes all three)
    train = np.array([[1.0, 0.0], [0.8, 0.6], [0.6, 0.8]])
    y = np.array([0, 1, 1])
    test = np.array([[2.0, 0.0]])  # rows are normalised: the scale does not matter
    # T = 0.07: e^(1/.07) = 1.6e6 against e^(.8/.07) + e^(.6/.07) = 9.2e4 + 5.3e3: class 0
    assert weighted_knn_predict(train, y, test, k=3, temperature=0.07).tolist() == [0]
    # T = 1: e^1 = 2.718 against e^.8 + e^.6 = 4.048: class 1 (the plain majority)
    assert math.exp(1) < math.exp(0.8) + math.exp(0.6)
    assert weighted_knn_predict(train, y, test, k=3, temperature=1.0).tolist() == [1]
    # k = 1: only the nearest votes
    assert weighted_knn_predict(train, y, test, k=1, temperature=1.0).tolist() == [0]


def test_wilson_interval_matches_closed_form():
    lo, hi = wilson_interval(8, 10, 0.95)
    z, p, n = 1.959963984540054, 0.8, 10
    mid = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    assert lo == pytest.approx(mid - half) and hi == pytest.approx(mid + half)
    assert wilson_interval(0, 5)[0] == 0.0 and wilson_interval(5, 5)[1] == 1.0


def _clusters(n_per=40, k=4, d=16, spread=0.05, seed=0):
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((k, d)) * 3
    x = np.concatenate([c + spread * rng.standard_normal((n_per, d)) for c in centres])
    y = np.repeat([f"class{i}" for i in range(k)], n_per)
    return x, y


def test_separated_clusters_give_accuracy_one():
    x, y = _clusters()
    r = knn_classify_cv(x, y, n_folds=5)
    assert r["accuracy"] == 1.0 and r["n"] == 160 and r["n_correct"] == 160
    assert r["chance"] == 0.25 and r["n_classes"] == 4 and r["k"] == 8 and r["temperature"] == 0.07
    assert r["ci"] == pytest.approx(wilson_interval(160, 160))
    assert linear_probe_cv(x, y)["accuracy"] == 1.0


def test_random_labels_give_chance_within_interval():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((600, 10))
    y = rng.integers(0, 3, 600).astype(str)
    for r in (knn_classify_cv(x, y, seed=1), linear_probe_cv(x, y, seed=1)):
        assert r["ci"][0] <= 1 / 3 <= r["ci"][1], r
        assert abs(r["accuracy"] - r["chance"]) < 0.1


def test_linear_labels_a_linear_probe_reads():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((300, 5))
    y = np.where(x @ np.array([1.0, -2.0, 0.5, 0, 0]) > 0, "pos", "neg")
    assert linear_probe_cv(x, y)["accuracy"] >= 0.95


def test_folds_are_lowered_for_small_classes_and_singletons_refused():
    x, y = _clusters(n_per=3, k=3)
    r = knn_classify_cv(x, y, n_folds=5)
    assert r["n_folds"] == 3 and any("--folds reduced from 5 to 3 because the largest class has 3 items" in n for n in r["notes"])
    with pytest.raises(VlgapError, match="single item"):
        knn_classify_cv(np.eye(3), ["a", "b", "c"])
    with pytest.raises(VlgapError, match="one label per item"):
        knn_classify_cv(np.eye(4), ["a", "b"])


def test_retrieval_ranks_by_hand():
    video = np.eye(3)
    # caption 0 -> video 0 best; caption 1 is closest to video 2 (rank 2 of its video 1); caption 2 -> video 2
    text = np.array([[1.0, 0.1, 0.0], [0.0, 0.5, 1.0], [0.0, 0.0, 1.0]])
    r = retrieval_scores(video, text, n_bootstrap=50)
    t2v = r["text_to_video"]
    assert t2v["R@1"]["value"] == pytest.approx(2 / 3) and t2v["R@5"]["value"] == 1.0
    assert t2v["median_rank"]["value"] == 1.0 and t2v["R@1"]["chance"] == pytest.approx(1 / 3)
    # video 2 ranks captions: caption 1 (1.0 / |c1|) vs caption 2 (1.0): caption 2 wins; video 1's caption is
    # beaten by nothing (0.5/|c1| > 0.1/|c0|): all videos at rank 1
    assert r["video_to_text"]["R@1"]["value"] == 1.0
    # constant features: every candidate ties, ties count against the query
    const = retrieval_scores(np.ones((4, 2)), np.ones((4, 2)), n_bootstrap=0)
    assert const["text_to_video"]["R@1"]["value"] == 0.0 and const["text_to_video"]["median_rank"]["value"] == 4
    # two captions per video: video -> text takes the best caption
    multi = retrieval_scores(np.eye(2), np.array([[1.0, 0.0], [0.0, 1.0], [0.9, 0.1]]), caption_owner=[0, 1, 1],
                             n_bootstrap=0)
    assert multi["text_to_video"]["R@1"]["value"] == pytest.approx(2 / 3)
    assert multi["video_to_text"]["R@1"]["value"] == 1.0
    with pytest.raises(VlgapError, match="joint space"):
        retrieval_scores(np.eye(3), np.ones((3, 2)))
    with pytest.raises(VlgapError, match="no caption"):
        retrieval_scores(np.eye(3), np.eye(3)[:2], caption_owner=[0, 1])


def test_manifest_labels(tmp_path):
    from vlgap.probe.proxies import manifest_labels

    rows = [{"id": "a", "video": "a.mp4", "captions": ["x"], "meta": {"label": "run", "spec": {
                "background": "navy", "objects": [{"shape": "star", "colour": "red"}],
                "events": [{"kind": "move", "start": 0.5}, {"kind": "grow", "start": 0.1}]}}},
            {"id": "b", "video": "b.mp4", "captions": ["y"], "meta": {"label": 3, "spec": {
                "background": "moon", "objects": [{"shape": "heart", "colour": "blue"}, {"shape": "star"}],
                "events": []}}}]
    man = tmp_path / "m.jsonl"
    man.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert manifest_labels(man, "label") == ["run", "3"]
    assert manifest_labels(man, "spec.background") == ["navy", "moon"]
    assert manifest_labels(man, "spec.objects.0.shape") == ["star", "heart"]
    assert manifest_labels(man, "shape") == ["star", "heart"]
    assert manifest_labels(man, "n_objects") == ["1", "2"]
    with pytest.raises(VlgapError, match="item 'b' has no label 'first_event'"):
        manifest_labels(man, "first_event")  # b has no events
    with pytest.raises(VlgapError, match="item 'a' has no label 'genre'"):
        manifest_labels(man, "genre")


def _toy_data(tmp_path, n=24):
    from conftest import write_video
    from toy_encoders import ToyText, ToyVision
    from vlgap.features.extract import extract

    rows = []
    for i in range(n):
        write_video(tmp_path / "m" / f"v{i}.mp4", 6 + i % 6, size=16)
        rows.append({"id": f"v{i}", "video": f"m/v{i}.mp4", "captions": [f"clip with {i % 6 + 6} frames"],
                     "meta": {"label": f"len{i % 3}", "parity": str(i % 2)}})
    man = tmp_path / "man.jsonl"
    man.write_text("".join(json.dumps(r) + "\n" for r in rows))
    cache = tmp_path / "cache"
    for name, enc in (("toy_img", ToyVision("image")), ("toy_vid", ToyVision("video", n0=2))):
        extract(man, name, n_frames=[4], cache_dir=cache, loaded_encoder=enc, progress=False)
    extract(man, "toy_txt", n_captions=[1], cache_dir=cache, loaded_encoder=ToyText(), progress=False)
    return man, cache


def test_proxies_per_layer_equal_direct_scores_and_cli(tmp_path):
    from vlgap.data.manifest import read_manifest
    from vlgap.features.source import FeatureOptions, FeatureSource
    from vlgap.probe.proxies import downstream_proxies, layer_alignment

    man, cache = _toy_data(tmp_path)
    src = FeatureSource(FeatureOptions(cache_dir=cache, progress=False))
    res = downstream_proxies(man, ["toy_img", "toy_vid"], "toy_txt", task="knn-classify,linear-probe",
                             labels="label,parity", n_f=4, n_c=1, k=3, alignment_k=3, n_folds=3, n_bootstrap=50,
                             features=src)
    assert {r["task"] for r in res.layers} == {"knn-classify:label", "knn-classify:parity", "linear-probe:label",
                                               "linear-probe:parity"}
    assert len(res.layers) == 2 * 3 * 4  # 2 encoders x 3 layers x 4 tasks
    vis = src.vision(read_manifest(man), "toy_vid", 4)
    labels = [f"len{i % 3}" for i in range(24)]
    direct = knn_classify_cv(vis.layers[1], labels, k=3, n_folds=3)
    row = next(r for r in res.layers if r["encoder"] == "toy_vid" and r["layer"] == 1 and r["task"] == "knn-classify:label")
    assert row["score"] == direct["accuracy"] and row["detail"]["ci"] == direct["ci"]
    txt = src.text(read_manifest(man), "toy_txt", 1)
    matrix = layer_alignment(vis.layers, txt.layers, k=3)
    assert row["alignment"] == pytest.approx(float(np.nanmax(matrix[1])))
    # per-layer analysis: 6 points per task, leave-one-encoder-out present; per-encoder needs 3 encoders
    per = {t["task"]: t for t in res.per_layer["tasks"]}
    assert per["knn-classify:label"]["n"] == 6 and "lofo" in per["knn-classify:label"]
    assert res.correlation is None and any("per-encoder correlation needs 3" in n for n in res.notes)
    enc = res.encoders[0]["tasks"]["knn-classify:label"]
    assert enc["score"] == max(r["score"] for r in res.layers if r["encoder"] == "toy_img"
                               and r["task"] == "knn-classify:label")
    # retrieval needs a joint space: the toy vision (8-d) and text (64-d) last layers are not one
    with pytest.raises(VlgapError, match="one joint space"):
        downstream_proxies(man, ["toy_img"], "toy_txt", task="retrieval", n_f=4, features=src)
    out = runner.invoke(app, ["downstream", str(man), "--task", "knn-classify", "--labels", "label", "--vision",
                              "toy_img,toy_vid", "--text", "toy_txt", "--n-f", "4", "--k", "3", "--alignment-k", "3",
                              "--folds", "3", "--bootstrap", "50", "--cache-dir", str(cache), "--out",
                              str(tmp_path / "run"), "--json"])
    assert out.exit_code == 0, out.output
    d = json.loads(out.stdout)
    assert [r["score"] for r in d["layers"] if r["encoder"] == "toy_vid" and r["layer"] == 1] == [direct["accuracy"]]
    sec = json.loads((tmp_path / "run" / "sections" / "70_downstream.json").read_text())
    assert "Which layer predicts which task" in sec["html"] and (tmp_path / "run" / sec["figures"][0]).is_file()
    bad = runner.invoke(app, ["downstream", str(man), "--task", "knn-classify", "--labels", "genre", "--vision",
                              "toy_img", "--text", "toy_txt", "--n-f", "4", "--cache-dir", str(cache)])
    assert isinstance(bad.exception, VlgapError) and "has no label 'genre'" in str(bad.exception)
    bad = runner.invoke(app, ["downstream", str(man), "--task", "classify", "--vision", "toy_img", "--text", "toy_txt"])
    assert isinstance(bad.exception, VlgapError) and "knn-classify" in str(bad.exception)


def test_folds_reduced_is_a_warning_on_the_console_and_in_the_json(tmp_path):
    """--folds 100 on classes of 8 items runs at 8 folds and says so (it used 8 silently)."""
    man, cache = _toy_data(tmp_path)
    out = runner.invoke(app, ["downstream", str(man), "--task", "knn-classify", "--labels", "label", "--vision",
                              "toy_img", "--text", "toy_txt", "--n-f", "4", "--k", "3", "--alignment-k", "3",
                              "--folds", "100", "--bootstrap", "20", "--cache-dir", str(cache), "--json"])
    assert out.exit_code == 0, out.output
    d = json.loads(out.stdout)
    said = "--folds reduced from 100 to 8 because the largest class has 8 items"
    assert [w for w in d["warnings"] if w.startswith(said)] == [d["warnings"][-1]]
    # the toy layers all score 1.0: the correlation over them is n/a, said once (issue 44), not printed as nan
    assert any("has the same score (1), so its correlations" in w for w in d["warnings"])
    assert d["config"]["n_folds"] == 100 and d["config"]["n_folds_used"] == 8
    assert "warning: " + said in " ".join(out.stderr.split())
