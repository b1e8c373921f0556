"""The manifest's JSON Schema (vlgap/resources/manifest.schema.json) is what `read_manifest` enforces.

- The schema is a valid draft 2020-12 schema, shipped as package data.
- `schema_valid` (the fast check every line goes through) gives jsonschema's own answer on every object
  of a generated set: each field missing, of each JSON type, empty, extra keys, both or no media.
- A line that breaks the schema is a one-line error naming the line, the item, the field and what it must
  be; docs/own-data.md's table lists the schema's fields with its words.
"""
from __future__ import annotations

import itertools
import json
import re
from pathlib import Path

import pytest

from vlgap.data.manifest import SCHEMA_PATH, manifest_schema, read_manifest, schema_problem, schema_valid
from vlgap.errors import VlgapError

ROOT = Path(__file__).resolve().parent.parent

VALUES = {  # candidate values per field: each JSON type, empty and non-empty
    "id": ["a", "", 3, 3.0, 3.5, True, None, ["a"], {"a": 1}],
    "video": ["v.mp4", "", 1, None, ["v.mp4"]],
    "image": ["i.jpg", "", None, 2],
    "captions": ["one", "", [], ["a", "b"], ["a", 1], [None], 5, None, {"a": "b"}],
    "meta": [{}, {"label": "x"}, None, [1], "m", 0],
    "caption": ["typo"],
}
_ABSENT = object()


def generated_objects():
    yield from ([], "x", 1, None, True)
    fields = list(VALUES)
    for combo in itertools.product(*[[_ABSENT, *VALUES[f][:3]] for f in fields]):
        yield {f: v for f, v in zip(fields, combo) if v is not _ABSENT}
    base = {"id": "a", "video": "v.mp4", "captions": ["x"], "meta": {}}
    for field, values in VALUES.items():  # every value of every field on an otherwise valid item
        for v in values:
            yield {**base, field: v}
        yield {k: v for k, v in base.items() if k != field}


def test_the_schema_is_valid_and_shipped():
    from jsonschema import Draft202012Validator

    Draft202012Validator.check_schema(manifest_schema())
    assert SCHEMA_PATH.is_file() and SCHEMA_PATH.parent.name == "resources"
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert re.search(r'vlgap = \[[^\]]*"resources/\*"', pyproject), "resources/ is not package data"


def test_the_fast_check_agrees_with_jsonschema():
    from jsonschema import Draft202012Validator

    validator = Draft202012Validator(manifest_schema())
    n = n_valid = 0
    for obj in generated_objects():
        n += 1
        expected = validator.is_valid(obj)
        n_valid += expected
        assert schema_valid(obj) == expected, obj
        assert (schema_problem(obj) is None) == expected, obj
    assert n > 1000 and 50 < n_valid < n - 50, (n, n_valid)  # both answers well represented


@pytest.mark.parametrize("line,words", [
    ('{"id": "a", "video": "v.mp4", "caption": "x"}', "(item 'a'): unknown key 'caption' (did you mean 'captions'?)"),
    ('{"id": "a", "video": "v.mp4", "captions": ["x", 2]}',
     "'captions' must be a list of strings (or one string), got a list holding a number at index 1"),
    ('{"id": "", "video": "v.mp4"}', "'id' must be a non-empty string (or an integer), got an empty string"),
    ('{"id": "a", "video": "v.mp4", "image": "i.jpg"}', "give exactly one of 'video' or 'image'"),
    ('{"id": "a", "video": "v.mp4", "meta": [1]}', "'meta' must be an object (or null), got a list"),
    ('["a", "v.mp4"]', "expected a JSON object with id, video or image, captions, meta, got a list"),
])
def test_a_line_against_the_schema_is_one_line_naming_line_item_and_field(tmp_path, line, words):
    path = tmp_path / "m.jsonl"
    path.write_text('{"id": "ok", "image": "i.jpg", "captions": "fine"}\n' + line + "\n")
    with pytest.raises(VlgapError) as err:
        read_manifest(path)
    msg = str(err.value)
    assert "\n" not in msg and f"{path} line 2" in msg and words in msg, msg
    assert "schema: vlgap/resources/manifest.schema.json" in msg


def test_integers_and_integral_numbers_are_ids(tmp_path):
    path = tmp_path / "m.jsonl"
    path.write_text('{"id": 7, "image": "i.jpg"}\n{"id": 8.0, "video": "v.mp4", "captions": null, "meta": null}\n'
                    .replace('"captions": null, ', ""))
    assert read_manifest(path).ids == ["7", "8"]


def test_the_own_data_page_lists_the_schema_fields():
    page = (ROOT / "docs" / "own-data.md").read_text(encoding="utf-8")
    rows = dict(re.findall(r"^\| `(\w+)` \| ([^|]+) \|", page, flags=re.M))
    props = manifest_schema()["properties"]
    assert list(rows) == list(props), (list(rows), list(props))
    for key, prop in props.items():
        assert prop["x-expected"] in rows[key], (key, rows[key])
