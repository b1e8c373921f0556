"""caption_eval: coco-caption metrics on predictions vs references, with N and bootstrap intervals.

The flow: read and validate inputs (captions.io) -> tokenise like coco-caption (ptb_tokenize) ->
per-item sufficient statistics for each metric -> point estimates identical to pycocoevalcap 1.2
(BLEU-1..4, METEOR, ROUGE-L, CIDEr) and sacrebleu's corpus BLEU -> optional bootstrap intervals
over items that recompute each corpus statistic per replicate (captions.intervals).
`compare_captions` runs the same for two systems on the same items and reports the paired
difference with a paired-bootstrap interval and an approximate-randomisation p-value.

Scores keep coco-caption's scale (fractions: BLEU-4 0.25, CIDEr 1.29); SacreBLEU keeps its 0-100
scale and carries its signature.
"""
from __future__ import annotations

import csv
import io as _io
import os
from contextlib import nullcontext
from pathlib import Path
from typing import Any, Sequence

from vlgap.captions.cider import CIDER_VARIANT, DocumentFrequencies  # noqa: F401 (CIDER_VARIANT: re-export)
from vlgap.captions.intervals import PAIRED_DISAGREEMENT_WHY, paired_difference, sum_statistic_intervals
from vlgap.stats.bounds import keep_in_range
from vlgap.stats.resampling import disagreement_note
from vlgap.captions.io import CaptionData, materialise, reference_rows, load_captions
from vlgap.captions.ptb_tokenize import ptb_tokenize
from vlgap.captions.registry import (Scoring, ScoringSettings, caption_metrics, check_references, get_metric,
                                     parse_metrics, set_up, tokenize_data)  # noqa: F401 (tokenize_data: re-export)
from vlgap.captions.tables import MetricTable
from vlgap.caveats import reports_caveats
from vlgap.errors import VlgapError
from vlgap.keywords import renamed_keywords
from vlgap.memory import collector_paused

TOKENIZER = "PTBTokenizer (stanford-corenlp 3.4.1, -lowerCase, coco-caption punctuation removed), pure Python"
_parse_metrics = parse_metrics  # the name other modules used


def __getattr__(name: str):
    """METRICS (the default ones), MODEL_METRICS and ALL_METRICS, as they were: read from the registry."""
    if name == "METRICS":
        return tuple(m.name for m in caption_metrics() if m.default)
    if name == "MODEL_METRICS":
        return tuple(m.name for m in caption_metrics() if not m.default)
    if name == "ALL_METRICS":
        return tuple(m.name for m in caption_metrics())
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _text_metrics(metrics: Sequence[str]) -> list[str]:
    return [m for m in metrics if get_metric(m).kind == "text"]


def _frozen_df(cider_df: Any) -> DocumentFrequencies | None:
    """None for "corpus" (coco-caption's: the document frequencies of the references scored), else frozen
    document frequencies: given, or counted from references (a path or data) of at least 2 items."""
    if cider_df is None or (isinstance(cider_df, str) and cider_df == "corpus"):
        return None
    if isinstance(cider_df, DocumentFrequencies):
        df = cider_df
    else:
        df = _count_df(cider_df)
    if df.n_documents < 2:
        raise VlgapError(f"cider_df: document frequencies from {df.n_documents} item would give every n-gram idf "
                         "log(1 / 1) = 0 and CIDEr 0 for every caption; freeze them from the references of at least "
                         "2 items (coco-caption: the whole test set), or use 'corpus'")
    return df


