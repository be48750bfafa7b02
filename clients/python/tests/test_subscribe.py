"""subscribe: replay, live events, and reconnecting with ``after`` — against the live daphne."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from agent_artifacts_client import AsyncArtifactsClient, StreamRefused, subscribe
from conftest import Served, kit_server
from proxies import CuttingProxy


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


async def next_tagged(stream, keys: set[str], timeout: float = 15) -> list[dict]:
    """The stream's ``artifact.tagged`` events for ``keys``, in arrival order, until all came."""
    seen: list[dict] = []

    async def read():
        async for event in stream:
            if event.get("type") == "artifact.tagged" and event["record"]["key"] in keys:
                seen.append(event)
                if {e["record"]["key"] for e in seen} == keys:
                    return

    await asyncio.wait_for(read(), timeout)
    return seen


async def test_subscribe_sees_a_tag_made_through_the_client(served: Served):
    key = unique("sub")
    async with AsyncArtifactsClient(served.base, served.key, "reviewer") as client:
        stream = client.subscribe(after=None)
        waiter = asyncio.create_task(next_tagged(stream, {key}))
        await asyncio.sleep(0.5)  # subscribed before the tag
        record = await client.tag(kind="report", key=key, data="x")
        [event] = await waiter
        await stream.aclose()
    assert event["record"]["id"] == record.id and isinstance(event["seq"], int)


async def test_session_stream_replays_then_continues_live_without_gap(served: Served):
    async with AsyncArtifactsClient(served.base, served.key, "reviewer") as client:
        sid = (await client.create_session())["id"]
        before = [unique("before") for _ in range(3)]
        for key in before:
            await client.tag(kind="report", key=key, data="b", session_id=sid)
        stream = client.subscribe(session_id=sid, after=0)
        replayed = await next_tagged(stream, set(before))
        after = [unique("after") for _ in range(3)]
        for key in after:
            await client.tag(kind="report", key=key, data="a", session_id=sid)
        live = await next_tagged(stream, set(after))
        await stream.aclose()
    events = replayed + live
    assert [e["record"]["key"] for e in events] == before + after
    seqs = [e["seq"] for e in events]
    assert seqs == sorted(seqs) and len(set(seqs)) == 6  # in order, none twice


async def test_dropped_connection_reconnects_with_after_and_misses_nothing(served: Served):
    proxy = CuttingProxy(served.port)
    try:
        async with AsyncArtifactsClient(served.base, served.key, "reviewer") as client:
            sid = (await client.create_session())["id"]
            stream = subscribe(
                f"{proxy.ws}/reviewer/v1/sessions/{sid}/events",
                served.key,
                after=0,
                max_backoff=0.2,
            )
            first = unique("first")
            await client.tag(kind="report", key=first, data="1", session_id=sid)
            [one] = await next_tagged(stream, {first})
            proxy.cut()  # the network fails under the open stream
            during = [unique("during") for _ in range(3)]
            for key in during:  # tagged while the stream is down
                await client.tag(kind="report", key=key, data="2", session_id=sid)
            rest = await next_tagged(stream, set(during))
            await stream.aclose()
    finally:
        proxy.close()
    assert proxy.connections >= 2  # it did reconnect
    assert [e["record"]["key"] for e in rest] == during
    assert [e["seq"] for e in rest] == list(range(one["seq"] + 1, one["seq"] + 4))


@pytest.mark.parametrize(
    ("who", "path", "code"),
    [
        ("none", "reviewer/v1/events", 4401),
        ("bad", "reviewer/v1/events", 4401),
        ("user", "reviewer/v1/events", 4403),  # the agent's stream is not a user's
        ("notes", "reviewer/v1/events", 4403),  # another agent's key
    ],
)
async def test_refusals_are_final_with_the_close_code(served: Served, who, path, code):
    token = {
        "none": None,
        "bad": "aak_nope_nope",
        "user": served.user_token,
        "notes": served.notes_key,
    }[who]
    with pytest.raises(StreamRefused) as refused:
        await asyncio.wait_for(subscribe(f"{served.ws}/{path}", token).__anext__(), 15)
    assert refused.value.code == code


async def test_past_the_failed_authentication_limit_a_stream_is_refused_with_4408():
    # A server of its own that allows one failure per address: the shared one keeps its count.
    with kit_server({"ARTIFACTS_AUTH_FAILURE_LIMIT": "1"}) as strict:
        url = f"{strict.ws}/reviewer/v1/events"
        with pytest.raises(StreamRefused) as first:
            await asyncio.wait_for(subscribe(url, "aak_nope_nope").__anext__(), 15)
        assert first.value.code == 4401
        with pytest.raises(StreamRefused) as limited:  # final: not retried
            await asyncio.wait_for(subscribe(url, "aak_nope_nope").__anext__(), 15)
        assert limited.value.code == 4408
        # A good key from the same address goes on: the stream stays open (nothing to send yet).
        stream = subscribe(url, strict.key)
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(stream.__anext__(), 0.5)
        await stream.aclose()
