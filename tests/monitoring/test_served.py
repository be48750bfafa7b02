"""Metrics and logs of real daphne processes (DEBUG off, JSON logs): the totals of two processes
sharing ``PROMETHEUS_MULTIPROC_DIR``, the request id in the response and in the access line, no
secret in any line, and the event streams (websocket, MCP) counted and still working."""

from __future__ import annotations

import asyncio
import json
import re
import secrets
import subprocess
import sys

import httpx
import orjson
import pytest
import websockets
from prometheus_client.parser import text_string_to_metric_families

from tests.servers import ROOT, DaphneServer, sqlite_site, wait_for

METRICS_TOKEN = secrets.token_urlsafe(32)
PASSWORD = "pw-" + secrets.token_urlsafe(12)


def _manage_shell(env: dict[str, str], code: str) -> str:
    done = subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), "shell", "-c", code],
        cwd=ROOT,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    return done.stdout.strip().splitlines()[-1]


@pytest.fixture(scope="module")
def two(tmp_path_factory):
    """Two daphne processes on one SQLite site, sharing a metrics directory: ``(servers, key,
    user token, staff token, logs)``."""
    data_dir = tmp_path_factory.mktemp("served")
    multiproc = data_dir / "prometheus"
    multiproc.mkdir()
    env, key = sqlite_site(
        data_dir,
        PROMETHEUS_MULTIPROC_DIR=str(multiproc),
        ARTIFACTS_METRICS_TOKEN=METRICS_TOKEN,
        ARTIFACTS_LOG_FORMAT="json",
        DJANGO_SECURE_COOKIES="0",
    )
    # DEBUG off: the login page's static files come from the manifest.
    subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), "collectstatic", "--noinput", "-v0"],
        cwd=ROOT,
        env=env,
        check=True,
    )
    tokens = _manage_shell(
        env,
        "from django.contrib.auth import get_user_model; from artifacts_app import services; "
        f"u = get_user_model().objects.create_user('ann', password={PASSWORD!r}); "
        f"s = get_user_model().objects.create_user('sup', password={PASSWORD!r}, is_staff=True); "
        "print(services.user_token_create(user=u)[1], services.user_token_create(user=s)[1])",
    ).split()
    logs = [data_dir / "a.log", data_dir / "b.log"]
    # -v0: daphne writes no access line of its own (docs/operations.md "Logs": its lines are
    # Apache text, query string included); the site's are the JSON ones.
    servers = [
        DaphneServer(env, log_path=log, ready_path="/healthz", args=("-v0",)) for log in logs
    ]
    for server in servers:
        server.start()
    try:
        yield servers, key, tokens[0], tokens[1], logs
    finally:
        for server in servers:
            server.stop()


def scrape(base: str) -> dict[tuple[str, tuple], float]:
    response = httpx.get(base + "/metrics", headers={"Authorization": f"Bearer {METRICS_TOKEN}"})
    assert response.status_code == 200, response.text
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(response.text)
        for sample in family.samples
    }