def _count_df(cider_df: Any) -> DocumentFrequencies:
    if isinstance(cider_df, (str, os.PathLike)) and not Path(cider_df).expanduser().is_file():
        raise VlgapError(f"cider_df={str(cider_df)!r}: neither 'corpus' (coco-caption's default: the document "
                         "frequencies of the references scored) nor an existing file of references (coco "
                         "annotations JSON or JSONL) to freeze them from")
    if isinstance(cider_df, (bool, int, float)):
        raise VlgapError(f"cider_df={cider_df!r}: use 'corpus', references (a path or data) to freeze document "
                         "frequencies from, or a DocumentFrequencies")
    data, source = materialise(cider_df, "references for CIDEr document frequencies")
    grouped: dict[str, list[str]] = {}
    for item, cap in reference_rows(data, source):
        if cap is not None:
            grouped.setdefault(str(item), []).append(cap)
    flat = [c for caps in grouped.values() for c in caps]
    tokens = ptb_tokenize(flat)
    out, i = [], 0
    for caps in grouped.values():
        out.append(tokens[i:i + len(caps)])
        i += len(caps)
    return DocumentFrequencies.from_references(out)


def score_items(data: CaptionData, metrics: Sequence[str], *, cider_df: DocumentFrequencies | None = None,
                meteor=None, sacrebleu_options: dict | None = None,
                tokenized: tuple[list[str], list[list[str]]] | None = None,
                embedding_ctx=None, settings: ScoringSettings | None = None) -> dict[str, MetricTable]:
    """Per-item statistics and exact corpus scores of each requested metric (registered names, see
    captions.registry) for one system. Model-based scores (CLIPScore, EMScore, BERTScore...) read the
    models and caches of embedding_ctx (captions.embedding_eval.EmbeddingContext; a default one if None).
    settings (a registry.ScoringSettings) replaces cider_df, meteor, sacrebleu_options and embedding_ctx."""
    from vlgap.progress import step

    if settings is None:
        settings = ScoringSettings(options={"cider_df": cider_df, "sacrebleu_options": sacrebleu_options},
                                   resources={} if meteor is None else {"meteor": meteor},
                                   embedding_ctx=embedding_ctx)
    check_references(data, metrics)
    if settings.embedding_ctx is None and any(get_metric(m).kind == "model" for m in metrics):
        from vlgap.captions.embedding_eval import EmbeddingContext, EmbeddingOptions

        settings.embedding_ctx = EmbeddingContext(EmbeddingOptions())
    s = Scoring(data, settings, tokenized=tokenized)
    out: dict[str, MetricTable] = {}
    # text scores: about 2-4 ms per item on a CPU: say what is happening when it takes seconds (COCO val: 5000)
    for kind in ("text", "model"):
        group = [m for m in metrics if get_metric(m).kind == kind]
        if group:
            with step(f"scoring {len(data)} captions ({', '.join(group)})", enabled=len(data) >= LOUD_ITEMS), \
                    (collector_paused() if kind == "text" else nullcontext()):
                out.update(_score_group(s, group) if kind == "text" else ((m, get_metric(m).compute(s)) for m in group))
            if kind == "text":
                _say_wordless(data.ids, data.predictions)
    return {m: out[m] for m in metrics if m in out}


def _say_wordless(ids: Sequence[Any], predictions: Sequence[str]) -> None:
    """Predictions without a letter or digit (punctuation or symbols only: "!!!", "...") are scored as
    pycocoevalcap scores them (its tokeniser drops some punctuation and keeps "!!!" as a token): kept,
    for parity, and said in one warning naming the items."""
    empty = [str(ids[i]) for i, t in enumerate(predictions) if not any(ch.isalnum() for ch in t)]
    if empty:
        from vlgap.caveats import caveat

        shown = ", ".join(repr(e) for e in empty[:5]) + (f" and {len(empty) - 5} more" if len(empty) > 5 else "")
        caveat(f"{len(empty)} of {len(predictions)} predictions have no words (punctuation or symbols only): items "
               f"{shown}; they are scored as pycocoevalcap scores them, which says nothing about a caption")


LOUD_ITEMS = 1000  # inputs at least this large say on stderr what is being scored
CONCURRENT_ITEMS = 1000  # from this many items, `concurrent` text metrics run in a worker thread


