"""Bad input answers its 4xx envelope and changes nothing (API.md "Errors")."""

from __future__ import annotations

import base64
import io

import orjson
import pytest

from artifacts_app.models import Agent, Artifact, Blob, Event, Session
from tests.conftest import blob_files
from tests.rest.conftest import World, bearer


def _cursor(raw: str) -> str:
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def snapshot() -> tuple:
    return (
        sorted(Artifact.objects.values_list("id", "updated_at", "blob_id", "data")),
        Blob.objects.count(),
        Event.objects.count(),
        Session.objects.count(),
        sorted(Agent.objects.values_list("slug", "artifact_count", "last_seq")),
        sorted(str(p) for p in blob_files()),
    )


def envelope_of(response) -> dict:
    payload = orjson.loads(response.content)
    assert set(payload) == {"error"}
    error = payload["error"]
    assert isinstance(error["code"], str) and error["code"].islower()
    assert isinstance(error["message"], str) and error["message"]
    return error


GOOD = {"kind": "reviewed-pr", "key": "k", "data": {"url": "https://x/1"}}

JSON_CASES = [
    ("malformed json", b'{"kind": ', 400, "malformed_json"),
    ("not an object", b"[1, 2]", 400, "invalid_body"),
    ("NaN", b'{"kind": "report", "data": NaN}', 400, "malformed_json"),
    ("data missing", {"kind": "report"}, 400, "data_required"),
    ("data null", {"kind": "report", "data": None}, 400, "data_required"),
    ("kind wrong type", {"kind": 5, "data": {}}, 400, "invalid_kind"),
    ("unknown kind", {"kind": "nope", "data": {}}, 400, "unknown_kind"),
    ("key wrong type", {**GOOD, "key": 5}, 400, "invalid_key"),
    ("key empty", {**GOOD, "key": ""}, 400, "invalid_key"),
    ("key too long", {**GOOD, "key": "k" * 1025}, 400, "invalid_key"),
    ("title wrong type", {**GOOD, "title": ["t"]}, 400, "invalid_title"),
    ("title NUL", {**GOOD, "title": "a\x00b"}, 400, "invalid_title"),
    ("turnId wrong type", {**GOOD, "turnId": {}}, 400, "invalid_turn_id"),
    ("source unknown", {**GOOD, "source": "human"}, 400, "invalid_source"),
    ("sessionId wrong type", {**GOOD, "sessionId": 7}, 400, "invalid_session_id"),
    ("unknown session", {**GOOD, "sessionId": "s-none"}, 404, "unknown_session"),
    (
        "unknown session with contents",
        {**GOOD, "sessionId": "s-none", "contents": "x"},
        404,
        "unknown_session",
    ),
    ("schema violation", {"kind": "reviewed-pr", "data": {"verdict": 3}}, 400, "schema_invalid"),
    ("data with NUL", {"kind": "report", "data": {"a": "x\x00y"}}, 400, "invalid_data"),
    ("data key with NUL", {"kind": "report", "data": {"a\x00": 1}}, 400, "invalid_data"),
    (
        "both contents",
        {**GOOD, "contents": "a", "contentsBase64": "YQ=="},
        400,
        "contents_conflict",
    ),
    ("contents wrong type", {**GOOD, "contents": 5}, 400, "invalid_contents"),
    ("invalid base64", {**GOOD, "contentsBase64": "not base64!"}, 400, "invalid_base64"),
    ("base64 wrong type", {**GOOD, "contentsBase64": [1]}, 400, "invalid_base64"),
    (
        "contentType without contents",
        {**GOOD, "contentType": "text/plain"},
        400,
        "content_type_without_contents",
    ),
    (
        "contentType invalid",
        {**GOOD, "contents": "x", "contentType": "text\nplain"},
        400,
        "invalid_content_type",
    ),
    ("unknown field", {**GOOD, "sessionID": "s-alice"}, 400, "unknown_field"),
]


