"""jsonschemas: defaults filled where API.md says (absent properties, inside present objects),
through references, arrays and unions; the caller's data never changed; nothing ever fetched."""

from __future__ import annotations

import copy

import pytest

from artifacts_app.jsonschemas import CompiledSchema, SchemaProblem, check

SCHEMA = {
    "$defs": {
        "Check": {
            "type": "object",
            "properties": {"name": {"type": "string"}, "ok": {"type": "boolean", "default": False}},
            "required": ["name"],
        },
        "Level": {"type": "string", "default": "info"},
    },
    "type": "object",
    "properties": {
        "level": {"$ref": "#/$defs/Level"},
        "checks": {"type": "array", "items": {"$ref": "#/$defs/Check"}},
        "target": {
            "anyOf": [
                {
                    "type": "object",
                    "properties": {
                        "file": {"type": "string"},
                        "line": {"type": "integer", "default": 1},
                    },
                    "required": ["file"],
                },
                {
                    "type": "object",
                    "properties": {
                        "url": {"type": "string"},
                        "depth": {"type": "integer", "default": 0},
                    },
                    "required": ["url"],
                },
            ]
        },
        "meta": {"type": "object", "properties": {"v": {"type": "integer", "default": 2}}},
        "tags": {"type": "array", "default": []},
    },
}


def parse(data):
    check(SCHEMA)
    return CompiledSchema(SCHEMA).parse(data)


def test_defaults_fill_absent_properties_through_refs_arrays_and_the_matching_branch():
    data = {"checks": [{"name": "lint"}, {"name": "types", "ok": True}], "target": {"url": "u"}}
    kept = copy.deepcopy(data)
    filled, problems = parse(data)
    assert problems == []
    assert filled == {
        "level": "info",
        "checks": [{"name": "lint", "ok": False}, {"name": "types", "ok": True}],
        "target": {"url": "u", "depth": 0},
        "tags": [],
    }
    assert data == kept  # the caller's value is untouched
    assert "meta" not in filled  # an object the data leaves out is not made up


def test_a_default_is_a_copy_not_shared_between_tags():
    first, _ = parse({})
    first["tags"].append("x")
    second, _ = parse({})
    assert second["tags"] == []


def test_problems_are_listed_with_loc_and_msg():
    _, problems = parse({"checks": [{"ok": "yes"}], "level": 3})
    locs = {tuple(p["loc"]) for p in problems}
    assert {("checks", 0, "name"), ("checks", 0, "ok"), ("level",)} <= locs
    assert all(isinstance(p["msg"], str) and p["msg"] for p in problems)


@pytest.mark.parametrize(
    "schema",
    [
        {"$ref": "http://127.0.0.1:1/x.json"},
        {"$dynamicRef": "https://example.com/s#meta"},
        {"type": "object", "x-mine": {"a": {"$ref": "https://example.com"}}, "$ref": "#/x-mine/a"},
    ],
)
def test_no_reference_reaches_outside_the_schema(schema):
    with pytest.raises(SchemaProblem) as err:
        check(schema)
    assert "not local" in err.value.message
