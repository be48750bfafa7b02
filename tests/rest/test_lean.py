"""The tag route has one road (artifacts_app/rest/lean.py): every ``POST /<slug>/v1/artifacts`` —
JSON or multipart, bearer or cookie, whole, chunked or streamed — is answered by ``lean.tag``
at the end of the site's whole middleware chain, before URL resolution.

Each request goes through the site's ASGI handler (one hop to the request's thread, counted) and
through Django's test client (Django's own handler); both reach the same ``tag`` (counted), and
status, headers and body agree, the good paths and the bad ones alike.
"""

from __future__ import annotations

import asyncio
import base64
import re
from typing import Any

import orjson
import pytest
from asgiref.testing import ApplicationCommunicator
from django.core.exceptions import ImproperlyConfigured
from django.http import HttpRequest, HttpResponse
from django.test import Client

from agent_site import body as body_stream
from agent_site.asgi import django_asgi_app
from artifacts_app import checks, services
from artifacts_app.models import Artifact
from artifacts_app.rest import lean
from tests.rest.conftest import bearer

pytestmark = pytest.mark.django_db(transaction=True)

VOLATILE = {"id", "createdAt", "updatedAt"}
PATH = "/reviewer/v1/artifacts"
CSRF = "a" * 32  # a CSRF secret, as the site's pages set it in the cookie and echo it


@pytest.fixture
def calls(monkeypatch):
    """The requests ``lean.tag`` answered, and those the ASGI handler answered in one hop."""
    seen: dict[str, list[str]] = {"tag": [], "hop": []}
    tag, hop = lean.tag, django_asgi_app._one_hop_response

    def counted_tag(request: HttpRequest, slug: str) -> HttpResponse:
        seen["tag"].append(slug)
        return tag(request, slug)

    def counted_hop(scope: dict, body_file: Any) -> HttpResponse:
        seen["hop"].append(scope["path"])
        return hop(scope, body_file)

    monkeypatch.setattr(lean, "tag", counted_tag)
    monkeypatch.setattr(django_asgi_app, "_one_hop_response", counted_hop)
    yield seen
    django_asgi_app.retire_all()  # close the handler threads' connections before teardown


@pytest.fixture
def keys(reviewer, alice):
    other = services.agent_create(slug="other", max_artifacts=100)
    return {
        "agent": services.agent_key_create(agent=reviewer)[1],
        "other": services.agent_key_create(agent=other)[1],
        "user": services.user_token_create(user=alice)[1],
    }


def _scope(method: str, path: str, headers: list[tuple[bytes, bytes]]) -> dict[str, Any]:
    raw_path, _, query = path.partition("?")
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": raw_path,
        "raw_path": raw_path.encode(),
        "query_string": query.encode(),
        "root_path": "",
        "headers": headers,
        "client": ("127.0.0.1", 1),
        "server": ("testserver", 80),
    }


async def _asgi(app: Any, scope: dict[str, Any], body: bytes) -> tuple[int, dict, bytes]:
    communicator = ApplicationCommunicator(app, scope)
    # As daphne sends an in-memory body: in pieces.
    for start in range(0, max(len(body), 1), 8192):
        piece = body[start : start + 8192]
        more = start + 8192 < len(body)
        await communicator.send_input({"type": "http.request", "body": piece, "more_body": more})
    start_message = await communicator.receive_output(timeout=30)
    content = b""
    while True:
        message = await communicator.receive_output(timeout=30)
        content += message.get("body", b"")
        if not message.get("more_body"):
            break
    await communicator.wait(timeout=30)
    answer_headers = {k.decode().lower(): v.decode() for k, v in start_message["headers"]}
    return start_message["status"], answer_headers, content


def _head(body: bytes, token: str | None, **headers: str) -> list[tuple[bytes, bytes]]:
    head = [(b"host", headers.pop("host", "testserver").encode())]
    head.append((b"content-type", headers.pop("content_type", "application/json").encode()))
    if token is not None:
        head.append((b"authorization", f"Bearer {token}".encode()))
    if not headers.pop("chunked", False):
        head.append((b"content-length", str(len(body)).encode()))
    else:
        head.append((b"transfer-encoding", b"chunked"))
    head += [(k.replace("_", "-").encode(), v.encode()) for k, v in headers.items()]
    return head


def _site(
    path: str, body: bytes, token: str | None, method: str = "POST", **headers: str
) -> tuple[int, dict, Any]:
    """Through the site's ASGI handler."""
    scope = _scope(method, path, _head(body, token, **headers))
    status, answer_headers, content = asyncio.run(_asgi(django_asgi_app, scope, body))
    return status, answer_headers, orjson.loads(content) if content else None


