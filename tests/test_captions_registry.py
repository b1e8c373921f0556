"""A caption metric is one file: it registers itself, and caption_eval, compare_captions and
`vlgap caption-eval` (names, aliases, --help, output) discover it. The toy metric below is all it takes."""
from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from vlgap.captions import registry
from vlgap.captions.evaluate import caption_eval, compare_captions
from vlgap.captions.registry import Scoring, caption_metric
from vlgap.captions.tables import MetricTable
from vlgap.cli import app
from vlgap.errors import VlgapError

PREDS = {"a": "a dog runs", "b": "two cats", "c": "a red car on the road"}
REFS = {"a": ["a dog is running fast", "a dog runs"], "b": ["two cats sleep on a mat"], "c": ["a red car"]}
# words of each prediction over the words of its shortest reference: (3 + 2 + 6) / (3 + 6 + 3)
RATIO = 11 / 12
PER_ITEM = {"a": 3 / 3, "b": 2 / 6, "c": 6 / 3}
ENV = {"COLUMNS": "200", "NO_COLOR": "1"}


def _register_length_ratio():
    @caption_metric("length_ratio", keys=("LengthRatio",), aliases=("len-ratio",), order=5,
                    summary="words of the prediction over words of its shortest reference, summed over items")
    def score_length_ratio(s: Scoring) -> MetricTable:
        stats = np.array([[len(p.split()), min(len(r.split()) for r in refs)]
                          for p, refs in zip(s.data.predictions, s.data.references)], dtype=float)
        ratio = lambda sums, n: (np.asarray(sums)[..., :1] / np.asarray(sums)[..., 1:])  # noqa: E731
        return MetricTable(["LengthRatio"], stats, ratio, [float(stats[:, 0].sum() / stats[:, 1].sum())],
                           {"LengthRatio": stats[:, 0] / stats[:, 1]})


@pytest.fixture
def length_ratio():
    _register_length_ratio()
    yield "length_ratio"
    registry.unregister_metric("length_ratio")


def test_a_registered_metric_is_scored_by_caption_eval(length_ratio):
    preds = {f"{k}{i}": v for i in range(10) for k, v in PREDS.items()}  # 30 items: enough for an interval
    refs = {f"{k}{i}": v for i in range(10) for k, v in REFS.items()}
    res = caption_eval(preds, refs, metrics="len-ratio,rouge", n_bootstrap=200, seed=0, per_item=True)
    assert list(res.metrics()) == ["LengthRatio", "ROUGE-L"]  # the order asked
    assert res["LengthRatio"]["score"] == pytest.approx(RATIO)
    lo, hi = res["LengthRatio"]["ci"]
    assert lo <= RATIO <= hi and lo < hi
    assert {row["id"]: row["LengthRatio"] for row in res["per_item"]} == pytest.approx(
        {f"{k}{i}": v for i in range(10) for k, v in PER_ITEM.items()})
    assert "length_ratio" not in registry.parse_metrics(None)[0]  # not a default metric
    assert "LengthRatio" not in caption_eval(PREDS, REFS, metrics="rouge")
    cmp = compare_captions(PREDS, {k: v + " today" for k, v in PREDS.items()}, REFS, metrics="length_ratio",
                           n_bootstrap=50, n_permutations=50)
    assert cmp["LengthRatio"]["difference"] == pytest.approx(RATIO - 14 / 12)


def test_a_registered_metric_is_on_the_command_line(length_ratio, tmp_path):
    (tmp_path / "pred.json").write_text(json.dumps(PREDS))
    (tmp_path / "refs.json").write_text(json.dumps(REFS))
    files = ["--pred", str(tmp_path / "pred.json"), "--refs", str(tmp_path / "refs.json")]
    res = CliRunner().invoke(app, ["caption-eval", *files, "--metrics", "length-ratio", "--json"], env=ENV)
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert out["LengthRatio"]["score"] == pytest.approx(RATIO) and out["n"] == 3
    table = CliRunner().invoke(app, ["caption-eval", *files, "--metrics", "length_ratio,bleu"], env=ENV)
    assert table.exit_code == 0, table.output
    assert table.output.index("LengthRatio") < table.output.index("BLEU-1") and "0.9167" in table.output
    helped = " ".join(CliRunner().invoke(app, ["caption-eval", "--help"], env=ENV).output.split())
    assert "length_ratio" in helped and "len-ratio=length_ratio" in helped


def test_unregistered_metric_is_gone(length_ratio):
    registry.unregister_metric(length_ratio)
    with pytest.raises(VlgapError, match="unknown metric"):
        caption_eval(PREDS, REFS, metrics="length_ratio")
    helped = CliRunner().invoke(app, ["caption-eval", "--help"], env=ENV).output
    assert "length_ratio" not in helped


