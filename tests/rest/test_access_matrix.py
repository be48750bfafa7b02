"""Every route × every kind of caller, with the expected status and, for lists, exactly the ids.

The matrix must name every route the URLconf serves under /<slug>/v1/: ``test_matrix_covers_urlconf``
enumerates the patterns, so a new route without a row here fails.
"""

from __future__ import annotations

import orjson
import pytest
from django.urls import URLPattern, URLResolver

from artifacts_app import services
from artifacts_app.rest import urls as rest_urls
from tests.rest.conftest import World, bearer

# Routes that another issue owns and tests (none left: the tool routes are in the matrix).
DEFERRED_PREFIXES: tuple[str, ...] = ()

CALLERS = ("none", "agent", "other_agent", "owner", "other_user", "staff")


def _token(world: World, caller: str) -> str | None:
    return {
        "none": None,
        "agent": world.agent_key,
        "other_agent": world.other_key,
        "owner": world.alice_token,
        "other_user": world.bob_token,
        "staff": world.staff_token,
    }[caller]


# (route pattern, method) -> {caller: status}; list routes also check ids (see LIST_IDS).
MATRIX: dict[tuple[str, str], dict[str, int]] = {
    ("sessions", "GET"): dict(
        none=401, agent=200, other_agent=403, owner=200, other_user=200, staff=200
    ),
    ("sessions", "POST"): dict(
        none=401, agent=201, other_agent=403, owner=201, other_user=201, staff=403
    ),
    ("sessions/<session_id>", "GET"): dict(
        none=401, agent=200, other_agent=403, owner=200, other_user=404, staff=200
    ),
    ("artifacts", "GET"): dict(
        none=401, agent=200, other_agent=403, owner=200, other_user=200, staff=200
    ),
    ("artifacts", "POST"): dict(
        none=401, agent=201, other_agent=403, owner=403, other_user=403, staff=403
    ),
    ("artifacts/kinds", "GET"): dict(
        none=401, agent=200, other_agent=403, owner=200, other_user=200, staff=200
    ),
    # The world's agent declares its kinds in code: its own key gets 409 kinds_in_code (the
    # freeform agent's own key is tested in test_kinds_put.py).
    ("artifacts/kinds", "PUT"): dict(
        none=401, agent=409, other_agent=403, owner=403, other_user=403, staff=403
    ),
    ("artifacts/<artifact_id>", "GET"): dict(
        none=401, agent=200, other_agent=403, owner=200, other_user=404, staff=200
    ),
    ("artifacts/<artifact_id>", "DELETE"): dict(
        none=401, agent=204, other_agent=403, owner=403, other_user=404, staff=204
    ),
    ("artifacts/<artifact_id>/content", "GET"): dict(
        none=401, agent=200, other_agent=403, owner=200, other_user=404, staff=200
    ),
    ("artifacts/<artifact_id>/pin", "PUT"): dict(
        none=401, agent=200, other_agent=403, owner=403, other_user=404, staff=200
    ),
    ("artifacts/<artifact_id>/pin", "DELETE"): dict(
        none=401, agent=200, other_agent=403, owner=403, other_user=404, staff=200
    ),
    ("artifacts/<artifact_id>/versions", "GET"): dict(
        none=401, agent=200, other_agent=403, owner=200, other_user=404, staff=200
    ),
    ("artifacts/<artifact_id>/versions/<number>", "GET"): dict(
        none=401, agent=200, other_agent=403, owner=200, other_user=404, staff=200
    ),
    ("artifacts/<artifact_id>/versions/<number>/content", "GET"): dict(
        none=401, agent=200, other_agent=403, owner=200, other_user=404, staff=200
    ),
    ("artifacts/<artifact_id>/versions/<number>/diff", "GET"): dict(
        none=401, agent=200, other_agent=403, owner=200, other_user=404, staff=200
    ),
    ("artifacts/<artifact_id>/versions/<number>/restore", "POST"): dict(
        none=401, agent=200, other_agent=403, owner=403, other_user=403, staff=403
    ),
    ("artifacts/<artifact_id>/content", "PUT"): dict(
        none=401, agent=200, other_agent=403, owner=403, other_user=403, staff=403
    ),
    ("tools/tag_artifact", "GET"): dict(
        none=401, agent=200, other_agent=403, owner=403, other_user=403, staff=200
    ),
    ("tools/tag_artifact", "POST"): dict(
        none=401, agent=201, other_agent=403, owner=403, other_user=403, staff=403
    ),
    # Webhooks: the agent's key, or a user holding the webhook model permission (none here).
    ("webhooks", "GET"): dict(
        none=401, agent=200, other_agent=403, owner=403, other_user=403, staff=403
    ),
    ("webhooks", "POST"): dict(
        none=401, agent=201, other_agent=403, owner=403, other_user=403, staff=403
    ),
    ("webhooks/<webhook_id>", "GET"): dict(
        none=401, agent=200, other_agent=403, owner=403, other_user=403, staff=403
    ),
    ("webhooks/<webhook_id>", "PATCH"): dict(
        none=401, agent=200, other_agent=403, owner=403, other_user=403, staff=403
    ),
    ("webhooks/<webhook_id>", "DELETE"): dict(
        none=401, agent=204, other_agent=403, owner=403, other_user=403, staff=403
    ),
    ("webhooks/<webhook_id>/secret", "POST"): dict(
        none=401, agent=200, other_agent=403, owner=403, other_user=403, staff=403
    ),
    ("webhooks/<webhook_id>/deliveries", "GET"): dict(
        none=401, agent=200, other_agent=403, owner=403, other_user=403, staff=403
    ),
    ("webhooks/<webhook_id>/replay", "POST"): dict(
        none=401, agent=200, other_agent=403, owner=403, other_user=403, staff=403
    ),
    # Uploads are the agent key's alone and hidden from the others (404). The key gets 412: the
    # matrix speaks no tus (Tus-Resumable), and the version is checked once the caller is let in.
    ("uploads", "POST"): dict(
        none=401, agent=412, other_agent=404, owner=404, other_user=404, staff=404
    ),
    ("uploads/<upload_id>", "PATCH"): dict(
        none=401, agent=412, other_agent=404, owner=404, other_user=404, staff=404
    ),
    ("uploads/<upload_id>", "DELETE"): dict(
        none=401, agent=412, other_agent=404, owner=404, other_user=404, staff=404
    ),
}

