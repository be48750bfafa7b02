"""jsonschemas: what a kind's JSON Schema can make the server do is bounded (API.md "Limits on
what a caller can make the server do"): regular expressions on RE2, fan-out refused when the schema
is checked, and a budget per validation. The attack inputs are the ones that froze the process on
Python's ``re`` (each would take hours there: 2^40 steps); the tests carry a timeout so that a
regression fails instead of hanging the suite."""

from __future__ import annotations

import re
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from artifacts_app import jsonschemas
from artifacts_app.jsonschemas import (
    MAX_APPLICATIONS,
    MAX_PROGRAM,
    CompiledSchema,
    SchemaProblem,
    TooCostly,
    check,
)
from artifacts_app.tool.strict import MAX_INLINED, strict_problem
from tests.schemas import fan_out

EVIL = "a" * 40 + "!"  # ^(a+)+$ on Python's re: ~2^40 steps


def parse(schema: dict[str, Any], data: Any, budget_ms: int | None = 200) -> list[dict[str, Any]]:
    check(schema)
    return CompiledSchema(schema).parse(data, budget_ms)[1]


EXPONENTIAL = [
    pytest.param({"type": "string", "pattern": "^(a+)+$"}, EVIL, id="pattern"),
    pytest.param(
        {"type": "object", "patternProperties": {"^(a|a)*$": {"type": "integer"}}},
        {EVIL: "x", "aaaa": "not an integer"},
        id="patternProperties",
    ),
    pytest.param(
        {"type": "object", "propertyNames": {"pattern": "^(\\w+\\s?)*$"}},
        {EVIL: 1},
        id="propertyNames",
    ),
    pytest.param(
        {
            "type": "object",
            "patternProperties": {"^(a+)+$": {}},
            "additionalProperties": False,
        },
        {EVIL: 1},
        id="additionalProperties",
    ),
    pytest.param(
        {
            "type": "object",
            "allOf": [{"$ref": "#/$defs/named"}],
            "$defs": {"named": {"patternProperties": {"^(a+)+$": {}}}},
            "unevaluatedProperties": False,
        },
        {EVIL: 1},
        id="unevaluatedProperties",
    ),
]


@pytest.mark.timeout(60)
@pytest.mark.parametrize(("schema", "data"), EXPONENTIAL)
def test_exponential_patterns_answer_at_once_on_re2(schema, data):
    problems = parse(schema, data)
    assert problems, "the data matches none of these patterns"


def test_no_pattern_a_caller_wrote_reaches_pythons_re(monkeypatch):
    """Checking and validating never hand a caller's pattern to ``re`` (the meta-schema's
    ``regex`` format, ``pattern``, ``patternProperties``, the keys ``additionalProperties`` and
    ``unevaluatedProperties`` weed out)."""
    mine = {"^caller-one$", "^caller-two", "caller-three$", "^caller-four$"}
    seen: list[Any] = []
    for name in ("compile", "search", "match", "fullmatch", "findall", "finditer", "sub"):
        real = getattr(re, name)

        def spy(pattern: Any, *args: Any, _real: Any = real, **kwargs: Any) -> Any:
            seen.append(getattr(pattern, "pattern", pattern))
            return _real(pattern, *args, **kwargs)

        monkeypatch.setattr(re, name, spy)
    schema = {
        "$id": "https://agents.example/finding",
        "type": "object",
        "properties": {"name": {"type": "string", "pattern": "^caller-one$"}},
        "patternProperties": {"^caller-two": {"type": "integer"}},
        "propertyNames": {"pattern": "caller-three$|^name$|^caller-two"},
        "allOf": [{"$ref": "#/$defs/more"}],
        "$defs": {"more": {"patternProperties": {"^caller-four$": {}}}},
        "unevaluatedProperties": False,
    }
    problems = parse(schema, {"name": "x", "caller-two-a": "y", "zzz": 1})
    assert problems
    also = {
        "type": "object",
        "patternProperties": {"^caller-one$": {}},
        "additionalProperties": False,
    }
    assert parse(also, {"q": 1})
    assert not mine & {str(p) for p in seen}