def _score_group(s: Scoring, group: list[str]) -> dict[str, MetricTable]:
    """The text metrics of one system; those registered `concurrent` (ROUGE-L) in a worker thread
    while the others (BLEU, CIDEr: numpy, which lets the worker run meanwhile) score in this one, where
    there are both, enough items and more than one CPU. What the worker reads (tokens, split) is made
    first; the values do not depend on it."""
    from vlgap.runs.claims import available_cores

    aside = [m for m in group if get_metric(m).concurrent]
    if not aside or len(aside) == len(group) or len(s.data) < CONCURRENT_ITEMS or available_cores() < 2:
        return {m: get_metric(m).compute(s) for m in group}
    from concurrent.futures import ThreadPoolExecutor

    s.split()
    with ThreadPoolExecutor(1, thread_name_prefix="vlgap-text-metric") as pool:
        futures = {m: pool.submit(get_metric(m).compute, s) for m in aside}
        out = {m: get_metric(m).compute(s) for m in group if m not in futures}
        out.update((m, f.result()) for m, f in futures.items())
    return out


#: pycocoevalcap's names (COCOEvalCap.eval) -> ours; METEOR and CIDEr are spelled alike
COCO_NAMES = {"Bleu_1": "BLEU-1", "Bleu_2": "BLEU-2", "Bleu_3": "BLEU-3", "Bleu_4": "BLEU-4", "METEOR": "METEOR",
              "ROUGE_L": "ROUGE-L", "CIDEr": "CIDEr"}
_ALIASES = {**{k: v for k, v in COCO_NAMES.items() if k != v}, "CIDEr-D": "CIDEr"}


class CaptionScores(dict):
    """caption_eval's result: the JSON-ready dict (keys "BLEU-4", "ROUGE-L", "CIDEr", ...), which also
    answers to pycocoevalcap's key names (`scores["Bleu_4"]`, `scores["ROUGE_L"]`, and "CIDEr-D" for
    "CIDEr") without repeating them in the JSON; `coco()` is pycocoevalcap's flat {name: score}
    dict, `to_frame()` a DataFrame."""

    def _key(self, key: Any) -> Any:
        return _ALIASES.get(key, key) if not dict.__contains__(self, key) else key

    def __getitem__(self, key: Any) -> Any:
        return dict.__getitem__(self, self._key(key))

    def __contains__(self, key: Any) -> bool:
        return dict.__contains__(self, self._key(key))

    def get(self, key: Any, default: Any = None) -> Any:
        return dict.get(self, self._key(key), default)

    def metrics(self) -> list[str]:
        """Names of the score entries (e.g. BLEU-1..BLEU-4, METEOR, ROUGE-L, CIDEr), in order."""
        return [k for k, v in self.items() if isinstance(v, dict) and ("score" in v or "difference" in v)]

    def coco(self) -> dict[str, float]:
        """The scores under pycocoevalcap's names, as `COCOEvalCap.eval` holds them: {"Bleu_1": ..,
        "Bleu_4": .., "METEOR": .., "ROUGE_L": .., "CIDEr": ..} (those computed)."""
        return {coco: dict.__getitem__(self, ours)["score"] for coco, ours in COCO_NAMES.items()
                if dict.__contains__(self, ours) and "score" in dict.__getitem__(self, ours)}

    def to_frame(self, per_item: bool = False):
        """pandas DataFrame. Default: one row per metric (metric, coco_name, score, ci_low, ci_high, n,
        confidence). per_item=True: one row per item and metric (id, metric, score), from a result of
        caption_eval(..., per_item=True)."""
        from vlgap.frames import FLOAT, INT, STRING, interval_bounds, make_frame, require_pandas
        require_pandas(type(self).__name__)

        if per_item:
            if "per_item" not in self:
                raise VlgapError("to_frame(per_item=True) needs per-item scores: call caption_eval(..., per_item=True)")
            rows = [{"id": str(row["id"]), "metric": name, "score": value}
                    for row in self["per_item"] for name, value in row.items() if name != "id"]
            return make_frame(rows, {"id": STRING, "metric": STRING, "score": FLOAT}, "CaptionScores")
        confidence = self.get("interval", {}).get("confidence")
        coco = {ours: theirs for theirs, ours in COCO_NAMES.items()}
        rows = [{"metric": name, "coco_name": coco.get(name), "score": self[name]["score"],
                 **interval_bounds(self[name].get("ci")), "n": self["n"],
                 "confidence": confidence if "ci" in self[name] else None}
                for name in self.metrics()]
        return make_frame(rows, {"metric": STRING, "coco_name": STRING, "score": FLOAT, "ci_low": FLOAT,
                                 "ci_high": FLOAT, "n": INT, "confidence": FLOAT}, "CaptionScores")