PUBLIC_URL = "https://93.184.216.34/hook"  # a public address: no name to resolve


def _route_of(regex: str) -> str:
    """A URL pattern as the matrix names it: named groups become <name>."""
    import re

    text = regex.lstrip("^").rstrip("$")
    return re.sub(r"\(\?P<(\w+)>[^)]*\)", r"<\1>", text)


def urlconf_routes() -> set[tuple[str, str]]:
    found: set[tuple[str, str]] = set()

    def walk(patterns: list, prefix: str) -> None:
        for pattern in patterns:
            if isinstance(pattern, URLResolver):
                walk(pattern.url_patterns, prefix + _route_of(str(pattern.pattern)))
                continue
            assert isinstance(pattern, URLPattern)
            if pattern.name == "unknown_route":
                continue
            route = prefix + _route_of(str(pattern.pattern))
            if route.startswith(DEFERRED_PREFIXES):
                continue
            view = pattern.callback.view_class
            for method in ("get", "post", "put", "patch", "delete"):
                if hasattr(view, method):
                    found.add((route, method.upper()))

    walk(rest_urls.agent_urlpatterns, "")
    return found


def test_matrix_covers_urlconf():
    assert urlconf_routes() == set(MATRIX)


def _path(world: World, route: str) -> str:
    if "<webhook_id>" in route:
        webhook, _ = services.webhook_create(agent=world.agent, url=PUBLIC_URL)
        route = route.replace("<webhook_id>", webhook.public_id)
    path = "/reviewer/v1/" + route.replace("<session_id>", world.alice_session).replace(
        "<artifact_id>", world.content_id
    ).replace("<number>", "1").replace("<upload_id>", "up_missing")
    return path + "?from=1" if path.endswith("/diff") else path


def _body(route: str, method: str) -> dict | None:
    if method == "PUT" and route.endswith(
        "/content"
    ):  # the raw content; the test client sends no Content-Type with no body
        return {"replaced": True}
    if method == "PATCH":
        return {"description": "changed"}
    if route == "webhooks" and method == "POST":
        return {"url": PUBLIC_URL}
    if route.endswith("/replay"):
        return {"after": 0}
    if method != "POST" or route.endswith(("/restore", "/secret")):
        return None
    if route == "sessions":
        return {}
    if route == "tools/tag_artifact":
        return {"input": {"artifact": {"kind": "report", "key": None, "title": None, "data": "r"}}}
    return {"kind": "report", "data": {"n": 1}}


CASES = [(route, method, caller) for (route, method) in MATRIX for caller in CALLERS]


