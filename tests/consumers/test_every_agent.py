"""``/ws/v1/events``: every agent's events at once, for staff only (the admin's home, live)."""

from __future__ import annotations

import json
import time

import pytest
from channels.db import database_sync_to_async

from tests.consumers.conftest import connect, tag

pytestmark = pytest.mark.django_db(transaction=True)

EVERY = "/ws/v1/events"


async def _next(comm) -> dict:
    message = await comm.receive_output(10)
    assert message["type"] == "websocket.send", message
    return json.loads(message["text"])


async def test_staff_get_every_agents_events_with_the_agent_named(keys):
    comm = connect(EVERY, keys["staff"])
    connected, _ = await comm.connect()
    assert connected
    await tag(agent="watched", kind="note", key="one", data={}, session_id="s:alice")
    await tag(agent="elsewhere", kind="note", key="two", data={})
    got = [await _next(comm), await _next(comm)]
    assert [(e["agent"], e["type"], e["record"]["key"]) for e in got] == [
        ("watched", "artifact.tagged", "one"),
        ("elsewhere", "artifact.tagged", "two"),
    ]
    assert got[0]["sessionId"] == "s:alice" and isinstance(got[0]["seq"], int)
    await comm.disconnect()


@pytest.mark.parametrize(
    ("who", "code"),
    [("alice", 4403), ("agent_key", 4403), (None, 4401), ("bogus", 4401)],
)
async def test_only_staff_may_watch_every_agent(keys, who, code):
    token = {"bogus": "ak_nothing_real"}.get(who) or (keys[who] if who else None)
    comm = connect(EVERY, token)
    connected, _ = await comm.connect()
    assert connected  # accepted, then closed with the reason
    message = await comm.receive_output(2)
    assert message["type"] == "websocket.close" and message["code"] == code
    await comm.disconnect()


async def test_staff_losing_is_staff_closes_the_stream(keys, django_user_model):
    comm = connect(EVERY, keys["staff"])
    connected, _ = await comm.connect()
    assert connected
    await tag(agent="watched", kind="note", key="before", data={})
    assert (await _next(comm))["record"]["key"] == "before"
    started = time.monotonic()
    await database_sync_to_async(
        lambda: django_user_model.objects.filter(username="sup").update(is_staff=False)
    )()
    message = await comm.receive_output(5)
    assert message["type"] == "websocket.close" and message["code"] == 4403
    print(f"\nclosed after {time.monotonic() - started:.3f} s")