@pytest.mark.parametrize(
    ("name", "payload", "status", "code"), JSON_CASES, ids=[c[0] for c in JSON_CASES]
)
def test_tag_json_refusals_change_nothing(world: World, client, name, payload, status, code):
    before = snapshot()
    raw = payload if isinstance(payload, bytes) else orjson.dumps(payload)
    response = client.post(
        "/reviewer/v1/artifacts",
        data=raw,
        content_type="application/json",
        **bearer(world.agent_key),
    )
    assert response.status_code == status, response.content
    assert envelope_of(response)["code"] == code
    assert snapshot() == before


def test_schema_violation_lists_the_validator_errors(world: World, client):
    response = client.post(
        "/reviewer/v1/artifacts",
        data=orjson.dumps({"kind": "reviewed-pr", "data": {}}),
        content_type="application/json",
        **bearer(world.agent_key),
    )
    error = envelope_of(response)
    assert error["code"] == "schema_invalid"
    assert error["details"][0]["loc"] == ["url"]


def test_oversize_data_body_and_content(world: World, client, settings):
    settings.ARTIFACTS_MAX_DATA_BYTES = 100
    settings.ARTIFACTS_MAX_JSON_BODY_BYTES = 1000
    settings.ARTIFACTS_MAX_CONTENT_BYTES = 50
    before = snapshot()
    cases = [
        ({"kind": "report", "data": {"x": "y" * 200}}, "data_too_large"),
        ({"kind": "report", "data": {}, "contents": "z" * 2000}, "body_too_large"),
        ({"kind": "report", "data": {}, "contents": "z" * 51}, "content_too_large"),
        (
            {"kind": "report", "data": {}, "contentsBase64": base64.b64encode(b"q" * 51).decode()},
            "content_too_large",
        ),
    ]
    for payload, code in cases:
        response = client.post(
            "/reviewer/v1/artifacts",
            data=orjson.dumps(payload),
            content_type="application/json",
            **bearer(world.agent_key),
        )
        assert response.status_code == 413, (code, response.content)
        error = envelope_of(response)
        assert error["code"] == code
        assert "ARTIFACTS_MAX_" in error["message"]
    handle = io.BytesIO(b"w" * 5000)
    handle.name = "big.bin"
    response = client.post(
        "/reviewer/v1/artifacts",
        data={"record": orjson.dumps({"kind": "report", "data": {}}).decode(), "contents": handle},
        **bearer(world.agent_key),
    )
    assert response.status_code == 413
    assert envelope_of(response)["code"] == "content_too_large"
    assert snapshot() == before


MULTIPART_CASES = [
    ("record missing", {"file": True}, 400, "record_required"),
    ("record not json", {"record": "{nope"}, 400, "malformed_json"),
    (
        "record and contents field",
        {"record": orjson.dumps({**GOOD, "contents": "a"}).decode(), "file": True},
        400,
        "contents_conflict",
    ),
    (
        "record unknown kind",
        {"record": orjson.dumps({"kind": "zzz", "data": {}}).decode(), "file": True},
        400,
        "unknown_kind",
    ),
]


@pytest.mark.parametrize(
    ("name", "fields", "status", "code"), MULTIPART_CASES, ids=[c[0] for c in MULTIPART_CASES]
)
def test_tag_multipart_refusals_change_nothing(world: World, client, name, fields, status, code):
    before = snapshot()
    data = dict(fields)
    if data.pop("file", False):
        handle = io.BytesIO(b"bytes")
        handle.name = "f.bin"
        data["contents"] = handle
    response = client.post("/reviewer/v1/artifacts", data=data, **bearer(world.agent_key))
    assert response.status_code == status, response.content
    assert envelope_of(response)["code"] == code
    assert snapshot() == before


