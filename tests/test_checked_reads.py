"""Every file read through one checked reader (issue 44): run-folder JSON checked field by field whether or
not its seal is there, JSON nesting bounded, the demo's TOML checked with the options' declarations,
CSV rows of the wrong width, count lists never taken from a string's characters nor with a value twice,
and empty runs that had nothing to summarise. Each case was a traceback or a silent result before."""
from __future__ import annotations

import json

import numpy as np
import pytest
from in_process_cli import refused, run_cli

from vlgap.errors import VlgapError


def rows(n_fs=(1, 2, 4), n_cs=(1, 2, 4)) -> list[dict]:
    return [{"vision": "vis", "text": "txt", "n_f": nf, "n_c": nc, "score": 0.3 + 0.01 * nf + 0.02 * nc,
             "ci_lo": 0.2, "ci_hi": 0.5, "p_value": None, "null_mean": None, "x_layer": 1, "y_layer": 0,
             "x_layer_name": "", "y_layer_name": "", "n": 40, "k": 5, "chance": 5 / 39, "metric": "mutual_knn"}
            for nf in n_fs for nc in n_cs]


def copied_run(tmp_path, sweep: object, scaling: object | None = None):
    """A sweep folder copied without its dot-files (`cp dir/*`): no seals, so nothing but the checks stands
    between an edited table and the readers."""
    run = tmp_path / "run"
    run.mkdir()
    (run / "sweep.json").write_text(sweep if isinstance(sweep, str) else json.dumps(sweep))
    if scaling is not None:
        (run / "scaling.json").write_text(scaling if isinstance(scaling, str) else json.dumps(scaling))
    return run


def error_line(monkeypatch, capsys, *args) -> str:
    code, _, err = run_cli(monkeypatch, capsys, *args)
    assert code == 2 and "Traceback" not in err, err
    return err.strip().splitlines()[-1]


# ---- run folders ---------------------------------------------------------------------------------------

BAD_SWEEPS = [
    ({"rows": 5}, "rows: must be a non-empty list of rows, got a number (5)"),
    ({"rows": []}, "rows: must be a non-empty list of rows"),
    ([1, 2], "the file: must be an object with the sweep's rows, got a list of 2"),
    ({"rows": [dict(rows()[0], score="x")]}, "rows/0/score: must be a number or null, got a string ('x')"),
    ({"rows": [{k: v for k, v in rows()[0].items() if k != "n_f"}]}, "rows/0: missing 'n_f'"),
    ({"rows": rows()[:1], "config": {"confidence": "high"}}, "config/confidence: must be a number"),
    ("{not json", "not valid JSON at column 2"),
    ("[" * 100_000 + "]" * 100_000, "JSON nested more than 100 levels deep"),
]


@pytest.mark.parametrize("sweep, problem", BAD_SWEEPS, ids=[p.split(":")[0] for _, p in BAD_SWEEPS])
def test_report_and_cross_model_figures_check_an_unsealed_sweep_json(tmp_path, capsys, monkeypatch, sweep, problem):
    run = copied_run(tmp_path, sweep)
    for command in (["report", run], ["cross-model-figures", run]):
        err = error_line(monkeypatch, capsys, *command)
        assert err.startswith(f"error: {run / 'sweep.json'}: ") and problem in err, err
        assert "rerun `vlgap sweep" in err


def test_a_scaling_json_with_a_wrong_field(tmp_path, capsys, monkeypatch):
    fit = {"params": {"S_inf": 0.5, "C_f": 0.1, "C_c": 0.1, "alpha": "a", "beta": 1.0}, "r2": 0.9}
    run = copied_run(tmp_path, {"rows": rows()}, {"vis|txt": fit})
    err = error_line(monkeypatch, capsys, "report", run)
    assert "scaling.json: vis|txt/params/alpha: must be a number or null, got a string ('a')" in err
    (run / "scaling.json").write_text(json.dumps({"vis|txt": {"r2": 0.9}}))
    assert "vis|txt: must be a fit: an object with 'params' (or 'error')" in error_line(monkeypatch, capsys, "report", run)


def test_intrinsic_dim_sweep_checks_the_sweep_folder(tmp_path):
    from vlgap.probe.intrinsic import run_intrinsic_dimension

    man = tmp_path / "m.jsonl"
    man.write_text('{"id": "v1", "video": "v1.mp4", "captions": ["a"]}\n')
    run = copied_run(tmp_path, {"rows": [dict(rows()[0], n="forty")]}, {})
    with pytest.raises(VlgapError, match=r"sweep.json: rows/0/n: must be a whole number, got a string"):
        run_intrinsic_dimension(man, ["vis"], sweep_dir=run)


