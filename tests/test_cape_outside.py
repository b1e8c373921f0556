"""CAPE-T2V at real scale without a GPU: outside rewriters (precomputed JSONL, an OpenAI-compatible stub
server on 127.0.0.1), benchmark scores in (VBench / VBench-2.0 JSON, T2V-CompBench CSV, a judge's JSONL)
with a planted 2x2 effect, and the controls (SacreBLEU overlap, caption-set permutation test, witness
regression), also from a run folder built here. No LM is loaded."""
from __future__ import annotations

import csv
import hashlib
import io
import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import numpy as np
import pytest

from vlgap.cape import world as W
from vlgap.cape.schema import parse_six
from vlgap.errors import VlgapError

SIX = {"short_caption": "A red circle.", "dense_caption": "A red circle grows on black.", "main_object": "a red circle",
       "background": "a plain black background", "camera": "static camera", "style": "flat synthetic graphics"}
SIX_TEXT = "\n".join(f"{k.replace('_', ' ').title()}: {v}" for k, v in SIX.items())


# ------------------------------------------------------------------------------------------------ precomputed

def _write_jsonl(path, recs):
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    return path


def test_precomputed_operator_valid_invalid_and_cache(tmp_path):
    from vlgap.cape.operators import PrecomputedOperator, get_operator, rewrite
    from vlgap.reuse import read_seal

    f = _write_jsonl(tmp_path / "rw.jsonl", [
        {"input": "a red ball  on black bg", "output": SIX, "model": "Qwen3.5-397B-A17B"},
        {"input": "blue star zoom in", "output": SIX_TEXT.replace("red circle", "blue star"), "model": "api"},
        {"input": "green box", "output": SIX_TEXT.replace("Camera: static camera\n", ""), "model": "api"},
    ])
    op = get_operator("precomputed", rewrites=f)
    assert isinstance(op, PrecomputedOperator) and op.models == {"Qwen3.5-397B-A17B", "api"}
    res = rewrite(op, ["a red ball on black bg", "blue star zoom in", "green box"], cache_dir=tmp_path / "cache")
    assert [r["valid"] for r in res] == [True, True, False]
    assert res[0]["main_object"] == "a red circle" and parse_six(res[1]["text"]).main_object == "a blue star"
    assert res[2]["camera"] is None and "Camera" in res[2]["error"] and res[2]["retries"] == 0
    # the cache is keyed on the file's sha256: same file -> reused, its seal names the hash
    seal = read_seal(tmp_path / "cache" / "precomputed.json")
    assert seal["key"]["model_hash"] == "sha256:" + hashlib.sha256(f.read_bytes()).hexdigest()
    op.table.clear()  # a second call must come from the cache, not the table
    assert rewrite(op, ["a red ball on black bg"], cache_dir=tmp_path / "cache")[0]["valid"]
    # another file in the same cache folder is another operator: refused, never mixed
    f2 = _write_jsonl(tmp_path / "rw2.jsonl", [{"input": "a red ball on black bg", "output": SIX, "model": "other"}])
    with pytest.raises(VlgapError, match="another operator"):
        rewrite(PrecomputedOperator(f2), ["a red ball on black bg"], cache_dir=tmp_path / "cache")
    # a missing input is an error naming it
    with pytest.raises(VlgapError, match="'purple hexagon' has no rewrite in rw.jsonl"):
        rewrite(PrecomputedOperator(f), ["purple hexagon"])


