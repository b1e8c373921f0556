"""The paper's cross-model figures (Dynamic Reflections Figs 7, 10, 11, 12) on sweep tables with a known
answer: a planted line recovered with intervals that cover it (coverage by simulation), the per-encoder
n_f, the matrix argmax and layer indices equal to a hand computation, the encoder x encoder matrix with
per-encoder n_f and text rows equal to the layer search on the same features, the CLI and the dr-full
sections on toy encoders."""
from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from typer.testing import CliRunner

from vlgap.cli import app
from vlgap.errors import VlgapError
from vlgap.probe.cross_figures import (best_n_f, best_score_matrix, caption_gain_fit, choose_n_f, n_f_table,
                                       parse_n_f)
from vlgap.stats.line_fit import fit_line

runner = CliRunner()


# ------------------------------------------------------------------------------------------------
# the line through models (Fig 7)
# ------------------------------------------------------------------------------------------------

def test_line_fit_estimates_equal_least_squares_and_t_interval():
    from scipy import stats

    x = np.array([0.10, 0.14, 0.18, 0.22, 0.26, 0.30])
    y = np.array([0.145, 0.210, 0.270, 0.335, 0.395, 0.465])
    f = fit_line(x, y, n_bootstrap=500, seed=1)
    slope, intercept = np.polyfit(x, y, 1)
    assert f.slope == pytest.approx(slope, abs=1e-12) and f.intercept == pytest.approx(intercept, abs=1e-12)
    assert f.r == pytest.approx(np.corrcoef(x, y)[0, 1], abs=1e-12)
    lr = stats.linregress(x, y)  # scipy's standard errors give the same t interval
    tq = stats.t.ppf(0.975, 4)
    assert f.slope_ci_t == pytest.approx([lr.slope - tq * lr.stderr, lr.slope + tq * lr.stderr], abs=1e-10)
    assert f.intercept_ci_t == pytest.approx([lr.intercept - tq * lr.intercept_stderr,
                                              lr.intercept + tq * lr.intercept_stderr], abs=1e-10)
    assert f.mean_ratio == pytest.approx(np.mean(y / x), abs=1e-12)
    assert len(f.band_x) == 50 and all(lo <= hi for lo, hi in zip(f.band_lo, f.band_hi))
    assert any("only 6 points" in n for n in f.notes)


def test_planted_line_is_recovered_and_its_intervals_cover_it():
    """y = 1.6 x - 0.018 (the paper's Fig 7) plus noise over 25 models, 200 data sets: the slope's
    bootstrap and t intervals and the band at the middle of the x range cover the planted values
    near their 95 %."""
    rng = np.random.default_rng(7)
    true_a, true_b, n, reps = 1.6, -0.018, 25, 200
    hits = {"boot": 0, "t": 0, "band": 0, "intercept": 0}
    slopes = []
    for rep in range(reps):
        x = rng.uniform(0.1, 0.3, n)
        y = true_a * x + true_b + rng.normal(0, 0.008, n)
        f = fit_line(x, y, n_bootstrap=400, seed=rep, band_x=[0.2])
        slopes.append(f.slope)
        hits["boot"] += f.slope_ci[0] <= true_a <= f.slope_ci[1]
        hits["t"] += f.slope_ci_t[0] <= true_a <= f.slope_ci_t[1]
        hits["intercept"] += f.intercept_ci[0] <= true_b <= f.intercept_ci[1]
        hits["band"] += f.band_lo[0] <= true_a * 0.2 + true_b <= f.band_hi[0]
    assert np.mean(slopes) == pytest.approx(true_a, abs=0.01)
    cover = {k: v / reps for k, v in hits.items()}
    assert 0.90 <= cover["t"] <= 0.99, cover
    assert 0.87 <= cover["boot"] <= 0.99, cover
    assert 0.87 <= cover["intercept"] <= 0.99 and 0.87 <= cover["band"] <= 0.99, cover


def test_line_fit_refuses_what_has_no_line():
    with pytest.raises(VlgapError, match="at least 3 points"):
        fit_line([0.1, 0.2], [0.2, 0.3])
    with pytest.raises(VlgapError, match="same x"):
        fit_line([0.1, 0.1, 0.1], [0.2, 0.3, 0.4])
    with pytest.raises(VlgapError, match="finite"):
        fit_line([0.1, 0.2, np.nan], [0.2, 0.3, 0.4])