def test_a_report_section_of_the_wrong_shape(tmp_path, capsys, monkeypatch):
    run = copied_run(tmp_path, {"rows": rows((1,), (1,))})
    (run / "sections").mkdir()
    (run / "sections" / "50_x.json").write_text(json.dumps({"title": "x", "html": 5}))
    assert "sections/50_x.json: html: must be a string, got a number (5)" in error_line(monkeypatch, capsys, "report", run)


def test_cape_controls_checks_the_run_folder(tmp_path, capsys):
    run = tmp_path / "exp"
    run.mkdir()
    (run / "data.json").write_text(json.dumps({"train_captions": "a caption", "test_prompts": ["p"]}))
    err = refused(capsys, "cape", "controls", run)
    assert f"{run / 'data.json'}: train_captions: must be a list, got a string ('a caption')" in err
    (run / "data.json").write_text(json.dumps({"train_captions": ["a"], "test_prompts": ["p"]}))
    (run / "config.json").write_text(json.dumps({"seed": -1}))
    assert "config.json: seed: must be a whole number (minimum 0), got a number (-1)" in refused(
        capsys, "cape", "controls", run)


# ---- JSON of the user ------------------------------------------------------------------------------------

def test_deep_json_is_refused_not_a_recursion_error(tmp_path, capsys):
    deep = tmp_path / "pred.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    refs = tmp_path / "refs.json"
    refs.write_text('{"1": ["a"]}')
    err = refused(capsys, "caption-eval", "--pred", deep, "--refs", refs, "--metrics", "bleu")
    assert f"{deep}: JSON nested more than 100 levels deep" in err
    from vlgap.json_files import nesting_depth, parse_json

    assert nesting_depth(parse_json("[" * 100 + "]" * 100, "x")) == 100
    with pytest.raises(VlgapError, match="nested more than 100"):
        parse_json("[" * 101 + "]" * 101, "x")  # parses, yet deeper than the bound
    assert nesting_depth({"a": [{"b": 1}], "c": 2}) == 3 and nesting_depth(5) == 0


# ---- the demo's TOML -----------------------------------------------------------------------------------

TOML_CASES = [
    ("demo = 5", "demo = 5: need a [demo] table of keys, got a whole number"),
    ('cache_dir = ["a"]', "cache_dir = ['a']: need a path (a string), got a list"),
    ("seed = -1.5", "seed = -1.5: need a whole number, got a number"),
    ('random_weights = "false"', "random_weights = 'false': need true or false (a TOML boolean, without quotes)"),
    ("x = 1\n[demo]\nk = 5", "keys ['x'] sit beside the [demo] table and would be ignored"),
    ("n_frames = [1, 1]", "n_frames '1,1': 1 is given twice"),
    ('n_captions = ["1", 2]', "n_captions = ['1', 2]: need a list of whole numbers"),
    ("k = true", "k = True: need a whole number, got a boolean"),
    ("k = 0", "k=0: need an integer >= 1"),
    ('device = "gpu9"', "device 'gpu9' (--device) is not valid here"),
    ('metric = "bogus"', "metric 'bogus': choose one of mutual_knn"),
    ('out = ""', "out = '': an empty path"),
    ("bogus = 1", "unknown config keys ['bogus']"),
]


@pytest.mark.parametrize("text, problem", TOML_CASES, ids=[t.split("=")[0].strip() for t, _ in TOML_CASES])
def test_demo_toml_is_checked_with_the_options_declarations(tmp_path, text, problem):
    from vlgap.cli.config_file import load_config

    p = tmp_path / "demo.toml"
    p.write_text(text + "\n")
    with pytest.raises(VlgapError) as ei:
        load_config(p)
    assert str(ei.value).startswith(f"--config {p}: ") and problem in str(ei.value), str(ei.value)


def test_demo_toml_values_that_are_fine(tmp_path):
    from vlgap.cli.config_file import load_config

    p = tmp_path / "demo.toml"
    p.write_text('n_frames = 4\nvision = "mobilenet_v2"\ntext = ["minilm"]\nn_captions = "1,2"\n'
                 'random_weights = true\nframe_sampling = ["uniform", "random"]\n')
    cfg = load_config(p)
    assert (cfg.n_frames, cfg.vision, cfg.text, cfg.n_captions) == ([4], ["mobilenet_v2"], ["minilm"], [1, 2])
    assert cfg.random_weights is True and cfg.frame_sampling == ["uniform", "random"]
    p.write_bytes("[demo]\nk = 7\n".encode("utf-16"))  # a Windows editor's UTF-16, with its byte-order mark
    assert load_config(p).k == 7


