"""Events are stored in the tag's transaction and published only after commit, straight to this
process's fan-out (and, with Redis, one layer message per transaction to the agent's group)."""

from __future__ import annotations

import asyncio
import threading

import orjson
import pytest
from channels.db import database_sync_to_async
from django.db import transaction

from artifacts_app import fanout, services
from artifacts_app.models import Artifact, Event

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("closed_hub")]


class Collect:
    """A subscriber of the hub, as a websocket consumer is."""

    def __init__(self, session_sid: str | None = None) -> None:
        self.session_sid = session_sid
        self.got: list[dict] = []

    def offer(self, event: dict, text: str) -> None:
        # The hub hands the event as declared and its JSON, serialized once: they must agree.
        assert orjson.loads(text) == event
        self.got.append(event)

    async def settle(self, n: int | None = None, timeout: float = 3) -> list[dict]:
        deadline = asyncio.get_running_loop().time() + timeout
        while asyncio.get_running_loop().time() < deadline:
            if n is not None and len(self.got) >= n:
                break
            await asyncio.sleep(0.02 if n is not None else 0.2)
            if n is None:
                break
        return self.got


@pytest.fixture
def session(freeform, alice):
    return services.session_create(agent=freeform, sid="s:1", owner=alice)


async def test_subscribers_receive_after_commit_filtered_by_session(freeform, session):
    hub = fanout.hub()
    on_agent, on_session = Collect(), Collect("s:1")
    await hub.join(freeform.pk, on_agent)
    await hub.join(freeform.pk, on_session)
    tag = database_sync_to_async(services.artifact_tag)
    await tag(agent=freeform, key="k", data={"a": 1}, session_id="s:1")
    await tag(agent=freeform, key="other", data={})  # sessionless: agent stream only
    assert [m["seq"] for m in await on_agent.settle(2)] == [1, 2]
    assert [m["seq"] for m in await on_session.settle()] == [1]
    assert on_session.got[0]["type"] == "artifact.tagged"
    assert on_session.got[0]["record"]["key"] == "k"
    hub.leave(freeform.pk, on_agent)
    hub.leave(freeform.pk, on_session)
    assert freeform.pk not in hub.feeds


@pytest.mark.django_db
def test_nothing_is_published_before_commit(freeform, django_capture_on_commit_callbacks):
    published = []
    original = fanout.deliver_local
    fanout.deliver_local = lambda agent_id, payloads: published.append(payloads)
    try:
        with django_capture_on_commit_callbacks(execute=False) as callbacks:
            services.artifact_tag(agent=freeform, data={})
        assert published == [] and len(callbacks) == 1
        callbacks[0]()
        assert [p["seq"] for p in published[0]] == [1]
    finally:
        fanout.deliver_local = original


async def test_rolled_back_tag_leaves_no_record_no_event_no_publish(freeform):
    hub = fanout.hub()
    listener = Collect()
    await hub.join(freeform.pk, listener)

    class Boom(Exception):
        pass

    def tag_then_fail():
        with pytest.raises(Boom), transaction.atomic():
            services.artifact_tag(agent=freeform, key="k", data={})
            raise Boom

    await database_sync_to_async(tag_then_fail)()

    def check():
        assert not Artifact.objects.exists()
        assert not Event.objects.exists()
        freeform.refresh_from_db()
        assert (freeform.artifact_count, freeform.last_seq) == (0, 0)

    await database_sync_to_async(check)()
    assert await listener.settle() == []
    await database_sync_to_async(services.artifact_tag)(agent=freeform, key="k", data={})
    assert [m["seq"] for m in await listener.settle(1)] == [1]
    hub.leave(freeform.pk, listener)


async def test_publish_from_plain_threads_reaches_the_hub_in_seq_order(freeform):
    """Tags from several threads (no server loop anywhere): one ordered stream, no gap, no dup."""
    hub = fanout.hub()
    listener = Collect()
    await hub.join(freeform.pk, listener)

    def tag_many(n: int, prefix: str) -> None:
        for i in range(n):
            services.artifact_tag(agent="free", key=f"{prefix}{i}", data={})

    threads = [threading.Thread(target=tag_many, args=(40, f"t{t}-")) for t in range(3)]
    await asyncio.gather(*(asyncio.to_thread(lambda t=t: (t.start(), t.join())) for t in threads))
    got = await listener.settle(120)
    assert [m["seq"] for m in got] == list(range(1, 121))
    hub.leave(freeform.pk, listener)


