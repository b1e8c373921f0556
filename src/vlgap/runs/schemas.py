"""What the JSON files of a run folder hold, as JSON Schemas, and the one checked reader of them.

`read_run_json(path, schema, fix=...)` reads a run folder's JSON file (sweep.json, scaling.json, a report
section, a CAPE experiment's data.json, config.json, cells and rewrite caches): a seal that no longer
holds is refused (the bytes changed after vlgap wrote them), and the value is checked against its schema
whether or not the seal is there, so a folder copied without its dot-files (`cp dir/*`) or edited by hand
gives one line naming the file and the field ("sweep.json: rows/3/score: must be a number, got a string
('x')"), never a KeyError or a TypeError from deep inside a figure. Fields are declared as far as the
readers use them; other fields are free (older and newer versions add some).
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

NUM = {"type": ["number", "null"]}
INT = {"type": "integer"}
INT_OR_NULL = {"type": ["integer", "null"]}
STR = {"type": "string"}
STR_OR_NULL = {"type": ["string", "null"]}
STRINGS = {"type": "array", "items": STR}
PAIR = {"type": ["array", "null"], "items": NUM, "minItems": 2, "maxItems": 2,
        "x-expected": "a pair [low, high] of numbers, or null"}

SWEEP_ROW = {
    "type": "object", "x-expected": "a row: an object with vision, text, n_f, n_c, score, ...",
    "required": ["vision", "text", "n_f", "n_c", "score", "x_layer", "y_layer", "n", "k", "chance", "metric"],
    "properties": {"vision": STR, "text": STR, "n_f": {"type": "integer", "minimum": 1},
                   "n_c": {"type": "integer", "minimum": 1}, "score": NUM, "ci_lo": NUM, "ci_hi": NUM,
                   "p_value": NUM, "null_mean": NUM, "x_layer": INT, "y_layer": INT, "x_layer_name": STR_OR_NULL,
                   "y_layer_name": STR_OR_NULL, "n": {"type": "integer", "minimum": 1}, "k": INT, "chance": NUM,
                   "metric": STR, "vision_encoder": STR, "frame_sampling": STR, "vision_weights": STR,
                   "text_weights": STR, "warnings": {"type": "array", "items": STR}},
}

#: a sweep's sweep.json
SWEEP = {
    "type": "object", "x-expected": "an object with the sweep's rows", "required": ["rows"],
    "properties": {"rows": {"type": "array", "minItems": 1, "items": SWEEP_ROW,
                            "x-expected": "a non-empty list of rows"},
                   "description": STR,
                   "config": {"type": "object", "properties": {"confidence": {"type": "number"},
                                                               "interval": STR}},
                   "provenance": {"type": "object", "x-expected": "an object (version, date, command, machine)",
                                  "properties": {"vlgap": STR, "date": STR, "command": STR, "api": STR,
                                                 "machine": {"type": "object"}}},
                   "items": {"type": "object", "x-expected": "an object (items kept and left out)"}},
}

LAW_PARAMS = ("S_inf", "C_f", "C_c", "alpha", "beta")
FIT = {
    "type": "object", "x-expected": "a fit: an object with 'params' (or 'error')",
    "anyOf": [{"required": ["error"]}, {"required": ["params"]}],
    "properties": {
        "error": STR, "model": STR, "r2": NUM, "rmse": NUM, "n_cells": INT_OR_NULL,
        "params": {"type": "object", "required": list(LAW_PARAMS), "additionalProperties": NUM},
        "param_ci": {"type": ["object", "null"], "additionalProperties": PAIR},
        "not_identified": {"type": ["array", "null"], "items": STR},
        "identification": {"type": ["object", "null"], "additionalProperties": {
            "type": "object", "properties": {"identified": {"type": "boolean"}, "why": STR_OR_NULL,
                                             "at_bound": STR_OR_NULL, "bounds": PAIR}}},
        "bootstrap": {"type": ["object", "null"], "properties": {
            "confidence": NUM, "n_resamples": INT_OR_NULL, "n_failed": INT_OR_NULL, "method": STR_OR_NULL}},
        "heldout": {"type": ["object", "null"], "properties": {
            "cells": {"type": "array", "items": {
                "type": "object", "required": ["n_f", "n_c", "predicted", "observed", "abs_error"],
                "properties": {k: NUM for k in ("n_f", "n_c", "predicted", "observed", "abs_error")}}},
            "train": STR, "n_train": INT, "n_test": INT, "mean_abs_error": NUM, "max_abs_error": NUM,
            "skipped": STR_OR_NULL}},
        "alternatives": {"type": ["object", "null"], "additionalProperties": {
            "type": "object", "properties": {"n_params": INT_OR_NULL, "r2": NUM, "aic": NUM, "aicc": NUM, "bic": NUM,
                                             "heldout_mean_abs_error": NUM, "heldout_skipped": STR_OR_NULL,
                                             "params": {"type": "object", "additionalProperties": NUM}}}},
        "best_by": {"type": ["object", "null"], "additionalProperties": STR},
        "warnings": {"type": ["array", "null"], "items": STR},
    },
}

#: a sweep's scaling.json: {"vision|text": fit}
SCALING = {"type": "object", "x-expected": "an object of fits by 'vision|text'",
           "propertyNames": {"pattern": "[|]"}, "additionalProperties": FIT}

#: a report section (RUN_DIR/sections/*.json, vlgap.probe.report.write_section)
SECTION = {"type": "object", "x-expected": "a report section: an object with title, html and figures",
           "properties": {"title": STR, "html": STR, "figures": STRINGS}}

#: a CAPE experiment's data.json
CAPE_DATA = {"type": "object", "x-expected": "an object with train_captions and test_prompts",
             "required": ["train_captions", "test_prompts"],
             "properties": {"train_captions": STRINGS, "test_prompts": STRINGS}}

#: a CAPE experiment's config.json (only what `cape controls` reads)
CAPE_CONFIG = {"type": "object", "properties": {"n_permutations": {"type": "integer", "minimum": 0},
                                                "n_bootstrap": {"type": "integer", "minimum": 0},
                                                "seed": {"type": "integer", "minimum": 0}}}

#: a CAPE experiment's generator cell (cells/*.json)
CAPE_CELL = {"type": "object", "required": ["train", "infer", "seed", "item"],
             "properties": {"train": STR, "infer": STR, "seed": INT,
                            "item": {"type": "array", "items": NUM}}}

#: a CAPE rewrite cache (rewrites/*.json): each entry a rewrite result with its text
CAPE_REWRITES = {"type": "object", "required": ["entries"],
                 "properties": {"entries": {"type": "object", "additionalProperties": {
                     "type": "object", "required": ["text"],
                     "properties": {"text": STR, "dense_caption": STR_OR_NULL}}}}}


def read_run_json(path: str | os.PathLike, schema: dict, *, what: str = "", fix: str = "") -> Any:
    """The JSON value of a run folder's file `path`, refused in one line when vlgap sealed it and it no
    longer matches its seal, and checked against `schema` in any case. `what` names the file in messages
    (default: its path); `fix`: what to do about a refusal."""
    from vlgap.errors import VlgapError
    from vlgap.json_files import read_json
    from vlgap.reuse import check_artefact

    path = Path(path)
    verdict = check_artefact(path, None)
    if verdict.status == "corrupt":
        raise VlgapError(f"{verdict.message()}" + (f"; {fix}" if fix else ""))
    try:
        return read_json(path, what, schema=schema)
    except VlgapError as err:
        if not fix:
            raise
        raise VlgapError(f"{err}; {fix}") from None


__all__ = ["CAPE_CELL", "CAPE_CONFIG", "CAPE_DATA", "CAPE_REWRITES", "FIT", "SCALING", "SECTION", "SWEEP",
           "read_run_json"]