# ------------------------------------------------------------------------------------------------
# sweep tables with a known answer
# ------------------------------------------------------------------------------------------------

def _row(v, t, nf, nc, score, xl=0, yl=0, ci=0.02):
    return {"vision": v, "text": t, "n_f": nf, "n_c": nc, "score": score, "ci_lo": score - ci, "ci_hi": score + ci,
            "x_layer": xl, "y_layer": yl, "x_layer_name": f"v{xl}", "y_layer_name": f"t{yl}", "n": 100, "k": 10,
            "chance": 10 / 99, "metric": "mutual_knn", "p_value": 0.005, "null_mean": 0.11}


def _planted_rows(n_vision=8, texts=("t0",), noise=0.0, seed=0):
    """n_f in {1, 4}, n_c in {1, 8}. Each vision encoder is best at a planted n_f (even ones at 4, odd at
    1, by 0.01); at its best n_f the 8-caption score is 1.6 x the 1-caption score minus 0.018."""
    rng = np.random.default_rng(seed)
    rows, planted_n_f = [], {}
    for i in range(n_vision):
        v = f"vis{i}"
        planted_n_f[v] = 4 if i % 2 == 0 else 1
        for t in texts:
            base = rng.uniform(0.10, 0.30)
            for nf in (1, 4):
                x = base if nf == planted_n_f[v] else base - 0.01
                y = 1.6 * x - 0.018 + (rng.normal(0, noise) if noise else 0.0)
                rows.append(_row(v, t, nf, 1, x, xl=i, yl=1))
                rows.append(_row(v, t, nf, 8, y, xl=i + 1, yl=2))
    return rows, planted_n_f


def test_best_n_f_equals_hand_computation():
    rows = [_row("a", "t", 1, 1, 0.30), _row("a", "t", 4, 1, 0.25), _row("a", "t", 1, 2, 0.40),
            _row("a", "t", 4, 2, 0.41),  # a: mean at n_f 1 = 0.35, at 4 = 0.33 -> 1
            _row("b", "t", 1, 1, 0.20), _row("b", "t", 4, 1, 0.20),  # b: tie -> the smaller n_f
            _row("c", "t", 2, 1, 0.10), _row("c", "t", 8, 1, 0.12), _row("c", "t", 8, 2, 0.90)]
    # c: the n_c = 2 cell exists only at n_f 8: left out of both means (0.10 vs 0.12 -> 8)
    table = n_f_table(rows)
    assert best_n_f(rows) == {"a": 1, "b": 1, "c": 8}
    assert table["a"]["mean_score"] == pytest.approx({1: 0.35, 4: 0.33})
    assert table["c"]["mean_score"] == pytest.approx({2: 0.10, 8: 0.12}) and table["c"]["n_cells"] == 1
    nan_rows = [dict(_row("a", "t", 1, 1, 0.3), score=float("nan")), _row("a", "t", 2, 1, 0.2)]
    assert best_n_f(nan_rows) == {"a": 2}  # an n/a cell gives its n_f no mean
    assert choose_n_f(rows, {"a": 4})[0] == {"a": 4, "b": 1, "c": 8}
    with pytest.raises(VlgapError, match=r"n_f not in the sweep: c=1 \(swept: 2, 8\)"):
        choose_n_f(rows, 1)
    with pytest.raises(VlgapError, match="zzz, not a vision encoder"):
        choose_n_f(rows, {"zzz": 4})
    assert parse_n_f("best") is None and parse_n_f("8") == 8 and parse_n_f("a=4, b=8") == {"a": 4, "b": 8}
    with pytest.raises(VlgapError, match="--n-f"):
        parse_n_f("a=x")


def test_caption_gain_recovers_planted_line_at_each_encoders_best_n_f():
    rows, planted = _planted_rows()
    res = caption_gain_fit(rows, n_bootstrap=500)
    assert res["n_f"] == planted and res["n_points"] == 8 and res["n_c_high"] == 8
    # each point is the row at the encoder's planted n_f (hand-picked)
    for p in res["points"]:
        hand = [r for r in rows if r["vision"] == p["vision"] and r["n_f"] == planted[p["vision"]]]
        assert p["x"] == next(r["score"] for r in hand if r["n_c"] == 1)
        assert p["y"] == next(r["score"] for r in hand if r["n_c"] == 8)
        assert p["y_layers"] == [int(p["vision"][3:]) + 1, 2]
    fit = res["fit"]
    assert fit["slope"] == pytest.approx(1.6, abs=1e-9) and fit["intercept"] == pytest.approx(-0.018, abs=1e-9)
    assert fit["r"] == pytest.approx(1.0, abs=1e-12)
    # with noise, the intervals cover the planted slope; the t interval too
    noisy, _ = _planted_rows(n_vision=20, noise=0.006, seed=3)
    f = caption_gain_fit(noisy, n_bootstrap=1000)["fit"]
    assert f["slope_ci"][0] <= 1.6 <= f["slope_ci"][1] and f["slope_ci_t"][0] <= 1.6 <= f["slope_ci_t"][1]
    assert f["n"] == 20 and f["slope_ci"][1] - f["slope_ci"][0] < 0.3


