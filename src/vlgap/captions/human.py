"""Agreement of caption scores with human judgments read from a CSV (orchestration over
captions.agreement, which holds the statistics).

Two kinds of file, told apart by their columns (header row required):

    ratings      item, rating, and either caption (the rated text) or system (a system whose
                 prediction for that item was rated: --pred's file stem, or a name given in
                 human_systems). Flickr8k-Expert, Composite and VATEX-Eval come in this form.
    preferences  item, preference, and either caption_a + caption_b or system_a + system_b;
                 preference is a | b | tie (or 1 | -1 | 0). CapArena and Pascal-50S votes.

`item` may also be named image_id, id or video_id. Flickr8k's official ExpertAnnotations.txt and
CrowdFlowerAnnotations.txt are read directly (captions.flickr8k: the CLIPScore paper's protocol, with
the references of Flickr8k.token.txt unless refs are given). Each rated caption is scored like a
prediction for its item (same references, pictures and models), so every per-item score the run
computes gets Kendall tau-b, tau-c, Pearson and Spearman (or the preference agreement rate), with a
bootstrap interval over items.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Sequence

from vlgap.captions.agreement import correlation_agreement, preference_agreement
from vlgap.captions.io import CaptionData, load_predictions, materialise, reference_rows
from vlgap.errors import VlgapError

ITEM_COLUMNS = ("item", "image_id", "id", "video_id")
PREFERENCE_WORDS = {"a": 1.0, "b": -1.0, "tie": 0.0, "1": 1.0, "-1": -1.0, "0": 0.0}


def read_judgments(path: str | Path) -> tuple[str, list[dict[str, str]], str]:
    """(kind, rows, item column) of a judgments CSV; kind is 'ratings' or 'preferences'."""

    path = Path(path)
    from vlgap.csv_files import read_csv  # a row with more fields than the header is refused by line

    columns, rows = read_csv(path, "human judgments")
    item_col = next((c for c in ITEM_COLUMNS if c in columns), None)
    if item_col is None:
        raise VlgapError(f"{path}: no item column; the header needs one of {', '.join(ITEM_COLUMNS)}")
    if "rating" in columns and ("caption" in columns or "system" in columns):
        kind = "ratings"
    elif "preference" in columns and ({"caption_a", "caption_b"} <= set(columns) or {"system_a", "system_b"} <= set(columns)):
        kind = "preferences"
    else:
        raise VlgapError(f"{path}: columns {columns} are neither ratings (item, rating, caption or system) nor "
                         "preferences (item, preference, caption_a + caption_b or system_a + system_b)")
    if not rows:
        raise VlgapError(f"{path}: no judgment rows under the header")
    return kind, rows, item_col


def _caption_for(row: dict[str, str], side: str, systems: dict[str, dict[str, str]], item: str, where: str) -> str:
    cap_col, sys_col = (f"caption{side}", f"system{side}")
    if row.get(cap_col):
        return row[cap_col]
    name = row.get(sys_col, "")
    if name not in systems:
        raise VlgapError(f"{where} (item {item!r}): system {name!r} is not known; known systems: "
                         f"{', '.join(systems)} (add one with --human-pred NAME=FILE)")
    caption = systems[name].get(item)
    if caption is None:
        raise VlgapError(f"{where}: system {name!r} has no prediction for item {item!r}")
    return caption


def human_agreement(human: Any, systems: dict[str, Any], refs: Any, metrics: Sequence[str], ctx,
                    score_rows: Callable[[CaptionData], dict[str, Any]], *, n_bootstrap: int = 1000,
                    seed: int | None = 0, confidence: float = 0.95, on_duplicate: str = "error",
                    on_empty: str = "error") -> dict[str, Any]:
    """Score every judged caption with `score_rows` (rows of CaptionData -> MetricTables, as
    captions.evaluate.score_items) and measure agreement (see the module docstring)."""
    from vlgap.captions.flickr8k import is_flickr8k, read_flickr8k

    protocol: dict[str, Any] = {}
    references: dict[str, list[str]] = {}
    if is_flickr8k(human):  # the official files, read as the CLIPScore paper's protocol does
        rows, flickr_refs, protocol = read_flickr8k(human)
        kind, item_col = "ratings", "item"
        if refs is None:
            references = flickr_refs
    else:
        kind, rows, item_col = read_judgments(human)
    loaded = {}
    for name, pred in systems.items():
        data = load_predictions(pred, on_duplicate=on_duplicate, on_empty=on_empty)
        loaded[name] = {str(i): c for i, c in zip(data.ids, data.predictions)}
    if refs is not None:
        ref_data, src = materialise(refs, "references")
        for item, cap in reference_rows(ref_data, src):
            references.setdefault(str(item), [])
            if cap is not None:
                references[str(item)].append(cap)
    items = [row[item_col] for row in rows]
    if refs is None and ctx.options.videos is not None:
        references = {i: r for i, r in zip(items, ctx.manifest_references(items))}
    from vlgap.captions.registry import get_metric

    needs_refs = [m for m in metrics if get_metric(m).references == "required"]
    if needs_refs:
        unknown = [i for i in items if not references.get(i)]
        if unknown:
            raise VlgapError(f"human judgments {human}: item {unknown[0]!r} has no reference captions, which "
                             f"{', '.join(needs_refs)} need ({len(set(unknown))} such items)")
    where = str(human)

    def scores_of(captions: list[str]) -> dict[str, Any]:
        data = CaptionData(ids=list(items), predictions=captions, references=[references.get(i, []) for i in items])
        tables = score_rows(data)
        return {name: values for t in tables.values() for name, values in t.per_item.items()}

    if kind == "ratings":
        captions = [_caption_for(r, "", loaded, r[item_col], f"{where}, row {n + 2}") for n, r in enumerate(rows)]
        try:
            ratings = [float(r["rating"]) for r in rows]
        except ValueError:
            bad = next(n for n, r in enumerate(rows) if not _is_number(r["rating"]))
            raise VlgapError(f"{where}, row {bad + 2} (item {items[bad]!r}): rating {rows[bad]['rating']!r} is not "
                             "a number") from None
        per_metric = scores_of(captions)
        agreement = metric_agreement(per_metric, ratings, items, n_bootstrap=n_bootstrap, seed=seed,
                                     confidence=confidence)
        return {"human_agreement": {"file": where, "kind": "ratings", "n_rows": len(rows),
                                    "n_items": len(set(items)), "unit": "items (all captions of an item together)",
                                    "interval": "percentile bootstrap", **protocol, "metrics": agreement}}
    side_a = [_caption_for(r, "_a", loaded, r[item_col], f"{where}, row {n + 2}") for n, r in enumerate(rows)]
    side_b = [_caption_for(r, "_b", loaded, r[item_col], f"{where}, row {n + 2}") for n, r in enumerate(rows)]
    votes = []
    for n, r in enumerate(rows):
        word = r["preference"].lower()
        if word not in PREFERENCE_WORDS:
            raise VlgapError(f"{where}, row {n + 2} (item {items[n]!r}): preference {r['preference']!r} is not "
                             "a, b, tie (or 1, -1, 0)")
        votes.append(PREFERENCE_WORDS[word])
    scores_a, scores_b = scores_of(side_a), scores_of(side_b)
    out = {name: preference_agreement(scores_a[name], scores_b[name], votes, items, n_bootstrap=n_bootstrap,
                                      seed=seed, confidence=confidence) for name in scores_a}
    return {"preference_agreement": {"file": where, "n_rows": len(rows), "n_items": len(set(items)),
                                     "metric_ties": "count 1/2", "interval": "percentile bootstrap over items",
                                     "metrics": out}}


def _is_number(text: str) -> bool:
    try:
        float(text)
        return True
    except ValueError:
        return False


def metric_agreement(metric_scores: dict[str, Sequence[float]] | Sequence[float], human_ratings: Sequence[float],
                     items: Sequence[Any] | None = None, *, n_bootstrap: int = 1000, confidence: float = 0.95,
                     seed: int | None = 0) -> dict[str, Any]:
    """Kendall tau-b and tau-c, Pearson and Spearman of each metric's scores with human ratings.

    metric_scores: {metric name: one score per rated caption} (or one list); human_ratings: one
    rating per caption; items: the item each caption belongs to (the bootstrap resamples items;
    None: every caption its own item). Returns {metric: {"kendall_tau_b": {"value", "ci"}, ...}}."""
    if not isinstance(metric_scores, dict):
        metric_scores = {"metric": metric_scores}
    items = list(range(len(human_ratings))) if items is None else list(items)
    return {name: correlation_agreement(values, human_ratings, items, n_bootstrap=n_bootstrap,
                                        confidence=confidence, seed=seed)
            for name, values in metric_scores.items()}
