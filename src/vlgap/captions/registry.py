"""The caption-metric registry: a metric is one file that registers itself, and caption_eval, the
paired comparison, human-judgment agreement and `vlgap caption-eval` (its `--metrics` names,
aliases, help text and output order) discover it here.

A metric module decorates one function with `@caption_metric(...)`:

    @caption_metric("bleu", title="BLEU", keys=("BLEU-1", "BLEU-2", "BLEU-3", "BLEU-4"),
                    aliases=("bleu-4",), default=True, order=10)
    def score_bleu(s: Scoring) -> MetricTable: ...

The function scores one system: `s.data` holds the items (ids, predictions, references), and
`s.tokens()`, `s.ngram_index()`, `s.embedding()`, `s.resource(name)`, `s.option(key)` and
`s.shared(key, make)` give what several metrics share, computed once. It returns a MetricTable:
per-item sufficient statistics and how to reduce them (so intervals, paired tests, per-item CSV and
JSON come from one machinery); for a score that is a mean over items, `mean_table` builds it from
pycocoevalcap's contract (corpus score, per-item scores).

Built-in metrics live in the modules of `vlgap.captions` that call `caption_metric(`; they are
imported on the first lookup. Any other module (a plugin, a test) registers by being imported.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field, replace as _with
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from vlgap.captions.tables import MetricTable
from vlgap.errors import VlgapError
from vlgap.stats.bounds import UNBOUNDED, ScoreRange

#: what a metric may need besides the predictions, as its `needs` names them (for --help and errors)
NEEDS = {
    "references": "reference captions (--refs)",
    "pictures": "the pictures (--images DIR or --videos manifest.jsonl)",
    "clip model": "a CLIP-family checkpoint (--clip)",
    "text model": "a text encoder (--bertscore-model)",
    "java": "Java or the meteor extra (pycocoevalcap)",
}
#: how a metric reads references: it must have them, uses them where every item has some, or never
REFERENCES = ("required", "optional", "none")
#: "text" metrics read the caption strings and are scored together (the result then names the
#: tokenizer); "model" metrics read a model through the shared EmbeddingContext
KINDS = ("text", "model")


@dataclass(frozen=True)
class CaptionMetric:
    """One registered caption metric (a family of score keys computed together)."""

    name: str                              # canonical --metrics name, e.g. "bleu"
    compute: Callable[["Scoring"], MetricTable]
    keys: tuple[str, ...]                  # the score entries it writes, in order ("BLEU-1".."BLEU-4")
    title: str = ""                        # how notes name it ("METEOR skipped: ..."); default keys[0]
    aliases: tuple[str, ...] = ()          # other spellings accepted by --metrics
    references: str = "required"           # one of REFERENCES
    needs: tuple[str, ...] = ()            # further needs, from NEEDS
    default: bool = False                  # scored when no metric is named
    kind: str = "text"                     # one of KINDS
    setup: Callable[["ScoringSettings"], Any] | None = None  # once per evaluation; raises VlgapError if unavailable
    manifest_references: bool = False      # without --refs, a --videos manifest's captions serve as references
    order: float = 1000.0                  # position in listings and default output
    concurrent: bool = False               # a "text" metric that reads only s.tokens() and s.split(): it may
    #                                        run in a worker thread beside the other text metrics
    summary: str = ""                      # one line for docs and listings
    score_range: ScoreRange = UNBOUNDED    # the values each of its keys can take (vlgap.stats.bounds): intervals
    #                                        are kept inside it and flagged where that clipped them

    @property
    def all_needs(self) -> tuple[str, ...]:
        return (("references",) if self.references == "required" else ()) + self.needs


def normalise(name: str) -> str:
    """--metrics spelling rule: case, '-' and '_' do not matter ("ROUGE-L" = "rouge_l" = "rougel")."""
    return re.sub(r"[-_\s]", "", str(name).strip().lower())


_REGISTRY: dict[str, CaptionMetric] = {}
_SEQ: dict[str, int] = {}
_DISCOVERED = False


def register_metric(metric: CaptionMetric, *, replace: bool = False) -> CaptionMetric:
    """Add a metric; its name and aliases must not clash with another's (replace=True swaps a metric of
    the same name, e.g. when its module is reloaded)."""
    if metric.references not in REFERENCES:
        raise VlgapError(f"caption metric {metric.name!r}: references={metric.references!r}; use one of "
                         f"{', '.join(REFERENCES)}")
    if metric.kind not in KINDS:
        raise VlgapError(f"caption metric {metric.name!r}: kind={metric.kind!r}; use one of {', '.join(KINDS)}")
    unknown = [n for n in metric.needs if n not in NEEDS or n == "references"]
    if unknown:
        raise VlgapError(f"caption metric {metric.name!r}: unknown need(s) {', '.join(unknown)}; use "
                         f"{', '.join(n for n in NEEDS if n != 'references')} (references= says how it reads "
                         "references)")
    if not metric.keys:
        raise VlgapError(f"caption metric {metric.name!r} names no score keys")
    if not metric.title:
        metric = _with(metric, title=metric.keys[0])
    taken = {normalise(s): m.name for m in _REGISTRY.values() if not (replace and m.name == metric.name)
             for s in (m.name, *m.aliases)}
    for spelling in (metric.name, *metric.aliases):
        owner = taken.get(normalise(spelling))
        if owner is not None and (owner != metric.name or not replace):
            raise VlgapError(f"caption metric {metric.name!r}: the name {spelling!r} is taken by {owner!r}")
    _REGISTRY[metric.name] = metric
    _SEQ.setdefault(metric.name, len(_SEQ))
    return metric


def caption_metric(name: str, *, keys: Sequence[str], **fields: Any) -> Callable:
    """Decorator: register the decorated `compute(s: Scoring) -> MetricTable` as metric `name` (the
    other fields as CaptionMetric's); returns the function unchanged."""
    def wrap(compute: Callable[["Scoring"], MetricTable]) -> Callable[["Scoring"], MetricTable]:
        register_metric(CaptionMetric(name=name, compute=compute, keys=tuple(keys), **fields), replace=True)
        return compute
    return wrap


def unregister_metric(name: str) -> None:
    """Remove a metric (tests that register a toy one)."""
    _REGISTRY.pop(name, None)
    _SEQ.pop(name, None)


def _discover() -> None:
    """Import the modules of vlgap.captions that register metrics (those that call caption_metric)."""
    global _DISCOVERED
    if _DISCOVERED:
        return
    _DISCOVERED = True
    import importlib

    for path in sorted(Path(__file__).parent.glob("*.py")):
        if path.stem in ("registry", "__init__"):
            continue
        if "@caption_metric(" in path.read_text(encoding="utf-8"):
            importlib.import_module(f"vlgap.captions.{path.stem}")


def caption_metrics() -> list[CaptionMetric]:
    """Every registered metric, in listing order."""
    _discover()
    return sorted(_REGISTRY.values(), key=lambda m: (m.order, _SEQ[m.name]))


def metric_names(*, default: bool | None = None) -> list[str]:
    return [m.name for m in caption_metrics() if default is None or m.default == default]


def get_metric(name: str) -> CaptionMetric:
    _discover()
    return _REGISTRY[name]


def score_range(key: str) -> ScoreRange:
    """The declared range of a score key ("BLEU-4", "CIDEr", ...): its metric's `score_range`; unbounded for
    a key no registered metric writes."""
    for m in caption_metrics():
        if key in m.keys:
            return m.score_range
    return UNBOUNDED


def choices() -> str:
    """The registered names with their aliases, for one-line messages: "bleu (bleu-4), meteor, ..."."""
    return ", ".join(m.name + (f" ({', '.join(m.aliases)})" if m.aliases else "") for m in caption_metrics())


def parse_metrics(metrics: Sequence[str] | str | None) -> tuple[list[str], bool]:
    """--metrics names or aliases -> (canonical names in the order asked, explicitly named?); None means
    the default metrics."""
    registered = caption_metrics()
    if metrics is None:
        return [m.name for m in registered if m.default], False
    if isinstance(metrics, str):
        metrics = [m for m in metrics.split(",") if m.strip()]
    lookup = {normalise(s): m.name for m in registered for s in (m.name, *m.aliases)}
    wanted = [normalise(m) for m in metrics]
    unknown = [m for m in wanted if m not in lookup]
    if unknown:
        raise VlgapError(f"unknown metric(s) {', '.join(unknown)}: choose from {choices()}")
    if not wanted:
        raise VlgapError(f"no metric requested: choose from {choices()}")
    return list(dict.fromkeys(lookup[m] for m in wanted)), True


def metrics_help() -> str:
    """--metrics help: the default metrics, the ones scored only when named, and the aliases."""
    registered = caption_metrics()
    default = [m for m in registered if m.default]
    named = [m for m in registered if not m.default]
    skipped = [f"{m.title} skipped with a note if {NEEDS[n]} is missing" for m in default if m.setup
               for n in m.needs if n == "java"]
    aliases = [f"{a}={m.name}" for m in registered for a in m.aliases]
    text = f"Comma list of {','.join(m.name for m in default)} (default: all"
    text += f"; {'; '.join(skipped)})" if skipped else ")"
    if named:
        text += f" and {','.join(m.name for m in named)} (only when named)"
    return text + (f"; aliases {', '.join(aliases)}." if aliases else ".")


@dataclass
class ScoringSettings:
    """What one evaluation shares between its metrics and systems: the metrics' options (cider_df,
    sacrebleu_options, meteor_jar, ...), resources set up once per evaluation (a METEOR process), and
    the EmbeddingContext of the model-based scores (models and embeddings, kept across systems)."""

    options: dict[str, Any] = field(default_factory=dict)
    resources: dict[str, Any] = field(default_factory=dict)
    embedding_ctx: Any = None

    def resource(self, name: str) -> Any:
        """What metric `name`'s setup returned (run now if it has not run yet)."""
        if name not in self.resources:
            metric = get_metric(name)
            self.resources[name] = metric.setup(self) if metric.setup is not None else None
        return self.resources[name]

    def embedding(self):
        if self.embedding_ctx is None:
            raise VlgapError("the model-based caption scores need an EmbeddingContext (captions.embedding_eval): "
                             "pass embedding_ctx= or score through caption_eval")
        return self.embedding_ctx


def set_up(metrics: list[str], explicit: bool, settings: ScoringSettings, notes: list[str]) -> None:
    """Run each requested metric's setup once; a default metric whose setup fails (Java missing) is left
    out with a note, a named one raises."""
    for name in list(metrics):
        metric = get_metric(name)
        if metric.setup is None or name in settings.resources:
            continue
        try:
            settings.resource(name)
        except VlgapError as err:
            if explicit:
                raise
            metrics.remove(name)
            notes.append(f"{metric.title} skipped: {err}")


class Scoring:
    """One system's scoring pass: the items, the evaluation's settings, and values several metrics
    share, each computed once (PTB tokens, the n-gram index, caption embeddings...)."""

    def __init__(self, data, settings: ScoringSettings, tokenized=None):
        self.data = data
        self.settings = settings
        self._shared: dict[str, Any] = {}
        if tokenized is not None:
            self._shared["tokens"] = tokenized

    def shared(self, key: str, make: Callable[[], Any]) -> Any:
        if key not in self._shared:
            self._shared[key] = make()
        return self._shared[key]

    def option(self, key: str, default: Any = None) -> Any:
        return self.settings.options.get(key, default)

    def resource(self, name: str) -> Any:
        return self.settings.resource(name)

    def embedding(self):
        return self.settings.embedding()

    def tokens(self) -> tuple[list[str], list[list[str]]]:
        """coco-caption's PTB tokens: (predictions, references per item)."""
        return self.shared("tokens", lambda: tokenize_data(self.data))

    def documents(self) -> list[str]:
        """The tokenized references (flattened, in order), then the predictions."""
        def make():
            hyps, refs = self.tokens()
            return [r for rs in refs for r in rs] + hyps
        return self.shared("documents", make)

    def split(self):
        """The documents' tokens (str.split(), numbered), shared by the n-gram index and ROUGE-L."""
        from vlgap.captions.ngrams import split_corpus

        return self.shared("split", lambda: split_corpus(self.documents()))

    def ngram_index(self, n: int = 4):
        """One n-gram index over the tokenized references and predictions (BLEU and CIDEr share it)."""
        from vlgap.captions.ngrams import index_ngrams

        return self.shared(f"ngram index {n}", lambda: index_ngrams(self.documents(), n, split=self.split()))


def tokenize_data(data) -> tuple[list[str], list[list[str]]]:
    """coco-caption tokenisation: references in one pass, predictions in another (as pycocoevalcap)."""
    from vlgap.captions.ptb_tokenize import ptb_tokenize
    from vlgap.memory import collector_paused

    with collector_paused():  # (see there: a list per item, all kept)
        flat = [r for rs in data.references for r in rs]
        tok_refs = ptb_tokenize(flat)
        refs, i = [], 0
        for rs in data.references:
            refs.append(tok_refs[i:i + len(rs)])
            i += len(rs)
        return ptb_tokenize(data.predictions), refs


def mean_table(key: str, per_item: Sequence[float] | np.ndarray, extra: dict[str, Any] | None = None) -> MetricTable:
    """A MetricTable for a score that is the mean of per-item scores (pycocoevalcap's contract:
    corpus = mean(per_item)), e.g. ROUGE-L, CIDEr, CLIPScore."""
    from vlgap.captions.intervals import mean_statistic

    scores = np.asarray(per_item, dtype=float)
    return MetricTable([key], scores[:, None], mean_statistic, [float(np.mean(scores))], {key: scores},
                       dict(extra or {}))


def check_references(data, metrics: Sequence[str]) -> None:
    """Refuse, naming the first item, when a metric that needs references meets an item without any."""
    needing = [m for m in metrics if get_metric(m).references == "required"]
    missing = [str(i) for i, refs in zip(data.ids, data.references) if not refs]
    if needing and missing:
        raise VlgapError(f"{', '.join(needing)} need reference captions: item {missing[0]!r} has none"
                         f"{f' ({len(missing)} items in all)' if len(missing) > 1 else ''}; pass --refs")
