"""Every JSON file vlgap reads, a user's or a run folder's, through one reader.

- `parse_json(text, where)`: the text parsed by the standard library's C parser; a syntax error is one
  line naming the file, the line and the column; nesting deeper than `MAX_DEPTH` (a 100,000-deep `[[[...`
  would raise RecursionError inside the parser, or later in any code that walks the value) is refused.
- `read_json(path, what, schema=...)`: the file's bytes decoded as every text file is
  (`vlgap.paths.decode_utf8`: UTF-8, a byte-order mark, UTF-16, `--encoding`), parsed, and checked
  against a JSON Schema when one is given, whether or not vlgap sealed the file: a folder copied without
  its seals (`cp dir/*` leaves the dot-files behind) or edited by hand is read through the same checks.
- `check_schema(value, schema, where)`: the first problem as one line naming the file, the field's path
  inside it, what it must be and what it is (never the whole value, which may be megabytes).

The schemas of the run folders' own files are in `vlgap.runs.schemas`.
"""
from __future__ import annotations

import json
import os
from functools import lru_cache
from typing import Any

from vlgap.errors import VlgapError

#: the deepest nesting a JSON value may have (COCO annotations: 4; a manifest line's meta: a few)
MAX_DEPTH = 100


def nesting_depth(value: Any, limit: int = MAX_DEPTH) -> int:
    """How deeply lists and objects nest in `value` (a scalar: 0), counted without recursion; the walk
    stops once it passes `limit` (the depth returned is then limit + 1)."""
    if type(value) is not dict and type(value) is not list:
        return 0
    deepest, stack = 0, [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > deepest:
            deepest = depth
            if deepest > limit:
                return deepest
        for child in (node.values() if type(node) is dict else node):
            if type(child) is dict or type(child) is list:
                stack.append((child, depth + 1))
    return deepest


def _too_deep(where: str) -> VlgapError:
    return VlgapError(f"{where}: JSON nested more than {MAX_DEPTH} levels deep; vlgap reads flatter files "
                      "(lists of objects of values)")


def parse_json(text: str, where: str, *, hint: str = "") -> Any:
    """`text` as a JSON value; one-line VlgapError naming `where` for a syntax error (where in the text;
    `hint`: what the reader expects, added to it) or nesting deeper than MAX_DEPTH."""
    try:
        value = json.loads(text)
    except RecursionError:
        raise _too_deep(where) from None
    except json.JSONDecodeError as err:
        at = f"column {err.colno}" if "\n" not in text.strip() else f"line {err.lineno}, column {err.colno}"
        raise VlgapError(f"{where}: not valid JSON at {at} ({err.msg}){hint}") from None
    if nesting_depth(value) > MAX_DEPTH:
        raise _too_deep(where)
    return value


def read_json(path: str | os.PathLike, what: str = "", *, schema: dict | None = None) -> Any:
    """The JSON value in the file at `path` (`what` names it in messages: an option, "sweep.json"),
    checked against `schema` (a JSON Schema) when given. Every problem is a one-line VlgapError."""
    from vlgap.paths import read_text_utf8

    where = f"{what} {path}" if what else str(path)
    value = parse_json(read_text_utf8(path, what), where)
    if schema is not None:
        check_schema(value, schema, where)
    return value


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return f"a boolean ({str(value).lower()})"
    if isinstance(value, (int, float)):
        return f"a number ({value!r})"
    if isinstance(value, str):
        return f"a string ({value[:40]!r}{'...' if len(value) > 40 else ''})" if value else "an empty string"
    if isinstance(value, list):
        return f"a list of {len(value)}"
    if isinstance(value, dict):
        return "an object"
    return "null" if value is None else type(value).__name__


_TYPE_WORDS = {"object": "an object", "array": "a list", "string": "a string", "number": "a number",
               "integer": "a whole number", "boolean": "true or false", "null": "null"}


def _expected(schema: dict) -> str:
    if "x-expected" in schema:
        return schema["x-expected"]
    types = schema.get("type")
    if types is None:
        return "another value"
    return " or ".join(_TYPE_WORDS.get(t, t) for t in ([types] if isinstance(types, str) else types))


@lru_cache(maxsize=64)
def _validator(schema_json: str):
    from jsonschema import Draft202012Validator

    schema = json.loads(schema_json)
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


def schema_problem(value: Any, schema: dict) -> str | None:
    """The first problem of `value` under `schema` in words ("rows/3/score: must be a number, got a
    string ('x')"), None when it is valid."""
    validator = _validator(json.dumps(schema, sort_keys=True))
    try:
        errors = sorted(validator.iter_errors(value), key=lambda e: (len(e.absolute_path), list(map(str, e.absolute_path))))
    except RecursionError:
        return f"nested more than the checks can follow (at most {MAX_DEPTH} levels)"
    if not errors:
        return None
    err = errors[0]
    where = "/".join(map(str, err.absolute_path)) or "the file"
    if err.validator == "required":
        missing = next((k for k in err.validator_value if not isinstance(err.instance, dict) or k not in err.instance), "?")
        return f"{where}: missing {missing!r}" + (f" ({_expected(err.schema.get('properties', {}).get(missing, {}))})"
                                                 if missing in err.schema.get("properties", {}) else "")
    if err.validator in ("type", "anyOf", "oneOf", "enum", "const"):
        return f"{where}: must be {_expected(err.schema)}, got {_kind(err.instance)}"
    if err.validator in ("minItems", "maxItems", "minLength", "minimum", "maximum", "exclusiveMinimum"):
        return f"{where}: must be {_expected(err.schema)} ({err.validator} {err.validator_value}), got {_kind(err.instance)}"
    if err.validator == "additionalProperties":
        extra = sorted(set(err.instance) - set(err.schema.get("properties", {})))
        return f"{where}: unexpected key {extra[0]!r}" if extra else f"{where}: unexpected keys"
    message = err.message if len(err.message) <= 160 else err.message[:157] + "..."
    return f"{where}: {message}"


def check_schema(value: Any, schema: dict, where: str) -> Any:
    """`value` when it satisfies `schema`, else a one-line VlgapError naming `where` and the first problem."""
    problem = schema_problem(value, schema)
    if problem is not None:
        raise VlgapError(f"{where}: {problem}" + (f" ({schema['x-fix']})" if "x-fix" in schema else ""))
    return value


__all__ = ["MAX_DEPTH", "check_schema", "nesting_depth", "parse_json", "read_json", "schema_problem"]