class CaptionComparison(CaptionScores):
    """compare_captions' result: the dict, pycocoevalcap's key names as aliases, and `to_frame()`."""

    def coco(self) -> dict[str, float]:
        raise VlgapError("coco() holds one system's scores; a comparison holds two: read result[name][system]")

    def to_frame(self, per_item: bool = False):
        """pandas DataFrame, one row per metric: metric, coco_name, score_a, score_b, difference (A - B),
        ci_low, ci_high (of the difference), p_value, n, confidence; the systems' names in system_a,
        system_b."""
        from vlgap.frames import FLOAT, INT, STRING, interval_bounds, make_frame, require_pandas
        require_pandas(type(self).__name__)

        if per_item:
            raise VlgapError("a comparison has no per-item scores: run caption_eval(..., per_item=True) per system")
        a, b = self["systems"]
        coco = {ours: theirs for theirs, ours in COCO_NAMES.items()}
        rows = [{"metric": name, "coco_name": coco.get(name), "system_a": a, "system_b": b,
                 "score_a": self[name][a], "score_b": self[name][b], "difference": self[name]["difference"],
                 **interval_bounds(self[name]["ci"]), "p_value": self[name]["p_value"], "n": self["n"],
                 "confidence": self["interval"]["confidence"]}
                for name in self.metrics()]
        return make_frame(rows, {"metric": STRING, "coco_name": STRING, "system_a": STRING, "system_b": STRING,
                                 "score_a": FLOAT, "score_b": FLOAT, "difference": FLOAT, "ci_low": FLOAT,
                                 "ci_high": FLOAT, "p_value": FLOAT, "n": INT, "confidence": FLOAT},
                          "CaptionComparison")


def _settings(metrics: list[str], explicit: bool, notes: list[str], ctx, **options: Any) -> ScoringSettings:
    """One evaluation's settings; each requested metric set up once (a default one that cannot be, such
    as METEOR without Java, is left out of `metrics` with a note)."""
    settings = ScoringSettings(options=options, embedding_ctx=ctx)
    set_up(metrics, explicit, settings, notes)
    return settings


def _embedding_context(metrics: list[str], model_options: dict[str, Any]):
    from vlgap.captions.embedding_eval import EmbeddingContext, EmbeddingOptions

    unknown = sorted(set(model_options) - set(EmbeddingOptions.__dataclass_fields__))
    if unknown:
        raise VlgapError(f"unknown option(s) {', '.join(unknown)} for the model-based caption scores")
    return EmbeddingContext(EmbeddingOptions(**model_options))


def _load_data(pred: Any, refs: Any, metrics: list[str], ctx, *, on_missing: str, on_duplicate: str,
               on_empty: str) -> CaptionData:
    """Predictions with references; without --refs only reference-free scores run, and a video
    manifest's own captions serve as references where they exist."""
    if refs is not None:
        return load_captions(pred, refs, on_missing=on_missing, on_duplicate=on_duplicate, on_empty=on_empty)
    need = [m for m in metrics if get_metric(m).references == "required" and not get_metric(m).manifest_references]
    if need:
        free = [m.name for m in caption_metrics() if m.references != "required"]
        raise VlgapError(f"{', '.join(need)} compare with references: pass --refs (only {' and '.join(free)} "
                         "need none)")
    from vlgap.captions.io import load_predictions

    data = load_predictions(pred, on_duplicate=on_duplicate, on_empty=on_empty)
    if ctx.options.videos is not None and any(get_metric(m).manifest_references for m in metrics):
        data.references = ctx.manifest_references(data.ids)
        if any(data.references):
            data.report["references"] = f"captions of the video manifest {ctx.options.videos}"
    return data