def test_re2_follows_json_schemas_ecma_dialect():
    """``\\uXXXX`` escapes (surrogate pairs too) work; ``\\d`` and ``\\w`` are ASCII as in
    ECMA-262 (Python's ``re`` read them as Unicode); ``$`` is the end, not before a last newline."""
    assert parse({"pattern": "^\\u00e9\\ud83d\\ude00\\u{1F600}$"}, "é😀😀") == []
    assert parse({"pattern": "^\\d+$"}, "٣") != []
    assert parse({"pattern": "^\\w+$"}, "é") != []
    assert parse({"pattern": "^abc$"}, "abc\n") != []
    assert parse({"pattern": "^\\p{L}+$"}, "héllo") == []
    assert parse({"pattern": "^[^\\u0000]*$"}, "no nul") == []
    assert parse({"pattern": "^[^\\u0000]*$"}, "a\x00b") != []


def test_a_lone_surrogate_in_the_data_is_matched_not_a_crash():
    assert parse({"pattern": "^a.b$"}, "a\ud800b") == []
    assert parse({"pattern": "^x"}, "\udfffy") != []


@pytest.mark.parametrize(
    ("schema", "at", "words"),
    [
        ({"pattern": "(a)\\1"}, ["pattern"], "(a)\\\\1"),
        ({"pattern": "foo(?=bar)"}, ["pattern"], "(?=bar)"),
        ({"patternProperties": {"(?<=x)y": {}}}, ["patternProperties", "(?<=x)y"], "(?<=x)y"),
        (
            {"$defs": {"deep": {"properties": {"p": {"pattern": "(?!x)"}}}}},
            ["$defs", "deep", "properties", "p", "pattern"],
            "(?!x)",
        ),
        ({"pattern": "\\cA"}, ["pattern"], "\\\\cA"),
    ],
)
def test_a_pattern_re2_cannot_run_is_refused_naming_it(schema, at, words):
    with pytest.raises(SchemaProblem) as err:
        check(schema)
    assert err.value.at == at
    assert words in err.value.message and "RE2" in err.value.message


def test_a_pattern_with_a_program_too_large_is_refused_and_so_are_too_many():
    with pytest.raises(SchemaProblem) as err:
        check({"pattern": "^\\S{1,1000}$"})
    assert f"{MAX_PROGRAM:,}" in err.value.message and "maxLength" in err.value.message
    check({"pattern": "^.{1,255}$"})  # ~2,300 instructions: accepted
    many = {"properties": {f"p{i}": {"pattern": f"^.{{1,255}}{i}$"} for i in range(40)}}
    with pytest.raises(SchemaProblem) as err:
        check(many)
    assert "in all" in err.value.message


def test_a_stored_pattern_re2_cannot_run_refuses_the_tag_without_running_it():
    """A declaration stored before patterns ran on RE2 may hold one: never run on ``re``."""
    compiled = CompiledSchema({"type": "string", "pattern": "^(a)\\1$"})  # not checked
    _, problems = compiled.parse("aa", 200)
    assert problems and "declared again" in problems[0]["msg"]


def test_a_worst_case_match_past_the_budget_is_not_started():
    """RE2's worst case (its DFA thrashing) is ~25 ns per byte per instruction and a match cannot
    be interrupted: one whose worst case passes the budget left is refused before it starts."""
    schema = {"type": "string", "pattern": "(a|b)*a(a|b){20}c"}
    with pytest.raises(TooCostly):
        parse(schema, "ab" * 500_000)
    assert parse(schema, "ab" * 50) != []  # small text: matched, does not match


@pytest.mark.timeout(60)
@pytest.mark.parametrize("keyword", ["allOf", "anyOf", "oneOf"])
def test_fan_out_at_depth_30_is_refused_when_checked(keyword):
    with pytest.raises(SchemaProblem) as err:
        check(fan_out(30, keyword))
    assert f"{MAX_APPLICATIONS:,} subschemas" in err.value.message


@pytest.mark.timeout(60)
def test_fan_out_through_not_if_and_dependent_schemas_is_counted():
    defs: dict[str, Any] = {}
    for i in range(30):
        nxt = {"$ref": f"#/$defs/d{i + 1}"}
        defs[f"d{i}"] = {
            "not": {"not": nxt},
            "if": nxt,
            "then": nxt,
            "dependentSchemas": {"k": nxt},
        }
    defs["d30"] = {}
    with pytest.raises(SchemaProblem):
        check({"$defs": defs, "$ref": "#/$defs/d0"})


def test_fan_out_just_under_the_bound_is_accepted_and_validates():
    schema = fan_out(7)  # 510 subschemas for one value; depth 8 is 1,021
    assert parse(schema, 5) == []
    assert parse(schema, "x") != []
    with pytest.raises(SchemaProblem):
        check(fan_out(8))
    assert parse(fan_out(7, "anyOf"), "x") != []


