"""The tag route's lean road (artifacts_app/rest/lean.py) answers what Django's road answers.

Each request goes through the site's ASGI handler, where a bearer JSON ``POST …/artifacts`` takes
the lean road (counted), and through Django's test client (the whole middleware chain and the DRF
view); status, headers and body must agree, the good paths and the bad ones alike. A request the
lean road does not take (a cookie, a spooled body) still gets its answer from Django's road.
"""

from __future__ import annotations

import asyncio
import base64
import re
from typing import Any

import orjson
import pytest
from asgiref.testing import ApplicationCommunicator
from django.test import Client

from agent_site.asgi import django_asgi_app
from artifacts_app import services
from artifacts_app.models import Artifact
from tests.rest.conftest import bearer

pytestmark = pytest.mark.django_db(transaction=True)

VOLATILE = {"id", "createdAt", "updatedAt"}


@pytest.fixture
def lean_calls(monkeypatch):
    """How many requests the handler answered on the lean road."""
    calls: list[str] = []
    original = django_asgi_app._lean_response

    def counted(scope, body, slug):
        calls.append(slug)
        return original(scope, body, slug)

    monkeypatch.setattr(django_asgi_app, "_lean_response", counted)
    yield calls
    django_asgi_app.retire_all()  # close the handler threads' connections before teardown


@pytest.fixture
def keys(reviewer, alice):
    other = services.agent_create(slug="other", max_artifacts=100)
    return {
        "agent": services.agent_key_create(agent=reviewer)[1],
        "other": services.agent_key_create(agent=other)[1],
        "user": services.user_token_create(user=alice)[1],
    }


async def _asgi(
    path: str, body: bytes, headers: list[tuple[bytes, bytes]]
) -> tuple[int, dict, bytes]:
    raw_path, _, query = path.partition("?")
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": raw_path,
        "raw_path": raw_path.encode(),
        "query_string": query.encode(),
        "root_path": "",
        "headers": headers,
        "client": ("127.0.0.1", 1),
        "server": ("testserver", 80),
    }
    app = ApplicationCommunicator(django_asgi_app, scope)
    # As daphne sends an in-memory body: in pieces.
    for start in range(0, max(len(body), 1), 8192):
        piece = body[start : start + 8192]
        more = start + 8192 < len(body)
        await app.send_input({"type": "http.request", "body": piece, "more_body": more})
    start_message = await app.receive_output(timeout=30)
    content = b""
    while True:
        message = await app.receive_output(timeout=30)
        content += message.get("body", b"")
        if not message.get("more_body"):
            break
    await app.wait(timeout=30)
    answer_headers = {k.decode().lower(): v.decode() for k, v in start_message["headers"]}
    return start_message["status"], answer_headers, content


def _lean(path: str, body: bytes, token: str | None, **headers: str) -> tuple[int, dict, Any]:
    head = [(b"host", headers.pop("host", "testserver").encode())]
    head.append((b"content-type", headers.pop("content_type", "application/json").encode()))
    if token is not None:
        head.append((b"authorization", f"Bearer {token}".encode()))
    head.append((b"content-length", str(len(body)).encode()))
    head += [(k.replace("_", "-").encode(), v.encode()) for k, v in headers.items()]
    status, answer_headers, content = asyncio.run(_asgi(path, body, head))
    return status, answer_headers, orjson.loads(content)


def _django(path: str, body: bytes, token: str | None, **headers: str) -> tuple[int, dict, Any]:
    extra = {"HTTP_HOST": headers.pop("host", "testserver")}
    content_type = headers.pop("content_type", "application/json")
    extra.update({f"HTTP_{k.upper()}": v for k, v in headers.items()})
    response = Client().post(path, body, content_type=content_type, **bearer(token), **extra)
    answer_headers = {k.lower(): v for k, v in response.headers.items()}
    return response.status_code, answer_headers, orjson.loads(response.content)


def _same(lean: tuple[int, dict, Any], django: tuple[int, dict, Any]) -> None:
    def steady(body: Any) -> Any:
        if isinstance(body, dict) and "error" not in body:
            return {k: ("…" if k in VOLATILE else v) for k, v in body.items()}
        return body

    assert lean[0] == django[0], (lean, django)
    # Each request has an id of its own (monitoring.RequestMiddleware): both roads answer one.
    lean_headers, django_headers = dict(lean[1]), dict(django[1])
    for answered in (lean_headers, django_headers):
        assert re.fullmatch(r"[0-9a-f]{32}", answered.pop("x-request-id"))
    assert lean_headers == django_headers
    assert steady(lean[2]) == steady(django[2])


def _tag_body(key: str, **extra: Any) -> bytes:
    return orjson.dumps({"kind": "reviewed-pr", "key": key, "data": {"url": key}, **extra})