def test_demo_with_a_bad_toml_is_one_line(tmp_path, capsys):
    p = tmp_path / "demo.toml"
    p.write_text("[demo]\nn_frames = 4\nseed = -1.5\n")
    assert refused(capsys, "demo", "--config", p) == f"error: --config {p}: seed = -1.5: need a whole number, got a number"
    p.write_text("demo = 5\n")  # the message's "[demo]" is text, not console markup
    assert refused(capsys, "demo", "--config", p) == f"error: --config {p}: demo = 5: need a [demo] table of keys, got a whole number"


# ---- count lists and CSV rows ---------------------------------------------------------------------------

def test_a_string_is_never_a_list_of_its_characters():
    from vlgap.features.chunk_steps import requested_values
    from vlgap.probe.demo import DemoConfig
    from vlgap.probe.sweep import SweepConfig

    assert requested_values("12", None) == ("n_f", [12]) and requested_values(None, [4, 1]) == ("n_c", [1, 4])
    for bad, words in (("1,1", "1 is given twice"), ([True], "True is not an integer"), ("", "is empty"),
                       (["1"], "'1' is not an integer"), (1.5, "need an integer or a list")):
        with pytest.raises(VlgapError, match=words):
            requested_values(bad, None)
    cfg = SweepConfig("m.jsonl", "mobilenet_v2", "minilm,smollm2", "12", [1, 2])
    assert (cfg.vision, cfg.text, cfg.n_frames, cfg.n_captions) == (["mobilenet_v2"], ["minilm", "smollm2"], [12], [1, 2])
    with pytest.raises(VlgapError, match="'minilm' is given twice"):
        SweepConfig("m.jsonl", ["a"], ["minilm", "minilm"], [1], [1])
    assert DemoConfig(vision="mobilenet_v2", n_frames="2,4").check().vision == ["mobilenet_v2"]


def test_list_options_with_a_value_twice_are_refused(tmp_path, capsys):
    man = tmp_path / "m.jsonl"
    man.write_text('{"id": "v1", "video": "v1.mp4", "captions": ["a"]}\n')
    assert "--n-frames '1,1': 1 is given twice" in refused(capsys, "extract", man, "-e", "mobilenet_v2", "--n-frames", "1,1")
    assert "'minilm' is given twice" in refused(capsys, "sweep", man, "--vision", "mobilenet_v2", "--text",
                                                "minilm,minilm", "--out", tmp_path / "run")
    assert not (tmp_path / "run").exists()


def test_a_csv_row_with_more_fields_than_its_header(tmp_path, capsys):
    scores, alignment = tmp_path / "s.csv", tmp_path / "a.csv"
    scores.write_text("model,task,score\na,t1,1,2,3\n")
    alignment.write_text("model,alignment\na,0.1\n")
    assert refused(capsys, "downstream", scores, alignment) == (
        f"error: {scores} line 2: 5 fields, but the header has 3 (model, task, score); quote a value that holds a comma")
    from vlgap.csv_files import read_csv

    ok = tmp_path / "ok.csv"
    ok.write_text(' Model ,Task\n"a, b", t \n\nc\n')
    assert read_csv(ok, lower=True) == (["model", "task"], [{"model": "a, b", "task": "t"}, {"model": "c", "task": ""}])


def test_duplicate_ids_in_a_feature_file_are_refused(tmp_path, capsys):
    p = tmp_path / "x.npz"
    np.savez(p, layer_0=np.random.default_rng(0).normal(size=(4, 3)), ids=np.array(["a", "b", "a", "c"]))
    assert "item id 'a' appears twice (rows 0 and 2)" in refused(capsys, "align", p, p)


# ---- nothing to summarise --------------------------------------------------------------------------------

def test_wsv_summary_only_on_an_empty_folder_is_refused(tmp_path):
    from vlgap.wsv.experiment import ExperimentConfig, run_experiment

    out = tmp_path / "exp"
    with pytest.raises(VlgapError, match=r"--summary-only: .*exp holds no finished cell of this configuration"):
        run_experiment(out, ExperimentConfig(), summary_only=True)
    assert not out.exists()