def test_a_loop_through_dependent_schemas_is_refused():
    with pytest.raises(SchemaProblem) as err:
        check({"type": "object", "dependentSchemas": {"a": {"$ref": "#"}}})
    assert "never end" in err.value.message


def test_a_chain_of_references_too_long_to_follow_is_refused_not_a_crash():
    defs: dict[str, Any] = {f"d{i}": {"$ref": f"#/$defs/d{i + 1}"} for i in range(2000)}
    defs["d2000"] = {"type": "integer"}
    with pytest.raises(SchemaProblem) as err:
        check({"$defs": defs, "$ref": "#/$defs/d0"})
    assert "too deeply" in err.value.message


def test_validation_past_its_budget_ends_with_too_costly():
    schema = {"type": "array", "items": {"$ref": "#/$defs/d0"}, **fan_out(7, "anyOf")}
    del schema["$ref"]
    data = ["x"] * 3000  # each item fails all 128 branches
    with pytest.raises(TooCostly) as err:
        parse(schema, data, budget_ms=1)
    assert err.value.budget_ms == 1
    assert parse(schema, data[:3], budget_ms=None) != []  # the same, small: answered


def test_the_defaults_walk_is_under_the_budget_too():
    schema = {
        "type": "array",
        "items": {"type": "object", "properties": {"x": {"type": "integer", "default": 1}}},
    }
    with pytest.raises(TooCostly):
        parse(schema, [{}] * 200_000, budget_ms=1)


def nesting_fan_out(depth: int) -> dict[str, Any]:
    """d_i = array of anyOf[$ref d_i+1, $ref d_i+1]: each level of the data doubles the work."""
    defs: dict[str, Any] = {
        f"d{i}": {
            "type": "array",
            "items": {"anyOf": [{"$ref": f"#/$defs/d{i + 1}"}, {"$ref": f"#/$defs/d{i + 1}"}]},
        }
        for i in range(depth)
    }
    defs[f"d{depth}"] = {"type": "integer"}
    return {"$defs": defs, "$ref": "#/$defs/d0"}


