"""Running a model's tag_artifact call: round trips from every branch, refusals naming the field."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from hypothesis_jsonschema import from_schema

from artifacts_app import artifacts, services
from artifacts_app.errors import ArtifactError
from artifacts_app.models import Agent, Artifact
from artifacts_app.registry import spec_for_declared
from artifacts_app.tool import ToolInputError, tool_definition
from artifacts_app.tool.schema import strip_defaulted_nulls

RICH = ("rich", "tests.tool.rich_agent")
REVIEWER = ("reviewer", "agent_site.agents.reviewer")


def branches(slug: str, module: str) -> dict[str, dict]:
    """kind -> a standalone schema of {"artifact": <that kind's branch>} (with the root's $defs)."""
    schema = tool_definition(spec_for_declared(slug, module), "openai")["function"]["parameters"]
    artifact = schema["properties"]["artifact"]
    out = {}
    for branch in artifact.get("anyOf", [artifact]):
        one = {**schema, "properties": {"artifact": branch}}
        out[branch["properties"]["kind"]["enum"][0]] = one
    return out


def unrolled(schema: dict, depth: int = 2) -> dict:
    """hypothesis-jsonschema cannot follow recursive refs: unroll them ``depth`` times, then stop."""
    defs = schema.get("$defs", {})

    def walk(node, left):
        if isinstance(node, list):
            return [walk(n, left) for n in node]
        if not isinstance(node, dict):
            return node
        if "$ref" in node:
            if left == 0:
                return {"not": {}}  # no deeper: a recursive list ends here
            return walk(defs[node["$ref"].split("/")[-1]], left - 1)
        return {k: walk(v, left) for k, v in node.items() if k != "$defs"}

    return walk(schema, depth)


@pytest.fixture
def rich(db) -> Agent:
    return Agent.objects.get_or_create(
        slug="rich", defaults={"module": RICH[1], "max_artifacts": 100_000}
    )[0]


def _ints(value):
    if isinstance(value, dict):
        for v in value.values():
            yield from _ints(v)
    elif isinstance(value, list):
        for v in value:
            yield from _ints(v)
    elif isinstance(value, int) and not isinstance(value, bool):
        yield value


def _storable(call: dict) -> bool:
    """What the store itself refuses (not the tool): NUL in text, integers past 64 bits, lengths."""
    artifact = call["artifact"]
    text = json.dumps(call)
    return (
        "\\u0000" not in text  # PostgreSQL text and jsonb cannot hold NUL
        and all(-(2**63) <= i < 2**63 for i in _ints(call))
        and len(artifact["key"] or "") <= 1024
        and len(artifact["title"] or "") <= 512
    )


def _round_trip(slug: str, module: str, kind: str, call: dict) -> None:
    assume(_storable(call))
    spec = spec_for_declared(slug, module)
    declared = spec.kinds[kind]
    result = artifacts(slug).run_tool(call)
    assert result.ok, result.content
    record = artifacts(slug).get(result.record.id)
    assert record.source == "model" and record.kind == kind
    sent = call["artifact"]
    assert record.key == (sent["key"] or None) and record.title == (sent["title"] or None)
    if declared.adapter is None:
        assert record.data == sent["data"]
    else:
        parsed = declared.adapter.validate_python(
            strip_defaulted_nulls(declared.json_schema(), sent["data"])
        )
        assert record.data == declared.adapter.dump_python(parsed, mode="json")


NO_DB_HEALTH = settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@pytest.mark.parametrize("kind", sorted(branches(*RICH)))
def test_instances_of_every_rich_branch_are_tagged_as_parsed_output(rich, kind):
    @NO_DB_HEALTH
    @given(from_schema(unrolled(branches(*RICH)[kind])))
    def run(call):
        _round_trip(*RICH, kind, call)

    run()


@pytest.mark.parametrize("kind", sorted(branches(*REVIEWER)))
def test_instances_of_every_demo_branch_are_tagged_as_parsed_output(reviewer, kind):
    @NO_DB_HEALTH
    @given(from_schema(branches(*REVIEWER)[kind]))
    def run(call):
        _round_trip(*REVIEWER, kind, call)

    run()


def test_null_for_a_defaulted_field_takes_the_default(reviewer):
    call = {
        "artifact": {
            "kind": "reviewed-pr",
            "key": "pr-1",
            "title": None,
            "data": {"url": "https://x/pull/1", "verdict": None},
        }
    }
    result = artifacts("reviewer").run_tool(call)
    assert result.ok and result.record.data == {"url": "https://x/pull/1", "verdict": "comment"}
    assert result.created and result.record.source == "model"


def test_openai_arguments_as_json_text_are_accepted(reviewer):
    args = json.dumps(
        {"artifact": {"kind": "report", "key": None, "title": "T", "data": "# Report"}}
    )
    result = artifacts("reviewer").run_tool(args)
    assert result.ok and result.record.data == "# Report"


def test_empty_key_and_title_mean_none(reviewer):
    call = {"artifact": {"kind": "report", "key": "", "title": "", "data": "x"}}
    record = artifacts("reviewer").run_tool(call).record
    assert record.key is None and record.title is None


def test_session_and_turn_of_a_bound_facade_are_used(reviewer):
    sid = artifacts("reviewer").create_session()
    api = artifacts("reviewer", session_id=sid, turn_id="t-9")
    record = api.run_tool(
        {"artifact": {"kind": "report", "key": "k", "title": None, "data": "x"}}
    ).record
    assert record.session_id == sid and record.turn_id == "t-9"


def test_retagging_a_key_replaces_and_says_so(reviewer):
    call = {"artifact": {"kind": "report", "key": "same", "title": None, "data": "one"}}
    first = artifacts("reviewer").run_tool(call)
    second = artifacts("reviewer").run_tool(call)
    assert first.created and not second.created and first.record.id == second.record.id
    assert "replaced" in second.content


OK = {"kind": "reviewed-pr", "key": "k", "title": "t", "data": {"url": "u", "verdict": "approve"}}

REFUSED = [
    ({}, "artifact"),
    ([OK], "input"),
    ("{not json", "input"),
    ({"artifact": OK, "extra": 1}, "input"),
    ({"artifact": "text"}, "artifact"),
    ({"artifact": {**OK, "tags": []}}, "artifact.tags"),
    ({"artifact": {**OK, "kind": "nope"}}, "artifact.kind"),
    ({"artifact": {k: v for k, v in OK.items() if k != "kind"}}, "artifact.kind"),
    ({"artifact": {k: v for k, v in OK.items() if k != "data"}}, "artifact.data"),
    ({"artifact": {**OK, "data": {"verdict": "x"}}}, "artifact.data.url"),
    ({"artifact": {**OK, "data": {"url": 7, "verdict": "x"}}}, "artifact.data.url"),
    ({"artifact": {**OK, "key": "k" * 1025}}, "artifact.key"),
    ({"artifact": {**OK, "title": 5}}, "artifact.title"),
    ({"artifact": {**OK, "title": "t" * 513}}, "artifact.title"),
]


@pytest.mark.parametrize(("call", "field"), REFUSED)
def test_input_of_no_branch_is_refused_naming_the_field(reviewer, call, field):
    with pytest.raises(ToolInputError) as err:
        services.tool_run(agent="reviewer", input=call)
    assert err.value.status == 400 and err.value.details["field"] == field
    assert f"`{field}`" in err.value.message or field == "input"
    result = artifacts("reviewer").run_tool(call)
    assert not result.ok and result.content.startswith("Not tagged: ")
    block = result.anthropic("toolu_1")
    assert block["is_error"] is True and block["tool_use_id"] == "toolu_1"
    assert result.openai("call_1") == {
        "role": "tool",
        "tool_call_id": "call_1",
        "content": result.content,
    }
    assert not Artifact.objects.exists()


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({"severity": "medium"}, "artifact.data.severity"),
        ({"severity": "low", "status": "closed"}, "artifact.data.status"),
    ],
)
def test_enum_refusals_name_the_field_and_what_was_expected(rich, data, field):
    result = artifacts("rich").run_tool(
        {"artifact": {"kind": "triage", "key": None, "title": None, "data": data}}
    )
    assert not result.ok and result.details["field"] == field
    assert "Input should be" in result.content


@given(
    st.sampled_from(["finding", "note", "plan", "evidence"]), st.sampled_from([1, "x", [1], True])
)
@settings(
    max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
def test_data_of_the_wrong_type_for_its_kind_is_refused(rich, kind, data):
    result = artifacts("rich").run_tool(
        {"artifact": {"kind": kind, "key": None, "title": None, "data": data}}
    )
    assert not result.ok and result.details["field"].startswith("artifact.data")


def test_an_unknown_session_is_the_hosts_problem_and_raises(reviewer):
    with pytest.raises(ArtifactError) as err:
        artifacts("reviewer", session_id="s-missing").run_tool(
            {"artifact": {"kind": "report", "key": None, "title": None, "data": "x"}}
        )
    assert err.value.code == "unknown_session"


def test_tool_and_run_tool_need_the_tool_on(freeform, settings):
    settings.ARTIFACTS_AGENTS = {**settings.ARTIFACTS_AGENTS, "shadowing": "tests.agents.shadowing"}
    Agent.objects.create(slug="shadowing", module="tests.agents.shadowing")
    for slug, why in (("free", "agent_tool=True"), ("shadowing", "shadows")):
        with pytest.raises(ArtifactError) as err:
            artifacts(slug).tool()
        assert (
            err.value.code == "tool_not_offered"
            and err.value.status == 404
            and why in err.value.message
        )
        with pytest.raises(ArtifactError):
            artifacts(slug).run_tool(
                {"artifact": {"kind": "note", "key": None, "title": None, "data": "x"}}
            )


def test_python_api_tool_formats(reviewer):
    assert artifacts("reviewer").tool()["name"] == "tag_artifact"
    assert artifacts("reviewer").tool("openai")["function"]["strict"] is True
