"""Two daphne processes on PostgreSQL + Redis: a tag taken by one reaches an MCP subscriber of the
other (the stored events, through the per-process fan-out hub and the Redis layer)."""

from __future__ import annotations

import asyncio
from contextlib import ExitStack

import mcp_types as types
import pytest

from tests.mcp.conftest import World, mcp, rest, server_env
from tests.servers import DaphneServer

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.scale, pytest.mark.slow]


@pytest.fixture
def two(_shared_store, transactional_db):
    env = {**server_env(_shared_store), "ARTIFACTS_PROCESSES": "2"}
    servers = [DaphneServer(env), DaphneServer(env)]
    with ExitStack() as stack:
        for server in servers:
            stack.callback(server.stop)
            server.start(wait=False)
        for server in servers:
            server.wait_ready()
        yield servers


async def test_a_tag_through_one_process_notifies_a_subscriber_of_the_other(world: World, two):
    tagger, watcher = two
    inbox: asyncio.Queue = asyncio.Queue()
    target = world.alice_ids[0]
    uri = f"artifact://reviewer/{target}"
    async with mcp(watcher, world.alice_token, inbox=inbox) as client:
        await client.subscribe_resource(uri)
        response = await rest(
            tagger,
            "POST",
            "/reviewer/v1/artifacts",
            world.agent_key,
            json={
                "kind": "reviewed-pr",
                "key": "https://x/pr/0",
                "data": {"url": "https://x/pr/0", "verdict": "approve"},
                "sessionId": world.alice_session,
            },
        )
        assert response.status_code == 200, response.text
        while True:
            message = await asyncio.wait_for(inbox.get(), 30)
            root = getattr(message, "root", message)
            if isinstance(root, types.ResourceUpdatedNotification):
                assert root.params.uri == uri
                break
        read = await client.read_resource(uri)
        assert '"verdict":"approve"' in read.contents[0].text

    async with mcp(watcher, world.agent_key, mode="auto") as client:
        async with client.listen(resources_list_changed=True) as sub:
            await rest(
                tagger, "DELETE", f"/reviewer/v1/artifacts/{world.loose_ids[0]}", world.agent_key
            )
            event = await asyncio.wait_for(sub.__anext__(), 30)
            assert type(event).__name__ == "ResourcesListChanged"
