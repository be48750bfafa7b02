"""Failed authentications limited per client address, over real daphne processes: a websocket
handshake past the limit closes with 4408 ("too many attempts", a refusal the kits do not retry)
and ``/<slug>/mcp`` answers 429 ``too_many_attempts``, while a good caller from the same address
goes on; at scale, two processes count the same failures (Redis).

The servers trust 127.0.0.1 as a proxy, and each test sends ``X-Forwarded-For`` addresses of its
own: the counts of one test (which outlive it in Redis) never reach another.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import uuid

import httpx
import pytest
import websockets
from agent_artifacts_client import StreamRefused, subscribe
from asgiref.sync import sync_to_async

from artifacts_app import services, throttle
from tests.consumers import live
from tests.consumers.conftest import connect
from tests.servers import ROOT, DaphneServer

pytestmark = pytest.mark.django_db(transaction=True)

LIMIT = 20
BAD = "aak_00000000_not-a-real-key-at-all"
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "throttle-test", "version": "1"},
    },
}
MCP_HEADERS = {"Accept": "application/json, text/event-stream"}


def new_address() -> str:
    return "10.{}.{}.{}".format(*secrets.token_bytes(3))


def server_env(**extra: str) -> dict[str, str]:
    return {
        **os.environ,
        "DATABASE_URL": live.test_database_url(),
        "PYTHONPATH": str(ROOT),
        "ARTIFACTS_AUTH_FAILURE_LIMIT": str(LIMIT),
        "ARTIFACTS_TRUSTED_PROXIES": "127.0.0.1",
        **extra,
    }


@pytest.fixture(scope="module")
def server(django_db_setup, django_db_blocker):
    with django_db_blocker.unblock():
        env = server_env()
    with DaphneServer(env) as started:
        yield started


@pytest.fixture
def key(transactional_db):
    agent = services.agent_create(slug="guarded", max_artifacts=100)
    return services.agent_key_create(agent=agent)[1]


async def ws_close(server: DaphneServer, token: str, address: str) -> int | None:
    """The close code of an events socket opened with ``token`` (None: it stayed open)."""
    headers = {"Authorization": f"Bearer {token}", "X-Forwarded-For": address}
    async with websockets.connect(
        f"{server.ws_url}/guarded/v1/events", additional_headers=headers, open_timeout=30
    ) as ws:
        try:
            await asyncio.wait_for(ws.recv(), 0.3)
        except TimeoutError:
            return None  # open, nothing to say: a good caller
        except websockets.ConnectionClosed as closed:
            assert closed.rcvd is not None  # (daphne sends no close reason, only the code)
            return closed.rcvd.code
    raise AssertionError("a message on a fresh stream with no events")


async def test_a_burst_of_bad_handshakes_closes_with_4408_while_a_good_caller_connects(server, key):
    address = new_address()
    codes = []
    for _ in range(25):
        codes.append(await ws_close(server, BAD, address))
        assert await ws_close(server, key, address) is None  # the good caller, same address
    assert codes == [4401] * LIMIT + [4408] * 5


async def test_the_4408_close_says_why_and_for_how_long(settings, key):
    # In the process (no peer address: counted as "unknown"), where the close's reason is seen;
    # daphne passes on only the code.
    settings.ARTIFACTS_AUTH_FAILURE_LIMIT = 1
    await sync_to_async(throttle.forget)(throttle.UNKNOWN)
    closes = []
    for _ in range(2):
        comm = connect("/guarded/v1/events", BAD)
        assert (await comm.connect())[0]
        closes.append(await comm.receive_output(5))
        await comm.disconnect()
    assert [c["code"] for c in closes] == [4401, 4408]
    assert closes[1]["reason"].startswith("Too many failed authentications from this address")
    assert " s (valid credentials are accepted meanwhile)" in closes[1]["reason"]
    good = connect("/guarded/v1/events", key)
    assert (await good.connect())[0]
    assert await good.receive_nothing(0.2)
    await good.disconnect()


async def test_a_burst_of_bad_tokens_on_mcp_answers_429_while_a_good_caller_goes_on(server, key):
    address = new_address()
    refused = []
    async with httpx.AsyncClient(base_url=server.base_url, timeout=30) as http:
        for _ in range(25):
            bad = await http.post(
                "/guarded/mcp",
                json=INIT,
                headers={
                    **MCP_HEADERS,
                    "Authorization": f"Bearer {BAD}",
                    "X-Forwarded-For": address,
                },
            )
            refused.append(bad)
            good = await http.post(
                "/guarded/mcp",
                json=INIT,
                headers={
                    **MCP_HEADERS,
                    "Authorization": f"Bearer {key}",
                    "X-Forwarded-For": address,
                },
            )
            assert good.status_code == 200, good.text[:300]
            assert good.json()["result"]["serverInfo"]
        # REST shares the count: the address is past the limit there too, on Django's road and on
        # the tag's lean one (agent_site/asgi.py) alike.
        rest = await http.get(
            "/guarded/v1/artifacts",
            headers={"Authorization": f"Bearer {BAD}", "X-Forwarded-For": address},
        )
        lean = await http.post(
            "/guarded/v1/artifacts",
            json={"kind": "report", "key": "k", "data": {}},
            headers={"Authorization": f"Bearer {BAD}", "X-Forwarded-For": address},
        )
    assert [r.status_code for r in refused] == [401] * LIMIT + [429] * 5
    for response in refused[:LIMIT]:
        assert response.json()["error"]["code"] == "invalid_token"
        assert response.headers["www-authenticate"].startswith("Bearer")
    for response in [*refused[LIMIT:], rest, lean]:
        assert response.status_code == 429
        assert response.json()["error"]["code"] == "too_many_attempts"
        assert 1 <= int(response.headers["retry-after"]) <= 60


async def test_the_python_kit_takes_4408_as_a_refusal_not_a_reason_to_reconnect(
    django_db_blocker, key
):
    # A server of its own with a limit of 1, the kit connecting from 127.0.0.1 itself (it sends
    # no X-Forwarded-For), its own key prefix in Redis at scale.
    with django_db_blocker.unblock():
        env = server_env(
            ARTIFACTS_AUTH_FAILURE_LIMIT="1",
            ARTIFACTS_TRUSTED_PROXIES="",
            ARTIFACTS_REDIS_PREFIX=f"throttle-{uuid.uuid4().hex[:8]}",
        )
    with DaphneServer(env) as own:
        url = f"{own.ws_url}/guarded/v1/events"
        with pytest.raises(StreamRefused) as first:
            await asyncio.wait_for(subscribe(url, BAD).__anext__(), 30)
        assert first.value.code == 4401
        with pytest.raises(StreamRefused) as second:
            await asyncio.wait_for(subscribe(url, BAD).__anext__(), 30)
        assert second.value.code == 4408


@pytest.mark.scale
async def test_two_processes_count_the_same_failures(key):
    env = server_env()  # the same Redis and key prefix
    address = new_address()
    with DaphneServer(env) as one, DaphneServer(env) as two:
        async with httpx.AsyncClient(timeout=30) as http:

            async def bad(server: DaphneServer) -> int:
                response = await http.get(
                    f"{server.base_url}/guarded/v1/artifacts",
                    headers={"Authorization": f"Bearer {BAD}", "X-Forwarded-For": address},
                )
                return response.status_code

            codes = [await bad(one if i % 2 else two) for i in range(LIMIT)]
            assert codes == [401] * LIMIT
            assert await bad(one) == 429
            assert await bad(two) == 429
            assert await ws_close(two, BAD, address) == 4408
            for server in (one, two):
                good = await http.get(
                    f"{server.base_url}/guarded/v1/artifacts",
                    headers={"Authorization": f"Bearer {key}", "X-Forwarded-For": address},
                )
                assert good.status_code == 200, good.text[:300]