@pytest.mark.timeout(60)
def test_fan_out_that_multiplies_as_the_data_nests_is_refused_when_checked():
    with pytest.raises(SchemaProblem) as err:
        check(nesting_fan_out(30))
    assert "levels deep in the data" in err.value.message
    check(nesting_fan_out(6))  # 2^6 = 64 at the bottom: accepted
    tree = {  # a recursive schema that does not multiply: accepted
        "$defs": {
            "node": {
                "type": "object",
                "properties": {"children": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
                "additionalProperties": {"$ref": "#/$defs/node"},
            }
        },
        "$ref": "#/$defs/node",
    }
    check(tree)
    any_json = {  # any JSON value: arrays and objects of itself, one level after another
        "$defs": {
            "json": {
                "anyOf": [
                    {"type": ["string", "number", "boolean", "null"]},
                    {"type": "array", "items": {"$ref": "#/$defs/json"}},
                    {"type": "object", "additionalProperties": {"$ref": "#/$defs/json"}},
                ]
            }
        },
        "$ref": "#/$defs/json",
    }
    check(any_json)
    both = {
        "$defs": {
            "n": {
                "type": "array",
                "items": {"$ref": "#/$defs/n"},
                "contains": {"$ref": "#/$defs/n"},
            }
        }
    }
    with pytest.raises(SchemaProblem):  # items and contains both apply to every item
        check({**both, "$ref": "#/$defs/n"})


def test_a_stored_nesting_fan_out_is_ended_by_the_budget():
    """A schema stored before the bound (not checked) is still ended by the budget."""
    data: Any = "x"
    for _ in range(30):
        data = [data]
    with pytest.raises(TooCostly):
        CompiledSchema(nesting_fan_out(30)).parse(data, 200)


@pytest.mark.timeout(60)
def test_the_tool_refuses_a_fan_out_it_would_inline_exponentially():
    defs: dict[str, Any] = {
        f"d{i}": {
            "type": "array",
            "items": {"anyOf": [{"$ref": f"#/$defs/d{i + 1}"}, {"$ref": f"#/$defs/d{i + 1}"}]},
        }
        for i in range(30)
    }
    defs["d30"] = {"type": "integer"}
    schema = {"$defs": defs, "$ref": "#/$defs/d0"}
    with pytest.raises(SchemaProblem) as err:  # on its own: the PUT's check refuses it first
        strict_problem(schema)
    assert f"{MAX_INLINED:,} subschemas" in err.value.message


@pytest.mark.parametrize(
    ("items", "unique"),
    [
        ([1, 1.0], False),
        ([True, 1], True),
        ([0, False], True),
        ([{"a": 1, "b": [2.0]}, {"b": [2], "a": 1}], False),
        ([[1], [1.0]], False),
        ([None, "null", 0], True),
        (["1", 1], True),
        ([{"a": 1}, {"a": 2}], True),
    ],
)
def test_unique_items_hashes_with_json_schemas_equality(items, unique):
    schema = {"type": "array", "uniqueItems": True}
    assert (parse(schema, items) == []) == unique
    assert Draft202012Validator(schema).is_valid(items) == unique  # the library's own answer


def test_unique_items_over_many_objects_is_linear_and_budgeted():
    schema = {"type": "array", "uniqueItems": True}
    assert parse(schema, [{"a": i} for i in range(20_000)], budget_ms=None) == []
    with pytest.raises(TooCostly):
        parse(schema, [{"a": i} for i in range(300_000)], budget_ms=1)


SAME_AS_THE_LIBRARY = [
    (
        {
            "type": "object",
            "properties": {"a": {}},
            "patternProperties": {"^b": {"type": "integer"}},
            "additionalProperties": {"type": "string"},
        },
        [{"a": 1, "b1": 2, "c": "s"}, {"b1": "no"}, {"c": 3}, {}],
    ),
    (
        {
            "$id": "https://agents.example/root",
            "type": "object",
            "allOf": [{"$ref": "#/$defs/inner"}],
            "$defs": {
                "inner": {
                    "$id": "inner",
                    "patternProperties": {"^x-": {"$ref": "#/$defs/str"}},
                    "$defs": {"str": {"type": "string"}},
                }
            },
            "properties": {"id": {"type": "integer"}},
            "unevaluatedProperties": False,
        },
        [{"id": 1, "x-a": "s"}, {"id": 1, "x-a": 2}, {"id": 1, "y": 1}, {"x-b": "t"}],
    ),
    (
        {
            "type": "object",
            "anyOf": [
                {"properties": {"kind": {"const": "a"}, "a": {}}, "required": ["kind"]},
                {"patternProperties": {"^k": {}, "^b$": {}}},
            ],
            "if": {"properties": {"kind": {"const": "a"}}},
            "then": {"properties": {"extra": {}}},
            "else": {"dependentSchemas": {"z": {"properties": {"zz": {}}}}},
            "unevaluatedProperties": {"type": "boolean"},
        },
        [
            {"kind": "a", "a": 1, "extra": 2},
            {"kind": "b", "b": 1, "z": True, "zz": 3},
            {"kind": "b", "q": 1},
            {"kind": "a", "q": False},
        ],
    ),
]


@pytest.mark.parametrize(("schema", "values"), SAME_AS_THE_LIBRARY)
def test_our_keywords_answer_as_jsonschemas_own_on_harmless_patterns(schema, values):
    """Where Python's ``re`` and RE2 agree, our ``patternProperties``, ``additionalProperties``
    and ``unevaluatedProperties`` (references into embedded ``$id`` resources included) decide
    exactly as the library's own."""
    check(schema)
    ours = CompiledSchema(schema)
    theirs = Draft202012Validator(schema, registry=ours.registry)
    for value in values:
        _, problems = ours.parse(value, 200)
        assert (problems == []) == theirs.is_valid(value), value
        assert [p["msg"] for p in problems] == [
            e.message for e in sorted(theirs.iter_errors(value), key=jsonschemas.relevance)
        ][: len(problems)], value


def test_a_failed_pattern_quotes_a_large_value_by_its_start_only():
    compiled = jsonschemas.CompiledSchema({"type": "string", "pattern": "^b+$"})
    _, details = compiled.parse("a" * 400_000)
    (detail,) = details
    # the message is made bounded, not made whole (a repr as large as the data) and cut later
    assert len(detail["msg"]) < 300
    assert detail["msg"].startswith("'aaaa") and "…" in detail["msg"]
    assert detail["msg"].endswith("does not match '^b+$'")
    _, small = compiled.parse("abc")
    assert small[0]["msg"] == "'abc' does not match '^b+$'"  # as jsonschema's own words
