"""The event streams through the real ASGI application (auth middleware, routing, consumer, hub)."""

from __future__ import annotations

import asyncio

import pytest
from channels.db import database_sync_to_async

from artifacts_app import services
from artifacts_app.models import Event
from tests.consumers.conftest import connect, delete, receive_all, receive_n, tag

pytestmark = pytest.mark.django_db(transaction=True)

AGENT = "/watched/v1/events"
ALICE = "/watched/v1/sessions/s:alice/events"


async def close_code(
    path: str, token: str | None = None, headers: list | None = None
) -> int | None:
    comm = connect(path, token, headers)
    connected, _ = await comm.connect()
    assert connected  # API.md: accepted, then closed at once, so the client learns why
    message = await comm.receive_output(2)
    await comm.disconnect()
    return message.get("code") if message["type"] == "websocket.close" else None


@pytest.mark.parametrize(
    ("who", "path", "code"),
    [
        ("agent_key", AGENT, None),
        ("agent_key", ALICE, None),
        ("staff", AGENT, None),
        ("staff", ALICE, None),
        ("alice", ALICE, None),
        ("alice", AGENT, 4403),  # users watch their sessions, not the agent's stream
        ("bob", ALICE, 4403),  # another user's session
        ("other_key", AGENT, 4403),  # another agent's key
        ("other_key", ALICE, 4403),
        (None, AGENT, 4401),
        (None, ALICE, 4401),
        ("bogus", AGENT, 4401),
    ],
)
async def test_auth_matrix(keys, who, path, code):
    token = {"bogus": "ak_nothing_real"}.get(who) or (keys[who] if who else None)
    if code is None:
        comm = connect(path, token)
        connected, _ = await comm.connect()
        assert connected
        # open and delivering: a tag made now arrives, with nothing (no close) before it
        session = "s:alice" if path == ALICE else None
        assert await receive_all(comm, session_id=session) == []
        await comm.disconnect()
    else:
        assert await close_code(path, token) == code


async def test_revoked_token_is_4401(keys):
    await database_sync_to_async(services.token_revoke)(token=keys["agent_key"])
    assert await close_code(AGENT, keys["agent_key"]) == 4401


async def test_malformed_authorization_is_4401(keys):
    assert await close_code(AGENT, headers=[(b"authorization", b"Token abc")]) == 4401


async def test_unknown_agent_and_session(keys):
    assert await close_code("/nope/v1/events", keys["staff"]) == 4404
    assert await close_code("/watched/v1/sessions/s:none/events", keys["agent_key"]) == 4404
    # a user learns nothing about sessions it does not own
    assert await close_code("/watched/v1/sessions/s:none/events", keys["alice"]) == 4403
    assert await close_code("/watched/v1/what", keys["staff"]) == 4404


async def test_bad_after_is_4400(keys):
    assert await close_code(AGENT + "?after=-1", keys["agent_key"]) == 4400
    assert await close_code(AGENT + "?after=x", keys["agent_key"]) == 4400


async def test_cookie_needs_an_allowed_origin(keys):
    cookie = (b"cookie", f"sessionid={keys['alice_cookie']}".encode())
    comm = connect(ALICE, headers=[cookie, (b"origin", b"http://testserver")])
    assert (await comm.connect())[0]
    await tag(agent="watched", key="k", data={}, session_id="s:alice")
    assert [m["seq"] for m in await receive_n(comm, 1)] == [1]
    await comm.disconnect()
    assert await close_code(ALICE, headers=[cookie, (b"origin", b"https://evil.example")]) == 4403
    assert await close_code(ALICE, headers=[cookie]) == 4403  # no Origin: refused
    assert await close_code(ALICE, headers=[(b"origin", b"http://testserver")]) == 4401


