"""Temporal probes: the paired k-NN bootstrap against a brute-force resample, drops whose intervals
exclude zero when order is encoded and contain it when it is not, tie-aware mutual k-NN against hand
computations, the reorder JSON readers, and the demo sections end to end on toy encoders."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from vlgap.data.reorder import read_reorder_json
from vlgap.errors import VlgapError
from vlgap.metrics.conditions import frame_order_difference, reorder_drop
from vlgap.metrics.layer_search import layer_search
from vlgap.metrics.ties import cosine_similarities, nearest_related, tie_aware_mutual_knn, tie_aware_neighbours
from vlgap.metrics.uncertainty import bootstrap_weight_batches


def _latent(n, seed, noise=0.3, d=12, o=6):
    rng = np.random.default_rng(seed)
    return rng, rng.normal(size=(n, d)), rng.normal(size=(n, o)), noise


# ---------------------------------------------------------------------------------------------- bootstrap core
def _knn(sims_row: np.ndarray, candidates: list[int], k: int) -> set[int]:
    """k most similar candidates (ties: smaller index), literal sort."""
    return set(sorted(candidates, key=lambda j: (-sims_row[j], j))[:k])


def test_resampled_drop_equals_brute_force_resample():
    rng = np.random.default_rng(11)
    n, k = 25, 3
    vis, pos = rng.normal(size=(n, 5)), rng.normal(size=(n, 5))
    owner = np.array(list(range(n)) + [0, 3, 3, 7])  # some videos have two or three negatives
    neg = rng.normal(size=(len(owner), 5))
    res = reorder_drop(vis, pos, neg, owner, k=k, n_bootstrap=6, seed=7)
    norm = lambda a: torch.nn.functional.normalize(torch.as_tensor(a, dtype=torch.float32), dim=1)  # noqa: E731
    sx, sp, sn = (norm(vis) @ norm(vis).T).numpy(), (norm(pos) @ norm(pos).T).numpy(), (norm(neg) @ norm(pos).T).numpy()
    m = np.bincount(owner, minlength=n)
    weights = np.concatenate(list(bootstrap_weight_batches(n, 6, 7)))
    for b, w in enumerate(weights):
        drawn = [j for j in range(n) if w[j] > 0]
        others = lambda i: [j for j in drawn if j != i]  # noqa: E731  distinct drawn items, never itself
        a = sum(w[i] * len(_knn(sx[i], others(i), k) & _knn(sp[i], others(i), k)) for i in range(n))
        bb = sum(w[i] / m[i] * len(_knn(sx[i], others(i), k) & _knn(sn[r], others(i), k)) for r, i in enumerate(owner))
        assert res.samples[b] == pytest.approx((a - bb) / (k * n), abs=1e-12)
    # the point estimates are the ordinary mutual k-NN (positive) and its negative counterpart
    assert res.score_a == pytest.approx(layer_search([vis], [pos], k=k).best_score, abs=1e-12)
    every = list(range(n))
    ref_b = sum(len(_knn(sx[i], [j for j in every if j != i], k) & _knn(sn[r], [j for j in every if j != i], k)) / m[i]
                for r, i in enumerate(owner)) / (k * n)
    assert res.score_b == pytest.approx(ref_b, abs=1e-12)


# ---------------------------------------------------------------------------------------------- done-when
def test_reorder_drop_interval_excludes_zero_only_when_order_is_encoded():
    rng, c, o, s = _latent(150, 0)
    vis = np.hstack([c, o]) + s * rng.normal(size=(150, 18))
    pos = np.hstack([c, o]) + s * rng.normal(size=(150, 18))
    neg = np.hstack([c, rng.normal(size=o.shape)]) + s * rng.normal(size=(150, 18))  # same content, other order
    enc = reorder_drop(vis, pos, neg, k=5, n_bootstrap=300, seed=0)
    assert enc.difference > 0.1 and enc.ci[0] > 0 and enc.excludes_zero
    assert enc.ci_a[0] <= enc.score_a <= enc.ci_a[1] and enc.n == 150 and enc.chance == pytest.approx(5 / 149)
    # text blind to order: positive and negative are two equally noisy readings of the same content
    vis0, pos0, neg0 = (c + 0.6 * rng.normal(size=c.shape) for _ in range(3))
    blind = reorder_drop(vis0, pos0, neg0, k=5, n_bootstrap=300, seed=0)
    assert blind.ci[0] < 0 < blind.ci[1] and not blind.excludes_zero


def test_frame_order_interval_excludes_zero_only_when_order_is_encoded():
    rng, c, o, s = _latent(150, 1)
    text = np.hstack([c, o]) + s * rng.normal(size=(150, 18))
    ordered = np.hstack([c, o]) + s * rng.normal(size=(150, 18))
    shuffled = np.hstack([c, o[rng.permutation(150)]]) + s * rng.normal(size=(150, 18))
    enc = frame_order_difference(ordered, shuffled, text, k=10, n_bootstrap=300, control="shuffled")
    assert enc.difference > 0.1 and enc.ci[0] > 0 and enc.name_b == "shuffled"
    # an order-blind encoder: the control is just another reading of the same content
    blind = frame_order_difference(c + 0.6 * rng.normal(size=c.shape), c + 0.6 * rng.normal(size=c.shape),
                                   c + 0.6 * rng.normal(size=c.shape), k=10, n_bootstrap=300)
    assert blind.ci[0] < 0 < blind.ci[1]
    # identical features (mean over frames): exactly zero in every resample
    same = frame_order_difference([ordered, text], [ordered.copy(), text.copy()], text, k=10, n_bootstrap=50)
    assert same.difference == 0 and same.ci == [0.0, 0.0]


def test_null_intervals_cover_zero_and_se_tracks_the_spread():
    diffs, ses, covered = [], [], 0
    for rep in range(16):
        rng = np.random.default_rng(100 + rep)
        c = rng.normal(size=(100, 8))
        v, p, q = (c + 0.6 * rng.normal(size=c.shape) for _ in range(3))
        d = reorder_drop(v, p, q, k=5, n_bootstrap=150, seed=rep)
        diffs.append(d.difference)
        ses.append(d.se)
        covered += d.ci[0] <= 0 <= d.ci[1]
    assert covered >= 14
    ratio = np.mean(ses) / np.std(diffs, ddof=1)
    assert 0.7 < ratio < 2.0  # conservative by design (module docstring), never far too narrow


def test_reorder_drop_input_errors():
    x = np.random.default_rng(0).normal(size=(20, 4))
    with pytest.raises(VlgapError, match="no negative"):
        reorder_drop(x, x, x[:10], list(range(10)), k=3)
    with pytest.raises(VlgapError, match="one positive per video"):
        reorder_drop(x, x[:19], x, k=3)


# ---------------------------------------------------------------------------------------------- Test of Time maths
def test_tie_aware_neighbours_hand_examples():
    sims = np.array([[1, .9, .9, .1], [.9, 1, .2, .3], [.9, .2, 1, .5], [.1, .3, .5, 1]])
    p1 = tie_aware_neighbours(sims, 1)
    assert p1[0] == pytest.approx([0, .5, .5, 0]) and p1[1] == pytest.approx([1, 0, 0, 0])
    assert tie_aware_neighbours(sims, 2)[0] == pytest.approx([0, 1, 1, 0])
    # two duplicated videos; text item 0 is equally close to items 1 and 2 (and so on round the square)
    x = np.array([[1, 0], [1, 0], [0, 1], [0, 1]], float)
    y = np.array([[1, 0], [0, 1], [0, -1], [-1, 0]], float)
    per_item = tie_aware_mutual_knn(cosine_similarities(x), cosine_similarities(y), 1)
    assert per_item == pytest.approx([0.5, 0.5, 0.5, 0.5])


def test_tie_aware_equals_mutual_knn_without_ties_and_ignores_item_order_with_ties():
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(60, 5)), rng.normal(size=(60, 5))
    y[:, :2] += 2 * x[:, :2]
    score = tie_aware_mutual_knn(cosine_similarities(x), cosine_similarities(y), 4).mean()
    assert score == pytest.approx(layer_search([x], [y], k=4).best_score, abs=1e-12)
    xd, yd = np.repeat(x[:20], 3, axis=0), np.repeat(y[:30], 2, axis=0)  # duplicates on both sides
    perm = rng.permutation(60)
    a = tie_aware_mutual_knn(cosine_similarities(xd), cosine_similarities(yd), 2).mean()
    b = tie_aware_mutual_knn(cosine_similarities(xd[perm]), cosine_similarities(yd[perm]), 2).mean()
    assert a == pytest.approx(b, abs=1e-12)


def test_nearest_related_credit_and_ties():
    base = np.eye(4)
    layer = np.vstack([base[0], base[0] + 0.1 * base[1], base[0] + 0.5 * base[2], base[0] + 0.5 * base[3]])
    credit = nearest_related(layer, np.array([[1, 2, 3], [0, 2, 3], [0, 1, 3], [0, 1, 2]]))
    assert credit[0] == pytest.approx([1, 0, 0])      # item 1 is closest to item 0
    assert credit[1] == pytest.approx([1, 0, 0])
    assert credit[2] == pytest.approx([1, 0, 0])
    layer[1], layer[3] = base[1], layer[2]  # item 1 far away, items 2 and 3 identical
    tied = nearest_related(layer, np.array([[2, 3, 1], [0, 2, 3], [3, 0, 1], [2, 0, 1]]))
    assert tied[0] == pytest.approx([0.5, 0.5, 0]) and tied[2] == pytest.approx([1, 0, 0])


# ---------------------------------------------------------------------------------------------- readers
def test_reorder_json_forms(tmp_path):
    ours = [{"id": "a", "video": "a.mp4", "positive": "x then y", "negatives": ["y then x", "z then x"]},
            {"id": "b", "video": "/abs/b.mp4", "positive": "p then q", "negative": "q then p"}]
    (tmp_path / "ours.json").write_text(json.dumps(ours))
    t = read_reorder_json(tmp_path / "ours.json")
    assert [x.id for x in t] == ["a", "b"] and t[0].negatives == ["y then x", "z then x"]
    assert t[0].video == tmp_path / "a.mp4" and str(t[1].video) == "/abs/b.mp4"
    vc = [  # VideoComp fields (github.com/google-deepmind/video_comp README), flat "a/b" keys
        {"key": "k1", "video_id": "yt1", "type": "temporal reordering", "positive_text": "P1", "negative_text": "N1",
         "query_video/start_time": 0.0, "query_videl/end_time": 12.5},
        {"key": "k2", "video_id": "yt1", "type": "temporal reordering", "positive_text": "P1", "negative_text": "N1b"},
        {"key": "k3", "video_id": "yt1", "type": "action word replacement", "positive_text": "P1", "negative_text": "A"},
        {"key": "k4", "video_id": "yt2", "type": "temporal reordering", "positive_text": "P2", "negative_text": "N2",
         "query_video": {"start_time": 1.0, "end_time": 4.0}}]
    (tmp_path / "vc.json").write_text(json.dumps(vc))
    t = read_reorder_json(tmp_path / "vc.json", video_dir=tmp_path / "clips")
    assert [(x.id, x.negatives) for x in t] == [("yt1", ["N1", "N1b"]), ("yt2", ["N2"])]
    assert t[0].video == tmp_path / "clips" / "yt1.mp4" and t[0].meta["query_end"] == 12.5
    assert t[1].meta["query_start"] == 1.0
    with pytest.raises(VlgapError, match="no entry of type"):
        read_reorder_json(tmp_path / "vc.json", types=["segment"])
    (tmp_path / "bad.json").write_text(json.dumps([{"video": "a.mp4"}]))
    with pytest.raises(VlgapError, match="positive"):
        read_reorder_json(tmp_path / "bad.json")


# ---------------------------------------------------------------------------------------------- end to end
def test_demo_sections_on_toy_encoders(tmp_path):
    from toy_encoders import ToyText, ToyVision
    from vlgap.probe.demo import DemoConfig, shapes_manifest
    from vlgap.probe.report import write_report
    from vlgap.probe.sweep import SweepConfig, run_sweep
    from vlgap.probe.temporal import run_temporal_sections

    cfg = DemoConfig(n_videos=24, n_frames_per_video=8, video_size=32, vision=["toy_img", "toy_vid"], text=["toy_txt"],
                     n_frames=[2, 8], n_captions=[1, 4], k=3, n_bootstrap=20, n_permutations=20,
                     out=str(tmp_path / "run"), cache_dir=str(tmp_path / "cache"))
    enc = {"toy_img": ToyVision("image"), "toy_vid": ToyVision("video", n0=4), "toy_txt": ToyText()}
    sweep = SweepConfig(str(shapes_manifest(cfg)), cfg.vision, cfg.text, cfg.n_frames, cfg.n_captions, k=3,
                        text_dtype=cfg.text_dtype,
                        n_bootstrap=20, n_permutations=20, image_size=cfg.image_size, cache_dir=cfg.cache_dir)
    result = run_sweep(sweep, cfg.out, progress=False, encoders=enc)
    summary = run_temporal_sections(cfg, result, progress=False, encoders=enc, n_bootstrap=100)
    tot = summary["test_of_time"]
    assert tot["n_items"] == 180 and tot["n_videos"] == 90 and tot["n_distinct_captions"] == 60
    assert {(r["view"], r["k"]) for r in tot["alignment"]} == {(v, k) for v in tot["views"] for k in (1, 2, 3)}
    vis_rows = [r for r in tot["nearest_related"] if r["modality"] == "vision"]
    assert all(r["fractions"]["equivalent"] == 1.0 for r in vis_rows)  # same video: nearest by construction
    for r in tot["nearest_related"]:
        assert sum(r["fractions"].values()) == pytest.approx(1.0)
    fo = summary["frame_order"]
    img = [r for r in fo["rows"] if r["vision"] == "toy_img"]
    assert img and all(r["by_construction"] and r["difference"] == 0 and r["ci"] == [0.0, 0.0] for r in img)
    vid_checks = [c for c in fo["checks"] if c["vision"] == "toy_vid"]
    assert vid_checks and not any(c["invariant"] for c in vid_checks)  # a clip model sees the order
    assert summary["reorder"]["rows"] and summary["cross_vision"]["n"] == 24
    page = write_report(cfg.out).read_text()
    for title in ("Test of Time", "event reorder", "frame-order controls", "Vision × vision"):
        assert title in page
    assert page.count("data:image/png;base64,") >= 3 + 5
    # the CLI reads the same cached features (encoders are never loaded when nothing is missing)
    from typer.testing import CliRunner

    from vlgap.cli import app

    runner = CliRunner()
    common = ["--vision", "toy_img,toy_vid", "--text", "toy_txt", "--n-frames", "8", "--image-size", "160",
              "--cache-dir", cfg.cache_dir, "--bootstrap", "50", "--text-dtype", "bf16", "--json"]
    out = runner.invoke(app, ["temporal", str(shapes_manifest(cfg)), "--n-captions", "4", "--k", "3",
                              "--image-check", "16", *common])
    assert out.exit_code == 0, out.output
    d = json.loads(out.stdout)
    assert len(d["reorder"]["rows"]) == 2 and len(d["frame_order"]["rows"]) == 4
    tot_manifest = tmp_path / "cache" / "data" / "test-of-time-s0-128px" / "manifest.jsonl"
    out = runner.invoke(app, ["test-of-time", "--manifest", str(tot_manifest), *common])
    assert out.exit_code == 0, out.output
    assert json.loads(out.stdout)["nearest_related"] == tot["nearest_related"]


# ---------------------------------------------------------------------------------------------- vocabulary
def test_old_keywords_name_their_new_form():
    from vlgap.probe.cross_model import run_cross_alignment
    from vlgap.probe.frame_order import run_frame_order
    from vlgap.probe.reorder import run_reorder
    from vlgap.probe.test_of_time import run_test_of_time

    with pytest.raises(VlgapError, match=r"cache_dir= moved into features=FeatureOptions\(cache_dir=\.\.\.\)"):
        run_test_of_time(["v"], ["t"], cache_dir="/nonexistent")
    with pytest.raises(VlgapError, match=r"run_test_of_time\(\): the keyword 'source' is now features"):
        run_test_of_time(["v"], ["t"], source=None)
    with pytest.raises(VlgapError, match=r"device=, dtype= moved into features=FeatureOptions\(device=\.\.\., dtype="):
        run_reorder("x.jsonl", ["v"], ["t"], device="cpu", dtype="float32")
    with pytest.raises(VlgapError, match="FeatureSource"):
        run_frame_order("x.jsonl", ["v"], ["t"], encoders={})
    with pytest.raises(VlgapError, match=r"FeatureOptions\(image_size"):
        run_cross_alignment("x.jsonl", ["a", "b"], image_size=160)
    with pytest.raises(TypeError, match="n_boot"):  # not a name that ever existed: Python's own error
        run_reorder("x.jsonl", ["v"], ["t"], n_boot=10)


def test_cli_frame_count_is_a_comma_list_of_one_value(tmp_path):
    from typer.testing import CliRunner

    from vlgap.cli import app

    (tmp_path / "m.jsonl").write_text('{"id": "v1", "video": "v1.mp4", "captions": ["a"]}\n')
    out = CliRunner().invoke(app, ["temporal", str(tmp_path / "m.jsonl"), "--vision", "a", "--text", "b",
                                   "--n-frames", "4,8"])
    # `vlgap` (cli.main) turns a VlgapError into a one-line message and exit code 2
    assert isinstance(out.exception, VlgapError) and "--n-frames" in str(out.exception)
    assert "one value" in str(out.exception)


def test_tie_aware_alignment_leaves_zero_variance_layers_out_and_refuses_all_constant():
    """A layer whose items are all identical ties everyone with everyone: it is n/a (noted) and never
    the best pair; a side with only such layers is refused like the other metrics."""
    import numpy as np
    import pytest

    from vlgap.metrics.base import ZeroVarianceError
    from vlgap.metrics.ties import tot_alignment

    rng = np.random.default_rng(0)
    z = rng.normal(size=(30, 4))
    x_good = z @ rng.normal(size=(4, 16))
    y_good = z @ rng.normal(size=(4, 8))
    constant = np.ones((30, 16))
    groups = np.repeat(np.arange(10), 3)
    with_flat = tot_alignment([constant, x_good], [y_good], groups, ks=(1,))
    alone = tot_alignment([x_good], [y_good], groups, ks=(1,))
    assert with_flat[0]["x_layer"] == 1 and with_flat[0]["score"] == alone[0]["score"]
    assert np.isnan(with_flat[0]["scores"][0, 0]) and "vision layer 0 of 2" in with_flat[0]["notes"][0]
    with pytest.raises(ZeroVarianceError, match="text layer 0 of 1 has zero variance"):
        tot_alignment([x_good], [np.zeros((30, 8)) + 2.0], groups, ks=(1,))