def test_precomputed_file_errors_name_the_line(tmp_path):
    from vlgap.cape.operators import PrecomputedOperator, get_operator

    with pytest.raises(VlgapError, match="needs --rewrites"):
        get_operator("precomputed")
    with pytest.raises(VlgapError, match="line 2: needs 'model'"):
        PrecomputedOperator(_write_jsonl(tmp_path / "a.jsonl", [{"input": "x", "output": SIX, "model": "m"},
                                                                {"input": "y", "output": SIX}]))
    p = tmp_path / "b.jsonl"
    p.write_text('{"input": "x", "output": "y", "model": "m"}\nnot json\n')
    with pytest.raises(VlgapError, match="b.jsonl line 2: not valid JSON"):
        PrecomputedOperator(p)
    with pytest.raises(VlgapError, match="appears twice"):
        PrecomputedOperator(_write_jsonl(tmp_path / "c.jsonl", [{"input": "x", "output": SIX, "model": "m"},
                                                                {"input": "x ", "output": SIX_TEXT.replace("red", "blue"),
                                                                 "model": "m"}]))


def test_cli_rewrite_precomputed(tmp_path):
    from typer.testing import CliRunner

    from vlgap.cli import app

    f = _write_jsonl(tmp_path / "rw.jsonl", [{"input": "a red ball", "output": SIX, "model": "m"},
                                             {"input": "a bad one", "output": "Short Caption: x", "model": "m"}])
    p = tmp_path / "prompts.txt"
    p.write_text("a red ball\na bad one\n")
    r = CliRunner().invoke(app, ["cape", "rewrite", str(p), "--operator", "precomputed", "--rewrites", str(f), "--json"])
    assert r.exit_code == 0, r.output
    data = json.loads(r.output)
    assert [d["valid"] for d in data] == [True, False] and data[0]["camera"] == "static camera"
    p.write_text("a red ball\nnot in the file\n")
    r = CliRunner().invoke(app, ["cape", "rewrite", str(p), "--operator", "precomputed", "--rewrites", str(f)])
    assert r.exit_code != 0 and "not in the file" in str(r.exception)  # `vlgap` prints it, exit code 2


# ------------------------------------------------------------------------------------------------ HTTP stub

@pytest.fixture()
def stub_server():
    seen: list[dict] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 (http.server's name)
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            seen.append({"path": self.path, **body})
            prompt = body["messages"][-1]["content"]
            if body["model"] != "stub-9b":
                self.send_response(404)
                self.end_headers()
                self.wfile.write(b'{"error": "model not found"}')
                return
            if "always bad" in prompt or ("flaky" in prompt and body["temperature"] == 0.0):
                content = "Short Caption: only one part"
            else:
                content = SIX_TEXT.replace("red circle", prompt.split()[0] + " circle")
            data = json.dumps({"choices": [{"message": {"role": "assistant", "content": content}}]}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *a):
            pass

    server = HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1", seen
    server.shutdown()
    server.server_close()


def test_openai_compatible_operator_against_a_local_stub(stub_server, tmp_path):
    from vlgap.cape.operators import get_operator, rewrite

    url, seen = stub_server
    op = get_operator("openai-compatible", endpoint=url, model="stub-9b", max_retries=1)
    res = rewrite(op, ["green ball", "flaky prompt", "always bad"], cache_dir=tmp_path / "c")
    assert [r["valid"] for r in res] == [True, True, False]
    assert res[0]["main_object"] == "a green circle" and [r["retries"] for r in res] == [0, 1, 1]
    assert all(s["path"] == "/v1/chat/completions" and s["model"] == "stub-9b" for s in seen)
    assert seen[0]["messages"][0]["role"] == "system" and "six labelled lines" in seen[0]["messages"][0]["content"]
    assert seen[0]["temperature"] == 0.0 and seen[2]["temperature"] == 0.7  # the retry samples
    n = len(seen)
    assert rewrite(op, ["green ball"], cache_dir=tmp_path / "c")[0]["valid"] and len(seen) == n  # cached
    with pytest.raises(VlgapError, match="HTTP 404"):
        rewrite(get_operator("openai-compatible", endpoint=url, model="nope"), ["x"])
    with pytest.raises(VlgapError, match="needs --endpoint"):
        get_operator("openai-compatible", model="m")


def test_openai_compatible_unreachable_endpoint_is_named():
    import socket

    from vlgap.cape.operators import OpenAICompatibleOperator

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    op = OpenAICompatibleOperator(f"http://127.0.0.1:{port}/v1", "m", timeout=5)
    with pytest.raises(VlgapError, match=f"127.0.0.1:{port}/v1/chat/completions cannot be reached"):
        op.rewrite_batch(["a red ball"])


# ------------------------------------------------------------------------------------------------ scores

CELLS = [("rewriter", "rewriter"), ("rewriter", "pe"), ("pe", "rewriter"), ("pe", "pe"), ("third", "pe")]


def _planted(n=24, matched=0.05, noise=0.01, seed=0):
    """Per cell, per prompt, two videos: prompt difficulty + train pe +0.02 + infer pe +0.01 + matched bonus."""
    rng = np.random.default_rng(seed)
    prompts = [f"prompt number {i} with a red ball" for i in range(n)]
    base = rng.uniform(0.3, 0.6, n)
    out = {}
    for t, i in CELLS:
        mean = base + 0.02 * (t == "pe") + 0.01 * (i == "pe") + matched * (t == i) + 0.015 * (t == "third")
        out[(t, i)] = mean[:, None] + rng.normal(0, noise, (n, 2))
    return prompts, out


def _vbench_json(path, prompts, videos, dims=("Human_Anatomy", "Instance_Preservation")):
    doc = {}
    for k, dim in enumerate(dims):
        entries = [{"video_path": f"/videos/{p[:180]}-{j}.mp4", "video_results": float(videos[i, j] + 0.1 * k)}
                   for i, p in enumerate(prompts) for j in range(videos.shape[1])]
        doc[dim] = [float(np.mean([e["video_results"] for e in entries])), entries]
    path.write_text(json.dumps(doc))
    return path


def _compbench_csv(path, prompts, videos):
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["name", "prompt", "answer_1", "answer_2", "Score"])
        for i, p in enumerate(prompts):
            for j in range(videos.shape[1]):
                w.writerow([f"{i + 1:04d}_{j}.png", p, "desc", '{"option": "A1,A2"}', 1 + 4 * videos[i, j]])
        w.writerow(["score: ", 3.0])
    return path


