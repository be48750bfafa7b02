"""The tag's input is declared once (``artifacts_app.tag_input``): every entry point's view of it —
the JSON body, a multipart record, the OpenAPI schema, the model's tool over REST and MCP, the
services and the Python API — names the same fields, with the same required ones.

Each entry point is asked what it takes the way a caller finds out: a refusal of an unknown field
lists the fields, a body without the required ones is refused, the schema and the tool's
definition are read as served, signatures are read from the functions."""

from __future__ import annotations

import inspect
import re

import orjson
import pytest

from artifacts_app import api, services, tag_input
from artifacts_app.access import AGENT, Caller
from artifacts_app.mcp import tools as mcp_tools
from artifacts_app.mcp.call import Call
from artifacts_app.models import Artifact
from artifacts_app.registry import TOOL_NAME
from artifacts_app.services.rules import tag_validate
from tests.rest.conftest import bearer

NAMES = {field.name for field in tag_input.FIELDS}
REQUIRED = {field.name for field in tag_input.FIELDS if field.required}
PARAMS = {field.param for field in tag_input.FIELDS}
MODEL = [field.name for field in tag_input.MODEL_FIELDS]
URL = "/reviewer/v1/artifacts"


@pytest.fixture
def key(reviewer) -> str:
    return services.agent_key_create(agent=reviewer)[1]


def listed(message: str) -> set[str]:
    """The fields an ``unknown_field`` refusal lists ("...; the fields are a, b, c.")."""
    _, _, tail = message.partition("the fields are ")
    return {name.strip() for name in re.split(r", | and ", tail.rstrip("."))}


def refusal(response) -> dict:
    assert response.status_code == 400, response.content
    return orjson.loads(response.content)["error"]


def test_the_declaration_is_whole():
    assert len(NAMES) == len(tag_input.FIELDS)
    assert tag_input.NAMES == NAMES
    assert REQUIRED == {"data"}
    assert tag_input.SOURCE.schema["enum"] == [Artifact.SOURCE_HOST, Artifact.SOURCE_MODEL]
    assert tag_input.SOURCE.default == Artifact.SOURCE_HOST
    for field in tag_input.FIELDS:
        assert field.code.startswith("invalid_")
        assert not (field.required and field.nullable), field.name
        if field.max_length is not None:  # the schema states the limit the rules keep
            assert f",{field.max_length}}}$" in field.schema["pattern"], field.name


def test_the_json_body_takes_the_declared_fields(client, key):
    error = refusal(client.post(URL, {"nope": 1}, "application/json", **bearer(key)))
    assert error["code"] == "unknown_field"
    assert listed(error["message"]) == NAMES
    # Every field but the required ones may be left out (the agent declares kinds: one is named).
    error = refusal(client.post(URL, {"kind": "report"}, "application/json", **bearer(key)))
    assert error["code"] == "data_required" and error["details"]["field"] in REQUIRED
    kept = client.post(URL, {"kind": "report", "data": {"x": 1}}, "application/json", **bearer(key))
    assert kept.status_code == 201, kept.content
    assert orjson.loads(kept.content)["source"] == tag_input.SOURCE.default


def test_a_multipart_record_takes_the_declared_fields(client, key):
    def post(record: dict) -> dict:
        return refusal(client.post(URL, {"record": orjson.dumps(record).decode()}, **bearer(key)))

    error = post({"nope": 1})
    assert error["code"] == "unknown_field"
    assert listed(error["message"]) == NAMES
    assert post({"kind": "report"})["code"] == "data_required"


def test_the_openapi_schema_shows_the_declaration(client):
    schema = orjson.loads(client.get("/api/schema/?format=json").content)
    body = schema["components"]["schemas"]["TagRequest"]
    assert set(body["properties"]) == NAMES
    assert set(body["required"]) == REQUIRED
    assert body["additionalProperties"] is False
    for field in tag_input.FIELDS:
        shown = body["properties"][field.name]
        assert shown.get("nullable", False) == field.nullable, field.name
    operation = schema["paths"]["/{slug}/v1/artifacts"]["post"]["requestBody"]["content"]
    assert operation["application/json"]["schema"]["$ref"].endswith("/TagRequest")
    parts = schema["components"]["schemas"]["TagMultipartRequest"]["properties"]
    assert parts["record"]["allOf"][0]["$ref"].endswith("/TagRequest")


def _artifact_schemas(input_schema: dict) -> list[dict]:
    artifact = input_schema["properties"]["artifact"]
    return artifact.get("anyOf", [artifact])


def test_the_model_tool_takes_the_declared_model_fields(client, key):
    definition = orjson.loads(client.get("/reviewer/v1/tools/tag_artifact", **bearer(key)).content)
    for branch in _artifact_schemas(definition["input_schema"]):
        assert list(branch["properties"]) == MODEL
        assert branch["required"] == MODEL  # strict: every field named, null for none
        for field in tag_input.MODEL_FIELDS:
            if field.model_description is not None:
                assert branch["properties"][field.name]["description"] == field.model_description
    ran = client.post(
        "/reviewer/v1/tools/tag_artifact",
        orjson.dumps({"input": {"artifact": {"nope": 1}}}),
        "application/json",
        **bearer(key),
    )
    error = refusal(ran)
    assert error["details"]["field"] == "artifact.nope"
    assert listed(error["message"]) == set(MODEL)


def test_mcp_tag_tool_takes_the_declared_model_fields(reviewer):
    call = Call(
        agent=reviewer, caller=Caller(kind=AGENT, agent_id=reviewer.pk), base_url="http://t"
    )
    (tag,) = [d for d in mcp_tools.definitions(call) if d["name"] == TOOL_NAME]
    for branch in _artifact_schemas(tag["inputSchema"]):
        assert list(branch["properties"]) == MODEL
        assert branch["required"] == MODEL
    result = mcp_tools.run(call, TOOL_NAME, {"artifact": {"nope": 1}})
    assert result["isError"] is True
    error = orjson.loads(result["content"][0]["text"])["error"]
    assert listed(error["message"]) == set(MODEL)


def _keywords(function) -> dict[str, inspect.Parameter]:
    return {
        name: p
        for name, p in inspect.signature(function).parameters.items()
        if p.kind is inspect.Parameter.KEYWORD_ONLY
    }


def test_the_services_and_the_python_api_take_the_declared_keywords():
    service = _keywords(services.artifact_tag)
    assert PARAMS <= set(service)
    assert set(service) - PARAMS == {"agent", "artifact_id"}  # who, and a content PUT's record
    for facade in (api.Artifacts.tag,):
        assert set(_keywords(facade)) == PARAMS
    required = {tag_input.DATA.param}
    assert {n for n, p in service.items() if p.default is inspect.Parameter.empty} == {
        "agent",
        *required,
    }
    # The rules take every field but the contents themselves (whether there are any instead).
    rules = set(_keywords(tag_validate))
    assert rules == (PARAMS - {"contents"}) | {"spec", "has_contents"}