def test_caption_gain_filters_text_names_left_out_pairs_and_refuses_thin_sweeps():
    rows, _ = _planted_rows(n_vision=4, texts=("t0", "t1"))
    both = caption_gain_fit(rows, n_bootstrap=200)
    assert both["n_points"] == 8 and both["n_text"] == 2
    assert any("not independent" in n for n in both["notes"])
    one = caption_gain_fit(rows, text="t1", n_bootstrap=200)
    assert one["n_points"] == 4 and {p["text"] for p in one["points"]} == {"t1"}
    gap = [r for r in rows if not (r["vision"] == "vis0" and r["text"] == "t0" and r["n_c"] == 8)]
    res = caption_gain_fit(gap, n_bootstrap=200)
    assert res["n_points"] == 7 and any("vis0 × t0: no cell at n_f=4 with n_c=8" in n for n in res["notes"])
    with pytest.raises(VlgapError, match="at least 3 .* got 2"):
        caption_gain_fit(rows[:16], text="t0", n_bootstrap=200)
    with pytest.raises(VlgapError, match="n_c_high=5 is not an n_c of the sweep; swept: 1, 8"):
        caption_gain_fit(rows, n_c_high=5)
    with pytest.raises(VlgapError, match="text encoder nope is not in the sweep"):
        caption_gain_fit(rows, text="nope")


def test_best_score_matrix_argmax_and_layer_indices_equal_hand_computation():
    rng = np.random.default_rng(11)
    vision, texts = ["va", "vb", "vc"], ["ta", "tb", "tc", "td"]
    rows = []
    for v in vision:
        for t in texts:
            for nf in (2, 8):
                for nc in (1, 4):
                    rows.append(_row(v, t, nf, nc, float(rng.uniform(0.05, 0.5)), xl=int(rng.integers(0, 12)),
                                     yl=int(rng.integers(0, 30))))
    rows[5]["score"] = float("nan")  # an n/a cell somewhere
    rows[5]["na_reason"] = "zero variance"
    # hand computation: best n_f per vision = the larger mean over the (text, n_c) cells with finite scores
    # present at both n_f (the n/a cell drops its (text, n_c) from both means)
    hand_nf = {}
    for v in vision:
        sub = [r for r in rows if r["vision"] == v]
        bad = {(r["text"], r["n_c"]) for r in sub if not np.isfinite(r["score"])}
        means = {nf: np.mean([r["score"] for r in sub if r["n_f"] == nf and (r["text"], r["n_c"]) not in bad])
                 for nf in (2, 8)}
        hand_nf[v] = max(means, key=lambda nf: (means[nf], -nf))
    for nc in (1, 4):
        m = best_score_matrix(rows, n_c=nc)
        assert m.n_f == hand_nf and m.vision == vision and m.text == texts
        sc = np.full((3, 4), np.nan)
        for i, v in enumerate(vision):
            for j, t in enumerate(texts):
                r = next(r for r in rows if (r["vision"], r["text"], r["n_f"], r["n_c"]) == (v, t, hand_nf[v], nc))
                if np.isfinite(r["score"]):
                    sc[i, j] = r["score"]
                    assert (m.x_layer[i][j], m.y_layer[i][j]) == (r["x_layer"], r["y_layer"])
                    assert (m.ci_lo[i][j], m.ci_hi[i][j]) == (r["ci_lo"], r["ci_hi"])
                    assert m.y_layer_name[i][j] == f"t{r['y_layer']}"
                else:
                    assert m.x_layer[i][j] == -1 and any("n/a (zero variance)" in n for n in m.notes)
        np.testing.assert_array_equal(np.asarray(m.scores), sc)
        i, j = np.unravel_index(np.nanargmax(sc), sc.shape)
        assert (m.best["vision"], m.best["text"], m.best["score"]) == (vision[i], texts[j], sc[i, j])
        assert m.best_text == {v: texts[int(np.nanargmax(sc[a]))] for a, v in enumerate(vision)}
        assert m.best_vision == {t: vision[int(np.nanargmax(sc[:, b]))] for b, t in enumerate(texts)}
    with pytest.raises(VlgapError, match="n_c=3 is not an n_c of the sweep"):
        best_score_matrix(rows, n_c=3)