def _hand_interaction(v):
    m = {k: x.mean(axis=1) for k, x in v.items()}
    return float(((m[("pe", "pe")] - m[("pe", "rewriter")]) - (m[("rewriter", "pe")] - m[("rewriter", "rewriter")])).mean())


def test_cape_scores_recovers_a_planted_2x2_from_benchmark_files(tmp_path):
    from vlgap.cape.scores import analyse_scores, load_cells, scores_markdown

    prompts, videos = _planted()
    specs = []
    for t, i in CELLS:
        name = f"{t}/{i}"
        specs.append(f"{name}={_vbench_json(tmp_path / f'{t}_{i}_eval_results.json', prompts, videos[(t, i)])}")
        specs.append(f"{name}={_compbench_csv(tmp_path / f'wan_{t}_{i}_consistent_attr_score.csv', prompts, videos[(t, i)])}")
    judge = tmp_path / "judge.jsonl"
    judge.write_text("".join(json.dumps({"train": t, "infer": i, "prompt": p, "score": float(videos[(t, i)][k].mean())})
                             + "\n" for t, i in CELLS for k, p in enumerate(prompts)))
    cells = load_cells(specs + [str(judge)])
    assert set(cells) == {"Human_Anatomy", "Instance_Preservation", "consistent_attr", "score"}
    assert cells["Human_Anatomy"][("pe", "pe", 0)][prompts[3]] == pytest.approx(videos[("pe", "pe")][3].mean())
    res = analyse_scores(cells, n_bootstrap=300, n_permutations=300)
    want = _hand_interaction(videos)
    assert abs(want - 2 * 0.05) < 0.01  # the planted matching gain is 2 x the bonus
    for dim, scale in (("Human_Anatomy", 1), ("Instance_Preservation", 1), ("consistent_attr", 4), ("score", 1)):
        d = res["dimensions"][dim]
        assert d["interaction"]["estimate"] == pytest.approx(scale * want, abs=1e-9), dim
        assert d["interaction"]["ci"][0] > 0 and d["interaction"]["p_value"] < 0.01
        third = d["third_operator"]["third/pe - pe/pe"]
        m = {k: x.mean(axis=1) for k, x in videos.items()}
        assert third["estimate"] == pytest.approx(scale * float((m[("third", "pe")] - m[("pe", "pe")]).mean()))
        # caption-set identity matters here (pe captions +0.02, matching, third +0.015): detected
        assert d["controls"]["caption_set_permutation"]["p_value"] < 0.01
    md = scores_markdown(res)
    assert "| Human_Anatomy | 24 |" in md and "Randomization check" in md


