"""Kinds declared over HTTP cannot stall the server (API.md "Limits on what a caller can make the
server do"): the attacks that froze the process — exponential patterns, ``$ref`` fan-out — over
REST, refused at PUT or answered at once; and the validation budget, 400 ``schema_too_costly``
with nothing stored, through REST, the REST tool and the in-process API (MCP: tests/mcp).

The exponential inputs would take hours on Python's ``re``; the timeouts make a regression fail
instead of hanging the suite."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from artifacts_app import artifacts, services
from artifacts_app.errors import ArtifactError
from artifacts_app.models import Artifact, Event
from tests.rest.conftest import bearer
from tests.schemas import fan_out

URL = "/free/v1/artifacts/kinds"
EVIL = "a" * 40 + "!"


@pytest.fixture
def key(freeform) -> str:
    return services.agent_key_create(agent=freeform)[1]


def put(client, kinds: dict[str, Any], token: str, **more: Any):
    body = orjson.dumps({"kinds": kinds, **more})
    return client.put(URL, data=body, content_type="application/json", **bearer(token))


def declare(client, token: str, schema: dict[str, Any], **more: Any) -> None:
    response = put(client, {"k": {"description": "A thing.", "schema": schema}}, token, **more)
    assert response.status_code == 200, response.content


def tag(client, token: str, data: Any):
    body = orjson.dumps({"kind": "k", "data": data})
    return client.post(
        "/free/v1/artifacts", data=body, content_type="application/json", **bearer(token)
    )


def error_of(response, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.content
    error = orjson.loads(response.content)["error"]
    assert error["code"] == code, error
    return error


# A legitimate schema and data that cost real work: 3,000 items, each tried against the 128
# branches of an anyOf fan-out the PUT accepts (510 subschemas a value: under the bound).
COSTLY_SCHEMA = {
    "type": "array",
    "items": {"$ref": "#/$defs/d0"},
    "$defs": fan_out(7, "anyOf")["$defs"],
}
COSTLY_DATA = [1] * 2999 + ["x"]


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("schema", "data", "good"),
    [
        ({"type": "string", "pattern": "^(a+)+$"}, EVIL, "aaaa"),
        (
            {"type": "object", "patternProperties": {"^(a|a)*$": {"type": "integer"}}},
            {EVIL: 1, "aa": "x"},
            {EVIL: 1, "aa": 2},
        ),
        (
            {"type": "object", "propertyNames": {"pattern": "^(\\w+\\s?)*$"}},
            {EVIL: 1},
            {"two words": 1},
        ),
    ],
    ids=["pattern", "patternProperties", "propertyNames"],
)
def test_exponential_patterns_are_answered_at_once(client, key, schema, data, good):
    declare(client, key, schema)
    error = error_of(tag(client, key, data), 400, "schema_invalid")
    assert error["details"][0]["loc"] is not None
    assert Artifact.objects.count() == 0
    assert tag(client, key, good).status_code == 201
    assert client.get("/healthz").status_code in (200, 503)  # the process answers


@pytest.mark.parametrize(
    ("schema", "at", "words"),
    [
        (
            {"type": "object", "properties": {"p": {"pattern": "^(a)\\1$"}}},
            ["properties", "p"],
            "\\1",
        ),
        ({"type": "string", "pattern": "x(?=y)"}, ["pattern"], "(?=y)"),
        ({"patternProperties": {"(?<!a)b": {}}}, ["patternProperties", "(?<!a)b"], "(?<!a)b"),
    ],
)
def test_a_pattern_re2_cannot_run_is_refused_at_put_and_changes_nothing(
    client, key, freeform, schema, at, words
):
    declare(client, key, {"type": "string"})
    before = client.get(URL, **bearer(key)).content
    response = put(client, {"k": {"description": "A thing.", "schema": schema}}, key)
    error = error_of(response, 400, "invalid_schema")
    assert error["details"]["at"][: len(at)] == at
    assert words in error["details"]["problem"] and "RE2" in error["message"]
    assert client.get(URL, **bearer(key)).content == before


@pytest.mark.timeout(60)
@pytest.mark.parametrize("keyword", ["allOf", "anyOf"])
def test_a_fan_out_schema_at_depth_30_is_refused_at_put(client, key, keyword):
    response = put(client, {"k": {"description": "A thing.", "schema": fan_out(30, keyword)}}, key)
    error = error_of(response, 400, "invalid_schema")
    assert "subschemas" in error["message"] and error["details"]["field"] == "kinds.k.schema"
    assert client.get(URL, **bearer(key)).json()["kinds"] == []  # nothing declared


@pytest.mark.timeout(60)
def test_a_fan_out_that_multiplies_as_the_data_nests_is_refused_at_put(client, key):
    defs: dict[str, Any] = {
        f"d{i}": {
            "type": "array",
            "items": {"anyOf": [{"$ref": f"#/$defs/d{i + 1}"}, {"$ref": f"#/$defs/d{i + 1}"}]},
        }
        for i in range(30)
    }
    defs["d30"] = {"type": "integer"}
    schema = {"$defs": defs, "$ref": "#/$defs/d0"}
    error = error_of(
        put(client, {"k": {"description": "A thing.", "schema": schema}}, key),
        400,
        "invalid_schema",
    )
    assert "levels deep in the data" in error["message"]
    assert client.get(URL, **bearer(key)).json()["kinds"] == []


def test_a_fan_out_just_under_the_bound_is_accepted_and_works(client, key):
    declare(client, key, fan_out(7))
    assert tag(client, key, 3).status_code == 201
    error_of(tag(client, key, {}), 400, "schema_invalid")
    declare(client, key, fan_out(7, "anyOf"))
    error_of(tag(client, key, "x"), 400, "schema_invalid")  # every branch fails: answered


def _nothing_stored(events_before: int) -> None:
    assert Artifact.objects.count() == 0
    assert Event.objects.count() == events_before


def test_past_the_budget_a_rest_tag_is_400_schema_too_costly_and_stores_nothing(
    client, key, settings
):
    declare(client, key, COSTLY_SCHEMA)
    error_of(tag(client, key, COSTLY_DATA[-5:]), 400, "schema_invalid")  # the last is no integer
    events = Event.objects.count()
    settings.ARTIFACTS_MAX_VALIDATION_MS = 1
    error = error_of(tag(client, key, COSTLY_DATA), 400, "schema_too_costly")
    assert error["details"] == {"field": "data", "kind": "k", "limitMs": 1}
    assert "ARTIFACTS_MAX_VALIDATION_MS" in error["message"]
    _nothing_stored(events)


def test_past_the_budget_the_rest_tool_is_400_schema_too_costly_and_stores_nothing(
    client, key, settings
):
    declare(client, key, COSTLY_SCHEMA, agentTool=True)
    events = Event.objects.count()
    settings.ARTIFACTS_MAX_VALIDATION_MS = 1
    call = {"artifact": {"kind": "k", "key": None, "title": None, "data": COSTLY_DATA}}
    response = client.post(
        "/free/v1/tools/tag_artifact",
        data=orjson.dumps({"input": call}),
        content_type="application/json",
        **bearer(key),
    )
    error = error_of(response, 400, "schema_too_costly")
    assert "artifact.data" in error["message"]
    _nothing_stored(events)


def test_past_the_budget_the_python_api_raises_schema_too_costly_and_stores_nothing(
    client, key, settings
):
    declare(client, key, COSTLY_SCHEMA)
    events = Event.objects.count()
    settings.ARTIFACTS_MAX_VALIDATION_MS = 1
    with pytest.raises(ArtifactError) as err:
        artifacts("free").tag(kind="k", data=COSTLY_DATA)
    assert err.value.code == "schema_too_costly" and err.value.status == 400
    _nothing_stored(events)
    settings.ARTIFACTS_MAX_VALIDATION_MS = 60_000  # the same tag, with time enough: answered
    with pytest.raises(ArtifactError) as err:
        artifacts("free").tag(kind="k", data=COSTLY_DATA)
    assert err.value.code == "schema_invalid"
    assert artifacts("free").tag(kind="k", data=COSTLY_DATA[:-1]).kind == "k"


def test_a_refusal_quotes_the_value_at_fault_bounded_whatever_its_size(client, key):
    declare(
        client,
        key,
        {
            "type": "object",
            "properties": {
                "text": {"type": "string", "pattern": "^b+$"},
                "deep": {"type": "string"},
            },
        },
    )
    huge = "a" * 400_000
    response = tag(client, key, {"text": huge, "deep": {"list": [huge] * 3}})
    error = error_of(response, 400, "schema_invalid")
    assert len(response.content) < 4_096  # was ~1.6 MB: each error's message and input quoted it
    by_place = {tuple(detail["loc"]): detail for detail in error["details"]}
    assert by_place[("text",)]["input"].endswith("…") and len(by_place[("text",)]["input"]) < 300
    assert len(by_place[("text",)]["msg"]) < 300
    assert "input" not in by_place[("deep",)]  # a large object is named by its loc, not quoted
    assert not Artifact.objects.exists()