# ------------------------------------------------------------------------------------------------
# the run folder: CLI, report, dr-full sections (toy encoders)
# ------------------------------------------------------------------------------------------------

def _write_sweep(run: Path, rows: list[dict]) -> None:
    from vlgap.probe.sweep import SweepConfig, write_tables

    cfg = SweepConfig("none.jsonl", sorted({r["vision"] for r in rows}), sorted({r["text"] for r in rows}),
                      sorted({r["n_f"] for r in rows}), sorted({r["n_c"] for r in rows}), n_bootstrap=20)
    run.mkdir(parents=True, exist_ok=True)
    write_tables(run, rows, cfg, {})


def test_cross_model_figures_cli_writes_sections_and_the_report_includes_them(tmp_path):
    from vlgap.probe.report import write_report

    rows, planted = _planted_rows(n_vision=4, texts=("t0", "t1"), noise=0.004)
    run = tmp_path / "run"
    _write_sweep(run, rows)
    out = runner.invoke(app, ["cross-model-figures", str(run), "--bootstrap", "300", "--json"])
    assert out.exit_code == 0, out.output
    d = json.loads(out.stdout)
    assert d["n_f"] == planted and d["caption_gain"]["n_points"] == 8 and set(d["matrices"]) == {"1", "8"}
    sec = json.loads((run / "sections" / "80_cross_model.json").read_text())
    assert len(sec["figures"]) == 3 and all((run / f).is_file() for f in sec["figures"])
    assert "N = 8 (vision, text) pairs" in sec["html"] and "thin for a line" in sec["html"]
    text = write_report(run, progress=False).read_text()
    assert "Cross-model figures" in text
    plain = runner.invoke(app, ["cross-model-figures", str(run), "--n-f", "vis0=1", "--text", "t0"])
    assert plain.exit_code == 0, plain.output
    assert "vis0 1" in plain.output and "N = 4 pairs" in plain.output
    bad = runner.invoke(app, ["cross-model-figures", str(run), "--n-f", "vis0=2"])
    assert isinstance(bad.exception, VlgapError) and "n_f not in the sweep: vis0=2 (swept: 1, 4)" in str(bad.exception)
    high = runner.invoke(app, ["cross-model-figures", str(run), "--n-c-high", "5"])
    assert isinstance(high.exception, VlgapError) and "n_c_high=5 is not an n_c of the sweep" in str(high.exception)
    missing = runner.invoke(app, ["cross-model-figures", str(tmp_path / "nothing")])
    assert isinstance(missing.exception, VlgapError) and "does not exist (expected a folder)" in str(missing.exception)
    (tmp_path / "nothing").mkdir()
    missing = runner.invoke(app, ["cross-model-figures", str(tmp_path / "nothing")])
    assert isinstance(missing.exception, VlgapError) and "holds no sweep.json" in str(missing.exception)


def _toy_manifest(tmp_path: Path, n: int = 24) -> Path:
    from conftest import write_toy_manifest

    return write_toy_manifest(tmp_path, n, min_frames=6, length_mod=5, n_captions=2)


