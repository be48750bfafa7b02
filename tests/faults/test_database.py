"""A database that is not there, refuses, or accepts and never answers: requests
answer the 503 envelope (never HTML, never a hang) within the connect timeout, streams close with
4503, ``/healthz`` says so, and ``check`` / ``migrate`` stop with artifacts.E103. Real daphnes and
real ``manage.py`` processes against real faults: an SQLite file that cannot be opened, a closed
port, a listener that accepts and never answers (PostgreSQL URLs need psycopg: the scale extras)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
import websockets
from django.db import connection

from artifacts_app import services
from tests.faults.conftest import HEALTH, fill
from tests.servers import HOST, ROOT, DaphneServer, wait_for

CONNECT_TIMEOUT = 2  # seconds, DATABASE_CONNECT_TIMEOUT for these servers


def env_for(database_url: str, data_dir: Path) -> dict[str, str]:
    env = {
        **os.environ,
        "DATABASE_URL": database_url,
        "DATABASE_CONNECT_TIMEOUT": str(CONNECT_TIMEOUT),
        "ARTIFACTS_DATA_DIR": str(data_dir),
        "PYTHONPATH": str(ROOT),
        "DJANGO_SETTINGS_MODULE": "agent_site.settings",
    }
    # The scale run's S3 variables would send blobs to moto; these servers never store any.
    for name in ("ARTIFACTS_STORAGE", "ARTIFACTS_S3_BUCKET", "REDIS_URL"):
        env.pop(name, None)
    return env


def manage(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def close_code_of_stream(port: int) -> int | None:
    async def run() -> int | None:
        async with websockets.connect(
            f"ws://{HOST}:{port}/reviewer/v1/events",
            additional_headers={"Authorization": "Bearer aak_00000000_faults"},
            open_timeout=30,
        ) as ws:
            try:
                await asyncio.wait_for(ws.recv(), timeout=30)
            except websockets.ConnectionClosed as closed:
                return closed.rcvd.code if closed.rcvd else None
        return None

    return asyncio.run(run())


def assert_database_unavailable(server: DaphneServer) -> None:
    with httpx.Client(base_url=server.base_url, timeout=60) as client:
        api = client.get(
            "/reviewer/v1/artifacts", headers={"Authorization": "Bearer aak_00000000_faults"}
        )
        assert api.status_code == 503, api.text[:300]
        assert api.headers["content-type"] == "application/json"
        assert api.json()["error"]["code"] == "database_unavailable"
        assert int(api.headers["retry-after"]) > 0
        # A cookie session's page (the admin reads the session): a sentence, not Django's HTML.
        page = client.get("/admin/", cookies={"sessionid": "x" * 32})
        assert page.status_code == 503, page.text[:300]
        assert page.headers["content-type"].startswith("text/plain")
        health = client.get("/healthz", headers=HEALTH)
        assert health.status_code == 503
        checks = health.json()["checks"]
        assert checks["database"]["status"] == "unavailable"
        assert checks["storage"]["status"] == "ok"
        assert checks["channelLayer"]["status"] == "ok"
    assert close_code_of_stream(server.port) == 4503


def assert_commands_report_e103(env: dict[str, str]) -> None:
    for args in (("check",), ("migrate", "--noinput")):
        done = manage(env, *args)
        assert done.returncode == 1, (args, done.stdout, done.stderr[-2000:])
        assert "artifacts.E103" in done.stderr, done.stderr[-2000:]
        assert "Traceback" not in done.stderr


def test_an_sqlite_database_that_cannot_be_opened(tmp_path):
    # A path under a file: sqlite3 cannot open it (a lost volume, a wrong DATABASE_URL).
    (tmp_path / "not-a-dir").write_text("")
    env = env_for(f"sqlite:///{tmp_path / 'not-a-dir' / 'db.sqlite3'}", tmp_path / "data")
    with DaphneServer(env) as server:
        assert_database_unavailable(server)
    assert_commands_report_e103(env)


@pytest.mark.parametrize("fault", ["closed_port", "silent_port"])
def test_a_postgresql_server_that_refuses_or_never_answers(tmp_path, request, fault):
    pytest.importorskip("psycopg", reason="PostgreSQL URLs need psycopg (pip install -e .[scale])")
    port = request.getfixturevalue(fault)  # a closed port, or a listener that never answers
    env = env_for(f"postgres://postgres@{HOST}:{port}/artifacts", tmp_path / "data")
    with DaphneServer(env) as server:
        assert_database_unavailable(server)
    assert_commands_report_e103(env)


def test_an_sqlite_database_on_a_full_disk_answers_507(tmp_path, small_disk):
    env = env_for(f"sqlite:///{small_disk / 'db.sqlite3'}", tmp_path / "data")
    for args in (("migrate", "--noinput", "-v", "0"), ("create_agent", "full-db")):
        done = manage(env, *args)
        assert done.returncode == 0, done.stderr[-2000:]
    key = manage(env, "create_agent_key", "full-db").stdout.strip().splitlines()[-1]
    with DaphneServer(env) as server:
        with httpx.Client(base_url=server.base_url, timeout=60) as client:
            auth = {"Authorization": f"Bearer {key}"}
            first = client.post(
                "/full-db/v1/artifacts", json={"key": "a", "data": {}}, headers=auth
            )
            assert first.status_code == 201, first.text
            fill(small_disk)
            big = {"key": "b", "data": {"text": "x" * 200_000}}  # a WAL page past the room left
            refused = client.post("/full-db/v1/artifacts", json=big, headers=auth)
            assert refused.status_code == 507, refused.text[:300]
            assert refused.json()["error"]["code"] == "storage_full"
            listed = client.get("/full-db/v1/artifacts", headers=auth)
            assert listed.status_code == 200
            assert [r["key"] for r in listed.json()["results"]] == ["a"]


@pytest.mark.parametrize("pooled", [False, True], ids=["connections", "pool"])
def test_a_stream_against_an_unreachable_database_closes_with_4503_under_the_default_timeouts(
    tmp_path, silent_port, pooled
):
    """Daphne drops a websocket still handshaking after 5 s (its --websocket_connect_timeout): the
    default connect timeout (3 s) and pool wait (4 s) stay below it, so the stream is accepted
    and closed with 4503 — not dropped — when the database never answers."""
    pytest.importorskip("psycopg", reason="PostgreSQL URLs need psycopg (pip install -e .[scale])")
    url = f"postgres://postgres@{HOST}:{silent_port}/artifacts" + ("?pool=1" if pooled else "")
    env = env_for(url, tmp_path / "data")
    for name in ("DATABASE_CONNECT_TIMEOUT", "DATABASE_POOL_TIMEOUT"):
        env.pop(name, None)  # the defaults
    with DaphneServer(env) as server:
        assert close_code_of_stream(server.port) == 4503


def list_status(client: httpx.Client, slug: str, key: str) -> tuple[int, str, float]:
    started = time.monotonic()
    response = client.get(f"/{slug}/v1/artifacts", headers={"Authorization": f"Bearer {key}"})
    code = response.json()["error"]["code"] if response.status_code != 200 else ""
    return response.status_code, code, time.monotonic() - started


CLIENT_TIMEOUT = 3  # seconds, DATABASE_CLIENT_TIMEOUT for the stalled servers


@pytest.mark.scale
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("pooled", [False, True], ids=["connections", "pool"])
def test_a_postgresql_server_that_stalls_under_open_connections_answers_503_within_the_bound(
    stalling_proxy, pooled
):
    """A server that stops answering while its connections stay open (a stopped process: its
    kernel still acknowledges, so TCP keepalives see nothing) fails the next request with 503
    after DATABASE_CLIENT_TIMEOUT (+ the connect timeout of the new connection), not after the
    stall's length; once it answers again, so do the requests."""
    agent = services.agent_create(slug="stalled-db", max_artifacts=10)
    _, key = services.agent_key_create(agent=agent)
    conf = connection.settings_dict
    proxy = stalling_proxy(int(conf["PORT"] or 5432))
    url = f"postgres://{conf['USER']}@{HOST}:{proxy.port}/{conf['NAME']}"
    env = {
        **os.environ,
        "DATABASE_URL": url + ("?pool=1" if pooled else ""),
        "DATABASE_CLIENT_TIMEOUT": str(CLIENT_TIMEOUT),
        "DATABASE_CONNECT_TIMEOUT": "2",
        "DJANGO_SETTINGS_MODULE": "agent_site.settings",
    }
    with DaphneServer(env) as server, httpx.Client(base_url=server.base_url, timeout=120) as client:
        assert list_status(client, "stalled-db", key)[0] == 200  # its connection is open now
        proxy.stall()
        try:
            status, code, took = list_status(client, "stalled-db", key)
            assert (status, code) == (503, "database_unavailable")
            # The client's bound, then a new connection's connect timeout (or the pool's wait):
            # seconds, where the stall itself would have held the request as long as it lasted.
            assert took < CLIENT_TIMEOUT + 2 + 4 + 3, f"answered after {took:.1f} s"
        finally:
            proxy.resume()
        wait_for(lambda: list_status(client, "stalled-db", key)[0] == 200, "a 200 again", 30)
