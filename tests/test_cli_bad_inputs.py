"""Degenerate requests are named, not absorbed (issue 32, item 2), and bad paths say what is wrong.

Each test drives one command through `vlgap.cli.main` (exit code 2 and one line on stderr) or the
API function behind it, on tiny inputs; no model is loaded. Every case here ran to exit 0 with a
silent number, printed a traceback, or said "does not exist" for a path that exists, before.
"""
from __future__ import annotations

import json
import os

import numpy as np
import pytest

from in_process_cli import refused, run_cli

from vlgap.errors import VlgapError


def arrays(tmp_path, n: int = 12):
    rng = np.random.default_rng(0)
    a, b = tmp_path / "a.npy", tmp_path / "b.npy"
    np.save(a, rng.normal(size=(n, 3)))
    np.save(b, rng.normal(size=(n, 3)) + 1)
    return a, b


def manifest(tmp_path, name: str = "m.jsonl", ids=("v1", "v2")):
    p = tmp_path / name
    p.write_text("".join(json.dumps({"id": i, "video": f"{i}.mp4", "captions": [f"a red circle {i}"]}) + "\n"
                         for i in ids))
    return p


def latin1(tmp_path, name: str, text: str = "caf\u00e9 au lait\n") -> os.PathLike:
    p = tmp_path / name
    p.write_bytes(("first line\n" + text).encode("latin-1"))
    return p


# ---- gap -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("alpha", ["2", "0", "1", "-0.1"])
def test_gap_alpha_must_be_a_probability(tmp_path, capsys, alpha):
    a, b = arrays(tmp_path)
    err = refused(capsys, "gap", a, b, "--alpha", alpha, "--permutations", "0", "--bootstrap", "0")
    assert f"--alpha={float(alpha)!r}: need a number strictly between 0 and 1" in err


def test_gap_verdict_refuses_an_alpha_outside_0_1(tmp_path):
    from vlgap.stats.gap import gap

    a, b = arrays(tmp_path)
    res = gap(a, b, n_permutations=20, n_bootstrap=0)
    assert "alpha=0.05" in res.verdict(0.05)
    with pytest.raises(VlgapError, match="alpha"):
        res.verdict(2)


@pytest.mark.parametrize("option, value", [("--top-k", "-1"), ("--c2st-permutations", "-5"),
                                           ("--fd-bootstrap", "-1")])
def test_gap_negative_counts_are_refused(tmp_path, capsys, option, value):
    a, b = arrays(tmp_path)
    err = refused(capsys, "gap", a, b, option, value, "--permutations", "0", "--bootstrap", "0")
    assert err.startswith(f"error: {option}") and f"={value}: need an integer >= 0" in err


# ---- compare ---------------------------------------------------------------------------------------

def test_compare_the_same_system_twice_is_refused(tmp_path, capsys):
    p = tmp_path / "s.csv"
    p.write_text("item,system,score\n" + "".join(f"i{k},{s},{k % 3 + (s == 'B')}\n" for k in range(12)
                                                  for s in "AB"))
    err = refused(capsys, "compare", p, "--a", "A", "--b", "A", "--bootstrap", "10", "--permutations", "10")
    assert "--a and --b both name system 'A'" in err and "two different systems" in err


# ---- cache -----------------------------------------------------------------------------------------

def test_cache_check_of_a_missing_folder_or_a_file_is_refused(tmp_path, capsys):
    err = refused(capsys, "cache", "--cache-dir", tmp_path / "nope")
    assert f"--cache-dir {tmp_path / 'nope'}: does not exist (expected a folder)" in err
    f = tmp_path / "f.txt"
    f.write_text("x")
    assert f"--cache-dir {f}: is a file, expected a folder" in refused(capsys, "cache", "--cache-dir", f)


# ---- downstream ------------------------------------------------------------------------------------

