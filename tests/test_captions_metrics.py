"""BLEU, ROUGE-L, CIDEr and METEOR against pycocoevalcap 1.2 (1e-9; METEOR identical).

Without Java: the frozen pycocoevalcap outputs in expected_200.json, pycocoevalcap's pure-Python
scorers on our tokens (when pycocoevalcap is installed), and exact small references (naive LCS,
hand-computed BLEU). With Java (@pytest.mark.java): the whole coco-caption pipeline on the
2,000 x 5 parity corpus, tokenised once per session, and METEOR through both wrappers.
"""
from __future__ import annotations

import json
import math
import random
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

from vlgap.captions.bleu import Bleu, bleu_from_statistics, bleu_statistics
from vlgap.captions.cider import Cider, DocumentFrequencies, cider_d_scores
from vlgap.captions.evaluate import caption_eval, score_items, tokenize_data
from vlgap.captions.io import load_captions
from vlgap.captions.rouge import Rouge, lcs_length, rouge_l

FIXTURES = Path(__file__).parent / "fixtures" / "captions"
sys.path.insert(0, str(FIXTURES))
from corpus import make_corpus  # noqa: E402
from sequences import naive_lcs

needs_java = pytest.mark.skipif(shutil.which("java") is None, reason="needs a Java runtime")
TOL = 1e-9


