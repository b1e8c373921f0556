"""Encoder-by-encoder alignment matrix: entries equal the layer search, clustering follows the structure
built into the features, the linkage matches a hand computation, and the CLI/section path works."""
from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from vlgap.cli import app
from vlgap.errors import VlgapError
from vlgap.metrics.layer_search import layer_search
from vlgap.probe.cross_model import cluster_order, cross_alignment, heatmap_figure

runner = CliRunner()


def _families(n=150, seed=0):
    """Four encoders, two layers each: A1, A2 read latent za; B1, B2 read latent zb."""
    rng = np.random.default_rng(seed)
    za, zb = rng.normal(size=(n, 6)), rng.normal(size=(n, 6))
    feats = {}
    for name, z in (("A1", za), ("B1", zb), ("A2", za), ("B2", zb)):
        feats[name] = [(z @ rng.normal(size=(6, 20)) + s * rng.normal(size=(n, 20))).astype(np.float32)
                       for s in (0.4, 3.0)]
    return feats


def test_matrix_entries_equal_layer_search_and_clusters_follow_families():
    feats = _families()
    res = cross_alignment(feats, k=5, n_bootstrap=50, seed=0)
    m = res.scores
    assert np.allclose(m, m.T) and np.allclose(np.diag(m), 1, rtol=0, atol=1e-12)
    for i, a in enumerate(res.names):
        for j, b in enumerate(res.names):
            if i < j:
                ref = layer_search(feats[a], feats[b], k=5)
                assert m[i, j] == pytest.approx(ref.best_score, abs=1e-12)
                assert res.layers[f"{a}|{b}"] == [ref.x_layer, ref.y_layer]
                assert res.ci_lo[i, j] <= res.ci_hi[i, j]
    ordered = [res.names[i] for i in res.order]
    pos = {nm: ordered.index(nm) for nm in ordered}
    assert abs(pos["A1"] - pos["A2"]) == 1 and abs(pos["B1"] - pos["B2"]) == 1
    within = min(m[res.names.index("A1"), res.names.index("A2")], m[res.names.index("B1"), res.names.index("B2")])
    across = m[res.names.index("A1"), res.names.index("B1")]
    assert within > 5 * across and res.chance == pytest.approx(5 / 149)


def test_cluster_order_linkage_equals_hand_computation():
    scores = np.array([[1.0, 0.9, 0.1], [0.9, 1.0, 0.2], [0.1, 0.2, 1.0]])
    order, z = cluster_order(scores)
    # distances 1 - score: merge (0, 1) at 0.1, then {0,1} with 2 at mean(0.9, 0.8) = 0.85 (average linkage)
    assert z[:, 2] == pytest.approx([0.1, 0.85])
    assert abs(order.index(0) - order.index(1)) == 1
    assert cluster_order(np.ones((1, 1)))[0] == [0]


def test_heatmap_figure_and_errors(tmp_path):
    res = cross_alignment(_families(n=60), k=3)
    fig = heatmap_figure(res)
    fig.savefig(tmp_path / "h.png")
    assert (tmp_path / "h.png").stat().st_size > 1000
    with pytest.raises(VlgapError, match="at least two"):
        cross_alignment({"A": _families(n=60)["A1"]}, k=3)
    feats = _families(n=60)
    feats["B2"] = [x[:50] for x in feats["B2"]]
    with pytest.raises(VlgapError, match="different numbers of items"):
        cross_alignment(feats, k=3)


def test_cross_vision_cli_on_cached_features(tmp_path):
    from conftest import write_video
    from toy_encoders import ToyVision
    from vlgap.features.extract import extract

    rows = []
    for i in range(24):
        write_video(tmp_path / "m" / f"v{i}.mp4", 6 + i % 5, size=16)
        rows.append({"id": f"v{i}", "video": f"m/v{i}.mp4", "captions": [f"clip {i}"]})
    man = tmp_path / "man.jsonl"
    man.write_text("".join(json.dumps(r) + "\n" for r in rows))
    cache = tmp_path / "cache"
    for name, enc in (("toy_img", ToyVision("image")), ("toy_vid", ToyVision("video", n0=2))):
        extract(man, name, n_frames=[4], cache_dir=cache, loaded_encoder=enc, progress=False)
    out = runner.invoke(app, ["cross-vision", str(man), "--vision", "toy_img,toy_vid", "--n-frames", "4", "--k", "3",
                              "--bootstrap", "20", "--cache-dir", str(cache), "--out", str(tmp_path / "run"), "--json"])
    assert out.exit_code == 0, out.output
    d = json.loads(out.stdout)
    assert d["names"] == ["toy_img", "toy_vid"] and d["n"] == 24 and d["scores"][0][0] == 1
    sec = json.loads((tmp_path / "run" / "sections" / "43_cross_vision.json").read_text())
    assert (tmp_path / "run" / sec["figures"][0]).is_file()