def test_downstream_with_no_model_in_common_names_both_sides(tmp_path, capsys):
    scores, align = tmp_path / "scores.csv", tmp_path / "align.csv"
    scores.write_text("model,task,score\n" + "".join(f"m{i},cls,{i / 10}\n" for i in range(4)))
    align.write_text("model,alignment\n" + "".join(f"other{i},{i / 20}\n" for i in range(4)))
    err = refused(capsys, "downstream", scores, align, "--bootstrap", "10")
    assert "no model in common" in err and "'m0'" in err and "'other0'" in err


# ---- wsv eval --------------------------------------------------------------------------------------

def test_wsv_eval_refuses_duplicate_prediction_ids_as_caption_eval_does(tmp_path, capsys):
    m = manifest(tmp_path)
    preds = tmp_path / "p.json"
    preds.write_text(json.dumps([{"image_id": "v1", "caption": "a red circle"},
                                 {"image_id": "v2", "caption": "a blue square"},
                                 {"image_id": "v1", "caption": "nothing at all"}]))
    err = refused(capsys, "wsv", "eval", preds, m, "--bootstrap", "0")
    assert "1 id(s) have several predictions: 'v1'" in err
    from vlgap.captions.io import load_predictions

    with pytest.raises(VlgapError) as caption_eval_says:
        load_predictions(preds)
    assert err == f"error: {caption_eval_says.value}"  # one check, one message


def test_wsv_eval_truncated_json_is_one_line(tmp_path, capsys):
    preds = tmp_path / "p.json"
    preds.write_text('[{"image_id": "v1", "caption": "a red')
    assert "not valid JSON" in refused(capsys, "wsv", "eval", preds, manifest(tmp_path), "--bootstrap", "0")


# ---- cape scores -----------------------------------------------------------------------------------

def test_cape_scores_refuses_two_files_for_one_cell(tmp_path, capsys):
    files = []
    for name in ("a.csv", "b.csv"):
        p = tmp_path / name
        p.write_text("prompt,score\n" + "".join(f"prompt {i},{i / 10}\n" for i in range(4)))
        files.append(p)
    err = refused(capsys, "cape", "scores", f"pe/pe={files[0]}", f"pe/pe={files[1]}")
    assert f"cell pe/pe (seed 0) is given twice for 'score', by {files[0]} and {files[1]}" in err
    from vlgap.cape.scores import load_cells

    with pytest.raises(VlgapError, match="given twice"):  # the same file twice would count every video twice
        load_cells([f"pe/pe={files[0]}", f"pe/pe={files[0]}"])
    assert set(load_cells([f"pe/pe={files[0]}", f"pe/pe/1={files[1]}"])["score"]) == {("pe", "pe", 0),
                                                                                      ("pe", "pe", 1)}


# ---- fit-scaling -----------------------------------------------------------------------------------

def _grid(tmp_path, edit=None, lo_hi: bool = True):
    rows = []
    for a in (1, 2, 4, 8):
        for b in (1, 2, 4, 8):
            s = 0.4 - 0.15 * a ** -0.7 - 0.1 * b ** -1.2
            rows.append([a, b, s, s - 0.01, s + 0.01])
    if edit:
        edit(rows)
    p = tmp_path / "grid.csv"
    head = "n_f,n_c,score,score_lo,score_hi" if lo_hi else "n_f,n_c,score"
    p.write_text(head + "\n" + "".join(",".join(f"{v:g}" for v in (r if lo_hi else r[:3])) + "\n" for r in rows))
    return p


def test_fit_scaling_refuses_an_inverted_interval_and_fractional_counts(tmp_path, capsys):
    def invert(rows):
        rows[5][3], rows[5][4] = rows[5][4], rows[5][3]

    err = refused(capsys, "fit-scaling", _grid(tmp_path, invert), "--bootstrap", "0")
    assert "grid row 5 (data rows counted from 0): score_lo" in err and "> score_hi" in err

    def fraction(rows):
        rows[3][0] = 1.5

    err = refused(capsys, "fit-scaling", _grid(tmp_path, fraction, lo_hi=False), "--bootstrap", "0")
    assert "'n_f' must hold positive whole numbers" in err and "row 3 has 1.5" in err