def value(samples, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def lines(logs) -> list[str]:
    return [line for log in logs for line in log.read_text(errors="replace").splitlines()]


def test_each_process_answers_the_totals_of_both(two):
    servers, key, *_ = two
    a, b = (server.base_url for server in servers)
    assert servers[0].process.pid != servers[1].process.pid
    route = {"route": "rest:sessions", "method": "GET", "status": "200"}
    before = value(scrape(a), "artifacts_http_requests_total", **route)
    auth = {"Authorization": f"Bearer {key}"}
    for base, times in ((a, 3), (b, 4)):
        for _ in range(times):
            assert httpx.get(base + "/reviewer/v1/sessions", headers=auth).status_code == 200
    for base in (a, b):
        assert value(scrape(base), "artifacts_http_requests_total", **route) - before == 7
    # A tag in each process: both counted, whichever process is asked.
    tags = value(scrape(b), "artifacts_tags_total")
    for base in (a, b):
        made = httpx.post(
            base + "/reviewer/v1/artifacts", headers=auth, json={"kind": "report", "data": {}}
        )
        assert made.status_code == 201, made.text
    assert value(scrape(a), "artifacts_tags_total") - tags == 2


def test_the_request_id_is_echoed_and_logged(two):
    servers, key, _, _, logs = two
    base = servers[0].base_url
    auth = {"Authorization": f"Bearer {key}"}
    mine = "req-" + secrets.token_hex(8)
    response = httpx.post(
        base + "/reviewer/v1/artifacts",
        headers={**auth, "X-Request-ID": mine},
        json={"kind": "report", "data": {"n": 1}},
    )  # the tag's lean road
    assert response.status_code == 201 and response.headers["x-request-id"] == mine
    listed = httpx.get(base + "/reviewer/v1/artifacts", headers={**auth, "X-Request-ID": mine})
    assert listed.headers["x-request-id"] == mine
    for refused in ("x" * 129, "a b", 'quo"te', "ünï"):
        answer = httpx.get(
            base + "/reviewer/v1/sessions",
            headers={**auth, "X-Request-ID": refused.encode()},
        )
        assert re.fullmatch(r"[0-9a-f]{32}", answer.headers["x-request-id"])
    generated = httpx.get(base + "/nothing-here").headers["x-request-id"]
    assert re.fullmatch(r"[0-9a-f]{32}", generated)

    def logged():
        found = [json.loads(line) for line in lines(logs) if mine in line]
        return found if len(found) >= 2 else None

    tagged, listing = wait_for(logged, "the access lines of the request id")
    assert tagged["logger"] == "artifacts.access" and tagged["level"] == "INFO"
    assert tagged["request_id"] == mine
    assert tagged["route"] == "rest:artifacts" and tagged["method"] == "POST"
    assert tagged["status"] == 201 and tagged["caller"] == "agent" and tagged["agent"] == "reviewer"
    assert isinstance(tagged["duration_ms"], float) and tagged["time"]
    assert listing["method"] == "GET" and listing["status"] == 200
    # Django's own line about a request carries its id too.
    not_found = wait_for(
        lambda: [
            json.loads(line)
            for line in lines(logs)
            if generated in line and '"django.request"' in line
        ],
        "django.request's line",
    )
    assert not_found[0]["request_id"] == generated


def test_no_secret_reaches_any_log_line(two):
    servers, key, user_token, staff_token, logs = two
    base = servers[1].base_url
    body_secret = "body-" + secrets.token_hex(8)
    query_secret = "query-" + secrets.token_hex(8)
    wrong = "aak_" + secrets.token_hex(16)
    marker = "secrets-" + secrets.token_hex(4)
    sent = [
        httpx.post(
            base + "/reviewer/v1/artifacts",
            headers={"Authorization": f"Bearer {key}", "X-Request-ID": marker},
            json={"kind": "report", "data": {"password": body_secret}},
        ),
        httpx.get(
            base + f"/reviewer/v1/artifacts?token={query_secret}",
            headers={"Authorization": f"Bearer {user_token}", "X-Request-ID": marker},
        ),
        httpx.get(base + "/reviewer/v1/artifacts", headers={"Authorization": f"Bearer {wrong}"}),
        httpx.get(base + "/metrics", headers={"Authorization": f"Bearer {staff_token}"}),
        httpx.get(base + "/metrics", headers={"Authorization": f"Bearer {METRICS_TOKEN}"}),
        httpx.get(base + "/metrics", headers={"Authorization": f"Bearer {METRICS_TOKEN[:-2]}"}),
    ]
    assert [r.status_code for r in sent] == [201, 200, 401, 200, 200, 401]
    # A login: the password in a form body, then the session and CSRF cookies on every request.
    with httpx.Client(base_url=base) as browser:
        page = browser.get("/accounts/login/")
        assert page.status_code == 200, page.text[-3000:]
        csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)[1]
        login = browser.post(
            "/accounts/login/",
            data={"username": "ann", "password": PASSWORD, "csrfmiddlewaretoken": csrf},
            headers={"Referer": base + "/accounts/login/"},
        )
        assert login.status_code == 302, login.text
        cookies = [browser.cookies["sessionid"], browser.cookies["csrftoken"]]
        assert browser.get("/playground/").status_code == 200
        assert browser.get("/metrics").status_code == 403
        browser.post(
            "/accounts/login/",
            data={"username": "ann", "password": "wrong-" + PASSWORD, "csrfmiddlewaretoken": csrf},
            headers={"Referer": base + "/accounts/login/"},
        )
    wait_for(lambda: sum(marker in line for line in lines(logs)) >= 2, "the marked lines")
    secrets_sent = [key, user_token, staff_token, METRICS_TOKEN, METRICS_TOKEN[:-2], wrong]
    secrets_sent += [PASSWORD, body_secret, query_secret, csrf, *cookies]
    written = lines(logs)
    assert len(written) > 10
    for line in written:
        try:
            record = json.loads(line)  # one JSON object per line, every line
        except ValueError:
            raise AssertionError(f"not JSON: {line!r}") from None
        assert isinstance(record, dict) and {"time", "level", "logger", "message"} <= set(record)
        for secret in secrets_sent:
            assert secret not in line and secret[:16] not in line, (secret, line)
    callers = {json.loads(line).get("caller") for line in written}
    assert {"agent", "user", "staff", "anonymous", "metrics_token"} <= callers


