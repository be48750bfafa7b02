"""PUT /<slug>/v1/artifacts/kinds (API.md "Kinds declared over HTTP"): the declaration, its
refusals (each a 400 with a sentence, changing nothing), defaults, eviction and access."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from artifacts_app import services
from artifacts_app.models import Agent, Artifact, Event
from tests.rest.conftest import bearer

URL = "/free/v1/artifacts/kinds"
PR_SCHEMA = {
    "type": "object",
    "properties": {
        "url": {"type": "string"},
        "verdict": {"type": "string", "default": "comment"},
        "checks": {
            "type": "object",
            "properties": {"lint": {"type": "boolean", "default": True}},
        },
    },
    "required": ["url"],
}
DECLARATION = {
    "kinds": {
        "reviewed-pr": {
            "description": "A pull request this agent reviewed.",
            "schema": PR_SCHEMA,
            "keepVersions": 3,
        },
        "report": {"description": "A generated report."},
    },
    "agentTool": True,
    "max": 1000,
    "keepVersions": 5,
}


@pytest.fixture
def key(freeform) -> str:
    return services.agent_key_create(agent=freeform)[1]


def put(client, body: Any, token: str | None, url: str = URL):
    raw = body if isinstance(body, bytes) else orjson.dumps(body)
    return client.put(url, data=raw, content_type="application/json", **bearer(token))


def get(client, token: str | None, url: str = URL) -> Any:
    response = client.get(url, **bearer(token))
    assert response.status_code == 200, response.content
    return orjson.loads(response.content)


def tag(client, token: str, body: dict[str, Any], slug: str = "free"):
    return client.post(
        f"/{slug}/v1/artifacts",
        data=orjson.dumps(body),
        content_type="application/json",
        **bearer(token),
    )


def error_of(response, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.content
    error = orjson.loads(response.content)["error"]
    assert error["code"] == code, error
    assert error["message"].endswith(".") and len(error["message"].split()) >= 5, error
    return error


def test_put_answers_what_get_then_answers(client, key):
    response = put(client, DECLARATION, key)
    assert response.status_code == 200, response.content
    body = orjson.loads(response.content)
    assert body == get(client, key)
    assert body == {
        "kinds": [
            {
                "name": "report",
                "description": "A generated report.",
                "schema": None,
                "keepVersions": None,
            },
            {
                "name": "reviewed-pr",
                "description": "A pull request this agent reviewed.",
                "schema": PR_SCHEMA,
                "keepVersions": 3,
            },
        ],
        "max": 1000,
        "agentTool": True,
        "keepVersions": 5,
    }


def test_the_body_replaces_the_whole_declaration(client, key, freeform):
    assert put(client, DECLARATION, key).status_code == 200
    assert put(client, {"kinds": {"note": {"description": "A note."}}}, key).status_code == 200
    body = get(client, key)
    assert [k["name"] for k in body["kinds"]] == ["note"]
    assert (body["max"], body["agentTool"], body["keepVersions"]) == (1000, False, 10)
    # The rules of "Declaring kinds" now hold: only declared kinds, and a kind must be named.
    error_of(tag(client, key, {"kind": "report", "data": "x"}), 400, "unknown_kind")
    error_of(tag(client, key, {"data": "x"}), 400, "unknown_kind")
    assert tag(client, key, {"kind": "note", "data": "x"}).status_code == 201
    # Back to freeform: any kind, an omitted one is "artifact".
    assert put(client, {"kinds": {}}, key).status_code == 200
    created = tag(client, key, {"data": "y"})
    assert orjson.loads(created.content)["kind"] == "artifact"


def test_an_agent_declared_in_code_is_refused_with_409(client, reviewer):
    reviewer_key = services.agent_key_create(agent=reviewer)[1]
    before = get(client, reviewer_key, "/reviewer/v1/artifacts/kinds")
    response = put(client, DECLARATION, reviewer_key, "/reviewer/v1/artifacts/kinds")
    error = error_of(response, 409, "kinds_in_code")
    assert "agent_site.agents.reviewer" in error["message"]
    assert get(client, reviewer_key, "/reviewer/v1/artifacts/kinds") == before
    assert Agent.objects.get(slug="reviewer").kinds_hash == ""


def _with_schema(schema: Any, *, agent_tool: bool = True) -> dict[str, Any]:
    return {"kinds": {"k": {"description": "A kind.", "schema": schema}}, "agentTool": agent_tool}


@pytest.mark.parametrize(
    ("schema", "words"),
    [
        ({"$ref": "https://example.com/schemas/pr.json"}, "not local"),
        (
            {"type": "object", "properties": {"a": {"$ref": "other.json#/x"}}},
            "never fetches anything",
        ),
        ({"type": "object", "properties": {"a": {"$ref": "#/$defs/missing"}}}, "points at nothing"),
        ({"type": "strung"}, "not a valid JSON Schema"),
        ({"type": "object", "required": "url"}, "not a valid JSON Schema"),
        ({"$schema": "http://json-schema.org/draft-07/schema#", "type": "object"}, "2020-12"),
        (["not", "an", "object"], "JSON object"),
        (
            {
                "$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}},
                "$ref": "#/$defs/a",
            },
            "never end",
        ),
        ({"type": "object", "description": "x" * (64 * 1024)}, "64 KiB"),
    ],
)
def test_a_bad_schema_is_refused_with_invalid_schema(client, key, schema, words):
    assert put(client, DECLARATION, key).status_code == 200
    before = get(client, key)
    for agent_tool in (True, False):
        response = put(client, _with_schema(schema, agent_tool=agent_tool), key)
        error = error_of(response, 400, "invalid_schema")
        assert words in error["message"], error["message"]
        assert error["details"]["field"] == "kinds.k.schema" and error["details"]["kind"] == "k"
    assert get(client, key) == before


@pytest.mark.parametrize(
    ("schema", "keyword"),
    [
        ({"type": "object", "patternProperties": {"^x": {"type": "string"}}}, "patternProperties"),
        ({"type": "object", "additionalProperties": {"type": "integer"}}, "additionalProperties"),
        ({"type": "object", "not": {"required": ["a"]}}, "`not`"),
        ({"allOf": [{"type": "string"}, {"minLength": 2}]}, "`allOf`"),
        ({"type": "object", "properties": {"a": {}}}, "`type`"),
        ({"type": "array", "prefixItems": [{"type": "string"}]}, "prefixItems"),
        (
            {
                "type": "object",
                "properties": {"a": {"$ref": "#/properties/b"}, "b": {"type": "string"}},
            },
            "#/$defs/<name>",
        ),
    ],
)
def test_a_schema_strict_mode_cannot_express_is_refused_with_agent_tool_on(
    client, key, schema, keyword
):
    error = error_of(put(client, _with_schema(schema), key), 400, "invalid_schema")
    assert keyword in error["message"] and "strict mode" in error["message"], error["message"]
    assert Agent.objects.get(slug="free").kinds_hash == ""
    # The same schema is a fine schema: without the tool, it is accepted and validates.
    assert put(client, _with_schema(schema, agent_tool=False), key).status_code == 200


BAD_BODIES = [
    (b"[]", "invalid_body"),
    (b'"kinds"', "invalid_body"),
    ({"kinds": {}, "colour": "red"}, "unknown_field"),
    ({}, "invalid_kinds"),
    ({"kinds": []}, "invalid_kinds"),
    ({"kinds": {"bad name!": {"description": "x y"}}}, "invalid_kind"),
    ({"kinds": {"k": "A kind."}}, "invalid_kind"),
    ({"kinds": {"k": {"description": ""}}}, "invalid_description"),
    ({"kinds": {"k": {"description": "   "}}}, "invalid_description"),
    ({"kinds": {"k": {"description": "A kind.", "scheme": {}}}}, "unknown_field"),
    ({"kinds": {"k": {"description": "A kind.", "keepVersions": 0}}}, "invalid_keep_versions"),
    ({"kinds": {}, "max": 0}, "invalid_max"),
    ({"kinds": {}, "max": "10"}, "invalid_max"),
    ({"kinds": {}, "max": True}, "invalid_max"),
    ({"kinds": {}, "max": 2**40}, "invalid_max"),
    ({"kinds": {}, "keepVersions": 0}, "invalid_keep_versions"),
    ({"kinds": {}, "agentTool": "yes"}, "invalid_agent_tool"),
    ({"kinds": {}, "agentTool": True}, "tool_needs_kinds"),
    ({"kinds": {"k": {"description": "A\u0000kind."}}}, "invalid_body"),
    (b'{"kinds": {', "malformed_json"),
]


@pytest.mark.parametrize(("body", "code"), BAD_BODIES, ids=[c for _, c in BAD_BODIES])
def test_bad_bodies_are_refused_with_the_envelope_and_change_nothing(
    client, key, freeform, body, code
):
    assert put(client, DECLARATION, key).status_code == 200
    before = get(client, key)
    row = Agent.objects.values("kinds", "kinds_hash", "max_artifacts", "keep_versions").get(
        slug="free"
    )
    error = error_of(put(client, body, key), 400, code)
    if code == "invalid_body" and isinstance(body, dict):
        assert error["details"]["path"] == "kinds.k.description"
    assert get(client, key) == before
    assert (
        Agent.objects.values("kinds", "kinds_hash", "max_artifacts", "keep_versions").get(
            slug="free"
        )
        == row
    )


@pytest.mark.parametrize(
    ("caller", "status"),
    [("none", 401), ("user", 403), ("staff", 403), ("other_agent", 403)],
)
def test_only_the_agents_own_key_declares(client, key, freeform, alice, staff, caller, status):
    other = services.agent_create(slug="other")
    token = {
        "none": None,
        "user": services.user_token_create(user=alice)[1],
        "staff": services.user_token_create(user=staff)[1],
        "other_agent": services.agent_key_create(agent=other)[1],
    }[caller]
    response = put(client, DECLARATION, token)
    assert response.status_code == status
    assert orjson.loads(response.content)["error"]["message"]
    assert Agent.objects.get(slug="free").kinds_hash == ""


def test_unknown_agent_is_404(client, key):
    error_of(put(client, DECLARATION, key, "/nosuch/v1/artifacts/kinds"), 404, "unknown_agent")


def test_session_cookie_needs_csrf(freeform, staff):
    from django.test import Client

    browser = Client(enforce_csrf_checks=True)
    browser.force_login(staff)
    response = browser.put(URL, data=orjson.dumps(DECLARATION), content_type="application/json")
    assert response.status_code == 403
    assert Agent.objects.get(slug="free").kinds_hash == ""


def test_defaults_are_filled_recursively_and_stored(client, key):
    assert put(client, DECLARATION, key).status_code == 200
    response = tag(
        client, key, {"kind": "reviewed-pr", "key": "pr-1", "data": {"url": "u", "checks": {}}}
    )
    assert response.status_code == 201, response.content
    expected = {"url": "u", "verdict": "comment", "checks": {"lint": True}}
    record = orjson.loads(response.content)
    assert record["data"] == expected
    assert Artifact.objects.get(pk=record["id"]).data == expected
    # Not inside an object the data leaves out, and never over a value it gives.
    response = tag(client, key, {"kind": "reviewed-pr", "data": {"url": "u", "verdict": "approve"}})
    assert orjson.loads(response.content)["data"] == {"url": "u", "verdict": "approve"}


def test_data_that_fails_the_schema_is_refused_with_loc_and_msg_details(client, key):
    assert put(client, DECLARATION, key).status_code == 200
    response = tag(client, key, {"kind": "reviewed-pr", "data": {"verdict": 3, "checks": []}})
    error = error_of(response, 400, "schema_invalid")
    details = error["details"]
    assert isinstance(details, list) and len(details) == 3
    assert all(set(d) >= {"loc", "msg"} and isinstance(d["loc"], list) for d in details)
    assert {tuple(d["loc"]) for d in details} == {("url",), ("verdict",), ("checks",)}
    missing = next(d for d in details if d["loc"] == ["url"])
    assert missing["msg"] == "Field required"  # as pydantic words it
    assert Artifact.objects.count() == 0


def test_records_stored_already_are_not_revalidated(client, key):
    assert put(client, {"kinds": {"n": {"description": "A number."}}}, key).status_code == 200
    stored = orjson.loads(tag(client, key, {"kind": "n", "key": "a", "data": "text"}).content)
    strict = {"kinds": {"n": {"description": "A number.", "schema": {"type": "integer"}}}}
    assert put(client, strict, key).status_code == 200
    read = client.get(f"/free/v1/artifacts/{stored['id']}", **bearer(key))
    assert orjson.loads(read.content)["data"] == "text"
    error_of(tag(client, key, {"kind": "n", "key": "a", "data": "text"}), 400, "schema_invalid")


def test_lowering_max_evicts_the_surplus_now_with_events(client, key, freeform):
    assert put(client, {"kinds": {}, "max": 10}, key).status_code == 200
    ids = [
        orjson.loads(tag(client, key, {"key": f"k{i}", "data": i}).content)["id"] for i in range(6)
    ]
    tag(client, key, {"key": "k0", "data": "again"})  # k0 is now the newest-updated
    pinned = client.put(f"/free/v1/artifacts/{ids[1]}/pin", **bearer(key))
    assert pinned.status_code == 200
    seq_before = Agent.objects.get(slug="free").last_seq
    assert put(client, {"kinds": {}, "max": 3}, key).status_code == 200
    # The oldest-updated unpinned go: k2, k3, k4 (k1 is pinned, k0 was re-tagged).
    remaining = set(Artifact.objects.filter(agent=freeform).values_list("id", flat=True))
    assert remaining == {ids[0], ids[1], ids[5]}
    events = list(Event.objects.filter(agent=freeform, seq__gt=seq_before).order_by("seq"))
    assert [e.payload["reason"] for e in events] == ["evicted"] * 3
    assert {e.payload["record"]["id"] for e in events} == {ids[2], ids[3], ids[4]}
    agent = Agent.objects.get(slug="free")
    assert (agent.artifact_count, agent.max_artifacts) == (3, 3)
    assert agent.last_seq == seq_before + 3
    # The next new record evicts the oldest-updated unpinned one, as any tag at the cap does.
    tag(client, key, {"key": "k6", "data": 6})
    assert Artifact.objects.filter(agent=freeform).count() == 3
    assert not Artifact.objects.filter(pk=ids[5]).exists()


def test_keep_versions_per_agent_and_per_kind(client, key, freeform):
    declaration = {
        "kinds": {
            "short": {"description": "Keeps two.", "keepVersions": 2},
            "long": {"description": "Keeps the agent's."},
        },
        "keepVersions": 4,
    }
    assert put(client, declaration, key).status_code == 200
    for i in range(6):
        tag(client, key, {"kind": "short", "key": "s", "data": i})
        tag(client, key, {"kind": "long", "key": "l", "data": i})
    for record_key, kept in (("s", [6, 5]), ("l", [6, 5, 4, 3])):
        record = Artifact.objects.get(agent=freeform, key=record_key)
        versions = client.get(f"/free/v1/artifacts/{record.pk}/versions", **bearer(key))
        numbers = [v["version"] for v in orjson.loads(versions.content)["results"]]
        assert numbers == kept


def test_a_tag_reads_no_declaration_once_compiled(client, key):
    """Per-tag cost stays flat: the compiled declaration is found by the row's hash."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    assert put(client, DECLARATION, key).status_code == 200
    free_key = key
    body = {"kind": "reviewed-pr", "key": "a", "data": {"url": "u"}}
    assert tag(client, free_key, body).status_code == 201  # compiles, in this process
    with CaptureQueriesContext(connection) as declared:
        assert tag(client, free_key, body).status_code == 200
    assert put(client, {"kinds": {}}, key).status_code == 200
    assert tag(client, free_key, {"key": "a", "data": "x"}).status_code == 200
    with CaptureQueriesContext(connection) as freeform:
        assert tag(client, free_key, {"key": "a", "data": "y"}).status_code == 200
    assert len(declared.captured_queries) == len(freeform.captured_queries)
    assert not any('"kinds"' in q["sql"].split("FROM")[0] for q in declared.captured_queries)