async def test_event_shape_exactly_as_api(keys):
    comm = connect(ALICE, keys["alice"])
    assert (await comm.connect())[0]
    record = (
        await tag(
            agent="watched", key="u", title="T", data={"a": 1}, session_id="s:alice", turn_id="t1"
        )
    ).record
    await delete(agent="watched", artifact_id=record.id)
    tagged, deleted = await receive_n(comm, 2)
    assert set(tagged) == {"type", "seq", "sessionId", "at", "record"}
    assert tagged["type"] == "artifact.tagged" and tagged["sessionId"] == "s:alice"
    assert set(tagged["record"]) >= {"id", "kind", "key", "title", "data", "source"}
    assert tagged["record"]["data"] == {"a": 1} and tagged["at"].endswith("Z")
    assert deleted == {
        "type": "artifact.deleted",
        "seq": 2,
        "sessionId": "s:alice",
        "at": deleted["at"],
        "record": {"id": record.id, "key": "u", "kind": record.kind},
        "reason": "deleted",
    }
    await comm.disconnect()


async def test_sessions_are_isolated(keys):
    alice = connect(ALICE, keys["alice"])
    agent = connect(AGENT, keys["agent_key"])
    assert (await alice.connect())[0] and (await agent.connect())[0]
    await tag(agent="watched", key="b", data={}, session_id="s:bob")
    await tag(agent="watched", key="x", data={})  # sessionless: the agent stream only
    await tag(agent="watched", key="a", data={}, session_id="s:alice")
    assert [m["record"]["key"] for m in await receive_all(alice, session_id="s:alice")] == ["a"]
    assert [m["seq"] for m in await receive_all(agent)] == [1, 2, 3]
    await alice.disconnect()
    await agent.disconnect()


async def test_replay_after_a_gap_then_live(keys):
    for i in range(5):
        await tag(agent="watched", key=f"k{i}", data={}, session_id="s:alice" if i % 2 else None)
    comm = connect(AGENT + "?after=2", keys["agent_key"])
    assert (await comm.connect())[0]
    assert [m["seq"] for m in await receive_n(comm, 3)] == [3, 4, 5]
    await tag(agent="watched", key="k5", data={})
    assert [m["seq"] for m in await receive_n(comm, 1)] == [6]
    await comm.disconnect()
    session = connect(ALICE + "?after=0", keys["alice"])
    assert (await session.connect())[0]
    assert [m["seq"] for m in await receive_all(session, session_id="s:alice")] == [2, 4]
    await session.disconnect()


async def test_no_after_means_live_only(keys):
    await tag(agent="watched", key="old", data={})
    comm = connect(AGENT, keys["agent_key"])
    assert (await comm.connect())[0]
    await tag(agent="watched", key="new", data={})
    assert [m["record"]["key"] for m in await receive_all(comm)] == ["new"]
    await comm.disconnect()


async def test_after_older_than_retained_is_told(keys):
    for i in range(4):
        await tag(agent="watched", key=f"k{i}", data={})
    await database_sync_to_async(lambda: Event.objects.filter(seq__lte=2).delete())()
    comm = connect(AGENT + "?after=0", keys["agent_key"])
    assert (await comm.connect())[0]
    first, *rest = await receive_all(comm)
    assert first["type"] == "replay.truncated" and first["oldestSeq"] == 3
    assert [m["seq"] for m in rest] == [3, 4]
    await comm.disconnect()


async def test_no_duplicate_or_gap_at_the_replay_live_seam(keys):
    """Tag from a thread while a client replays: every seq once, in order."""
    total = 300
    for i in range(100):
        await tag(agent="watched", key=f"pre{i}", data={})

    def tag_many():
        for i in range(total - 100):
            services.artifact_tag(agent="watched", key=f"live{i}", data={})

    writer = asyncio.get_running_loop().run_in_executor(None, tag_many)
    await asyncio.sleep(0.05)
    clients = [connect(AGENT + "?after=0", keys["agent_key"]) for _ in range(3)]
    for c in clients:
        assert (await c.connect())[0]
        await asyncio.sleep(0.03)
    await writer
    for c in clients:
        seqs = [m["seq"] for m in await receive_n(c, total, timeout=10)]
        assert seqs == list(range(1, total + 1))
    for c in clients:  # and no duplicate after: the next event is a tag made now
        assert await receive_all(c) == []
        await c.disconnect()


