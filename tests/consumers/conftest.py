from __future__ import annotations

import json
import uuid

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.test import Client

from agent_site.asgi import application
from artifacts_app import services


@pytest.fixture(autouse=True)
def _hub_closed(closed_hub):
    """Every test here may run a hub on its loop: close it before the loop closes."""


@pytest.fixture
def keys(transactional_db, django_user_model):
    """An agent with a session per user, and every kind of credential the auth matrix needs."""
    agent = services.agent_create(slug="watched", max_artifacts=1000)
    other = services.agent_create(slug="elsewhere", max_artifacts=1000)
    alice = django_user_model.objects.create_user("alice", password="alice-pw-123")
    bob = django_user_model.objects.create_user("bob", password="bob-pw-123")
    staff = django_user_model.objects.create_user("sup", password="sup-pw-123", is_staff=True)
    services.session_create(agent=agent, sid="s:alice", owner=alice)
    services.session_create(agent=agent, sid="s:bob", owner=bob)
    client = Client()
    client.force_login(alice)
    return {
        "agent": agent,
        "other": other,
        "agent_key": services.agent_key_create(agent=agent)[1],
        "other_key": services.agent_key_create(agent=other)[1],
        "alice": services.user_token_create(user=alice)[1],
        "bob": services.user_token_create(user=bob)[1],
        "staff": services.user_token_create(user=staff)[1],
        "alice_cookie": client.cookies["sessionid"].value,
    }


class Communicator(WebsocketCommunicator):
    async def connect(self, timeout: float = 10):
        # channels' default is 1 s; opening a stream on a loaded machine (auth, the hub joining
        # the layer's groups on Redis) may take longer without anything being wrong.
        return await super().connect(timeout)


def connect(path: str, token: str | None = None, headers: list | None = None) -> Communicator:
    hdrs = list(headers or [])
    if token:
        hdrs.append((b"authorization", f"Bearer {token}".encode()))
    return Communicator(application, path, headers=hdrs)


async def receive_all(
    comm: WebsocketCommunicator, *, agent: str = "watched", session_id: str | None = None
) -> list[dict]:
    """Everything the stream sends before a marker tagged now (in ``session_id``, so that a
    session's stream gets it too) arrives. The end is shown by the marker arriving next, not by
    a quiet interval, so a slow machine delays the answer instead of cutting it short. Other
    streams' markers (keys ``marker-…``) are left out."""
    marker = (
        await tag(agent=agent, key=f"marker-{uuid.uuid4().hex}", data={}, session_id=session_id)
    ).record
    out = []
    while True:
        message = await comm.receive_output(10)
        if message["type"] != "websocket.send":
            out.append({"closed": message.get("code")})
            return out
        event = json.loads(message["text"])
        record = event.get("record") or {}
        if record.get("id") == marker.id:
            return out
        if not str(record.get("key") or "").startswith("marker-"):
            out.append(event)


async def receive_n(comm: WebsocketCommunicator, n: int, timeout: float = 5) -> list[dict]:
    out = []
    for _ in range(n):
        out.append(json.loads(await comm.receive_from(timeout)))
    return out


tag = database_sync_to_async(services.artifact_tag)
delete = database_sync_to_async(services.artifact_delete)