async def _stream_and_tag(base: str, ws: str, key: str, count: int) -> list[dict]:
    auth = {"Authorization": f"Bearer {key}"}
    async with websockets.connect(ws + "/reviewer/v1/events", additional_headers=auth) as socket:
        async with httpx.AsyncClient(base_url=base, headers=auth) as client:
            for i in range(count):
                made = await client.post(
                    "/reviewer/v1/artifacts", json={"kind": "report", "data": {"i": i}}
                )
                assert made.status_code == 201
        events = []
        while len(events) < count:
            events.append(orjson.loads(await asyncio.wait_for(socket.recv(), 30)))
        open_now = value(scrape(base), "artifacts_subscribers", transport="websocket")
        assert open_now >= 1
    return events


def test_websocket_events_are_delivered_and_counted(two):
    servers, key, *_ = two
    server = servers[0]
    before = scrape(server.base_url)
    events = asyncio.run(_stream_and_tag(server.base_url, server.ws_url, key, 3))
    assert [event["type"] for event in events] == ["artifact.tagged"] * 3
    after = scrape(server.base_url)
    delivered = "artifacts_events_delivered_total"
    assert (
        value(after, delivered, transport="websocket")
        - value(before, delivered, transport="websocket")
        == 3
    )
    lag = "artifacts_subscriber_lag_seconds_count"
    assert value(after, lag, transport="websocket") > value(before, lag, transport="websocket")
    published = "artifacts_events_published_total"
    assert (
        value(after, published, type="artifact.tagged")
        - value(before, published, type="artifact.tagged")
        == 3
    )
    # The socket closed: it no longer counts as open (its process lives on).
    wait_for(
        lambda: value(scrape(server.base_url), "artifacts_subscribers", transport="websocket") == 0,
        "the closed socket uncounted",
    )


def test_mcp_exchanges_are_counted_under_one_route(two):
    servers, key, _, _, logs = two
    base = servers[1].base_url
    before = scrape(base)
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "metrics-test", "version": "1"},
        },
    }
    headers = {"Accept": "application/json, text/event-stream"}
    refused = httpx.post(base + "/reviewer/mcp", json=initialize, headers=headers)
    assert refused.status_code == 401
    answered = httpx.post(
        base + "/reviewer/mcp",
        json=initialize,
        headers={**headers, "Authorization": f"Bearer {key}"},
    )
    assert answered.status_code == 200, answered.text
    mine = "mcp-" + secrets.token_hex(6)
    listed = httpx.post(
        base + "/reviewer/mcp",
        json={"jsonrpc": "2.0", "id": 2, "method": "ping"},
        headers={
            **headers,
            "Authorization": f"Bearer {key}",
            "Mcp-Session-Id": answered.headers["mcp-session-id"],
            "Mcp-Protocol-Version": "2025-06-18",
            "X-Request-ID": mine,
        },
    )
    assert listed.status_code == 200 and listed.headers["x-request-id"] == mine
    assert re.fullmatch(r"[0-9a-f]{32}", refused.headers["x-request-id"])
    (line,) = wait_for(
        lambda: [json.loads(line) for line in lines(logs) if mine in line], "the MCP access line"
    )
    assert line["route"] == "mcp" and line["status"] == 200 and line["agent"] == "reviewer"
    after = scrape(base)
    total = "artifacts_http_requests_total"
    for status, times in (("401", 1), ("200", 2)):
        labels = {"route": "mcp", "method": "POST", "status": status}
        assert value(after, total, **labels) - value(before, total, **labels) == times