@pytest.fixture(scope="module")
def expected():
    return json.loads((FIXTURES / "expected_200.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def subset_tables():
    refs, preds = make_corpus(200, 5, seed=0)
    data = load_captions(preds, refs)
    return data, score_items(data, ["bleu", "rouge", "cider"])


def test_frozen_corpus_scores(expected, subset_tables):
    _, tables = subset_tables
    got = dict(zip(tables["bleu"].names, tables["bleu"].estimates))
    got["ROUGE-L"] = tables["rouge"].estimates[0]
    got["CIDEr"] = tables["cider"].estimates[0]
    for name, value in got.items():
        assert abs(value - expected["scores"][name]) < TOL, name


def test_frozen_per_item_scores(expected, subset_tables):
    _, tables = subset_tables
    per = {**tables["bleu"].per_item, **tables["rouge"].per_item, **tables["cider"].per_item}
    for name, values in per.items():
        np.testing.assert_allclose(values, expected["per_item"][name], rtol=0, atol=TOL, err_msg=name)


# -- the scorers alone, against pycocoevalcap's pure-Python scorers (no Java needed) ---------------

@pytest.fixture(scope="module")
def corpus_tokens():
    refs, preds = make_corpus(2000, 5, seed=0)
    data = load_captions(preds, refs)
    hyps, tok_refs = tokenize_data(data)
    gts = {k: tok_refs[i] for i, k in enumerate(data.ids)}
    res = {k: [hyps[i]] for i, k in enumerate(data.ids)}
    return data, gts, res


def test_bleu_matches_pycocoevalcap(corpus_tokens):
    pytest.importorskip("pycocoevalcap")
    from pycocoevalcap.bleu.bleu import Bleu as RefBleu

    _, gts, res = corpus_tokens
    score, per = Bleu(4).compute_score(gts, res)
    ref_score, ref_per = RefBleu(4).compute_score(gts, res, verbose=0)
    np.testing.assert_allclose(score, ref_score, rtol=0, atol=TOL)
    np.testing.assert_allclose(per, ref_per, rtol=0, atol=TOL)


def test_rouge_matches_pycocoevalcap(corpus_tokens):
    pytest.importorskip("pycocoevalcap")
    from pycocoevalcap.rouge.rouge import Rouge as RefRouge

    _, gts, res = corpus_tokens
    score, per = Rouge().compute_score(gts, res)
    ref_score, ref_per = RefRouge().compute_score(gts, res)
    assert abs(score - ref_score) < TOL
    np.testing.assert_allclose(per, ref_per, rtol=0, atol=TOL)


def test_cider_matches_pycocoevalcap(corpus_tokens):
    pytest.importorskip("pycocoevalcap")
    from pycocoevalcap.cider.cider import Cider as RefCider

    _, gts, res = corpus_tokens
    score, per = Cider().compute_score(gts, res)
    ref_score, ref_per = RefCider().compute_score(gts, res)
    assert abs(score - ref_score) < TOL
    np.testing.assert_allclose(per, ref_per, rtol=0, atol=TOL)


# -- exact small references ---------------------------------------------------------------------


def test_bit_parallel_lcs_equals_dynamic_programming():
    rng = random.Random(3)
    for _ in range(500):
        a = [rng.choice("abcde") for _ in range(rng.randint(0, 30))]
        b = [rng.choice("abcde") for _ in range(rng.randint(0, 30))]
        assert lcs_length(a, b) == naive_lcs(a, b)


@pytest.mark.parametrize("dense_cells, batch", [(1 << 23, 32), (0, 32), (1 << 23, 1)])
def test_rouge_all_pairs_at_once_equals_item_by_item(dense_cells, batch, monkeypatch):
    """rouge_l_scores (all pairs at once on uint64 words) gives rouge_l's floats exactly: captions
    around 64 tokens, beyond it on both sides, empty ones, tokens holding non-breaking spaces or
    tabs (str.split() and str.split(" ") differ), ASCII-only inputs, others up to U+FFFF, others with
    characters beyond and lone surrogates, with and without the shared split; both bit-mask tables
    and the Python finish."""
    from vlgap.captions import ngrams, rouge

    monkeypatch.setattr(rouge, "_DENSE_TABLE", dense_cells)
    monkeypatch.setattr(rouge, "_MIN_BATCH", batch)
    rng = random.Random(8)

    # the characters: ASCII only, or up to U+FFFF, or beyond and lone surrogates (read as bytes,
    # UTF-16 or UTF-32 units)
    extras = [[], ["e\xa0f", "\u3000", "\u2029x"], ["e\xa0f", "\U0001f600", "i\ud83d"]]

    def doc(chars):
        if rng.random() < 0.1:
            return rng.choice(["", " ", " a", "a ", "a  b"] + (["\xa0"] if chars else []))
        n = rng.randint(0, rng.choice([1, 3, 10, 40, 63, 64, 65, 70, 130]))
        words = ["a", "b", "c", "d", "e", "", "g\th", "\x00"] + extras[chars]
        return " ".join(rng.choice(words) for _ in range(n))

    for case in range(40):
        n = rng.randint(1, 40)
        hyps = [doc(case % 3) for _ in range(n)]
        refs = [[doc(case % 3) for _ in range(rng.randint(1, 6))] for _ in range(n)]
        want = np.array([rouge_l(h, r) for h, r in zip(hyps, refs)])
        split = ngrams.split_corpus([x for rs in refs for x in rs] + hyps)
        assert np.array_equal(rouge.rouge_l_scores(hyps, refs), want)
        assert np.array_equal(rouge.rouge_l_scores(hyps, refs, split=split), want)


def test_split_corpus_token_ids():
    """SplitCorpus.token_ids: each word's id in `ids` (the id its first occurrence got there), -1 for a
    word no document holds, with and without the separator between documents."""
    from vlgap.captions import ngrams

    for docs in (["b a", "c  a\tb", "", "d"], ["b a\x00", "c d"]):  # (the second: no separator)
        split = ngrams.split_corpus(docs)
        tokens = [w for d in docs for w in d.split()]
        first = {}
        for w, i in zip(tokens, split.ids.tolist()):
            first.setdefault(w, i)
        words = ["a", "zz", "d", "", "\x00", "b"]
        want = [first.get(w, -1) for w in words]
        assert split.token_ids(words).tolist() == want, docs
    assert ngrams.split_corpus(["a"]).separator is None and ngrams.split_corpus(["a", "b"]).separator is not None


def test_rouge_split_of_other_documents_is_refused():
    from vlgap.captions import ngrams, rouge
    from vlgap.errors import VlgapError

    with pytest.raises(VlgapError, match="split corpus has 1 documents, not 2"):
        rouge.rouge_l_scores(["a"], [["a"]], split=ngrams.split_corpus(["a"]))


def test_ngram_index_of_other_documents_is_refused():
    from vlgap.captions import cider, ngrams
    from vlgap.errors import VlgapError

    index = ngrams.index_ngrams(["a", "b", "a"], 4)
    with pytest.raises(VlgapError, match="n-gram index has 3 documents, not 2 .1 references and 1 hypotheses"):
        bleu_statistics(["a"], [["a"]], index=index)
    with pytest.raises(VlgapError, match="n-gram index has 3 documents, not 4"):
        cider.cider_d_scores(["a", "b"], [["a"], ["b"]], index=index)


def test_odd_space_class_is_str_isspace_but_the_space():
    from vlgap.captions import rouge

    table = rouge._ODD_SPACE  # by code point, its last entry for all beyond
    odd = [chr(c) for c in range(0x110000) if table[min(c, table.size - 1)]]
    assert odd == [chr(c) for c in range(0x110000) if chr(c).isspace() and c != 32]


def test_rouge_uses_best_precision_and_best_recall_separately():
    # precision is best against ref 1 (1.0), recall against ref 2 (1.0): F(1, 1) = 1
    assert rouge_l("a b", ["a b c d", "a b"]) == pytest.approx(1.0)
    p, r = 2 / 2, 2 / 4
    assert rouge_l("a b", ["a b c d"]) == pytest.approx((1 + 1.2 ** 2) * p * r / (r + 1.2 ** 2 * p))
    assert rouge_l("", ["a"]) == 0.0


def test_sort_based_distinct_and_group_max_equal_numpy_references():
    from vlgap.captions.ngrams import distinct, group_max

    rng = np.random.default_rng(3)
    for size, high in [(0, 5), (1, 5), (1000, 20), (5000, 10 ** 12)]:
        keys = rng.integers(0, high, size).astype(np.int64)
        values = rng.integers(0, 7, size).astype(np.int64)
        u, c = np.unique(keys, return_counts=True)
        got_u, got_c = distinct(keys, counts=True)
        assert np.array_equal(got_u, u) and np.array_equal(got_c, c)
        assert np.array_equal(distinct(keys), u)
        k, v = group_max(keys, values)  # high = 10**12: key * 8 still fits, one sort
        assert np.array_equal(k, u)
        assert np.array_equal(v, [values[keys == x].max() for x in u])
    # keys too large to pack with the value: the lexsort path
    keys = np.array([2 ** 61, 5, 2 ** 61, 5, 7], dtype=np.int64)
    k, v = group_max(keys, np.array([1, 9, 4, 2, 0], dtype=np.int64))
    assert k.tolist() == [5, 7, 2 ** 61] and v.tolist() == [9, 0, 4]


def test_reference_maxima_against_plain_counting():
    """The largest count of each gram in any one reference of an item, keyed gram * n_items + item:
    read off the index's order (references in item order) or sorted (in any order); and where each
    reference and hypothesis row finds its key (reference_join, shared by BLEU and CIDEr)."""
    from collections import Counter

    from vlgap.captions import ngrams

    rng = random.Random(6)
    refs = [" ".join(rng.choice("a b c".split()) for _ in range(rng.randint(0, 8))) for _ in range(40)]
    hyps = [" ".join(rng.choice("a b d".split()) for _ in range(rng.randint(0, 5))) for _ in range(10)]
    index = ngrams.index_ngrams(refs + hyps, 2)
    for item_of_ref in (np.repeat(np.arange(10), 4), np.array([i % 10 for i in range(40)])):
        for k in (1, 2):
            join = ngrams.reference_join(index, k, 40, item_of_ref)
            keys, maxima = join.keys, join.maxima
            names = index.gram_tuples(k)
            got = {(names[int(key) // 10], int(key) % 10): int(v) for key, v in zip(keys, maxima)}
            want: dict = {}
            for r, doc in enumerate(refs):
                toks = doc.split()
                for gram, n in Counter(tuple(toks[i:i + k]) for i in range(len(toks) - k + 1)).items():
                    key = (gram, int(item_of_ref[r]))
                    want[key] = max(want.get(key, 0), n)
            assert got == want and np.all(np.diff(keys) > 0)
            # where each row finds its key: every reference row its own, a hypothesis row its
            # (gram, item) key when a reference of the item holds the gram
            c = index.orders[k - 1]
            is_ref = c.doc < 40
            assert np.array_equal(join.is_ref, is_ref)
            assert np.array_equal(keys[join.ref_slot], c.gram[is_ref] * 10 + item_of_ref[c.doc[is_ref]])
            hyp_keys = c.gram[~is_ref] * 10 + (c.doc[~is_ref] - 40)
            assert np.array_equal(join.hyp_item, c.doc[~is_ref] - 40)
            assert join.hyp_hit.tolist() == [int(q) in set(keys.tolist()) for q in hyp_keys]
            assert np.array_equal(keys[join.hyp_slot][join.hyp_hit], hyp_keys[join.hyp_hit])


def test_ngram_index_packed_and_fallback_paths_agree(monkeypatch):
    from vlgap.captions import ngrams

    rng = random.Random(4)
    docs = [" ".join(rng.choice("a b c d e f g h".split()) for _ in range(rng.randint(0, 12))) for _ in range(300)]
    fast = ngrams.index_ngrams(docs, 4)
    monkeypatch.setattr(ngrams, "_PACKED_BITS", 8)  # keys too large to pack with positions: the pairs sorted
    slow = ngrams.index_ngrams(docs, 4)
    for a, b in zip(fast.orders, slow.orders):
        assert a.n_grams == b.n_grams
        for name in ("doc", "gram", "count"):
            assert np.array_equal(getattr(a, name), getattr(b, name))
    assert [fast.gram_tuples(k) for k in range(1, 5)] == [slow.gram_tuples(k) for k in range(1, 5)]
    for (d_fast, s_fast), (d_slow, s_slow) in zip(fast.first_position, slow.first_position):  # the first occurrences
        assert np.array_equal(d_fast, d_slow) and np.array_equal(s_fast, s_slow)
    # against plain counting
    for k in range(1, 5):
        c = fast.orders[k - 1]
        names = fast.gram_tuples(k)
        got = {(int(d), names[int(g)]): int(n) for d, g, n in zip(c.doc, c.gram, c.count)}
        want = {}
        for d, doc in enumerate(docs):
            toks = doc.split()
            for i in range(len(toks) - k + 1):
                want[(d, tuple(toks[i:i + k]))] = want.get((d, tuple(toks[i:i + k])), 0) + 1
        assert got == want


@pytest.mark.parametrize("docs", [[], [""], ["a"], ["a b c d e"], ["", "b a b", "", "a"], ["x y", "z", "x y z x y"],
                                  ["a b"] * 3])
def test_ngram_index_edge_cases_against_plain_counting(docs):
    """No document, empty ones, documents shorter than the order (no gram of it), one document: the
    counts, the number of grams, their order and the first occurrence of each gram as plain counting
    finds them."""
    from vlgap.captions import ngrams

    index = ngrams.index_ngrams(docs, 4)
    assert index.lengths.tolist() == [len(d.split()) for d in docs]
    for k in range(1, 5):
        c = index.orders[k - 1]
        names = index.gram_tuples(k)
        want: dict = {}
        first: dict = {}
        for d, doc in enumerate(docs):
            toks = doc.split()
            for i in range(len(toks) - k + 1):
                gram = tuple(toks[i:i + k])
                want[(d, gram)] = want.get((d, gram), 0) + 1
                first.setdefault(gram, (d, i))
        # gram ids follow the order of the token-id tuples, tokens numbered by first appearance
        ids = {t: i for i, t in enumerate(dict.fromkeys(t for doc in docs for t in doc.split()))}
        as_ids = [tuple(ids[t] for t in g) for g in names]
        assert c.n_grams == len(names) == len(first) and sorted(as_ids) == as_ids
        assert {(int(d), names[int(g)]): int(n) for d, g, n in zip(c.doc, c.gram, c.count)} == want
        assert list(zip(*(a.tolist() for a in index.first_position[k - 1]))) == [first[g] for g in names]
        assert all(a.dtype == np.int64 for a in (c.doc, c.gram, c.count))


def test_bleu_by_hand():
    # hypothesis 4 tokens; references of 3 and 5 tokens: both 1 away, the shorter (3) is chosen
    stats = bleu_statistics(["the cat sat down"], [["the cat sat", "a cat sat on mat"]])
    assert stats[0].tolist() == [4, 3, 4, 3, 2, 1, 3, 2, 1, 0]
    b = bleu_from_statistics(stats[0])
    assert b[0] == pytest.approx(3 / 4, abs=1e-8)
    assert b[1] == pytest.approx(math.sqrt(3 / 4 * 2 / 3), abs=1e-8)
    assert b[3] < 1e-3  # no 4-gram match: only the 1e-15 guard keeps it positive


def test_bleu_brevity_penalty():
    stats = bleu_statistics(["a b"], [["a b c d"]])
    b = bleu_from_statistics(stats[0])
    assert b[0] == pytest.approx(math.exp(1 - 4 / 2), rel=1e-8)


def test_cider_frozen_df_from_same_references_equals_corpus_mode(corpus_tokens):
    _, gts, res = corpus_tokens
    keys = list(gts)[:300]
    hyps = [res[k][0] for k in keys]
    refs = [gts[k] for k in keys]
    df = DocumentFrequencies.from_references(refs)
    np.testing.assert_allclose(cider_d_scores(hyps, refs, df=df), cider_d_scores(hyps, refs), rtol=0, atol=1e-12)


def test_cider_frozen_df_keeps_item_scores_stable_under_subsetting(corpus_tokens):
    _, gts, res = corpus_tokens
    keys = list(gts)[:400]
    hyps = [res[k][0] for k in keys]
    refs = [gts[k] for k in keys]
    df = DocumentFrequencies.from_references(refs)
    full = cider_d_scores(hyps, refs, df=df)
    half = cider_d_scores(hyps[:150], refs[:150], df=df)
    np.testing.assert_allclose(half, full[:150], rtol=0, atol=1e-12)
    # coco-caption's own df moves with the item set
    assert not np.allclose(cider_d_scores(hyps[:150], refs[:150]), cider_d_scores(hyps, refs)[:150])


def test_compute_score_shapes_match_pycocoevalcap():
    gts = {"1": ["a dog runs", "the dog runs"], "2": ["a cat"]}
    res = {"1": ["a dog runs"], "2": ["a cat sits"]}
    score, per = Bleu(4).compute_score(gts, res)
    assert len(score) == 4 and len(per) == 4 and len(per[0]) == 2
    score, per = Cider().compute_score(gts, res)
    assert isinstance(score, float) and per.shape == (2,)


# -- the whole pipeline against coco-caption, with Java ----------------------------------------

@pytest.fixture(scope="module")
def coco_pipeline():
    pytest.importorskip("pycocoevalcap")
    from pycocoevalcap.bleu.bleu import Bleu as RefBleu
    from pycocoevalcap.cider.cider import Cider as RefCider
    from pycocoevalcap.rouge.rouge import Rouge as RefRouge
    from pycocoevalcap.tokenizer.ptbtokenizer import PTBTokenizer

    refs, preds = make_corpus(2000, 5, seed=0)
    keys = list(refs)
    gts = PTBTokenizer().tokenize({k: [{"caption": c} for c in refs[k]] for k in keys})
    res = PTBTokenizer().tokenize({k: [{"caption": preds[k]}] for k in keys})
    bleu, _ = RefBleu(4).compute_score(gts, res, verbose=0)
    rouge, _ = RefRouge().compute_score(gts, res)
    cider, _ = RefCider().compute_score(gts, res)
    scores = {"BLEU-1": bleu[0], "BLEU-2": bleu[1], "BLEU-3": bleu[2], "BLEU-4": bleu[3],
              "ROUGE-L": float(rouge), "CIDEr": float(cider)}
    return refs, preds, gts, res, scores


@pytest.mark.serial  # a Java VM: make test runs it alone
@pytest.mark.java
@needs_java
def test_live_pipeline_matches_coco_caption(coco_pipeline):
    refs, preds, _, _, scores = coco_pipeline
    result = caption_eval(preds, refs, ["bleu", "rouge", "cider"])
    assert result["n"] == 2000
    for name, value in scores.items():
        assert abs(result[name]["score"] - value) < TOL, name


@pytest.mark.slow  # > 5 s on 2 cores: make test-slow (the fast suite keeps a cheaper test of the same module)
@pytest.mark.serial  # a Java VM: make test runs it alone
@pytest.mark.java
@needs_java
def test_live_meteor_identical(coco_pipeline):
    from pycocoevalcap.meteor.meteor import Meteor as RefMeteor

    from vlgap.captions.meteor import meteor_from_statistics, parse_statistics, shared_meteor

    _, _, gts, res, _ = coco_pipeline
    keys = list(gts)
    ref_score, ref_items = RefMeteor().compute_score(gts, res)
    jar = shared_meteor()
    lines = jar.statistics([res[k][0] for k in keys], [gts[k] for k in keys])
    score, items = jar.evaluate(lines)
    assert score == ref_score
    assert items == ref_items
    # the Python reduction of the jar's statistics (used for bootstrap replicates) is exact too
    stats = parse_statistics(lines)
    assert meteor_from_statistics(stats.sum(axis=0)) == pytest.approx(score, abs=1e-12)
    np.testing.assert_allclose(meteor_from_statistics(stats), items, rtol=0, atol=1e-12)


@pytest.mark.serial  # a Java VM: make test runs it alone
@pytest.mark.java
@needs_java
def test_frozen_meteor(expected):
    pytest.importorskip("pycocoevalcap")
    refs, preds = make_corpus(200, 5, seed=0)
    result = caption_eval(preds, refs, ["meteor"], per_item=True)
    assert result["METEOR"]["score"] == expected["scores"]["METEOR"]
    assert [row["METEOR"] for row in result["per_item"]] == expected["per_item"]["METEOR"]
