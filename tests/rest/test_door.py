"""The one door for values: every value both databases cannot hold is
refused with the envelope naming the field, on every entry point, and what was stored can always
be listed, read and replayed. These run on SQLite and, in CI's scale pass, on PostgreSQL."""

from __future__ import annotations

import base64

import orjson
import pytest
from django.test import Client, override_settings

from artifacts_app import artifacts as artifacts_api
from artifacts_app import selectors, services
from artifacts_app.errors import ArtifactError
from artifacts_app.values import MAX_DEPTH, value_problem
from tests.rest.conftest import World, bearer
from tests.rest.test_bad_input import envelope_of, snapshot


def _nested(depth: int) -> object:
    value: object = 1
    for _ in range(depth):
        value = [value]
    return value


UNSTORABLE = [
    ("float standing for a huge integer", b'{"kind": "report", "data": {"n": 1e20}}', "data.n"),
    (
        "integer past 64 bits (parsed as a float)",
        b'{"kind": "report", "data": 18446744073709551616}',
        "data",
    ),
    ("integer 2**63", b'{"kind": "report", "data": {"a": [1, 9223372036854775808]}}', "data.a[1]"),
    ("negative past 64 bits", b'{"kind": "report", "data": {"n": -9223372036854775809}}', "data.n"),
    ("NUL in a nested value", b'{"kind": "report", "data": {"x": {"y": "a\\u0000"}}}', "data.x.y"),
    ("NUL in a key", b'{"kind": "report", "data": {"k\\u0000": 1}}', "data"),
    ("too deep", orjson.dumps({"kind": "report", "data": _nested(MAX_DEPTH + 1)}), None),
]


@pytest.mark.parametrize(("name", "raw", "path"), UNSTORABLE, ids=[c[0] for c in UNSTORABLE])
def test_rest_tag_refuses_values_a_database_cannot_hold(world: World, client, name, raw, path):
    before = snapshot()
    response = client.post(
        "/reviewer/v1/artifacts",
        data=raw,
        content_type="application/json",
        **bearer(world.agent_key),
    )
    assert response.status_code == 400, response.content
    error = envelope_of(response)
    assert error["code"] in ("invalid_data", "malformed_json")
    if path is not None:
        assert error["details"] == {"field": "data", "path": path}
        assert f"`{path}`" in error["message"]
    assert snapshot() == before


@pytest.mark.parametrize(
    "data",
    [
        2**63 - 1,
        -(2**63),
        9.2e18,
        1.5,
        -0.0,
        {"n": [True, None, "é", "\u2028"]},
        _nested(MAX_DEPTH),
    ],
)
def test_values_both_databases_hold_are_stored_and_read_back(world: World, client, data):
    response = client.post(
        "/reviewer/v1/artifacts",
        data=orjson.dumps({"kind": "report", "data": data}),
        content_type="application/json",
        **bearer(world.agent_key),
    )
    assert response.status_code == 201, response.content
    record_id = orjson.loads(response.content)["id"]
    listed = client.get("/reviewer/v1/artifacts?limit=500", **bearer(world.agent_key))
    assert listed.status_code == 200
    got = client.get(f"/reviewer/v1/artifacts/{record_id}", **bearer(world.agent_key))
    assert orjson.loads(got.content)["data"] == data


def test_multipart_record_goes_through_the_same_door(world: World, client):
    before = snapshot()
    response = client.post(
        "/reviewer/v1/artifacts",
        data={"record": '{"kind": "report", "data": {"n": 1e300}}'},
        **bearer(world.agent_key),
    )
    assert response.status_code == 400
    assert envelope_of(response)["details"] == {"field": "data", "path": "data.n"}
    response = client.post(
        "/reviewer/v1/artifacts",
        data={"record": '{"kind": "report", "data": NaN}'},
        **bearer(world.agent_key),
    )
    assert envelope_of(response) == {
        **envelope_of(response),
        "code": "malformed_json",
        "details": {**envelope_of(response)["details"], "field": "record"},
    }
    assert snapshot() == before