def _ranged(iv, bounds, method: str, name: str) -> dict[str, Any]:
    """{"ci", "ci_reason"?, "ci_note"?} of one score's interval, kept inside its metric's declared range. Percentile
    and BCa intervals of a corpus statistic are quantiles of the statistic recomputed on resamples, so they lie
    inside by construction; the guard says so if one ever would not (vlgap.stats.bounds)."""
    if iv.ci is None:  # below the small-n rule's minimum, or degenerate: the reason says which
        return {"ci": None, "ci_reason": iv.reason}
    kept = keep_in_range(iv.low, iv.high, bounds, method=method, label=name)
    if kept.withheld:
        return {"ci": None, "ci_reason": kept.note}
    return {"ci": kept.ci, **({"ci_note": kept.note} if kept.note else {})}


@reports_caveats
@renamed_keywords(bootstrap="n_bootstrap", method="ci_method")
def caption_eval(pred: Any, refs: Any = None, metrics: Sequence[str] | str | None = None, *, n_bootstrap: int = 0,
                 seed: int | None = 0, confidence: float = 0.95, ci_method: str = "bca",
                 cider_df: Any = "corpus", meteor_jar: str | os.PathLike | None = None,
                 meteor_timeout: float = 120.0, sacrebleu_options: dict | None = None,
                 on_missing: str = "error", on_duplicate: str = "error", on_empty: str = "error",
                 per_item: bool = False, human: Any = None, human_systems: dict[str, Any] | None = None,
                 **model_options: Any) -> CaptionScores:
    """Caption metrics of predictions against references, coco-caption's numbers plus intervals.

    pred, refs: (pred None: only the captions of `human` are scored) paths (coco JSON or JSONL) or in-memory data (see vlgap.captions.io): id-keyed
        (coco results and annotations, JSONL rows, dicts) or list-aligned as `evaluate` and torchmetrics
        take them (`pred: list[str]`, `refs: list[list[str]]` or `list[str]`, pandas Series / columns).
    metrics: names or aliases of registered metrics (captions.registry; a list or "a,b"); None means the
        default ones, "bleu", "meteor", "rouge", "cider", "sacrebleu", with METEOR left out (and said so
        in "notes") when Java or its jar is missing.
    n_bootstrap: number of bootstrap resamples over items (0: no intervals); seed makes them
        reproducible; ci_method "bca" or "percentile".
    cider_df: "corpus" (coco-caption: document frequencies of these references), a
        DocumentFrequencies, or references (path or data) to freeze them from.
    on_missing / on_duplicate / on_empty: input policies, see vlgap.captions.io.
    per_item: also return one row of per-item scores per item.
    Model-based scores, asked for by name: "clipscore", "refclipscore", "emscore" (pictures: images=DIR
    [image_pattern, see captions.pictures] or videos=manifest.jsonl, and `clip="hf:<id or folder>"` or `"pacs:<file.pth>"`; clip_convention
    "official" | "transformers" | "torchmetrics", clip_w, clip_prefix, truncate, n_frames (a frame rule:
    "all" | "int-linspace:N" | "rint-linspace:N"), emscore_convention "official" | "content-tokens",
    emscore_idf (None: the convention's, on for official; False: EMScorer.score(idf=False)) and "bertscore"
    (bertscore_model="minilm", bertscore_layer, idf, bertscore_baseline); refs may then be None for
    the reference-free ones. See captions.embedding_eval.EmbeddingOptions.
    human: a CSV of human judgments (see captions.human): adds "human_agreement" (Kendall tau-b and
    tau-c, Pearson, Spearman per score) or "preference_agreement"; human_systems names further
    systems' predictions {name: path or data} that the CSV's `system` column refers to.
    Returns a CaptionScores, a JSON-ready dict: "n", one entry per score ("BLEU-1".."BLEU-4", "METEOR",
    "ROUGE-L", "CIDEr" (CIDEr-D, as coco-caption's; its entry says so in "variant"), "SacreBLEU",
    "CLIPScore", "RefCLIPScore", "EMScore", "BERTScore-P/R/F1") holding "score" and, when bootstrapped,
    "ci"; plus provenance. pycocoevalcap's names also work as keys (`Bleu_4`, `ROUGE_L`, `CIDEr-D`);
    `.coco()` gives pycocoevalcap's flat dict, `.to_frame()` a DataFrame.
    """
    wanted, explicit = _parse_metrics(metrics)
    ctx = _embedding_context(wanted, model_options)
    if pred is None:  # only the captions of a human-judgment file are scored
        if human is None:
            raise VlgapError("pass the predictions to score (--pred), or a human-judgment file (--human) whose "
                             "rated captions are scored")
        data = CaptionData(ids=[], predictions=[], references=[])
    else:
        data = _load_data(pred, refs, wanted, ctx, on_missing=on_missing, on_duplicate=on_duplicate,
                          on_empty=on_empty)
    notes: list[str] = []
    df = _frozen_df(cider_df)
    settings = _settings(wanted, explicit, notes, ctx, cider_df=df, sacrebleu_options=sacrebleu_options,
                         meteor_jar=meteor_jar, meteor_timeout=meteor_timeout)
    tables = score_items(data, wanted, settings=settings) if pred is not None else {}
    result = CaptionScores(n=len(data))
    for metric, table in tables.items():
        intervals = None
        if n_bootstrap:
            intervals = sum_statistic_intervals(table.stats, table.statistic, n_bootstrap=n_bootstrap,
                                                confidence=confidence, ci_method=ci_method, seed=seed)
        for j, name in enumerate(table.names):
            entry: dict[str, Any] = {"score": table.estimates[j]}
            if intervals is not None:
                entry.update(_ranged(intervals[j], get_metric(metric).score_range, f"{ci_method} bootstrap", name))
            entry.update(table.extra)
            result[name] = entry
    if n_bootstrap:
        result["interval"] = {"confidence": confidence, "method": ci_method, "n_resamples": int(n_bootstrap),
                              "seed": seed, "unit": "items"}
    if _text_metrics(wanted):
        result["tokenizer"] = TOKENIZER
    if human is not None:
        from vlgap.captions.human import human_agreement

        systems = {**({_system_name(pred): pred} if pred is not None else {}), **(human_systems or {})}
        rated = ScoringSettings(options={**settings.options, "sacrebleu_options": None},
                                resources=settings.resources, embedding_ctx=ctx)
        if df is None and refs is not None and "cider" in wanted:
            # rated captions repeat items: document frequencies come from the references
            rated.options["cider_df"] = _frozen_df(refs)

        def score_rows(rows: CaptionData) -> dict[str, MetricTable]:
            return score_items(rows, wanted, settings=rated)

        result.update(human_agreement(human, systems, refs, wanted, ctx, score_rows, n_bootstrap=n_bootstrap or 1000,
                                      seed=seed, confidence=confidence, on_duplicate=on_duplicate,
                                      on_empty=on_empty))
    if "cider" in tables and n_bootstrap:
        notes.append("CIDEr intervals resample items with document frequencies fixed at the full reference set")
    if notes:
        result["notes"] = notes
    if data.report:
        result["input"] = data.report
    if per_item:
        result["per_item"] = per_item_rows(data, tables)
    return result


