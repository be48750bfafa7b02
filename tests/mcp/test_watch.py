"""The watch behind MCP notifications, on this process's real fan-out hub: events of committed tags
become coalesced signals, a user hears only of sessions it owns, and a flood loses nothing."""

from __future__ import annotations

import asyncio

import pytest
from channels.db import database_sync_to_async
from django.contrib.auth import get_user_model

from artifacts_app import access, services
from artifacts_app.mcp import watch as watch_module
from artifacts_app.mcp.watch import Watch

pytestmark = pytest.mark.django_db(transaction=True)

tag = database_sync_to_async(services.artifact_tag)


@pytest.fixture
def setup(transactional_db, django_user_model, settings):
    # The watches below are made for a caller without a key or a user: the credentials watch
    # would end them at its first look, and a slow machine's tags outlast one. The tests that are
    # about that look set their own interval.
    settings.ARTIFACTS_STREAM_RECHECK = 3600
    agent = services.agent_create(slug="watched", max_artifacts=1000)
    alice = django_user_model.objects.create_user("alice", password="x")
    services.session_create(agent=agent, sid="s-alice", owner="alice")
    services.session_create(agent=agent, sid="s-other")
    return agent, alice


async def _signals(watch: Watch) -> tuple[bool, list[str]]:
    return await asyncio.wait_for(watch.signals(), 10)


async def test_signals_are_coalesced_per_record(setup):
    agent, _ = setup
    first = await tag(agent=agent, key="a", data=1)
    watch = Watch(agent, access.Caller(kind=access.AGENT, agent_id=agent.pk), list_changes=True)
    watch.subscribe([first.record.id])
    await watch.join()
    try:
        for n in range(3):
            await tag(agent=agent, key="a", data=n)
        seen: list[str] = []
        listed = False
        while len(seen) < 1 or not listed:
            changed, uris = await _signals(watch)
            listed = listed or changed
            seen.extend(uris)
        assert set(seen) == {f"artifact://watched/{first.record.id}"}
        assert len(seen) <= 3
    finally:
        watch.leave()


async def test_a_user_hears_only_of_its_own_sessions(setup):
    agent, alice = setup
    hidden = await tag(agent=agent, key="other", data=1, session_id="s-other")
    mine = await tag(agent=agent, key="mine", data=1, session_id="s-alice")
    watch = Watch(agent, access.Caller(kind=access.USER, user=alice), list_changes=False)
    # Subscribed to both (the handler would refuse the hidden one; the watch filters anyway).
    watch.subscribe([hidden.record.id, mine.record.id])
    await watch.join()
    try:
        await tag(agent=agent, key="other", data=2, session_id="s-other")
        await tag(agent=agent, key="loose", data=1)
        await tag(agent=agent, key="mine", data=2, session_id="s-alice")  # the marker
        # Every event above was offered before signals() looks (each publish precedes its tag's
        # return on this loop), so the one signal holds all there is: the marker alone.
        assert await _signals(watch) == (False, [f"artifact://watched/{mine.record.id}"])
    finally:
        watch.leave()


async def test_a_flood_past_the_backlog_signals_everything_it_might_owe(setup, monkeypatch):
    agent, _ = setup
    monkeypatch.setattr(watch_module, "BACKLOG", 3)
    kept = await tag(agent=agent, key="kept", data=1)
    watch = Watch(agent, access.Caller(kind=access.AGENT, agent_id=agent.pk), list_changes=True)
    watch.subscribe([kept.record.id])
    await watch.join()
    try:
        for n in range(8):  # none of them touches the subscribed record
            await tag(agent=agent, key=f"n{n}", data=n)
        # More than the backlog arrived unexamined: the watch owes a superset, the list and
        # every subscribed record, rather than a guess that could miss one.
        assert await _signals(watch) == (True, [f"artifact://watched/{kept.record.id}"])
    finally:
        watch.leave()


async def test_a_revoked_token_ends_the_watch_and_says_why(setup, settings, closed_hub):
    settings.ARTIFACTS_STREAM_RECHECK = 0.05
    agent, alice = setup
    key, secret = await database_sync_to_async(services.user_token_create)(user=alice)
    agent_key = (await database_sync_to_async(services.agent_key_create)(agent=agent))[0]
    watch = Watch(agent, access.caller_from_key(key), list_changes=True)
    kept = Watch(agent, access.caller_from_key(agent_key), list_changes=True)
    await watch.join()
    await kept.join()
    try:
        await database_sync_to_async(services.token_revoke)(token=secret)
        # Ended: its signals answer empty, whatever is tagged after.
        assert await _signals(watch) == (False, [])
        assert watch.revoked is not None and watch.revoked.code == "invalid_token"
        await tag(agent=agent, key="later", data=1, session_id="s-alice")
        assert (await _signals(kept))[0] is True and kept.revoked is None
    finally:
        watch.leave()
        kept.leave()


async def test_staff_losing_is_staff_ends_a_watch_chosen_for_staff(setup, settings, closed_hub):
    settings.ARTIFACTS_STREAM_RECHECK = 0.05
    agent, _ = setup
    sup = await database_sync_to_async(
        lambda: get_user_model().objects.create_user("sup", password="x", is_staff=True)
    )()
    key = (await database_sync_to_async(services.user_token_create)(user=sup))[0]
    watch = Watch(agent, access.caller_from_key(key), list_changes=True)
    await watch.join()
    try:
        await database_sync_to_async(
            lambda: get_user_model().objects.filter(pk=sup.pk).update(is_staff=False)
        )()
        assert await _signals(watch) == (False, [])
        assert watch.revoked is not None and watch.revoked.code == "forbidden"
    finally:
        watch.leave()
