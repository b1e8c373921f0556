"""Read and validate captioning predictions and references (coco-caption JSON, JSONL, or in memory).

Predictions: a coco results list `[{"image_id": ..., "caption": ...}]`, JSONL rows `{"id", "caption"}`,
or a dict `{id: caption}`. References: a coco annotations file `{"annotations": [{"image_id",
"caption"}, ...]}`, JSONL rows `{"id", "captions": [...]}` (or one `{"id", "caption"}` row per
reference), or a dict `{id: [captions]}`. Ids match by their string form, so 1 and "1" are one item.

List-aligned, as Hugging Face `evaluate`, torchmetrics and aac-metrics take them: predictions a list
of captions and references a list of reference lists (or of single captions), item i being
predictions[i] with references[i] (ids 0..n-1; the lengths must agree). A pandas Series counts as
id-keyed by its index (so two columns of one DataFrame align by row), a numpy array of strings as a
list, and a DataFrame as its rows (columns id/image_id and caption/captions).

Nothing is dropped silently. By default every problem raises VlgapError naming the ids and what
would be valid; the policies below instead resolve a problem and record it in `report`:
  on_missing   = "error" | "drop"   ids with a prediction but no reference, or the reverse
  on_duplicate = "error" | "first"  several predictions for one id (keep the first)
  on_empty     = "error" | "keep"   empty or whitespace-only captions (scored as empty strings)
Text that is not valid UTF-8 (or holds unpaired surrogates) is always an error.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from itertools import chain
from pathlib import Path
from typing import Any, Iterable

from vlgap.errors import VlgapError

Policy = str
_SHOW = 5  # ids quoted in a message

PREDICTION_FORMS = ("accepted predictions: a list of captions (list-aligned with the references), a pandas "
                    "Series or DataFrame column, a dict {id: caption}, coco results [{'image_id', 'caption'}], "
                    "JSONL rows {'id', 'caption'}, or a path to such a .json/.jsonl file")
REFERENCE_FORMS = ("accepted references: a list of reference lists or of captions (list-aligned with the "
                   "predictions), a pandas Series or DataFrame column, a dict {id: [captions]}, coco annotations "
                   "{'annotations': [{'image_id', 'caption'}]}, JSONL rows {'id', 'captions'}, or a path to such a file")


@dataclass
class CaptionData:
    """Aligned evaluation items: ids[i] has predictions[i] and references[i]."""

    ids: list[Any]
    predictions: list[str]
    references: list[list[str]]
    report: dict[str, Any] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.ids)


def _ids(items: Iterable[Any]) -> str:
    items = list(items)
    shown = ", ".join(repr(i) for i in items[:_SHOW])
    return shown + (f" and {len(items) - _SHOW} more" if len(items) > _SHOW else "")


def _read_text(path: Path) -> str:
    from vlgap.paths import read_text_utf8  # the one reader: a folder, a missing file, non-UTF-8 bytes

    return read_text_utf8(path)


def _load_path(path: str | os.PathLike) -> Any:
    from vlgap.json_files import parse_json  # the one parser: syntax errors and nesting depth

    path = Path(path)
    text = _read_text(path)
    if path.suffix.lower() in (".jsonl", ".ndjson"):
        rows = []
        for n, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            rows.append(parse_json(line, f"{path}, line {n}", hint="; JSONL needs one object per line"))
        return rows
    return parse_json(text, str(path))


def _row_id(row: dict, where: str) -> Any:
    for key in ("image_id", "id", "video_id"):
        if key in row:
            return row[key]
    raise VlgapError(f"{where}: no id field; each row needs 'image_id' or 'id'")


def _plain_items(data: Any, kind: type) -> tuple[dict[str, Any], list] | None:
    """({str(id): id}, values) of an id-keyed dict whose values are all non-empty lists of non-blank
    strings (kind list) or all non-blank strings (kind str), with distinct str(id)s and no unpaired
    surrogate: the common input, checked with a few whole-input operations. None for anything else
    (the row-by-row reading then checks it and reports what is wrong)."""
    if not isinstance(data, dict) or "annotations" in data:
        return None
    values = list(data.values())
    if kind is list:
        if not all(v.__class__ is list and v for v in values):
            return None
        texts = list(chain.from_iterable(values))
    else:
        texts = values
    if set(map(type, texts)) != {str} or not all(map(str.strip, texts)):
        return None
    try:
        "".join(texts).encode("utf-8")  # (fails on a surrogate, as _check_text's search)
    except UnicodeEncodeError:
        return None
    ids = dict(zip(map(str, data), data))
    return (ids, values) if len(ids) == len(values) else None


def _check_text(value: Any, item: Any, what: str) -> str:
    if not isinstance(value, str):
        raise VlgapError(f"item {item!r}: {what} is {type(value).__name__}, expected a string")
    if not value.isascii() and _SURROGATE.search(value) is not None:  # (what UTF-8 cannot encode)
        raise VlgapError(f"item {item!r}: {what} holds undecodable text (an unpaired surrogate); "
                         "fix the encoding of the source")
    return value


_SURROGATE = re.compile("[\ud800-\udfff]")


def _prediction_rows(data: Any, source: str) -> list[tuple[Any, Any]]:
    if isinstance(data, dict):
        if "annotations" in data:
            data = data["annotations"]
        else:
            out = []
            for k, v in data.items():
                if isinstance(v, list):
                    if len(v) != 1:
                        out.extend((k, x) for x in v)  # several predictions: the duplicate policy decides
                        continue
                    v = v[0]
                out.append((k, v))
            return out
    if not isinstance(data, list):
        raise VlgapError(f"{source}: got {type(data).__name__}; {PREDICTION_FORMS}")
    out = []
    for n, row in enumerate(data):
        if not isinstance(row, dict):
            raise VlgapError(f"{source}, row {n}: got {type(row).__name__}, expected an object with an id and a "
                             f"'caption'; {PREDICTION_FORMS}")
        item = _row_id(row, f"{source}, row {n}")
        if "caption" not in row:
            raise VlgapError(f"{source}, row {n} (item {item!r}): no 'caption' field")
        out.append((item, row["caption"]))
    return out


def reference_rows(data: Any, source: str) -> list[tuple[Any, Any]]:
    if isinstance(data, dict) and "annotations" in data:
        data = data["annotations"]
    if isinstance(data, dict):
        out = []
        for k, v in data.items():
            if isinstance(v, str):
                v = [v]
            if not isinstance(v, list):
                raise VlgapError(f"{source}, item {k!r}: got {type(v).__name__}, expected a list of reference "
                                 f"captions; {REFERENCE_FORMS}")
            if not v:
                out.append((k, None))  # an item with no references: reported below
            out.extend((k, x) for x in v)
        return out
    if not isinstance(data, list):
        raise VlgapError(f"{source}: got {type(data).__name__}; {REFERENCE_FORMS}")
    out = []
    for n, row in enumerate(data):
        if not isinstance(row, dict):
            raise VlgapError(f"{source}, row {n}: got {type(row).__name__}, expected an object with an id and "
                             f"'caption' or 'captions'; {REFERENCE_FORMS}")
        item = _row_id(row, f"{source}, row {n}")
        if "captions" in row:
            caps = row["captions"]
            if not isinstance(caps, list):
                raise VlgapError(f"{source}, row {n} (item {item!r}): 'captions' must be a list of strings")
            if not caps:
                out.append((item, None))
            out.extend((item, c) for c in caps)
        elif "caption" in row:
            out.append((item, row["caption"]))
        else:
            raise VlgapError(f"{source}, row {n} (item {item!r}): no 'caption' or 'captions' field")
    return out


def _is_text(value: Any) -> bool:
    return isinstance(value, str)


def _plain(obj: Any) -> Any:
    """pandas and numpy containers as the plain forms: a Series as {index: value}, a DataFrame as its
    rows, an array as a list (values that are arrays, e.g. a column of reference lists, as lists)."""
    module = type(obj).__module__ or ""
    if module.startswith("pandas"):
        if hasattr(obj, "to_dict") and hasattr(obj, "columns"):  # DataFrame
            return [{k: _plain(v) for k, v in row.items()} for row in obj.reset_index(drop=True).to_dict("records")]
        if hasattr(obj, "index") and hasattr(obj, "tolist"):  # Series
            return {k: _plain(v) for k, v in zip(obj.index.tolist(), obj.tolist())}
    if module == "numpy" and hasattr(obj, "tolist"):
        return obj.tolist()
    if isinstance(obj, tuple):
        return list(obj)
    return obj


def positional_length(obj: Any) -> int | None:
    """Number of items of a list-aligned input (a list of captions, or of reference lists); None for
    the id-keyed forms."""
    obj = _plain(obj)
    if not isinstance(obj, list) or not obj:
        return None
    if all(_is_text(x) or (isinstance(x, (list, tuple)) and all(_is_text(c) for c in x)) for x in obj):
        return len(obj)
    return None


def _aligned(obj: Any, what: str) -> Any:
    """A list-aligned input as the dict form, ids 0..n-1 (item i of predictions is item i of references)."""
    obj = _plain(obj)
    if isinstance(obj, dict):
        return {k: v if v.__class__ is str or v.__class__ is list else _plain(v) for k, v in obj.items()}
    if positional_length(obj) is None:
        return obj
    if what.startswith("references"):
        return {i: [x] if _is_text(x) else list(x) for i, x in enumerate(obj)}
    return {i: x if _is_text(x) else list(x) for i, x in enumerate(obj)}  # [caption] lists: one caption each


def _loaded(obj: Any, what: str) -> tuple[Any, str]:
    if isinstance(obj, (str, os.PathLike)):
        return _load_path(obj), str(obj)
    return obj, f"in-memory {what}"


def materialise(obj: Any, what: str) -> tuple[Any, str]:
    """The data of a path or an in-memory input, list-aligned forms turned into the dict form."""
    data, source = _loaded(obj, what)
    return _aligned(data, what), source


def _check_aligned_lengths(predictions: Any, references: Any) -> None:
    n_pred, n_ref = positional_length(predictions), positional_length(references)
    if n_pred is not None and n_ref is not None and n_pred != n_ref:
        raise VlgapError(f"list-aligned inputs of different lengths: {n_pred} predictions but {n_ref} reference "
                         "lists; give one reference list (or one reference caption) per prediction, in the same order")


def load_captions(predictions: Any, references: Any, *, on_missing: Policy = "error",
                  on_duplicate: Policy = "error", on_empty: Policy = "error") -> CaptionData:
    """Read, validate and align predictions with references (see the module docstring)."""
    from vlgap.memory import collector_paused

    with collector_paused():  # (many small containers, all kept: collections would find nothing)
        return _load_captions(predictions, references, on_missing, on_duplicate, on_empty)


def _load_captions(predictions: Any, references: Any, on_missing: Policy, on_duplicate: Policy,
                   on_empty: Policy) -> CaptionData:
    for name, value, allowed in (("on_missing", on_missing, ("error", "drop")),
                                 ("on_duplicate", on_duplicate, ("error", "first")),
                                 ("on_empty", on_empty, ("error", "keep"))):
        if value not in allowed:
            raise VlgapError(f"{name}={value!r}: use one of {', '.join(repr(a) for a in allowed)}")
    report: dict[str, Any] = {}
    pred_data, pred_src = _loaded(predictions, "predictions")
    ref_data, ref_src = _loaded(references, "references")
    _check_aligned_lengths(pred_data, ref_data)
    pred_data, ref_data = _aligned(pred_data, "predictions"), _aligned(ref_data, "references")

    # references, in first-seen order
    refs: dict[str, list[str]] = {}
    ref_id: dict[str, Any] = {}
    no_refs: list[Any] = []
    empty_refs: list[Any] = []
    plain = _plain_items(ref_data, list)
    if plain is not None:  # every item a list of non-blank strings: what the loop below would make
        ref_id, refs = plain[0], dict(zip(plain[0], map(list, plain[1])))
    for item, cap in (() if plain is not None else reference_rows(ref_data, ref_src)):
        key = str(item)
        ref_id.setdefault(key, item)
        lst = refs.setdefault(key, [])
        if cap is None:
            continue
        cap = _check_text(cap, item, "a reference caption")
        if not cap.strip():
            empty_refs.append(item)
        lst.append(cap)
    no_refs = [ref_id[k] for k, v in refs.items() if not v]
    if no_refs:
        raise VlgapError(f"{len(no_refs)} reference item(s) without any caption: {_ids(no_refs)}; "
                         "each item needs at least one reference")
    if not refs:
        raise VlgapError(f"{ref_src}: no references found")

    # predictions
    preds: dict[str, str] = {}
    pred_id: dict[str, Any] = {}
    dupes: dict[str, int] = {}
    empty_preds: list[Any] = []
    plain = _plain_items(pred_data, str)
    if plain is not None:  # every item one non-blank string: what the loop below would make
        pred_id, preds = plain[0], dict(zip(plain[0], plain[1]))
    for item, cap in (() if plain is not None else _prediction_rows(pred_data, pred_src)):
        key = str(item)
        cap = _check_text(cap, item, "the prediction")
        if key in preds:
            dupes[key] = dupes.get(key, 1) + 1
            continue
        pred_id[key] = item
        preds[key] = cap
        if not cap.strip():
            empty_preds.append(item)
    if not preds:
        raise VlgapError(f"{pred_src}: no predictions found")
    if dupes:
        if on_duplicate == "error":
            raise VlgapError(f"{len(dupes)} id(s) have several predictions: {_ids(pred_id[k] for k in dupes)}; "
                             "give one caption per id, or pass on_duplicate='first' (--on-duplicate first) to keep the first")
        report["duplicate_predictions"] = {"policy": "first", "n": len(dupes),
                                           "ids": [pred_id[k] for k in list(dupes)[:_SHOW]]}

    # empty captions
    empty_ref_items = list(dict.fromkeys(empty_refs))
    if empty_preds or empty_ref_items:
        if on_empty == "error":
            parts = []
            if empty_preds:
                parts.append(f"{len(empty_preds)} empty prediction(s): {_ids(empty_preds)}")
            if empty_ref_items:
                parts.append(f"empty reference caption(s) for {len(empty_ref_items)} item(s): {_ids(empty_ref_items)}")
            raise VlgapError("; ".join(parts) + "; fix them, or pass on_empty='keep' (--on-empty keep) to score them as empty strings")
        report["empty_captions"] = {"policy": "keep", "predictions": len(empty_preds),
                                    "reference_items": len(empty_ref_items),
                                    "ids": (empty_preds + empty_ref_items)[:_SHOW]}

    # alignment
    missing_refs = [k for k in preds if k not in refs]
    missing_preds = [k for k in refs if k not in preds]
    if missing_refs or missing_preds:
        if on_missing == "error":
            parts = []
            if missing_refs:
                parts.append(f"{len(missing_refs)} predicted id(s) have no reference: {_ids(pred_id[k] for k in missing_refs)}")
            if missing_preds:
                parts.append(f"{len(missing_preds)} reference id(s) have no prediction: {_ids(ref_id[k] for k in missing_preds)}")
            raise VlgapError("; ".join(parts) + "; make the id sets equal, or pass on_missing='drop' (--on-missing drop) "
                             "to evaluate only the ids present on both sides")
        report["missing"] = {"policy": "drop",
                             "predictions_without_references": len(missing_refs),
                             "references_without_predictions": len(missing_preds),
                             "ids": ([pred_id[k] for k in missing_refs] + [ref_id[k] for k in missing_preds])[:_SHOW]}
    keys = [k for k in refs if k in preds]
    if not keys:
        raise VlgapError("no id is present in both predictions and references")
    return CaptionData(ids=[ref_id[k] for k in keys], predictions=[preds[k] for k in keys],
                       references=[refs[k] for k in keys], report=report)


def coco_pairs(gts, res, metric: str) -> tuple[list, list[str], list[list[str]]]:
    """Validate pycocoevalcap's compute_score input ({id: [refs]}, {id: [one prediction]}) and return
    (keys, predictions, reference lists) in key order."""
    if gts.keys() != res.keys():
        raise VlgapError("gts and res must have the same keys (one prediction per reference item)")
    keys = list(gts.keys())
    for k in keys:
        if len(res[k]) != 1:
            raise VlgapError(f"item {k!r} has {len(res[k])} predictions; {metric} needs exactly one")
    return keys, [res[k][0] for k in keys], [gts[k] for k in keys]


def load_predictions(predictions: Any, *, on_duplicate: Policy = "error", on_empty: Policy = "error") -> CaptionData:
    """Predictions alone (reference-free scores such as CLIPScore): every item gets an empty
    reference list. Duplicates and empty captions follow the same policies as load_captions."""
    for name, value, allowed in (("on_duplicate", on_duplicate, ("error", "first")),
                                 ("on_empty", on_empty, ("error", "keep"))):
        if value not in allowed:
            raise VlgapError(f"{name}={value!r}: use one of {', '.join(repr(a) for a in allowed)}")
    pred_data, pred_src = materialise(predictions, "predictions")
    preds: dict[str, str] = {}
    pred_id: dict[str, Any] = {}
    dupes: list[str] = []
    empty: list[Any] = []
    for item, cap in _prediction_rows(pred_data, pred_src):
        key = str(item)
        cap = _check_text(cap, item, "the prediction")
        if key in preds:
            dupes.append(key)
            continue
        pred_id[key], preds[key] = item, cap
        if not cap.strip():
            empty.append(item)
    if not preds:
        raise VlgapError(f"{pred_src}: no predictions found")
    report: dict[str, Any] = {}
    if dupes:
        if on_duplicate == "error":
            raise VlgapError(f"{len(set(dupes))} id(s) have several predictions: {_ids(pred_id[k] for k in dict.fromkeys(dupes))}; "
                             "give one caption per id, or pass on_duplicate='first' (--on-duplicate first) to keep the first")
        report["duplicate_predictions"] = {"policy": "first", "n": len(set(dupes)), "ids": [pred_id[k] for k in dupes[:_SHOW]]}
    if empty:
        if on_empty == "error":
            raise VlgapError(f"{len(empty)} empty prediction(s): {_ids(empty)}; fix them, or pass on_empty='keep' "
                             "(--on-empty keep) to score them as empty strings")
        report["empty_captions"] = {"policy": "keep", "predictions": len(empty), "reference_items": 0, "ids": empty[:_SHOW]}
    return CaptionData(ids=[pred_id[k] for k in preds], predictions=list(preds.values()),
                       references=[[] for _ in preds], report=report)