def test_unknown_metric_is_refused_in_one_line_with_every_name_and_alias():
    with pytest.raises(VlgapError) as err:
        caption_eval(PREDS, REFS, metrics="bleu,spice")
    text = str(err.value)
    assert "\n" not in text and text.startswith("unknown metric(s) spice: choose from ")
    for metric in registry.caption_metrics():
        for name in (metric.name, *metric.aliases):
            assert name in text
    for alias in ("rouge-l", "cider-d", "bleu-4", "pac-s", "clip-s", "refclip-s", "bertscore-f1"):
        assert alias in text


def test_builtin_names_aliases_and_defaults_are_as_documented():
    assert registry.metric_names() == ["bleu", "meteor", "rouge", "cider", "sacrebleu", "clipscore",
                                       "refclipscore", "emscore", "bertscore"]
    assert registry.metric_names(default=True) == ["bleu", "meteor", "rouge", "cider", "sacrebleu"]
    spelled = registry.parse_metrics("ROUGE_L, CIDEr-D ,Bleu4,clip-s,PAC-S,RefCLIP-S,BERTScore-F1,rouge")
    assert spelled == (["rouge", "cider", "bleu", "clipscore", "refclipscore", "bertscore"], True)
    assert registry.parse_metrics(None) == (["bleu", "meteor", "rouge", "cider", "sacrebleu"], False)
    needs = {m.name: (m.references, m.needs) for m in registry.caption_metrics()}
    assert needs["meteor"] == ("required", ("java",))
    assert needs["clipscore"] == ("none", ("pictures", "clip model"))
    assert needs["emscore"] == ("optional", ("pictures", "clip model"))
    assert needs["bertscore"] == ("required", ("text model",))


def test_a_taken_name_or_alias_is_refused(length_ratio):
    with pytest.raises(VlgapError, match="'rouge-l' is taken by 'rouge'"):
        caption_metric("other", keys=("Other",), aliases=("rouge-l",))(lambda s: None)
    with pytest.raises(VlgapError, match="unknown need"):
        caption_metric("other", keys=("Other",), needs=("gpu",))(lambda s: None)
    assert "other" not in registry.metric_names()


def test_without_references_only_reference_free_metrics_run(length_ratio):
    with pytest.raises(VlgapError, match=r"length_ratio compare with references: pass --refs \(only clipscore "
                                         r"and emscore need none\)"):
        caption_eval(PREDS, None, metrics="length_ratio")


def test_concurrent_text_metric_runs_in_a_worker_thread_with_the_same_numbers(monkeypatch):
    """ROUGE-L (registered `concurrent`) scores in a worker thread beside BLEU and CIDEr from
    CONCURRENT_ITEMS items on more than one CPU: the tables equal the one-thread ones; an error there
    reaches the caller."""
    import threading

    from vlgap.captions import evaluate
    from vlgap.captions.io import load_captions

    rng = np.random.default_rng(5)
    words = "a dog cat runs on the red car mat two sleep".split()
    preds = {str(i): " ".join(rng.choice(words, rng.integers(1, 9))) for i in range(60)}
    refs = {str(i): [" ".join(rng.choice(words, rng.integers(1, 12))) for _ in range(rng.integers(1, 4))]
            for i in range(60)}
    data = load_captions(preds, refs)
    names = ["bleu", "rouge", "cider"]
    assert registry.get_metric("rouge").concurrent and not registry.get_metric("bleu").concurrent
    one = evaluate.score_items(data, names)  # 60 items: below CONCURRENT_ITEMS, one thread
    seen = []
    rouge = registry.get_metric("rouge")

    def spy(s):
        # (in the worker, the split it reads was made before it started)
        seen.append((threading.current_thread() is threading.main_thread(), "split" in s._shared))
        return rouge.compute(s)

    monkeypatch.setattr(evaluate, "CONCURRENT_ITEMS", 10)
    from vlgap.runs import claims

    monkeypatch.setattr(claims, "available_cores", lambda: 2)
    monkeypatch.setitem(registry._REGISTRY, "rouge", registry._with(rouge, compute=spy))
    two = evaluate.score_items(data, names)
    assert seen == [(False, True)]
    assert list(two) == names
    for m in names:
        assert np.array_equal(one[m].stats, two[m].stats) and one[m].estimates == two[m].estimates

    def fail(s):
        raise VlgapError("rouge broke")

    monkeypatch.setitem(registry._REGISTRY, "rouge", registry._with(rouge, compute=fail))
    with pytest.raises(VlgapError, match="rouge broke"):
        evaluate.score_items(data, names)
    monkeypatch.setattr(claims, "available_cores", lambda: 1)  # one CPU: in this thread
    seen.clear()
    monkeypatch.setitem(registry._REGISTRY, "rouge", registry._with(rouge, compute=spy))
    evaluate.score_items(data, names)
    assert [main for main, _ in seen] == [True]