def test_fit_scaling_of_a_folder_or_latin1_is_one_line(tmp_path, capsys):
    assert "is a folder, expected a file" in refused(capsys, "fit-scaling", tmp_path)
    err = refused(capsys, "fit-scaling", latin1(tmp_path, "g.csv"))
    assert "g.csv: not UTF-8 text at line 2 (byte 0xe9" in err


# ---- BERTScore baseline ----------------------------------------------------------------------------

def test_bertscore_baseline_from_zero_pairs_is_refused(tmp_path, capsys):
    from vlgap.captions.bertscore import build_baseline

    with pytest.raises(VlgapError, match=r"--baseline-pairs \(n_pairs\)=0: need an integer >= 1"):
        build_baseline(None, ["a cat", "a dog"], n_pairs=0)  # refused before the model is touched
    s = tmp_path / "s.txt"
    s.write_text("a cat\na dog\n")
    err = refused(capsys, "caption-eval", "--bertscore-baseline", "build", "--baseline-sentences", s,
                  "--baseline-pairs", "0", "--bertscore-model", "hf:/nowhere")
    assert "--baseline-pairs (n_pairs)=0" in err


def test_a_nan_baseline_is_refused_with_a_reason(tmp_path):
    from types import SimpleNamespace

    from vlgap.captions.bertscore import BASELINE_FORMAT, read_baseline

    model = SimpleNamespace(spec="toy", source={"weights_files": None})
    nan = float("nan")
    base = {"format": BASELINE_FORMAT, "model": {"spec": "toy", "weights_files": None}, "n_pairs": 0,
            "layers": {"1": {"P": nan, "R": nan, "F": nan}}}
    with pytest.raises(VlgapError, match=r"layer 1: P/R/F are not finite numbers \(built from 0 pairs\?\)"):
        read_baseline(base, model, 1)
    p = tmp_path / "x.npy"
    p.write_bytes(b"\x93NUMPY\xff\xfe")
    with pytest.raises(VlgapError, match="not a vlgap BERTScore baseline"):
        read_baseline(p, model, 1)


# ---- align -----------------------------------------------------------------------------------------

def test_align_with_one_resample_gives_no_interval(tmp_path, capsys, monkeypatch):
    from vlgap.metrics.layer_search import layer_search

    rng = np.random.default_rng(1)
    x = rng.normal(size=(30, 4))
    y = x @ rng.normal(size=(4, 4)) + 0.1 * rng.normal(size=(30, 4))
    res = layer_search([x], [y], k=5, n_bootstrap=1)
    assert res.ci is None and res.ci_reason.startswith("1 resample: an interval needs at least 2")
    d = res.to_dict()
    assert d["ci"] is None and d["ci_reason"] == res.ci_reason and d["bootstrap"]["ci"] is None
    assert layer_search([x], [y], k=5, n_bootstrap=30).ci is not None
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", y)
    code, out, _ = run_cli(monkeypatch, capsys, "align", tmp_path / "x.npy", tmp_path / "y.npy", "--k", "5",
                           "--bootstrap", "1")
    assert code == 0
    assert "95% CI n/a (1 resample: an interval needs at least 2" in " ".join(out.split())


def test_align_negative_bootstrap_names_the_option(tmp_path, capsys):
    np.save(tmp_path / "x.npy", np.eye(12)[:, :4])
    err = refused(capsys, "align", tmp_path / "x.npy", tmp_path / "x.npy", "--k", "3", "--bootstrap", "-1")
    assert "--bootstrap (n_bootstrap)=-1: need an integer >= 0" in err and "for_bootstrap" not in err
    err = refused(capsys, "align", tmp_path / "x.npy", tmp_path / "x.npy", "--k", "3", "--permutations", "-2")
    assert "--permutations (n_permutations)=-2" in err


# ---- counts and sizes ------------------------------------------------------------------------------