def _django(path: str, body: bytes, token: str | None, **headers: str) -> tuple[int, dict, Any]:
    """Through Django's test client."""
    extra = {"HTTP_HOST": headers.pop("host", "testserver")}
    content_type = headers.pop("content_type", "application/json")
    cookie = headers.pop("cookie", None)
    extra.update({f"HTTP_{k.upper()}": v for k, v in headers.items()})
    client = Client(enforce_csrf_checks=True)
    if cookie is not None:
        for pair in cookie.split("; "):
            name, _, value = pair.partition("=")
            client.cookies[name] = value
    response = client.post(path, body, content_type=content_type, **bearer(token), **extra)
    answer_headers = {k.lower(): v for k, v in response.headers.items()}
    return response.status_code, answer_headers, orjson.loads(response.content)


def _same(site: tuple[int, dict, Any], django: tuple[int, dict, Any]) -> None:
    def steady(body: Any) -> Any:
        if isinstance(body, dict) and "error" not in body:
            return {k: ("…" if k in VOLATILE else v) for k, v in body.items()}
        return body

    assert site[0] == django[0], (site, django)
    # Set by Django's handler on the way out, not by the site (the test client sends a cookie
    # jar; the ASGI handler is given the header itself); each request has an id of its own
    # (monitoring.RequestMiddleware): both answer one.
    answered = [
        {k: v for k, v in headers.items() if k != "set-cookie"} for headers in (site[1], django[1])
    ]
    for headers in answered:
        assert re.fullmatch(r"[0-9a-f]{32}", headers.pop("x-request-id"))
    assert answered[0] == answered[1]
    assert steady(site[2]) == steady(django[2])


def _tag_body(key: str, **extra: Any) -> bytes:
    return orjson.dumps({"kind": "reviewed-pr", "key": key, "data": {"url": key}, **extra})


def _multipart(record: bytes, contents: bytes | None = None, boundary: str = "b0und") -> bytes:
    parts = [
        f'--{boundary}\r\nContent-Disposition: form-data; name="record"\r\n\r\n'.encode()
        + record
        + b"\r\n"
    ]
    if contents is not None:
        parts.append(
            f'--{boundary}\r\nContent-Disposition: form-data; name="contents"; '
            'filename="c.txt"\r\nContent-Type: text/plain\r\n\r\n'.encode()
            + contents
            + b"\r\n"
        )
    return b"".join(parts) + f"--{boundary}--\r\n".encode()


MULTIPART = "multipart/form-data; boundary=b0und"


def test_a_tag_and_a_retag_answer_alike_on_both_handlers(keys, calls):
    for key in ("https://x/pr/1", "https://x/pr/2"):
        created = _site(PATH, _tag_body(key + "-L"), keys["agent"])
        assert created[0] == 201
        # Same record shape from Django's handler (another key: a create too).
        django = _django(PATH, _tag_body(key + "-D"), keys["agent"])
        site_body, django_body = dict(created[2]), dict(django[2])
        for body in (site_body, django_body):
            body["key"] = body["data"] = None
        _same((created[0], created[1], site_body), (django[0], django[1], django_body))
        replaced = _site(PATH, _tag_body(key + "-L"), keys["agent"])
        again = _django(PATH, _tag_body(key + "-D"), keys["agent"])
        assert replaced[0] == again[0] == 200
        assert replaced[2]["id"] == created[2]["id"]
    assert calls["tag"] == ["reviewer"] * 8
    assert calls["hop"] == [PATH] * 4
    stored = Artifact.objects.filter(agent__slug="reviewer", key__endswith="-L").count()
    assert stored == 2


def test_contents_and_their_type_go_through_the_same_checks(keys, calls):
    body = _tag_body("c", contentsBase64=base64.b64encode(b"hi").decode(), contentType="text/plain")
    site, django = _site(PATH, body, keys["agent"]), _django(PATH, body, keys["agent"])
    assert site[0] == 201 and django[0] == 200  # the second is a re-tag of key "c"
    assert site[2]["content"] == django[2]["content"]
    assert site[2]["content"]["size"] == 2
    both = _tag_body("c", contents="x", contentsBase64="eA==")
    _same(_site(PATH, both, keys["agent"]), _django(PATH, both, keys["agent"]))
    assert len(calls["tag"]) == 4