def test_python_api_and_services_refuse_the_same(world: World):
    before = snapshot()
    api = artifacts_api("reviewer")
    for data, path in [
        ({"n": 2**64}, "data.n"),
        ({"s": "\ud800"}, "data.s"),
        ({"f": float("nan")}, "data.f"),
        ({"f": float("inf")}, "data.f"),
        ({1: "non-string key"}, "data"),
        ({"x": object()}, "data.x"),
    ]:
        with pytest.raises(ArtifactError) as refused:
            api.tag(kind="report", data=data)
        assert refused.value.code == "invalid_data"
        assert refused.value.details == {"field": "data", "path": path}
    for field, kwargs in [
        ("key", {"key": "k\ud800"}),
        ("title", {"title": "t\ud800"}),
        ("turnId", {"turn_id": "\udfff"}),
    ]:
        with pytest.raises(ArtifactError) as refused:
            api.tag(kind="report", data={}, **kwargs)
        assert refused.value.details == {"field": field}
    with pytest.raises(ArtifactError):
        services.agent_key_create(agent=world.agent, label="a\x00b")
    with pytest.raises(ArtifactError):
        services.session_create(agent=world.agent, owner="al\ud800ice")
    with pytest.raises(ArtifactError) as refused:
        selectors.artifacts_page(agent=world.agent, kind="a\x00")
    assert refused.value.code == "invalid_query"
    assert snapshot() == before


# --- item 4: the tool's JSON-text input goes through the one parser -----------------------------


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ('{"artifact": {"kind": "report", "data": NaN}}', "malformed_json"),
        ('{"artifact": {"kind": "report", "data": Infinity}}', "malformed_json"),
        ('{"artifact": {"kind": "report", "data": "\\ud800"}}', "malformed_json"),
        ("[" * 10_000 + "]" * 10_000, "malformed_json"),
        ('{"artifact": {"kind": "report", "data": {"n": 1e20}}}', "invalid_data"),
        ('{"artifact": {"kind": "report", "data": {"s": "\\u0000"}}}', "invalid_data"),
    ],
    ids=["NaN", "Infinity", "lone surrogate", "10000 nested arrays", "1e20", "NUL"],
)
def test_tool_json_text_input_is_refused_like_rest(world: World, client, text, code):
    before = snapshot()
    response = client.post(
        "/reviewer/v1/tools/tag_artifact",
        data=orjson.dumps({"input": text}),
        content_type="application/json",
        **bearer(world.agent_key),
    )
    assert response.status_code == 400, response.content
    error = envelope_of(response)
    assert error["code"] == code
    assert error["details"]["field"] in ("input", "artifact.data")
    assert snapshot() == before


def test_tool_object_input_with_unstorable_data_names_the_models_field(world: World, client):
    response = client.post(
        "/reviewer/v1/tools/tag_artifact",
        data=b'{"input": {"artifact": {"kind": "report", "data": {"n": 18446744073709551616}}}}',
        content_type="application/json",
        **bearer(world.agent_key),
    )
    assert response.status_code == 400
    error = envelope_of(response)
    assert error["details"]["field"] == "artifact.data"
    assert "artifact.data" in error["message"]


# --- item 1 (paths and queries) and item 5 --------------------------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        "/revi%00ewer/v1/artifacts",
        "/reviewer/v1/sessions/s%00x",
        "/reviewer/v1/artifacts?kind=a%00",
        "/reviewer/v1/artifacts?a%00=1",
        "/reviewer/v1/sessions?cursor=%00",
    ],
)
def test_nul_in_a_path_or_query_is_400_even_without_credentials(db, client, url):
    response = client.get(url)
    assert response.status_code == 400, response.content
    assert envelope_of(response)["code"] in ("invalid_path", "invalid_query")