def test_make_data_refuses_negative_seed_absurd_count_and_huge_size(tmp_path, capsys):
    out = tmp_path / "d"
    assert "--seed=-1: need an integer >= 0" in refused(capsys, "make-data", "shapes", "--out", out, "--seed", "-1")
    err = refused(capsys, "make-data", "shapes", "--out", out, "--n", "1000000000000")
    assert "--n 1000000000000: at most 1,000,000 videos per run" in err
    err = refused(capsys, "make-data", "shapes", "--out", out, "--size", "100000")
    # 894 GiB of uint8 frames and a float32 frame of scratch
    assert "--size: rendering 32 frames of 100000 x 100000 px would take 1,005.8 GiB of memory (limit 16.0 GiB)" in err
    err = refused(capsys, "make-data", "test-of-time", "--out", out, "--size", "100000")
    assert "--size: rendering 30 frames" in err
    assert not out.exists()  # refused before anything was written


def test_make_data_removes_what_an_interrupted_run_left(tmp_path):
    from vlgap.data.shapes.write import generate_shapes, remove_stale_temporaries

    videos = tmp_path / "d" / "videos"
    videos.mkdir(parents=True)
    dead = videos / ".shapes_00000.mp4.999999999.tmp"  # no such process
    mine = videos / f".shapes_00001.mp4.{os.getpid()}.tmp"  # a live writer's: kept
    dead.write_bytes(b"half a video")
    mine.write_bytes(b"being written")
    assert remove_stale_temporaries(videos) == [dead]
    assert not dead.exists() and mine.exists()
    mine.unlink()
    dead.write_bytes(b"half a video")
    generate_shapes(tmp_path / "d", 1, n_frames=2, size=16, photo_fraction=0.0)
    assert not dead.exists() and (videos / "shapes_00000.mp4").is_file()


def test_cape_train_negative_lr_is_refused_before_any_file(tmp_path, capsys):
    out = tmp_path / "run"
    err = refused(capsys, "cape", "train", "--out", out, "--lr", "-1", "--steps", "1")
    assert "--lr=-1.0: need a finite number > 0" in err
    assert "--seed=-1" in refused(capsys, "cape", "train", "--out", out, "--seed", "-1")
    assert not out.exists()


def test_extract_refuses_huge_image_size_and_frame_count_before_work(tmp_path, capsys):
    m = manifest(tmp_path)
    err = refused(capsys, "extract", m, "-e", "toy", "--n-frames", "1", "--image-size", "100000")
    assert "--image-size: a batch of 32 frames at 100000 x 100000 px would take" in err and "limit 16.0 GiB" in err
    err = refused(capsys, "extract", m, "-e", "toy", "--n-frames", "1000000000")
    assert "--n-frames 1000000000: at most 108,000 frames per video" in err
    err = refused(capsys, "sweep", m, "--vision", "a", "--text", "b", "--n-frames", "1,1000000000", "--out",
                  tmp_path / "run")
    assert "--n-frames 1000000000: at most 108,000" in err and not (tmp_path / "run").exists()


# ---- a folder for a file, or the reverse -----------------------------------------------------------

def test_a_folder_where_a_file_is_expected_says_so(tmp_path, capsys):
    d = tmp_path / "folder"
    d.mkdir()
    m = manifest(tmp_path)
    cases = [
        (["extract", d, "-e", "toy", "--n-frames", "1"], f"MANIFEST {d}: is a folder, expected a file"),
        (["wsv", "train", "--out", tmp_path / "w", "--corpus", d], f"--corpus {d}: is a folder, expected a file"),
        (["wsv", "caption", d, m, "--out", tmp_path / "p.json"], f"MODEL {d}: is a folder, expected a file"),
        (["cape", "rewrite", d], f"PROMPTS {d}: is a folder, expected a file"),
        (["import", "msrvtt", d, tmp_path, "--out", tmp_path / "o.jsonl"],
         f"ANNOTATIONS {d}: is a folder, expected a file"),
        (["import", "msrvtt", m, m, "--out", tmp_path / "o.jsonl"], f"VIDEO_DIR {m}: is a file, expected a folder"),
    ]
    for args, message in cases:
        assert message in refused(capsys, *args), args
    assert not (tmp_path / "w").exists()


