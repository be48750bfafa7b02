"""A subscriber that reads nothing never holds up tagging or the others; it is dropped with 4429
and recovers everything with ``after``."""

from __future__ import annotations

import asyncio
import json
import time

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from prometheus_client import REGISTRY

from agent_site.asgi import application
from artifacts_app import services
from tests.consumers.conftest import connect, receive_n

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

TAGS = 1000


def stalled(app):
    """The application as a server with backpressure sees a client that reads nothing: every
    websocket.send blocks forever (a close still goes through)."""

    async def wrapped(scope, receive, send):
        never = asyncio.Event()

        async def blocked_send(message):
            if message["type"] == "websocket.send":
                await never.wait()
            await send(message)

        return await app(scope, receive, blocked_send)

    return wrapped


def _sample(name: str) -> float:
    return REGISTRY.get_sample_value(name, {"transport": "websocket"}) or 0.0


async def test_slow_subscriber_is_dropped_and_recovers_with_after(keys, settings):
    settings.ARTIFACTS_WS_BUFFER = 50
    names = ("artifacts_subscribers_dropped_total", "artifacts_events_delivered_total")
    dropped, delivered = (_sample(name) for name in names)
    path = "/watched/v1/events"
    headers = [(b"authorization", f"Bearer {keys['agent_key']}".encode())]
    slow = WebsocketCommunicator(stalled(application), path, headers=headers)
    normal = connect(path, keys["agent_key"])
    assert (await slow.connect())[0] and (await normal.connect())[0]

    def tag_all() -> float:
        started = time.perf_counter()
        for i in range(TAGS):
            services.artifact_tag(agent="watched", key=f"k{i}", data={"i": i})
        return time.perf_counter() - started

    tagging = asyncio.ensure_future(database_sync_to_async(tag_all)())
    got = await receive_n(normal, TAGS, timeout=30)
    assert [m["seq"] for m in got] == list(range(1, TAGS + 1))
    await tagging

    closed = await slow.receive_output(5)
    assert closed == {"type": "websocket.close", "code": 4429, "reason": closed["reason"]}
    assert "after" in closed["reason"]
    await slow.wait(1)

    again = connect(path + "?after=0", keys["agent_key"])
    assert (await again.connect())[0]
    replayed = [json.loads(await again.receive_from(10))["seq"] for _ in range(TAGS)]
    assert replayed == list(range(1, TAGS + 1))
    # Nothing more came: the next message is the next tag's (a marker, not a quiet wait).
    await database_sync_to_async(services.artifact_tag)(agent="watched", key="marker", data={})
    assert json.loads(await again.receive_from(10))["seq"] == TAGS + 1
    # docs/operations.md "Metrics": the drop counted; the live events written counted as
    # delivered (the normal socket's and the marker at least; the 1,000 replayed are not).
    assert _sample(names[0]) - dropped == 1
    assert TAGS + 1 <= _sample(names[1]) - delivered < 2 * TAGS
    for comm in (normal, again):
        await comm.disconnect()


async def test_tagging_is_not_held_by_stalled_subscribers(keys, settings):
    """200 tags with 20 stalled subscribers all commit, and a reading subscriber gets every one in
    order, while the stalled ones have not been sent one: tagging never waits on a subscriber.
    (How fast fan-out is beside tagging is bench/events.py's to measure, not a timed test's.)"""
    settings.ARTIFACTS_WS_BUFFER = 1000
    tag = database_sync_to_async(
        lambda: [
            services.artifact_tag(agent="watched", key=f"watched{i}", data={}) for i in range(200)
        ]
    )
    headers = [(b"authorization", f"Bearer {keys['agent_key']}".encode())]
    stuck = [
        WebsocketCommunicator(stalled(application), "/watched/v1/events", headers=headers)
        for _ in range(20)
    ]
    for comm in stuck:
        assert (await comm.connect())[0]
    reader = connect("/watched/v1/events", keys["agent_key"])
    assert (await reader.connect())[0]
    results = await tag()
    assert len(results) == 200
    got = await receive_n(reader, 200, timeout=30)
    assert [m["seq"] for m in got] == list(range(1, 201))
    for comm in stuck:
        assert comm.output_queue.empty()  # every send of theirs is still blocked
    await reader.disconnect()
    for comm in stuck:
        await comm.disconnect()
