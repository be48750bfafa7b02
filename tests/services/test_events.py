"""Events are stored in the tag's transaction and published to the channel layer only after commit."""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import transaction

from artifacts_app import services
from artifacts_app.events import agent_group, session_group
from artifacts_app.models import Artifact, Event


class Listener:
    """A real channel on the configured layer, added to the groups under test."""

    def __init__(self, *groups: str) -> None:
        self.layer = get_channel_layer()
        self.channel = async_to_sync(self.layer.new_channel)()
        for group in groups:
            async_to_sync(self.layer.group_add)(group, self.channel)

    def drain(self) -> list[dict]:
        async def pull() -> list[dict]:
            import asyncio

            out = []
            while True:
                try:
                    out.append(await asyncio.wait_for(self.layer.receive(self.channel), 0.05))
                except TimeoutError:
                    return out

        return async_to_sync(pull)()


@pytest.fixture
def session(freeform, alice):
    return services.session_create(agent=freeform, sid="s:1", owner=alice)


def test_groups_receive_tag_after_commit(freeform, session, django_capture_on_commit_callbacks):
    agent_listener = Listener(agent_group(freeform.pk))
    session_listener = Listener(session_group(freeform.pk, "s:1"))
    with django_capture_on_commit_callbacks(execute=True):
        services.artifact_tag(agent=freeform, key="k", data={"a": 1}, session_id="s:1")
        services.artifact_tag(
            agent=freeform, key="other", data={}
        )  # sessionless: agent stream only
    on_agent = agent_listener.drain()
    on_session = session_listener.drain()
    assert [m["seq"] for m in on_agent] == [1, 2]
    assert [m["seq"] for m in on_session] == [1]
    assert on_session[0]["type"] == "artifact.tagged"
    assert on_session[0]["record"]["key"] == "k"


def test_nothing_is_published_before_commit(freeform, django_capture_on_commit_callbacks):
    listener = Listener(agent_group(freeform.pk))
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        services.artifact_tag(agent=freeform, data={})
    assert listener.drain() == []
    assert len(callbacks) == 1


@pytest.mark.django_db(transaction=True)
def test_rolled_back_tag_leaves_no_record_no_event_no_publish(freeform):
    listener = Listener(agent_group(freeform.pk))

    class Boom(Exception):
        pass

    with pytest.raises(Boom), transaction.atomic():
        services.artifact_tag(agent=freeform, key="k", data={})
        raise Boom
    assert not Artifact.objects.exists()
    assert not Event.objects.exists()
    freeform.refresh_from_db()
    assert (freeform.artifact_count, freeform.last_seq) == (0, 0)
    assert listener.drain() == []
    services.artifact_tag(agent=freeform, key="k", data={})
    assert [m["seq"] for m in listener.drain()] == [1]


def test_delete_and_eviction_events_reach_the_session_group(
    db, alice, django_capture_on_commit_callbacks
):
    agent = services.agent_create(slug="tiny", max_artifacts=1)
    services.session_create(agent=agent, sid="s1", owner=alice)
    listener = Listener(session_group(agent.pk, "s1"))
    with django_capture_on_commit_callbacks(execute=True):
        first = services.artifact_tag(agent=agent, key="a", data={}, session_id="s1").record
        second = services.artifact_tag(agent=agent, key="b", data={}, session_id="s1").record
        services.artifact_delete(agent=agent, artifact_id=second.id)
    messages = listener.drain()
    assert [(m["type"], m.get("reason"), m["record"]["id"]) for m in messages] == [
        ("artifact.tagged", None, first.id),
        ("artifact.tagged", None, second.id),
        ("artifact.deleted", "evicted", first.id),
        ("artifact.deleted", "deleted", second.id),
    ]
    assert [m["seq"] for m in messages] == [1, 2, 3, 4]