def test_an_output_of_the_wrong_kind_is_one_line(tmp_path, capsys):
    d, f = tmp_path / "folder", tmp_path / "file.txt"
    d.mkdir()
    f.write_text("x")
    m = manifest(tmp_path)
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("a cat\n")
    score = tmp_path / "s.csv"
    score.write_text("prompt,score\np,0.5\n")
    cases = [
        (["sweep", m, "--vision", "a", "--text", "b", "--out", f], f"--out {f}: is a file, expected a folder"),
        (["sweep", m, "--vision", "a", "--text", "b", "--out", f / "sub"], "is a file, not a folder"),
        (["extract", m, "-e", "toy", "--n-frames", "1", "--cache-dir", f], f"--cache-dir {f}: is a file"),
        (["make-data", "shapes", "--out", f], f"--out {f}: is a file, expected a folder"),
        (["make-data", "real", "--out", f / "x.jsonl"], f"--out {f / 'x.jsonl'}: cannot be created, {f} is a file"),
        (["import", "msrvtt", m, tmp_path, "--out", d], f"--out {d}: is a folder, expected a file"),
        (["split-captions", m, "--parts", "2", "--out", d], f"--out {d}: is a folder, expected a file"),
        (["wsv", "train", "--out", f], f"--out {f}: is a file, expected a folder"),
        (["wsv", "caption", f, m, "--out", d], f"--out {d}: is a folder, expected a file"),
        (["caption-eval", "--pred", m, "--refs", m, "-o", d], f"--out {d}: is a folder, expected a file"),
        (["cape", "rewrite", prompts, "--cache-dir", f], f"--cache-dir {f}: is a file, expected a folder"),
        (["cape", "scores", f"pe/pe={score}", "--out", f], f"--out {f}: is a file, expected a folder"),
    ]
    for args, message in cases:
        assert message in refused(capsys, *args), args


def test_an_unwritable_output_folder_is_named(tmp_path, monkeypatch):
    """`sweep --out` in a read-only folder: refused at the door (os.access says no; root would pass a chmod)."""
    from vlgap import paths

    ro = tmp_path / "ro"
    ro.mkdir()
    real = os.access
    monkeypatch.setattr(paths.os, "access", lambda p, mode: False if str(p) == str(ro) else real(p, mode))
    with pytest.raises(VlgapError, match=rf"--out {ro / 'run'}: cannot write there \({ro} is not writable\)"):
        paths.output_folder(ro / "run", "--out")
    with pytest.raises(VlgapError, match=r"--out .*cannot write there"):
        paths.output_file(ro / "x.csv", "--out")


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() == 0, reason="root writes into read-only folders")
def test_sweep_out_in_a_read_only_folder(tmp_path, capsys):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    try:
        err = refused(capsys, "sweep", manifest(tmp_path), "--vision", "a", "--text", "b", "--out", ro / "run")
    finally:
        ro.chmod(0o755)
    assert f"--out {ro / 'run'}: cannot write there" in err


# ---- bytes that are not UTF-8 ----------------------------------------------------------------------

def test_non_utf8_inputs_name_the_file_line_and_byte(tmp_path, capsys):
    man = tmp_path / "m.jsonl"
    man.write_bytes(b'{"id": "v1", "video": "v1.mp4", "captions": ["ok"]}\n'
                    b'{"id": "v2", "video": "v2.mp4", "captions": ["caf\xe9"]}\n')
    err = refused(capsys, "extract", man, "-e", "toy", "--n-frames", "1")
    assert f"MANIFEST {man}: not UTF-8 text at line 2 (byte 0xe9" in err
    csv = tmp_path / "c.csv"
    csv.write_bytes(b"item,system,score\ni1,A,1\ni1,B\xe9,2\n")
    assert "c.csv: not UTF-8 text at line 3 (byte 0xe9" in refused(capsys, "compare", csv)
    corpus = latin1(tmp_path, "corpus.txt")
    err = refused(capsys, "wsv", "train", "--out", tmp_path / "w", "--corpus", corpus, "--system", "wsv")
    assert "corpus.txt" in err
    from vlgap.wsv.api import read_corpus

    with pytest.raises(VlgapError, match=r"--corpus .*corpus.txt: not UTF-8 text at line 2 \(byte 0xe9"):
        read_corpus(corpus)
    preds = tmp_path / "p.json"
    preds.write_text(json.dumps([{"image_id": "v1", "caption": "a cat"}]))
    err = refused(capsys, "wsv", "eval", preds, man, "--bootstrap", "0")
    assert "m.jsonl" in err and "UTF-8" in err and "line 2" in err
    err = refused(capsys, "cape", "rewrite", latin1(tmp_path, "prompts.txt"))
    assert "PROMPTS" in err and "prompts.txt: not UTF-8 text at line 2 (byte 0xe9" in err
    err = refused(capsys, "cape", "scores", f"pe/pe={latin1(tmp_path, 'scores.csv')}")
    assert "SPECS" in err and "scores.csv: not UTF-8 text at line 2 (byte 0xe9" in err