def test_other_body_types_are_415(world: World, client):
    before = snapshot()
    response = client.post(
        "/reviewer/v1/artifacts",
        data="kind=report",
        content_type="application/x-www-form-urlencoded",
        **bearer(world.agent_key),
    )
    assert response.status_code == 415
    assert envelope_of(response)["code"] == "unsupported_media_type"
    assert snapshot() == before


@pytest.mark.parametrize(
    ("query", "code"),
    [
        ("limit=0", "invalid_query"),
        ("limit=501", "invalid_query"),
        ("limit=abc", "invalid_query"),
        ("limit=1.5", "invalid_limit"),
        ("source=human", "invalid_query"),
        ("source=", "invalid_query"),  # no source named: outside the enum, as `human`
        ("cursor=%21%21notacursor", "invalid_cursor"),
        ("kind=a%00b", "invalid_query"),
        ("cursor=" + _cursor("2026-01-01T00:00:00+00:00|art\x00x"), "invalid_cursor"),
    ],
)
def test_list_refuses_bad_query(world: World, client, query, code):
    # The agent's list and the list across agents read the same filters.
    for path in ("/reviewer/v1/artifacts", "/api/v1/artifacts"):
        response = client.get(f"{path}?{query}", **bearer(world.agent_key))
        assert response.status_code == 400, (path, response.content)
        assert envelope_of(response)["code"] == code


@pytest.mark.parametrize(
    "cursor",
    [
        _cursor("2026-01-01T00:00:00+00:00|²"),  # a digit to str.isdigit, not to int()
        _cursor("2026-01-01T00:00:00+00:00|" + "9" * 40),
        _cursor("2026-01-01T00:00:00|5"),  # no time zone
        "%%%",
    ],
)
def test_sessions_list_refuses_bad_cursors(world: World, client, cursor):
    response = client.get(f"/reviewer/v1/sessions?cursor={cursor}", **bearer(world.agent_key))
    assert response.status_code == 400, response.content
    assert envelope_of(response)["code"] in ("invalid_cursor", "invalid_query")


@pytest.mark.parametrize(
    ("payload", "status", "code"),
    [
        ({"id": "has space"}, 400, "invalid_session_id"),
        ({"id": 5}, 400, "invalid_session_id"),
        ({"owner": "nobody"}, 400, "unknown_user"),
        ({"owner": "a\x00"}, 400, "unknown_user"),
        ({"owner": 3}, 400, "invalid_owner"),
        ({"id": "s-alice"}, 409, "session_exists"),
        ({"nope": 1}, 400, "unknown_field"),
        ([], 400, "invalid_body"),
    ],
)
def test_session_create_refusals_change_nothing(world: World, client, payload, status, code):
    before = snapshot()
    response = client.post(
        "/reviewer/v1/sessions",
        data=orjson.dumps(payload),
        content_type="application/json",
        **bearer(world.agent_key),
    )
    assert response.status_code == status, response.content
    assert envelope_of(response)["code"] == code
    assert snapshot() == before


def test_bad_paths_answer_envelopes(world: World, client):
    key = bearer(world.agent_key)
    for path, status, code in [
        ("/reviewer/v1/artifacts/", 404, "unknown_route"),
        ("/reviewer/v1/artifacts/art_nope", 404, "unknown_artifact"),
        ("/reviewer/v1/artifacts/has%00nul", 400, "invalid_path"),  # refused at the door
        ("/reviewer/v1/sessions/s-none", 404, "unknown_session"),
        ("/reviewer/v1/", 404, "unknown_route"),
        ("/reviewer/v1/tools/nope", 404, "unknown_route"),
        ("/Not_A_Slug/v1/artifacts", 404, "unknown_agent"),
    ]:
        response = client.get(path, **key)
        assert response.status_code == status, path
        assert envelope_of(response)["code"] == code, path
    response = client.patch("/reviewer/v1/artifacts/kinds", **key)
    assert response.status_code == 405
    assert envelope_of(response)["code"] == "method_not_allowed"
    assert "GET" in response["Allow"]
