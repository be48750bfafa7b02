"""A re-tag that moves a record out of a session (API.md "Events"): the old
session's stream (and the agent's) gets ``artifact.deleted`` with reason ``moved`` first, then the
new session gets the ``artifact.tagged``; the old stream never sees the new data."""

from __future__ import annotations

import pytest

from tests.consumers.conftest import connect, receive_all, receive_n, tag

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.parametrize("target", ["s:bob", None])
async def test_a_move_leaves_the_old_session_first(keys, target):
    first = await tag(agent="watched", kind="note", key="k", data={"v": 1}, session_id="s:alice")
    old = connect("/watched/v1/sessions/s:alice/events?after=0", keys["agent_key"])
    agent = connect(f"/watched/v1/events?after={1}", keys["agent_key"])
    assert (await old.connect())[0] and (await agent.connect())[0]
    assert [e["type"] for e in await receive_n(old, 1)] == ["artifact.tagged"]
    await tag(agent="watched", kind="note", key="k", data={"v": "secret"}, session_id=target)
    on_old = await receive_all(old, session_id="s:alice")
    assert [(e["type"], e.get("reason"), e["sessionId"]) for e in on_old] == [
        ("artifact.deleted", "moved", "s:alice")
    ]
    assert on_old[0]["record"] == {"id": first.record.id, "key": "k", "kind": "note"}
    on_agent = await receive_all(agent)
    assert [(e["type"], e.get("reason"), e["sessionId"]) for e in on_agent] == [
        ("artifact.deleted", "moved", "s:alice"),
        ("artifact.tagged", None, target),
    ]
    assert on_agent[1]["seq"] == on_agent[0]["seq"] + 1
    await old.disconnect()
    await agent.disconnect()
    if target:
        new = connect(f"/watched/v1/sessions/{target}/events?after=0", keys["agent_key"])
        assert (await new.connect())[0]
        got = await receive_all(new, session_id=target)
        assert [(e["type"], e["record"]["data"]) for e in got] == [
            ("artifact.tagged", {"v": "secret"})
        ]
        await new.disconnect()


async def test_a_retag_in_the_same_session_or_into_one_is_no_move(keys):
    await tag(agent="watched", kind="note", key="k", data={}, session_id=None)
    await tag(agent="watched", kind="note", key="k", data={}, session_id="s:alice")
    await tag(agent="watched", kind="note", key="k", data={}, session_id="s:alice")
    agent = connect("/watched/v1/events?after=0", keys["agent_key"])
    assert (await agent.connect())[0]
    assert [e["type"] for e in await receive_all(agent)] == ["artifact.tagged"] * 3
    await agent.disconnect()
