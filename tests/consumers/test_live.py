"""Against real daphne processes with a real websocket client (agent_artifacts_client.subscribe, the client kit)."""

from __future__ import annotations

import asyncio
import uuid

import httpx
import pytest
from agent_artifacts_client import StreamRefused, subscribe
from channels.db import database_sync_to_async

from artifacts_app import services
from tests.consumers.live import daphne
from tests.servers import DaphneServer

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


@pytest.fixture
def agent(transactional_db):
    """A fresh agent per test (unique slug: nothing collides in a shared PostgreSQL test DB)."""
    slug = f"live-{uuid.uuid4().hex[:10]}"
    services.agent_create(slug=slug, max_artifacts=1000)
    return slug, services.agent_key_create(agent=slug)[1]


@pytest.fixture
def daphnes():
    started: list[DaphneServer] = []

    def start(port: int | None = None) -> DaphneServer:
        started.append(daphne(port=port))
        return started[-1]

    yield start
    for server in started:
        server.stop()


async def tag_over_http(server: DaphneServer, slug: str, token: str, **fields) -> str:
    """POST /<slug>/v1/artifacts, the REST tag (API.md)."""
    async with httpx.AsyncClient() as http:
        response = await http.post(
            f"{server.base_url}/{slug}/v1/artifacts",
            json=fields,
            headers={"Authorization": f"Bearer {token}"},
            timeout=10,
        )
    assert response.status_code == 201, response.text
    return response.json()["id"]


async def test_tag_over_http_event_arrives(agent, daphnes):
    slug, key = agent
    server = daphnes()
    stream = subscribe(f"{server.ws_url}/{slug}/v1/events", key, after=0)
    first = asyncio.ensure_future(stream.__anext__())
    # after=0: a tag made before the socket joins is replayed, one made after arrives live.
    record_id = await tag_over_http(server, slug, key, key="k", data={"v": 1})
    event = await asyncio.wait_for(first, 30)
    assert event["type"] == "artifact.tagged" and event["seq"] == 1
    assert event["record"]["id"] == record_id and event["record"]["data"] == {"v": 1}
    await stream.aclose()


async def test_client_reconnects_with_after_across_a_restart(agent, daphnes):
    """The server goes away; the client retries, reconnects with after and misses nothing."""
    slug, key = agent
    server = daphnes()
    stream = subscribe(f"{server.ws_url}/{slug}/v1/events", key, after=0)
    await tag_over_http(server, slug, key, key="a", data={})
    assert (await asyncio.wait_for(stream.__anext__(), 5))["seq"] == 1
    server.stop()
    nxt = asyncio.ensure_future(stream.__anext__())
    await database_sync_to_async(services.artifact_tag)(agent=slug, key="b", data={})
    # While nothing serves the port, the client keeps trying: a bare listener there sees it knock
    # (and shuts each attempt) before the server comes back; counted, not slept on.
    knocks = asyncio.Event()

    async def shut(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        knocks.set()
        writer.close()

    listener = await asyncio.start_server(shut, "127.0.0.1", server.port, reuse_address=True)
    await asyncio.wait_for(knocks.wait(), 30)
    listener.close()
    await listener.wait_closed()
    assert not nxt.done()
    server = daphnes(port=server.port)
    assert (await asyncio.wait_for(nxt, 10))["record"]["key"] == "b"
    await tag_over_http(server, slug, key, key="c", data={})
    assert (await asyncio.wait_for(stream.__anext__(), 5))["seq"] == 3
    await stream.aclose()


async def test_refusal_is_final(agent, daphnes):
    slug, _ = agent
    server = daphnes()
    with pytest.raises(StreamRefused) as refused:
        async for _ in subscribe(f"{server.ws_url}/{slug}/v1/events", "ak_wrong"):
            pass
    assert refused.value.code == 4401


@pytest.mark.scale
async def test_two_daphnes_over_redis(agent, daphnes):
    """A subscriber on process A gets, live, the events of tags made through process B."""
    slug, key = agent
    a, b = daphnes(), daphnes()
    stream = subscribe(f"{a.ws_url}/{slug}/v1/events", key, after=0)
    # A tag through A itself, received: the socket has joined and replayed, so what comes after
    # can only come live (no sleep that hopes it has connected).
    await tag_over_http(a, slug, key, key="joined", data={})
    assert (await asyncio.wait_for(stream.__anext__(), 30))["seq"] == 1
    record_id = await tag_over_http(
        b, slug, key, key="über", title="ü ✓", data={"n": [1, 2.5, None]}
    )
    event = await asyncio.wait_for(stream.__anext__(), 30)
    assert event["seq"] == 2
    assert event["record"]["id"] == record_id
    assert event["record"]["data"] == {"n": [1, 2.5, None]} and event["record"]["title"] == "ü ✓"
    # and the next ones keep coming, in order
    for i in range(20):
        await tag_over_http(b, slug, key, key=f"k{i}", data={"i": i})
    got = [(await asyncio.wait_for(stream.__anext__(), 30))["seq"] for _ in range(20)]
    assert got == list(range(3, 23))
    await stream.aclose()