def test_a_multipart_tag_takes_the_same_road(keys, calls):
    record = orjson.dumps({"kind": "reviewed-pr", "key": "m", "data": {"url": "m"}})
    body = _multipart(record, b"file bytes")
    site = _site(PATH, body, keys["agent"], content_type=MULTIPART)
    django = _django(PATH, body, keys["agent"], content_type=MULTIPART)
    assert (site[0], django[0]) == (201, 200)
    assert site[2]["content"] == django[2]["content"]
    assert site[2]["content"]["size"] == 10
    assert site[2]["content"]["contentType"].startswith("text/plain")
    assert calls["hop"] == [PATH] and calls["tag"] == ["reviewer"] * 2


@pytest.mark.parametrize(
    ("name", "path", "body", "token", "headers"),
    [
        ("malformed JSON", PATH, b'{"kind": ', "agent", {}),
        ("not an object", PATH, b"[1]", "agent", {}),
        ("unknown field", PATH, b'{"kind":"note","data":{},"x":1}', "agent", {}),
        ("no data", PATH, b'{"kind":"reviewed-pr"}', "agent", {}),
        ("unknown kind", PATH, b'{"kind":"nope","data":{}}', "agent", {}),
        ("an empty body", PATH, b"", "agent", {}),
        ("no credentials", PATH, b"{}", None, {}),
        ("unknown token", PATH, b"{}", "art_nope", {}),
        ("malformed token", PATH, b"{}", "a b", {}),
        ("another agent's key", PATH, b"{}", "other", {}),
        ("a user's token", PATH, b"{}", "user", {}),
        ("unknown agent", "/nobody/v1/artifacts", b"{}", "agent", {}),
        ("NUL in the query", PATH + "?x=%00", b"{}", "agent", {}),
        ("a wrong Host", PATH, b"{}", "agent", {"host": "evil.example"}),
        ("JSON with a charset", PATH, b"{", "agent", {"content_type": "application/json; x=y"}),
        ("text", PATH, b"{}", "agent", {"content_type": "text/plain"}),
        ("a form", PATH, b"a=1", "agent", {"content_type": "application/x-www-form-urlencoded"}),
        ("no boundary", PATH, _multipart(b"{}"), "agent", {"content_type": "multipart/form-data"}),
        ("no record", PATH, b"--b0und--\r\n", "agent", {"content_type": MULTIPART}),
        ("a bad record", PATH, _multipart(b"[1]"), "agent", {"content_type": MULTIPART}),
        ("an unknown session cookie", PATH, b"{}", None, {"cookie": "sessionid=s"}),
    ],
)
def test_bad_requests_answer_the_same_envelope(keys, calls, name, path, body, token, headers):
    token = keys.get(token, token)
    site = _site(path, body, token, **dict(headers))
    django = _django(path, body, token, **dict(headers))
    _same(site, django)
    assert site[0] >= 400 and set(site[2]) == {"error"}, name
    assert len(calls["hop"]) == 1, "the handler did not answer the tag route in one hop"


def test_a_json_body_past_the_limit_is_refused_alike(keys, calls, settings):
    settings.ARTIFACTS_MAX_JSON_BODY_BYTES = 1000
    body = _tag_body("big", title="t" * 2000)
    site, django = _site(PATH, body, keys["agent"]), _django(PATH, body, keys["agent"])
    _same(site, django)
    assert (site[0], site[2]["error"]["code"]) == (413, "body_too_large")
    site = _site(PATH, body, keys["agent"], chunked="1")  # no length to refuse it by: read
    assert (site[0], site[2]["error"]["code"]) == (413, "body_too_large")


def _session_cookie(user) -> str:
    client = Client()
    client.force_login(user)
    return f"sessionid={client.cookies['sessionid'].value}"


def test_cookie_callers_need_the_csrf_token_then_are_refused_by_the_table(keys, alice, calls):
    cookie = _session_cookie(alice)
    body = _tag_body("by-cookie")
    site = _site(PATH, body, None, cookie=cookie)
    _same(site, _django(PATH, body, None, cookie=cookie))
    assert (site[0], site[2]["error"]["code"]) == (403, "csrf_failed")
    with_token = {"cookie": f"{cookie}; csrftoken={CSRF}", "x_csrftoken": CSRF}
    site = _site(PATH, body, None, **with_token)
    _same(site, _django(PATH, body, None, **with_token))
    # Past CSRF: the session's user is the caller, and only the agent's key may tag.
    assert (site[0], site[2]["error"]["code"]) == (403, "forbidden")
    # A bearer credential beside a cookie is the caller (the site's first authenticator).
    site = _site(PATH, body, keys["agent"], cookie=cookie)
    assert site[0] == 201 and site[2]["key"] == "by-cookie"
    assert len(calls["tag"]) == 5 and len(calls["hop"]) == 3