@pytest.mark.parametrize(
    ("route", "method", "caller"), CASES, ids=[f"{m} {r} {c}" for r, m, c in CASES]
)
def test_access(world: World, client, route: str, method: str, caller: str):
    expected = MATRIX[(route, method)][caller]
    headers = bearer(_token(world, caller))
    body = _body(route, method)
    response = client.generic(
        method,
        _path(world, route),
        data=orjson.dumps(body) if body is not None else b"",
        content_type="application/json",
        **headers,
    )
    assert response.status_code == expected, getattr(response, "content", b"")
    if expected >= 400:
        error = orjson.loads(response.content)["error"]
        assert error["code"] and error["message"]
        return
    if (route, method) in LIST_IDS:
        results = orjson.loads(response.content)["results"]
        assert {row["id"] for row in results} == LIST_IDS[(route, method)](world, caller)


LIST_IDS = {
    ("artifacts/<artifact_id>/versions", "GET"): lambda w, c: {w.content_id},
    ("artifacts", "GET"): lambda w, c: {
        "agent": w.all_ids(),
        "staff": w.all_ids(),
        "owner": set(w.alice_ids),
        "other_user": set(w.bob_ids),
    }[c],
    ("sessions", "GET"): lambda w, c: {
        "agent": {w.alice_session, w.bob_session},
        "staff": {w.alice_session, w.bob_session},
        "owner": {w.alice_session},
        "other_user": {w.bob_session},
    }[c],
}


def test_unknown_agent_is_404_for_everyone(world: World, client):
    for token in (None, world.agent_key, world.alice_token):
        response = client.get("/nosuch/v1/artifacts", **bearer(token))
        assert response.status_code == 404
        assert orjson.loads(response.content)["error"]["code"] == "unknown_agent"


def test_revoked_and_unknown_tokens_are_401(world: World, client):
    from artifacts_app import services

    services.token_revoke(token=world.alice_token)
    for token in (world.alice_token, "aak_00000000_nope", "garbage"):
        response = client.get("/reviewer/v1/artifacts", **bearer(token))
        assert response.status_code == 401
        assert response["WWW-Authenticate"].startswith("Bearer")
        assert orjson.loads(response.content)["error"]["code"] == "invalid_token"


def _csrf_cookie(browser) -> str:
    """What a page of the site would have set: a CSRF cookie, echoed in X-CSRFToken."""
    from django.middleware.csrf import _get_new_csrf_string

    token = _get_new_csrf_string()
    browser.cookies["csrftoken"] = token
    return token


def test_session_cookie_reads_and_needs_csrf_to_write(world: World, alice, staff):
    from django.test import Client

    browser = Client(enforce_csrf_checks=True)
    browser.force_login(alice)
    listed = orjson.loads(browser.get("/reviewer/v1/artifacts").content)["results"]
    assert {row["id"] for row in listed} == set(world.alice_ids)
    refused = browser.post("/reviewer/v1/sessions", data=b"{}", content_type="application/json")
    assert refused.status_code == 403
    assert orjson.loads(refused.content)["error"]["code"] == "csrf_failed"
    token = _csrf_cookie(browser)
    made = browser.post(
        "/reviewer/v1/sessions", data=b"{}", content_type="application/json", HTTP_X_CSRFTOKEN=token
    )
    assert made.status_code == 201
    assert orjson.loads(made.content)["owner"] == "alice"

    supervisor = Client(enforce_csrf_checks=True)
    supervisor.force_login(staff)
    token = _csrf_cookie(supervisor)
    gone = supervisor.delete(f"/reviewer/v1/artifacts/{world.loose_ids[0]}", HTTP_X_CSRFTOKEN=token)
    assert gone.status_code == 204


def test_agent_names_an_owner_and_user_may_not(world: World, client):
    made = client.post(
        "/reviewer/v1/sessions",
        data=b'{"id": "s-x", "owner": "bob"}',
        content_type="application/json",
        **bearer(world.agent_key),
    )
    assert made.status_code == 201
    assert orjson.loads(made.content) | {"createdAt": None} == {
        "id": "s-x",
        "owner": "bob",
        "createdAt": None,
    }
    refused = client.post(
        "/reviewer/v1/sessions",
        data=b'{"owner": "bob"}',
        content_type="application/json",
        **bearer(world.alice_token),
    )
    assert refused.status_code == 403
    again = client.post(
        "/reviewer/v1/sessions",
        data=b'{"id": "s-x"}',
        content_type="application/json",
        **bearer(world.agent_key),
    )
    assert again.status_code == 409
