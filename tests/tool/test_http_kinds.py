"""The tag_artifact tool of kinds declared over HTTP: valid for both providers (the vendors' SDK
types and the strict-mode rules), the same as from code for the same kinds, and run like it."""

from __future__ import annotations

import pytest

from artifacts_app import services
from artifacts_app.models import Artifact
from artifacts_app.registry import spec_for, spec_for_declared
from artifacts_app.tool import ToolInputError, tool_definition
from tests.tool.checkers import (
    anthropic_problems,
    check_draft_2020_12,
    openai_strict_problems,
    sdk_problems,
)

# Schemas the PUT accepts with agentTool on, each using what strict mode can carry or word.
ACCEPTED = {
    "plain": {
        "type": "object",
        "properties": {
            "url": {"type": "string"},
            "verdict": {"type": "string", "default": "comment"},
        },
        "required": ["url"],
    },
    "annotated": {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://agents.example/finding",
        "$comment": "made by zod",
        "title": "Finding",
        "type": "object",
        "properties": {
            "title": {"type": "string", "minLength": 1, "maxLength": 200, "examples": ["x"]},
            "severity": {"type": "integer", "minimum": 1, "maximum": 5, "default": 1},
            "when": {"type": "string", "format": "date-time"},
            "link": {"type": "string", "format": "uri"},
            "tags": {
                "type": "array",
                "items": {"type": "string"},
                "maxItems": 10,
                "uniqueItems": True,
            },
            "level": {"enum": ["low", "high"]},
            "fixed": {"const": True},
        },
        "required": ["title"],
        "additionalProperties": False,
    },
    "unions": {
        "type": "object",
        "properties": {
            "target": {
                "oneOf": [
                    {
                        "type": "object",
                        "properties": {"file": {"type": "string"}},
                        "required": ["file"],
                    },
                    {
                        "type": "object",
                        "properties": {"url": {"type": "string"}},
                        "required": ["url"],
                    },
                ]
            },
            "score": {"type": ["number", "null"]},
        },
        "required": ["target"],
    },
    "recursive": {
        "$defs": {
            "Tree": {
                "type": "object",
                "properties": {
                    "label": {"type": "string"},
                    "children": {"type": "array", "items": {"$ref": "#/$defs/Tree"}},
                },
                "required": ["label"],
            },
            "Leaf": {"type": "string", "pattern": "^[a-z]+$"},
        },
        "type": "object",
        "properties": {"tree": {"$ref": "#/$defs/Tree"}, "leaf": {"$ref": "#/$defs/Leaf"}},
        "required": ["tree"],
    },
    "scalar": {"type": "integer", "multipleOf": 2},
}
FORMATS = (
    ("anthropic", ("input_schema",)),
    ("openai", ("function", "parameters")),
    ("openai-responses", ("parameters",)),
)


def declare(agent, kinds, **more):
    return spec_for(services.kinds_declare(agent=agent, declaration={"kinds": kinds, **more}))


@pytest.mark.parametrize("name", sorted(ACCEPTED))
def test_every_accepted_schema_gives_a_tool_both_providers_take(freeform, name):
    spec = declare(
        freeform,
        {
            name: {"description": f"A {name} thing.", "schema": ACCEPTED[name]},
            "note": {"description": "A note."},
        },
        agentTool=True,
    )
    for fmt, path in FORMATS:
        tool = tool_definition(spec, fmt)
        assert sdk_problems(tool, fmt) == []
        schema = tool
        for part in path:
            schema = schema[part]
        check_draft_2020_12(schema)
    assert openai_strict_problems(tool_definition(spec, "openai")) == []
    assert tool_definition(spec, "openai")["function"]["strict"] is True
    assert tool_definition(spec, "openai-responses")["strict"] is True
    assert anthropic_problems(tool_definition(spec, "anthropic")) == []