def test_read_text_utf8_helper(tmp_path):
    from vlgap.paths import read_text_utf8

    p = tmp_path / "bom.txt"
    p.write_bytes(b"\xef\xbb\xbfhello\n")
    assert read_text_utf8(p) == "hello\n"
    with pytest.raises(VlgapError, match=r"^--x .*nope: does not exist \(expected a file\)$"):
        read_text_utf8(tmp_path / "nope", "--x")


def test_wsv_eval_api_takes_a_list_of_predictions_and_refuses_its_duplicates(tmp_path):
    from vlgap.wsv.api import evaluate_predictions

    m = manifest(tmp_path)
    rows = [{"image_id": "v1", "caption": "a red circle v1"}, {"image_id": "v2", "caption": "a red circle"}]
    res = evaluate_predictions(rows, m, n_bootstrap=0, metrics=["bleu"])
    assert res["n"] == 2 and res["BLEU-1"]["score"] > 0.5
    with pytest.raises(VlgapError, match="several predictions: 'v1'"):
        evaluate_predictions(rows + [{"image_id": "v1", "caption": "x"}], m, n_bootstrap=0, metrics=["bleu"])
    with pytest.raises(VlgapError, match=r"REFERENCES .*: is a folder, expected a file"):
        evaluate_predictions(rows, tmp_path, n_bootstrap=0, metrics=["bleu"])


def test_sweep_with_a_misspelt_encoder_writes_no_run_folder(tmp_path, capsys):
    """Before, `sweep --vision nope` wrote run_config.json and then failed, so the corrected command was
    refused as "another configuration". A name with finished features in the cache stays usable."""
    ids = tuple(f"v{i}" for i in range(15))
    m = manifest(tmp_path, ids=ids)
    cache = tmp_path / "cache"
    err = refused(capsys, "sweep", m, "--vision", "nope", "--text", "minilm", "--out", tmp_path / "run",
                  "--cache-dir", cache)
    assert "unknown encoder 'nope'" in err and not (tmp_path / "run").exists()
    from vlgap.encoders.registry import check_encoder_name

    (cache / "features" / "nope" / "data" / "n_f-1-x").mkdir(parents=True)
    with pytest.raises(Exception, match="unknown encoder"):  # an unfinished entry does not count
        check_encoder_name("nope", cache)
    (cache / "features" / "nope" / "data" / "n_f-1-x" / "record.json").write_text("{}")
    check_encoder_name("nope", cache)


def test_wsv_train_with_a_missing_language_model_writes_no_run_folder(tmp_path, capsys, monkeypatch):
    """Before, `wsv train --lm gpt5` recorded its configuration and then failed to find the model, so the
    corrected command was refused as another configuration."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("a red circle moves left on a black background\na blue square grows on a white background\n")
    code, _, err = run_cli(monkeypatch, capsys, "wsv", "train", "--corpus", corpus, "--lm", "gpt5", "--out",
                           tmp_path / "w")
    last = err.strip().splitlines()[-1]
    assert code == 2 and last.startswith("error: ") and "'gpt5'" in last and "Traceback" not in err
    assert not (tmp_path / "w").exists()