def test_cape_scores_errors_and_cli(tmp_path):
    from typer.testing import CliRunner

    from vlgap.cape.scores import load_cells, analyse_scores
    from vlgap.cli import app

    prompts, videos = _planted(n=8)
    files = {k: _vbench_json(tmp_path / f"{k[0]}_{k[1]}_eval_results.json", prompts, videos[k]) for k in CELLS}
    short = _vbench_json(tmp_path / "short_eval_results.json", prompts[:-1], videos[("pe", "pe")][:-1])
    with pytest.raises(VlgapError, match=r"cell pe/pe \(seed 0\) has no score for prompt 'prompt number 7"):
        analyse_scores(load_cells([f"{t}/{i}={files[(t, i)]}" for t, i in CELLS if (t, i) != ("pe", "pe")]
                                  + [f"pe/pe={short}"]), n_bootstrap=10, n_permutations=10)
    with pytest.raises(VlgapError, match="cell 'pe': write TRAIN/INFER"):
        load_cells([f"pe={files[('pe', 'pe')]}"])
    bad = tmp_path / "judge.csv"
    bad.write_text("prompt,score\na,0.5\nb,1.7\n")
    with pytest.raises(VlgapError, match="judge.csv row 3: judge rating 1.7 is outside"):
        load_cells([f"pe/pe={bad}"], fmt="judge")
    r = CliRunner().invoke(app, ["cape", "scores", *[f"{t}/{i}={files[(t, i)]}" for t, i in CELLS],
                                 "--bootstrap", "50", "--permutations", "50", "--json", "--out", str(tmp_path / "o")])
    assert r.exit_code == 0, r.output
    data = json.loads(r.output)
    assert data["dimensions"]["Human_Anatomy"]["interaction"]["estimate"] == pytest.approx(_hand_interaction(videos))
    assert (tmp_path / "o" / "scores_report.md").is_file()


def test_cape_scores_with_texts_runs_mmd_and_witness_regression(tmp_path):
    from vlgap.cape.scores import analyse_scores, load_cells

    prompts, videos = _planted(n=10)
    prompts[0] += " and then a very long tail of words" * 8  # VBench names the video by its first 180 chars
    cells = load_cells([(f"{t}/{i}", _vbench_json(tmp_path / f"{t}{i}.json", prompts, videos[(t, i)], dims=("d",)))
                        for t, i in CELLS])
    rng = np.random.default_rng(1)
    vocab = {}

    def embed(texts):  # a fixed random code per text: no model
        return np.stack([vocab.setdefault(t, rng.normal(size=8)) for t in texts])

    rws = {op: {p: f"{op} rewrite of {p}" for p in prompts} for op in ("pe", "rewriter")}
    assert prompts[0][:180] in cells["d"][("pe", "pe", 0)] and prompts[0] not in cells["d"][("pe", "pe", 0)]
    caps = {op: {f"cap {j}": f"{op} caption {j}" for j in range(12)} for op in ("pe", "rewriter", "third")}
    res = analyse_scores(cells, prompt_rewrites=rws, captions=caps, embed=embed, n_bootstrap=100, n_permutations=100)
    assert set(res["mmd"]) == {f"user({i}) vs dense({t})" for i in rws for t in caps}
    wr = res["dimensions"]["d"]["controls"]["witness_regression"]
    assert wr["n_prompts"] == 10 and wr["n_cells"] == 5 and wr["within_prompt"]["ci"] is not None


