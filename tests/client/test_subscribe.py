"""client.subscribe: the agent's event stream through the client, against the live daphne."""

from __future__ import annotations

import asyncio
import uuid

from artifacts_app.client import AsyncArtifactsClient


async def test_subscribe_sees_a_tag_made_through_the_client(served):
    key = f"sub-{uuid.uuid4().hex[:8]}"
    async with AsyncArtifactsClient(served.base, served.key, "reviewer") as client:
        stream = client.subscribe(after=None)

        async def first_tagged():
            async for event in stream:
                if event.get("type") == "artifact.tagged" and event["record"]["key"] == key:
                    return event

        waiter = asyncio.create_task(first_tagged())
        await asyncio.sleep(0.5)  # subscribed before the tag
        record = await client.tag(kind="report", key=key, data="x")
        event = await asyncio.wait_for(waiter, 15)
        await stream.aclose()
    assert event["record"]["id"] == record.id and isinstance(event["seq"], int)
