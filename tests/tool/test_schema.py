"""Every generated tool validates as Draft 2020-12 and passes OpenAI-strict and Anthropic rules."""

from __future__ import annotations

import pytest
from django.core.exceptions import ImproperlyConfigured
from pydantic import BaseModel

from artifacts_app.errors import ArtifactError
from artifacts_app.registry import Kind, define_artifacts, spec_for_declared
from artifacts_app.tool import tool_definition
from tests.tool.checkers import (
    anthropic_problems,
    check_draft_2020_12,
    openai_strict_problems,
    sdk_problems,
)

SPECS = {
    "reviewer": ("reviewer", "agent_site.agents.reviewer"),
    "strict": ("strict", "tests.agents.strict"),
    "rich": ("rich", "tests.tool.rich_agent"),
}


@pytest.fixture(params=sorted(SPECS))
def spec(request):
    return spec_for_declared(*SPECS[request.param])


def test_every_format_validates_as_draft_2020_12(spec):
    for fmt, path in (
        ("anthropic", ("input_schema",)),
        ("openai", ("function", "parameters")),
        ("openai-responses", ("parameters",)),
    ):
        tool = tool_definition(spec, fmt)
        schema = tool
        for part in path:
            schema = schema[part]
        check_draft_2020_12(schema)


def test_every_format_passes_the_vendors_sdk_types(spec):
    for fmt in ("anthropic", "openai", "openai-responses"):
        assert sdk_problems(tool_definition(spec, fmt), fmt) == []


def test_openai_format_passes_the_strict_mode_rules(spec):
    assert openai_strict_problems(tool_definition(spec, "openai")) == []


def test_anthropic_format_passes_anthropic_rules(spec):
    assert anthropic_problems(tool_definition(spec, "anthropic")) == []


def test_responses_format_is_the_flat_function_tool(spec):
    tool = tool_definition(spec, "openai-responses")
    chat = tool_definition(spec, "openai")["function"]
    assert tool == {"type": "function", **chat}


def test_description_lists_every_kind_with_its_description(spec):
    text = tool_definition(spec)["description"]
    assert "notable" in text
    for name, kind in spec.kinds.items():
        assert f"- {name}: {kind.description}" in text


def test_input_is_a_union_over_kinds_each_branch_fixing_its_kind():
    spec = spec_for_declared(*SPECS["rich"])
    schema = tool_definition(spec)["input_schema"]
    branches = schema["properties"]["artifact"]["anyOf"]
    assert [b["properties"]["kind"]["enum"] for b in branches] == [[n] for n in sorted(spec.kinds)]
    for branch in branches:
        assert set(branch["properties"]) == {"kind", "key", "title", "data"}


def test_optional_fields_become_required_and_nullable_and_defaults_are_described():
    spec = spec_for_declared(*SPECS["reviewer"])
    schema = tool_definition(spec, "openai")["function"]["parameters"]
    pr = next(
        b
        for b in schema["properties"]["artifact"]["anyOf"]
        if b["properties"]["kind"]["enum"] == ["reviewed-pr"]
    )
    data = pr["properties"]["data"]
    assert data["required"] == ["url", "verdict"]
    assert data["properties"]["verdict"]["type"] == ["string", "null"]
    assert '"comment"' in data["properties"]["verdict"]["description"]


def test_recursive_model_keeps_one_renamed_def_and_the_rest_is_inlined():
    spec = spec_for_declared(*SPECS["rich"])
    schema = tool_definition(spec, "openai")["function"]["parameters"]
    assert list(schema["$defs"]) == ["evidence__Tree"]
    text = str(schema)
    assert "#/$defs/Location" not in text and "oneOf" not in text


def test_dict_fields_cannot_be_strict_so_openai_says_strict_false():
    class Counts(BaseModel):
        by_name: dict[str, int]

    decl = define_artifacts(kinds={"counts": Kind("Counts.", schema=Counts)}, agent_tool=True)
    from artifacts_app.registry import AgentSpec

    spec = AgentSpec(slug="counts", kinds=decl.kinds, agent_tool=True, max=10, module="x.counts")
    tool = tool_definition(spec, "openai")
    assert tool["function"]["strict"] is False
    check_draft_2020_12(tool["function"]["parameters"])
    assert anthropic_problems(tool_definition(spec)) == []


def test_unknown_format_is_refused():
    with pytest.raises(ArtifactError) as err:
        tool_definition(spec_for_declared(*SPECS["reviewer"]), "gemini")
    assert err.value.code == "unknown_format" and err.value.status == 400


def test_kind_needs_description():
    with pytest.raises(ImproperlyConfigured):
        Kind("")


def test_the_checkers_refuse_pydantics_raw_schema():
    """The rules bite: pydantic's own schema of the rich kinds breaks several of them."""
    spec = spec_for_declared(*SPECS["rich"])
    raw = spec.kinds["evidence"].json_schema()
    tool = {
        "type": "function",
        "function": {"name": "t", "description": "d", "parameters": raw, "strict": True},
    }
    problems = " ".join(openai_strict_problems(tool))
    assert "oneOf" in problems and "not every property is required" in problems
    assert "keywords strict mode refuses" in problems  # title, default, discriminator
    assert anthropic_problems({"name": "t", "description": "d", "input_schema": {"anyOf": [raw]}})