# ------------------------------------------------------------------------------------------------ controls

def test_surface_overlap_equals_sacrebleu():
    import sacrebleu

    from vlgap.cape.controls import surface_overlap
    from vlgap.cape.operators import TemplateOperator

    vids = W.sample_videos(12, seed=7)
    src = [W.dense_source_of(v) for v in vids]
    rw = [r["text"] for r in TemplateOperator().rewrite_batch(src)]
    copy = list(src)
    out = surface_overlap({"template": rw, "copy": copy}, src, {"template": [t.splitlines()[1] for t in rw]})
    ref = sacrebleu.corpus_bleu([" ".join(t.split()) for t in rw], [src])
    assert out["template"]["bleu4"] == pytest.approx(ref.score)
    assert out["template"]["signature"].startswith("nrefs:1|") and out["copy"]["bleu4"] == pytest.approx(100.0)
    d = sacrebleu.corpus_bleu([t.splitlines()[1] for t in rw], [src])
    assert out["template"]["dense_caption_bleu4"] == pytest.approx(d.score)
    with pytest.raises(VlgapError, match="3 rewrites for 12 dense sources"):
        surface_overlap({"x": rw[:3]}, src)


def _null_scores(rng, n=12, seeds=2, set_effect=0.0):
    prompt = rng.normal(0, 1, n)
    out = {}
    for infer, sets in (("pe", ("pe", "rewriter", "third")), ("rewriter", ("pe", "rewriter"))):
        shift = 0.7 * (infer == "pe")  # an inference-operator effect: held fixed by the strata
        for t in sets:
            for s in range(seeds):
                out[(t, infer, s)] = (prompt + shift + set_effect * (t == "pe") + rng.normal(0, 1, n)).tolist()
    return out


def test_caption_set_permutation_test_calibrated_and_powered():
    from vlgap.cape.controls import caption_set_permutation_test

    rng = np.random.default_rng(0)
    ps = np.array([caption_set_permutation_test(_null_scores(rng), n_permutations=99, seed=k)["p_value"]
                   for k in range(300)])
    # under the planted null p is uniform on {1/100, ..., 1}: rejection rates near their level
    assert 0.02 <= np.mean(ps <= 0.05) <= 0.095
    assert 0.07 <= np.mean(ps <= 0.10) <= 0.15
    assert 0.42 <= np.mean(ps <= 0.50) <= 0.58
    r = caption_set_permutation_test(_null_scores(rng, n=20, set_effect=1.0), n_permutations=500)
    assert r["p_value"] < 0.01 and r["groups"]["pe"]["set_effects"]["pe"] > 0.3


def test_witness_regression_recovers_a_planted_slope():
    from vlgap.cape.controls import prompt_witness, witness_regression

    rng = np.random.default_rng(2)
    w = rng.normal(0, 1, (5, 40))
    y = -2.0 * w + rng.normal(0, 3, 40)[None, :] + rng.normal(0, 0.2, (5, 40))  # prompt difficulty + noise
    r = witness_regression(y, w, n_bootstrap=400)
    lo, hi = r["within_prompt"]["ci"]
    assert lo < -2.0 < hi and hi < -1.8 and abs(r["within_prompt"]["slope"] + 2) < 0.1
    half = witness_regression(y, w, n_bootstrap=400, confidence=0.5)["within_prompt"]["ci"]  # the same resamples
    assert lo < half[0] < half[1] < hi
    assert witness_regression(y[:, :3], w[:, :3])["within_prompt"]["ci"] is None  # n too small: no interval
    # a rewrite that sits among the captions has a lower witness than one far from them
    caps = rng.normal(0, 1, (30, 4))
    f = prompt_witness(np.stack([caps[0] + 0.01, caps[0] + 8.0, caps[1] + 7.9]), caps)
    assert f[0] < f[1]