def test_a_chunked_json_body_is_read_as_it_comes(keys, calls):
    site = _site(PATH, _tag_body("chunked"), keys["agent"], chunked="1")
    assert site[0] == 201 and site[2]["key"] == "chunked"
    assert calls["hop"] == [PATH] and calls["tag"] == ["reviewer"]


def test_a_streamed_body_is_read_on_the_requests_thread(keys, calls):
    """A body daphne streams (agent_site/body.py: past STREAM_AT, or chunked) is handed over as
    a stream and read by the tag as it arrives; here the stream is fed before it is taken."""
    record = orjson.dumps({"kind": "reviewed-pr", "key": "streamed", "data": {"url": "s"}})
    body = _multipart(record, b"x" * 300_000)
    stream = body_stream.BodyStream(lambda: None, lambda: None)
    for start in range(0, len(body), 65536):
        stream.feed(body[start : start + 65536])
    stream.end()

    async def app(scope: dict, receive: Any, send: Any) -> None:
        messages = body_stream.StreamedMessages(stream, receive)
        await django_asgi_app(scope, messages.receive, send)

    head = _head(body, keys["agent"], content_type=MULTIPART)
    status, _, content = asyncio.run(_asgi(app, _scope("POST", PATH, head), b""))
    answer = orjson.loads(content)
    assert status == 201, answer
    assert answer["content"]["size"] == 300_000
    assert calls["hop"] == [PATH] and calls["tag"] == ["reviewer"]
    assert stream.closed


def test_other_methods_and_routes_are_djangos(keys, calls):
    status, _, answer = _site(PATH, b"", keys["agent"], method="GET")
    assert status == 200 and answer["results"] == []
    status, headers, answer = _site(PATH, b"{}", keys["agent"], method="PUT")
    assert (status, answer["error"]["code"]) == (405, "method_not_allowed")
    assert headers["allow"] == lean.ALLOW == "GET, POST, HEAD, OPTIONS"
    # The site's own prefixes are not agents: /admin/… stays the admin's.
    assert lean.route("POST", "/admin/v1/artifacts") is None
    assert lean.route("POST", "/reviewer/v1/artifacts/x") is None
    assert calls == {"tag": [], "hop": []}


class Stamp:
    """A middleware added to the site: it must run for the tag too."""

    def __init__(self, get_response: Any) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        # What URL resolution sets is there for the middleware around, as for any route.
        match = request.resolver_match
        response["X-Stamp"] = f"{match.view_name} {match.kwargs['slug']}" if match else "none"
        return response


def test_middleware_added_before_the_route_run_for_the_tag(keys, calls, settings):
    settings.MIDDLEWARE = [
        *settings.MIDDLEWARE[:-1],
        f"{__name__}.Stamp",
        lean.__name__ + ".TagRouteMiddleware",
    ]
    assert checks.check_tag_route_last() == []
    status, headers, _ = _django(PATH, _tag_body("stamped"), keys["agent"])
    assert (status, headers["x-stamp"]) == (201, "rest:artifacts reviewer")
    assert calls["tag"] == ["reviewer"]


def test_the_route_middleware_must_be_last(keys, settings):
    settings.MIDDLEWARE = [m for m in settings.MIDDLEWARE if not m.endswith("TagRouteMiddleware")]
    assert [error.id for error in checks.check_tag_route_last()] == ["artifacts.E105"]
    # Without it the POST reaches the view that only declares the tag (for the schema): it
    # says so instead of serving a second road.
    with pytest.raises(ImproperlyConfigured, match="TagRouteMiddleware"):
        Client().post(
            PATH, _tag_body("x"), content_type="application/json", **bearer(keys["agent"])
        )


def test_the_schema_still_documents_the_tag(keys, client):
    schema = orjson.loads(client.get("/api/schema/?format=json").content)
    operation = schema["paths"]["/{slug}/v1/artifacts"]["post"]
    assert operation["operationId"] == "artifacts_tag"
    assert set(operation["requestBody"]["content"]) == {"application/json", "multipart/form-data"}
    assert {"200", "201", "400", "401", "403", "404", "413", "415"} <= set(operation["responses"])