async def test_a_lost_publish_is_refilled_from_the_stored_rows(freeform, settings):
    """A layer may drop a message: the next event exposes the hole and the hub reads it."""
    settings.ARTIFACTS_WS_GAP_WAIT = 0.05
    hub = fanout.hub()
    hub.gap_wait = 0.05
    listener = Collect()
    await hub.join(freeform.pk, listener)
    original = fanout.deliver_local
    fanout.deliver_local = lambda agent_id, payloads: None  # this one publish is lost
    try:
        await database_sync_to_async(services.artifact_tag)(agent=freeform, key="lost", data={})
    finally:
        fanout.deliver_local = original
    await database_sync_to_async(services.artifact_tag)(agent=freeform, key="next", data={})
    got = await listener.settle(2)
    assert [(m["seq"], m["record"]["key"]) for m in got] == [(1, "lost"), (2, "next")]
    hub.leave(freeform.pk, listener)


async def test_delete_and_eviction_events_reach_the_session(alice):
    agent = await database_sync_to_async(services.agent_create)(slug="tiny", max_artifacts=1)
    await database_sync_to_async(services.session_create)(agent=agent, sid="s1", owner=alice)
    hub = fanout.hub()
    listener = Collect("s1")
    await hub.join(agent.pk, listener)
    tag = database_sync_to_async(services.artifact_tag)
    first = (await tag(agent=agent, key="a", data={}, session_id="s1")).record
    second = (await tag(agent=agent, key="b", data={}, session_id="s1")).record
    await database_sync_to_async(services.artifact_delete)(agent=agent, artifact_id=second.id)
    messages = await listener.settle(4)
    assert [(m["type"], m.get("reason"), m["record"]["id"]) for m in messages] == [
        ("artifact.tagged", None, first.id),
        ("artifact.tagged", None, second.id),
        ("artifact.deleted", "evicted", first.id),
        ("artifact.deleted", "deleted", second.id),
    ]
    assert [m["seq"] for m in messages] == [1, 2, 3, 4]
    hub.leave(agent.pk, listener)


@pytest.mark.scale
async def test_one_layer_message_per_transaction_survives_msgpack(freeform):
    """With Redis: the publisher thread sends ONE batch to the agent's group; msgpack keeps it."""
    layer = fanout.new_layer()
    channel = await layer.new_channel("test.")
    await layer.group_add(fanout.agent_group(freeform.pk), channel)
    try:
        await database_sync_to_async(services.artifacts_delete)(agent=freeform, ids=["none"])
        record = (
            await database_sync_to_async(services.artifact_tag)(
                agent=freeform, key="k", title="ü ✓", data={"n": [1, 2.5, None, {"x": "y"}]}
            )
        ).record
        message = await asyncio.wait_for(layer.receive(channel), 5)
        assert message["type"] == fanout.BATCH and message["agent"] == freeform.pk
        (event,) = message["events"]
        assert event["record"]["id"] == record.id
        assert event["record"]["data"] == {"n": [1, 2.5, None, {"x": "y"}]}
        assert event["record"]["title"] == "ü ✓"
        stored = await database_sync_to_async(
            lambda: Event.objects.get(agent=freeform, seq=1).payload
        )()
        assert event == stored
    finally:
        await layer.group_discard(fanout.agent_group(freeform.pk), channel)


@pytest.mark.scale
async def test_a_receive_waits_past_the_redis_clients_read_timeout():
    """redis-py 8 reads with a 5 s socket timeout by default, as long as channels_redis's BZPOPMIN
    blocks: an idle receive() failed with "Timeout reading from …" (channels_redis#422). The
    settings give the layer a longer socket timeout; a message 7 s later still arrives."""
    layer = fanout.new_layer()
    channel = await layer.new_channel("test.")
    waiting = asyncio.ensure_future(layer.receive(channel))
    try:
        await asyncio.sleep(7)
        assert not waiting.done(), waiting.exception() if waiting.done() else None
        await layer.send(channel, {"type": "late", "n": 1})
        message = await asyncio.wait_for(waiting, 5)
        assert message == {"type": "late", "n": 1}
    finally:
        waiting.cancel()
        await layer.close_pools()