@pytest.mark.parametrize(
    "url",
    [
        "/playground/?agent=a%00",
        "/playground/?agent=reviewer&session=s%00",
        "/admin/artifacts_app/artifact/?q=%00",
        "/admin/artifacts_app/artifact/?agent=%00",
        "/admin/%00/",
    ],
)
def test_nul_in_playground_and_admin_queries_is_400(world: World, client, staff, url):
    client.force_login(staff)
    response = client.get(url)
    assert response.status_code == 400, response.content
    assert "NUL" in response.content.decode()


def test_admin_changelist_with_a_page_past_any_integer(world: World, client, staff):
    client.force_login(staff)
    response = client.get("/admin/artifacts_app/artifact/?p=99999999999999999999")
    assert response.status_code in (200, 302)


def _cursor(raw: str) -> str:
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


@pytest.mark.parametrize(
    "raw",
    ["0001-01-01T00:00:00+23:59|art_x", "9999-12-31T23:59:59-23:59|art_x"],
)
def test_list_cursor_with_an_out_of_range_date_is_400(world: World, client, raw):
    response = client.get(
        f"/reviewer/v1/artifacts?cursor={_cursor(raw)}", **bearer(world.agent_key)
    )
    assert response.status_code == 400, response.content
    assert envelope_of(response)["code"] == "invalid_cursor"


@pytest.mark.parametrize(
    ("header", "status"),
    [
        ("bytes=" + "9" * 5000 + "-", 416),
        ("bytes=0-" + "9" * 5000, 206),
        ("bytes=-" + "9" * 5000, 206),
    ],
)
def test_range_with_a_5000_digit_number(world: World, client, header, status):
    response = client.get(
        f"/reviewer/v1/artifacts/{world.content_id}/content",
        HTTP_RANGE=header,
        **bearer(world.agent_key),
    )
    assert response.status_code == status


# --- item 6: envelopes that were not -------------------------------------------------------------


@pytest.mark.parametrize("debug", [True, False])
@pytest.mark.parametrize(
    "url", ["/reviewer/v2/artifacts", "/reviewer/v1/artifacts/abc%0A", "/nobody/x", "/reviewer/v1"]
)
def test_unmatched_paths_under_a_slug_answer_the_404_envelope(world: World, client, url, debug):
    with override_settings(DEBUG=debug):
        response = client.get(url, **bearer(world.agent_key))
    assert response.status_code == 404, response.content
    assert response["Content-Type"] == "application/json"
    assert envelope_of(response)["code"] in ("unknown_route", "not_found")


def test_a_wrong_host_on_the_api_answers_the_envelope(world: World):
    response = Client(HTTP_HOST="evil.example").get("/reviewer/v1/artifacts")
    assert response.status_code == 400
    assert envelope_of(response)["code"] == "invalid_host"


@pytest.mark.parametrize(
    "url", ["/reviewer/v1/artifacts", "/reviewer/v1/sessions", "/reviewer/v1/artifacts/kinds"]
)
@pytest.mark.parametrize("method", ["options", "head"])
def test_options_and_head_need_credentials_like_get(world: World, client, url, method):
    response = getattr(client, method)(url)
    assert response.status_code == 401
    if method == "options":
        assert envelope_of(response)["code"] == "not_authenticated"
        assert b"docstring" not in response.content
    authed = getattr(client, method)(url, **bearer(world.agent_key))
    assert authed.status_code in (200, 204)
    if method == "options":
        assert "GET" in authed["Allow"] and authed.content == b""


def test_options_for_an_unknown_slug_is_404(db, client):
    response = client.options("/nobody/v1/artifacts")
    assert response.status_code == 404
    assert envelope_of(response)["code"] == "unknown_agent"


def test_value_problem_names_the_first_path():
    assert value_problem({"a": [1, {"b c": 2**70}]}) == (
        'data.a[1]["b c"]',
        value_problem(2**70)[1],
    )
    assert value_problem({"ok": [1, 2.5, "x", None, True]}) is None