def test_the_schema_describes_the_put_and_a_fuzzer_gets_no_5xx(client, key, freeform):
    """The OpenAPI schema carries the request body; schemathesis (positive and negative bodies,
    with the suite's fuzz loop) against a freeform agent's own key never gets a 5xx or an answer
    the schema does not say."""
    import schemathesis
    from django.core.wsgi import get_wsgi_application
    from schemathesis.checks import (
        content_type_conformance,
        not_a_server_error,
        response_schema_conformance,
        status_code_conformance,
    )
    from schemathesis.generation import DataGenerationMethod

    from tests.rest.test_schema import schema_of
    from tests.rest.test_schemathesis import _fuzz, keep_connection

    raw = schema_of(client)
    operation = raw["paths"]["/{slug}/v1/artifacts/kinds"]["put"]
    body = operation["requestBody"]["content"]["application/json"]["schema"]
    declared = raw["components"]["schemas"][body["$ref"].rsplit("/", 1)[-1]]
    assert set(declared["properties"]) == {"kinds", "agentTool", "max", "keepVersions"}
    assert {"200", "400", "401", "403", "404", "409"} <= set(operation["responses"])
    raw["paths"] = {"/{slug}/v1/artifacts/kinds": {"put": operation}}
    for parameter in operation.get("parameters", []):
        if parameter["in"] == "path" and parameter["name"] == "slug":
            parameter["schema"] = {"type": "string", "enum": ["free"]}
    checks = (
        not_a_server_error,
        status_code_conformance,
        content_type_conformance,
        response_schema_conformance,
    )
    tally: dict = {"cases": 0, "statuses": {}, "failures": {}}
    with keep_connection():
        for method in (DataGenerationMethod.positive, DataGenerationMethod.negative):
            schema = schemathesis.from_dict(raw, app=get_wsgi_application())
            (found,) = [result.ok() for result in schema.get_all_operations()]
            _fuzz(found, method, key, 30, checks, f"PUT kinds [{method.name}]", tally)
    assert not tally["failures"], "\n\n".join(tally["failures"].values())
    statuses = set(tally["statuses"])
    assert {200, 400} <= statuses and max(statuses) < 500, sorted(statuses)