def test_a_tag_and_a_retag_answer_as_on_djangos_road(keys, lean_calls):
    path = "/reviewer/v1/artifacts"
    for key in ("https://x/pr/1", "https://x/pr/2"):
        created = _lean(path, _tag_body(key + "-L"), keys["agent"])
        assert created[0] == 201
        # Same record shape from Django's road (another key: a create too).
        django = _django(path, _tag_body(key + "-D"), keys["agent"])
        lean_body, django_body = dict(created[2]), dict(django[2])
        for body in (lean_body, django_body):
            body["key"] = body["data"] = None
        _same((created[0], created[1], lean_body), (django[0], django[1], django_body))
        replaced = _lean(path, _tag_body(key + "-L"), keys["agent"])
        again = _django(path, _tag_body(key + "-D"), keys["agent"])
        assert replaced[0] == again[0] == 200
        assert replaced[2]["id"] == created[2]["id"]
    assert lean_calls == ["reviewer"] * 4
    stored = Artifact.objects.filter(agent__slug="reviewer", key__endswith="-L").count()
    assert stored == 2


def test_contents_and_their_type_go_through_the_same_checks(keys, lean_calls):
    path = "/reviewer/v1/artifacts"
    body = _tag_body("c", contentsBase64=base64.b64encode(b"hi").decode(), contentType="text/plain")
    lean, django = _lean(path, body, keys["agent"]), _django(path, body, keys["agent"])
    assert lean[0] == 201 and django[0] == 200  # the second is a re-tag of key "c"
    assert lean[2]["content"] == django[2]["content"]
    assert lean[2]["content"]["size"] == 2
    both = _tag_body("c", contents="x", contentsBase64="eA==")
    _same(_lean(path, both, keys["agent"]), _django(path, both, keys["agent"]))
    assert len(lean_calls) == 2


@pytest.mark.parametrize(
    ("name", "path", "body", "token", "headers"),
    [
        ("malformed JSON", "/reviewer/v1/artifacts", b'{"kind": ', "agent", {}),
        ("not an object", "/reviewer/v1/artifacts", b"[1]", "agent", {}),
        (
            "unknown field",
            "/reviewer/v1/artifacts",
            b'{"kind":"note","data":{},"x":1}',
            "agent",
            {},
        ),
        ("no data", "/reviewer/v1/artifacts", b'{"kind":"reviewed-pr"}', "agent", {}),
        ("unknown kind", "/reviewer/v1/artifacts", b'{"kind":"nope","data":{}}', "agent", {}),
        ("unknown token", "/reviewer/v1/artifacts", b"{}", "art_nope", {}),
        ("malformed token", "/reviewer/v1/artifacts", b"{}", "a b", {}),
        ("another agent's key", "/reviewer/v1/artifacts", b"{}", "other", {}),
        ("a user's token", "/reviewer/v1/artifacts", b"{}", "user", {}),
        ("unknown agent", "/nobody/v1/artifacts", b"{}", "agent", {}),
        ("NUL in the query", "/reviewer/v1/artifacts?x=%00", b"{}", "agent", {}),
        ("a wrong Host", "/reviewer/v1/artifacts", b"{}", "agent", {"host": "evil.example"}),
        (
            "JSON with a charset",
            "/reviewer/v1/artifacts",
            b"{",
            "agent",
            {"content_type": "application/json; charset=utf-8"},
        ),
    ],
)
def test_bad_requests_answer_the_same_envelope(keys, lean_calls, name, path, body, token, headers):
    token = keys.get(token, token)
    lean = _lean(path, body, token, **dict(headers))
    django = _django(path, body, token, **dict(headers))
    _same(lean, django)
    assert lean[0] >= 400 and set(lean[2]) == {"error"}, name
    assert len(lean_calls) == 1, "the request did not take the lean road"


def test_a_json_body_past_the_limit_is_refused_alike(keys, lean_calls, settings):
    settings.ARTIFACTS_MAX_JSON_BODY_BYTES = 1000
    body = _tag_body("big", title="t" * 2000)
    lean, django = (
        _lean("/reviewer/v1/artifacts", body, keys["agent"]),
        _django("/reviewer/v1/artifacts", body, keys["agent"]),
    )
    _same(lean, django)
    assert (lean[0], lean[2]["error"]["code"]) == (413, "body_too_large")


def test_requests_the_lean_road_does_not_take_get_djangos_answer(keys, lean_calls):
    body = _tag_body("https://x/cookie")
    status, _, answer = _lean("/reviewer/v1/artifacts", body, keys["agent"], cookie="sessionid=x")
    assert status == 201 and answer["key"] == "https://x/cookie", answer
    status, _, answer = _lean(
        "/reviewer/v1/artifacts", body, keys["agent"], content_type="text/plain"
    )
    assert status == 415
    assert lean_calls == []