def test_encoder_matrix_takes_per_encoder_n_f_and_text_rows(tmp_path):
    from toy_encoders import ToyText, ToyVision
    from vlgap.features.extract import extract, load_features
    from vlgap.metrics.layer_search import layer_search
    from vlgap.probe.cross_model import run_cross_alignment

    man = _toy_manifest(tmp_path)
    cache = tmp_path / "cache"
    extract(man, "toy_img", n_frames=[2], cache_dir=cache, loaded_encoder=ToyVision("image"), progress=False)
    extract(man, "toy_vid", n_frames=[4], cache_dir=cache, loaded_encoder=ToyVision("video", n0=2), progress=False)
    extract(man, "toy_txt", n_captions=[2], cache_dir=cache, loaded_encoder=ToyText(), progress=False)
    out = runner.invoke(app, ["cross-vision", str(man), "--vision", "toy_img,toy_vid", "--n-frames",
                              "toy_img=2,toy_vid=4", "--text", "toy_txt", "--n-captions", "2", "--k", "3",
                              "--bootstrap", "10", "--cache-dir", str(cache), "--out", str(tmp_path / "run"), "--json"])
    assert out.exit_code == 0, out.output
    d = json.loads(out.stdout)
    assert d["names"] == ["toy_img", "toy_vid", "toy_txt"] and d["n_f"] == {"toy_img": 2, "toy_vid": 4}
    assert d["modality"]["toy_txt"] == "text" and d["n_c"] == 2
    feats = {"toy_img": load_features(man, "toy_img", "n_f", 2, cache_dir=cache).layers,
             "toy_vid": load_features(man, "toy_vid", "n_f", 4, cache_dir=cache).layers,
             "toy_txt": load_features(man, "toy_txt", "n_c", 2, cache_dir=cache).layers}
    for a, b in (("toy_img", "toy_txt"), ("toy_vid", "toy_txt"), ("toy_img", "toy_vid")):
        ref = layer_search(feats[a], feats[b], k=3)
        i, j = d["names"].index(a), d["names"].index(b)
        assert d["scores"][i][j] == pytest.approx(ref.best_score, abs=1e-12)
        assert d["layers"][f"{a}|{b}"] == [ref.x_layer, ref.y_layer]
    sec = json.loads((tmp_path / "run" / "sections" / "43_cross_vision.json").read_text())
    assert "text encoders (toy_txt, n_c = 2)" in sec["html"] and "with text rows" in sec["title"]
    with pytest.raises(VlgapError, match="no value for toy_vid"):
        run_cross_alignment(man, ["toy_img", "toy_vid"], n_f={"toy_img": 2})
    with pytest.raises(VlgapError, match="both a vision and a text encoder"):
        run_cross_alignment(man, ["toy_img", "toy_vid"], n_f=2, text=["toy_img"])


def test_dr_full_sections_on_a_toy_sweep(tmp_path):
    """The preset's two sections on a 2 x 2 toy sweep: Fig 7 on 4 pairs says it is thin, Fig 10's
    vision x text cells equal the sweep's cells (same features, items, k)."""
    from toy_encoders import ToyText, ToyVision
    from vlgap.probe.dr_full import run_dr_full_sections, sections
    from vlgap.probe.sweep import SweepConfig, run_sweep

    assert {"80_cross_model", "81_cross_encoder_matrix"} <= set(sections())
    man = _toy_manifest(tmp_path)
    cfg = SweepConfig(str(man), ["toy_img", "toy_vid"], ["toy_txt", "toy_txt2"], [1, 2], [1, 2], k=3,
                      n_bootstrap=10, n_permutations=0, cache_dir=str(tmp_path / "cache"), fit=False)
    encs = {"toy_img": ToyVision("image"), "toy_vid": ToyVision("video", n0=2), "toy_txt": ToyText(),
            "toy_txt2": ToyText()}
    result = run_sweep(cfg, tmp_path / "run", progress=False, encoders=encs)
    demo_cfg = SimpleNamespace(out=str(tmp_path / "run"), seed=0, n_bootstrap=10)
    done = run_dr_full_sections(demo_cfg, result, progress=False, only=("80_cross_model", "81_cross_encoder_matrix"))
    assert done == ["80_cross_model", "81_cross_encoder_matrix"]
    run = tmp_path / "run"
    figs = json.loads((run / "cross_model" / "figures.json").read_text())
    assert figs["caption_gain"].get("n_points", 0) == 4 or "error" in figs["caption_gain"]
    matrix = json.loads((run / "cross_model" / "encoder_matrix.json").read_text())
    assert matrix["n_f_per_encoder"] == best_n_f(result.rows)
    assert matrix["sweep_agreement"]["n_cells"] == 4
    assert matrix["sweep_agreement"]["max_abs_difference"] == pytest.approx(0, abs=1e-12)
    sec = json.loads((run / "sections" / "81_cross_encoder_matrix.json").read_text())
    assert "Fig 10" in sec["title"] and (run / sec["figures"][0]).is_file()
    timings = json.loads((run / "dr_full" / "timings.json").read_text())
    assert set(timings["sections"]) == {"80_cross_model", "81_cross_encoder_matrix"}