def test_controls_from_an_existing_run_folder(tmp_path):
    """A run folder with the stage files `vlgap cape experiment` writes (rewrite caches, cells, embeddings),
    built here without any model: `vlgap cape controls RUN` computes the controls from them."""
    from typer.testing import CliRunner

    from vlgap.cape import operators as O
    from vlgap.cli import app
    from vlgap.reuse import write_artefact

    run = tmp_path / "run"
    train = [W.dense_source_of(v) for v in W.sample_videos(10, seed=1, offset=100)]
    test = [W.user_prompt(v) for v in W.sample_videos(8, seed=1, offset=200)]
    (run / "cells").mkdir(parents=True)
    (run / "data.json").write_text(json.dumps({"train_captions": train, "test_prompts": test}))
    (run / "config.json").write_text(json.dumps({"seed": 0, "n_permutations": 200, "n_bootstrap": 200}))

    class Named(O.TemplateOperator):
        def __init__(self, name):
            self.name = name

        @property
        def model_hash(self):
            return f"h-{self.name}"

    texts = {}
    for name in ("pe", "rewriter", "third", "template"):
        tr = O.rewrite(Named(name), train, cache_dir=run / "rewrites")
        te = O.rewrite(Named(name), test, cache_dir=run / "rewrites") if name != "third" else None
        texts[name] = (tr, te)
    from vlgap.cape.schema import six_part_text as _six_text

    rng = np.random.default_rng(0)
    all_texts = sorted({_six_text(x) for tr, te in texts.values() for x in tr + (te or [])})
    buf = io.BytesIO()
    np.savez(buf, keys=np.array([hashlib.sha256(t.encode()).hexdigest() for t in all_texts]),
             x=rng.normal(size=(len(all_texts), 6)))
    write_artefact(run / "embeddings.npz", buf.getvalue(), {"what": "embeddings"})
    for t, i in CELLS + [("template", "template")]:
        for s in (0, 1):
            item = (rng.uniform(0, 1, len(test)) + 0.3 * (t == "pe")).tolist()
            write_artefact(run / "cells" / f"{t}__{i}__{s}.json",
                           json.dumps({"train": t, "infer": i, "seed": s, "item": item}).encode(), {"what": "cell"})
    r = CliRunner().invoke(app, ["cape", "controls", str(run), "--json"])
    assert r.exit_code == 0, r.output
    c = json.loads(r.output)
    assert set(c["surface_overlap"]) == {"pe", "rewriter", "third", "template"}
    assert c["caption_set_permutation"]["n_permutations"] == 200 and c["caption_set_permutation"]["p_value"] < 0.05
    assert c["witness_regression"]["cells"] == ["pe/pe", "pe/rewriter", "rewriter/pe", "rewriter/rewriter", "third/pe"]
    assert (run / "controls.md").read_text().startswith("### Controls")
    # --confidence reaches the regression's intervals and the page
    half = json.loads(CliRunner().invoke(app, ["cape", "controls", str(run), "--json", "--confidence", "0.5"]).output)
    assert c["witness_regression"]["confidence"] == 0.95 and half["witness_regression"]["confidence"] == 0.5
    assert "50% bootstrap over prompts" in (run / "controls.md").read_text()
    # a stage file whose bytes changed is refused with its name, not read
    cell = run / "cells" / "pe__pe__0.json"
    cell.write_text(cell.read_text().replace('"seed": 0', '"seed": 0 '))
    r = CliRunner().invoke(app, ["cape", "controls", str(run)])
    assert isinstance(r.exception, VlgapError) and "pe__pe__0.json" in str(r.exception)