async def test_eviction_and_delete_events(keys):
    tiny = await database_sync_to_async(services.agent_create)(slug="tiny", max_artifacts=1)
    key = (await database_sync_to_async(services.agent_key_create)(agent=tiny))[1]
    comm = connect("/tiny/v1/events", key)
    assert (await comm.connect())[0]
    first = (await tag(agent="tiny", key="a", data={})).record
    second = (await tag(agent="tiny", key="b", data={})).record
    await delete(agent="tiny", artifact_id=second.id)
    got = await receive_n(comm, 4)
    assert [(m["type"], m.get("reason"), m["record"]["id"]) for m in got] == [
        ("artifact.tagged", None, first.id),
        ("artifact.tagged", None, second.id),
        ("artifact.deleted", "evicted", first.id),
        ("artifact.deleted", "deleted", second.id),
    ]
    await comm.disconnect()


async def test_pin_events_are_fanned_out_stored_and_replayed(keys):
    """artifact.pinned (API.md "Events"): live on the session's and the agent's streams, and
    again through ?after= replay; artifact.tagged carries version and pinned."""
    alice = connect(ALICE, keys["alice"])
    agent = connect(AGENT, keys["agent_key"])
    assert (await alice.connect())[0] and (await agent.connect())[0]
    record = (await tag(agent="watched", key="p", data={"n": 1}, session_id="s:alice")).record
    pin = database_sync_to_async(services.artifact_pin)
    await pin(agent="watched", artifact_id=record.id)
    await tag(agent="watched", key="p", data={"n": 2}, session_id="s:alice")
    await pin(agent="watched", artifact_id=record.id, pinned=False)
    expected = [
        ("artifact.tagged", {"version": 1, "pinned": False}),
        ("artifact.pinned", {"pinned": True}),
        ("artifact.tagged", {"version": 2, "pinned": True}),
        ("artifact.pinned", {"pinned": False}),
    ]

    def shape(messages: list[dict]) -> list[tuple[str, dict]]:
        return [
            (m["type"], {k: m["record"][k] for k in ("version", "pinned") if k in m["record"]})
            for m in messages
        ]

    for comm in (alice, agent):
        got = await receive_n(comm, 4)
        assert shape(got) == expected
        assert [m["seq"] for m in got] == [1, 2, 3, 4]
        await comm.disconnect()
    pinned = got[1]
    assert pinned == {
        "type": "artifact.pinned",
        "seq": 2,
        "sessionId": "s:alice",
        "at": pinned["at"],
        "record": {"id": record.id, "key": "p", "kind": record.kind, "pinned": True},
    }
    replay = connect(ALICE + "?after=1", keys["alice"])
    assert (await replay.connect())[0]
    assert shape(await receive_n(replay, 3)) == expected[1:]
    await replay.disconnect()


def test_a_tag_committed_during_the_retention_check_is_not_a_truncation(keys, monkeypatch):
    # CI caught it once: a client joining with after=0 while the first tag committed was told
    # `replay.truncated` — the stored events read empty, then the agent's last seq read 1.
    from artifacts_app import selectors
    from artifacts_app.selectors import events

    agent = keys["agent"]
    real = events.agent_last_seq

    def tag_commits_meanwhile(agent_id: int) -> int:
        monkeypatch.setattr(events, "agent_last_seq", real)
        services.artifact_tag(agent=agent, kind="note", key="meanwhile", data={})
        return real(agent_id)

    monkeypatch.setattr(events, "agent_last_seq", tag_commits_meanwhile)
    stream = events.Stream(agent_id=agent.pk, slug=agent.slug, session_sid=None)
    page = selectors.replay_page(stream, 0, check_retention=True)
    assert page.truncated_from is None
    assert [e["seq"] for e in page.events] == [1]