def _system_name(pred: Any) -> str:
    return Path(pred).stem if isinstance(pred, (str, os.PathLike)) else "pred"


def per_item_rows(data: CaptionData, tables: dict[str, MetricTable]) -> list[dict[str, Any]]:
    names = [name for t in tables.values() for name in t.per_item]
    rows = []
    for i, item in enumerate(data.ids):
        row: dict[str, Any] = {"id": item}
        for t in tables.values():
            for name, values in t.per_item.items():
                row[name] = float(values[i])
        rows.append(row)
    return rows if names else [{"id": item} for item in data.ids]


def per_item_csv(rows: list[dict[str, Any]]) -> str:
    """Per-item scores as CSV text (columns: id, then one per score)."""
    if not rows:
        return "id\n"
    buf = _io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(rows[0].keys()), lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return buf.getvalue()


@reports_caveats
@renamed_keywords(bootstrap="n_bootstrap", permutations="n_permutations", method="ci_method")
def compare_captions(pred_a: Any, pred_b: Any, refs: Any, metrics: Sequence[str] | str | None = None, *,
                     n_bootstrap: int = 1000, n_permutations: int = 10000, seed: int | None = 0,
                     confidence: float = 0.95, ci_method: str = "bca", cider_df: Any = "corpus",
                     meteor_jar: str | os.PathLike | None = None, meteor_timeout: float = 120.0,
                     names: tuple[str, str] = ("A", "B"), on_missing: str = "error",
                     on_duplicate: str = "error", on_empty: str = "error", **model_options: Any) -> dict[str, Any]:
    """Paired comparison of two systems on the same items: for each score, A, B, A - B with a
    paired-bootstrap interval and a two-sided approximate-randomisation p-value."""
    wanted, explicit = _parse_metrics(metrics)
    ctx = _embedding_context(wanted, model_options)  # one context: pictures are embedded once for both
    policies = dict(on_missing=on_missing, on_duplicate=on_duplicate, on_empty=on_empty)
    data_a = _load_data(pred_a, refs, wanted, ctx, **policies)
    data_b = _load_data(pred_b, refs, wanted, ctx, **policies)
    keys_a = [str(i) for i in data_a.ids]
    keys_b = [str(i) for i in data_b.ids]
    if keys_a != keys_b:
        only_a = sorted(set(keys_a) - set(keys_b))
        only_b = sorted(set(keys_b) - set(keys_a))
        raise VlgapError(f"systems must be compared on the same items: {len(only_a)} only in {names[0]} "
                         f"({', '.join(only_a[:5])}), {len(only_b)} only in {names[1]} ({', '.join(only_b[:5])})")
    notes: list[str] = []
    settings = _settings(wanted, explicit, notes, ctx, cider_df=_frozen_df(cider_df), meteor_jar=meteor_jar,
                         meteor_timeout=meteor_timeout)
    tables_a = score_items(data_a, wanted, settings=settings)
    tables_b = score_items(data_b, wanted, settings=settings)
    result = CaptionComparison(n=len(data_a), systems=list(names))
    for key, ta in tables_a.items():
        tb = tables_b[key]
        pairs = paired_difference(ta.stats, tb.stats, ta.statistic, n_bootstrap=n_bootstrap,
                                  n_permutations=n_permutations, confidence=confidence, ci_method=ci_method, seed=seed)
        for j, name in enumerate(ta.names):
            interval, test = pairs[j]
            entry = {names[0]: ta.estimates[j], names[1]: tb.estimates[j],
                     "difference": ta.estimates[j] - tb.estimates[j], "ci": interval.ci,
                     "p_value": test.p_value}
            if interval.reason is not None:
                entry["ci_reason"] = interval.reason
            note = disagreement_note(interval.ci, test.p_value, 1.0 - confidence, PAIRED_DISAGREEMENT_WHY)
            if note is not None:
                entry["note"] = note
            entry.update(ta.extra)
            result[name] = entry
    result["interval"] = {"confidence": confidence, "method": ci_method, "n_resamples": int(n_bootstrap),
                          "n_permutations": int(n_permutations), "seed": seed, "unit": "items",
                          "test": "approximate randomisation (swap the systems' outputs per item), two-sided"}
    if _text_metrics(wanted):
        result["tokenizer"] = TOKENIZER
    if notes:
        result["notes"] = notes
    return result