def test_the_checkers_bite_on_what_the_put_refuses():
    """The walker and the SDK types are not vacuous: an open object and a stray key fail them."""
    tool = {
        "type": "function",
        "function": {
            "name": "tag_artifact",
            "description": "d",
            "parameters": {
                "type": "object",
                "properties": {"m": {"type": "object", "patternProperties": {"^x": {}}}},
            },
            "strict": True,
        },
    }
    problems = " ".join(openai_strict_problems(tool))
    assert "patternProperties" in problems and "additionalProperties is not false" in problems
    assert sdk_problems({**tool, "colour": "red"}, "openai")
    assert sdk_problems({"name": "tag_artifact", "input_schema": "nope"}, "anthropic")


def test_the_same_kinds_over_http_give_the_same_spec_answers_as_from_code(freeform):
    """One registry: the reviewer's kinds, declared over HTTP with the JSON Schemas pydantic makes
    of them, give the same tool, the same stored data and the same refusals as from code."""
    code = spec_for_declared("reviewer", "agent_site.agents.reviewer")
    http = declare(
        freeform,
        {
            name: {"description": kind.description, "schema": kind.json_schema()}
            for name, kind in code.kinds.items()
        },
        agentTool=code.agent_tool,
        max=code.max,
    )
    for fmt, _ in FORMATS:
        assert tool_definition(http, fmt) == tool_definition(code, fmt)
    assert (http.max, http.tool_enabled, http.keep_versions) == (
        code.max,
        code.tool_enabled,
        code.keep_versions,
    )
    for data in ({"url": "u"}, {"url": "u", "verdict": "approve"}):
        assert http.kinds["reviewed-pr"].parse("reviewed-pr", data) == code.kinds[
            "reviewed-pr"
        ].parse("reviewed-pr", data)
    for spec in (code, http):
        with pytest.raises(Exception) as err:
            spec.kinds["reviewed-pr"].parse("reviewed-pr", {"verdict": "approve"})
        assert err.value.code == "schema_invalid"
        assert err.value.details[0]["loc"] == ["url"]
        assert err.value.details[0]["msg"] == "Field required"


def test_a_model_call_with_nulls_for_optional_fields_stores_the_defaults(freeform):
    declare(
        freeform,
        {"reviewed-pr": {"description": "A PR.", "schema": ACCEPTED["plain"]}},
        agentTool=True,
    )
    call = {
        "artifact": {
            "kind": "reviewed-pr",
            "key": "pr",
            "title": None,
            "data": {"url": "u", "verdict": None},
        }
    }
    result = services.tool_run(agent="free", input=call)
    assert result.record.source == "model"
    assert Artifact.objects.get(pk=result.record.id).data == {"url": "u", "verdict": "comment"}


def test_a_model_call_that_fails_the_schema_names_the_field_for_the_model(freeform):
    declare(
        freeform,
        {"reviewed-pr": {"description": "A PR.", "schema": ACCEPTED["plain"]}},
        agentTool=True,
    )
    call = {"artifact": {"kind": "reviewed-pr", "key": None, "title": None, "data": {"url": 7}}}
    with pytest.raises(ToolInputError) as err:
        services.tool_run(agent="free", input=call)
    assert err.value.code == "schema_invalid"
    assert (
        "`artifact.data.url`" in err.value.message
        and "call tag_artifact again" in err.value.message
    )
    assert Artifact.objects.count() == 0


def test_the_tool_follows_the_declaration(freeform):
    first = declare(freeform, {"a": {"description": "An A."}}, agentTool=True)
    assert "- a: An A." in tool_definition(first)["description"]
    second = declare(freeform, {"b": {"description": "A B."}}, agentTool=True)
    text = tool_definition(second)["description"]
    assert "- b: A B." in text and "- a:" not in text
    off = declare(freeform, {"b": {"description": "A B."}}, agentTool=False)
    with pytest.raises(Exception) as err:
        tool_definition(off)
    assert err.value.code == "tool_not_offered"
