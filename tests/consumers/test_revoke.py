"""Revocation reaches open streams (API.md "Limits"): a socket whose credentials stop holding —
its key or token revoked, its user deactivated or deleted, its browser session logged out, its
session given to someone else or deleted, its staff flag taken — is closed (4401 / 4403) by the
hub's credentials watch, whichever process made the change; the other sockets go on."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from datetime import datetime

import httpx
import pytest
from channels.db import database_sync_to_async
from django.contrib.auth import get_user_model
from django.test import Client
from django.utils import timezone
from websockets.asyncio.client import connect as connect_ws
from websockets.exceptions import ConnectionClosed

from artifacts_app import fanout, selectors, services
from artifacts_app.models import Agent, ApiKey, Session
from tests.consumers import live
from tests.consumers.conftest import Communicator, connect, receive_all, tag
from tests.servers import ROOT

pytestmark = pytest.mark.django_db(transaction=True)

AGENT = "/watched/v1/events"
ALICE = "/watched/v1/sessions/s:alice/events"
BOUND = 5.0  # a generous bound for failure; the latency seen is printed, not asserted


async def opened(path: str, token: str | None = None, headers: list | None = None):
    """An open stream, shown delivering (a tag made now arrives, nothing before it)."""
    comm = connect(path, token, headers)
    connected, _ = await comm.connect()
    assert connected
    session = "s:alice" if "s:alice" in path else None
    assert await receive_all(comm, session_id=session) == []
    return comm


async def closed_after(
    comm: Communicator, what: str, started: float, bound: float = BOUND
) -> tuple[int, list]:
    """Wait for the close (up to ``BOUND``): its code and whatever was sent before it (other
    streams' markers left out: ``receive_all``'s of the sockets opened after this one)."""
    sent = []
    deadline = started + bound
    while True:
        message = await comm.receive_output(max(0.01, deadline - time.monotonic()))
        if message["type"] == "websocket.close":
            print(f"\n{what}: closed {message['code']} after {time.monotonic() - started:.3f} s")
            return message["code"], sent
        event = json.loads(message["text"])
        if not str(event["record"].get("key") or "").startswith("marker-"):
            sent.append(event)


def run(function, /, **kwargs):
    return database_sync_to_async(function)(**kwargs)


async def test_revoked_agent_key_closes_open_websocket_4401(keys):
    comm = await opened(AGENT, keys["agent_key"])
    started = time.monotonic()
    await run(services.token_revoke, token=keys["agent_key"])
    code, sent = await closed_after(comm, "agent key revoked", started)
    assert code == 4401 and sent == []
    # Gone from the hub: a tag made now reaches no socket of that key.
    assert not fanout.hub().feeds
    await tag(agent="watched", key="after", data={})
    assert await comm.receive_nothing(0.3)


async def test_revoked_user_token_closes_its_session_stream_4401(keys):
    comm = await opened(ALICE, keys["alice"])
    started = time.monotonic()
    await run(services.token_revoke, token=keys["alice"])
    code, sent = await closed_after(comm, "user token revoked", started)
    assert code == 4401 and sent == []


async def test_deleting_the_agent_closes_its_keys_streams_4401(keys):
    comm = await opened(ALICE, keys["agent_key"])
    started = time.monotonic()
    # The admin's delete: the agent's keys go with it.
    await database_sync_to_async(lambda: Agent.objects.filter(slug="watched").delete())()
    code, _ = await closed_after(comm, "agent deleted", started)
    assert code == 4401


@pytest.mark.parametrize("change", ["deactivated", "deleted"])
async def test_a_user_deactivated_or_deleted_loses_its_streams_4401(keys, change):
    comm = await opened(ALICE, keys["alice"])
    users = get_user_model().objects.filter(username="alice")
    started = time.monotonic()
    if change == "deactivated":
        await database_sync_to_async(lambda: users.update(is_active=False))()
    else:
        await database_sync_to_async(lambda: users.delete())()
    code, _ = await closed_after(comm, f"user {change}", started)
    assert code == 4401


@pytest.mark.parametrize("change", ["given to bob", "deleted"])
async def test_a_user_losing_the_session_loses_its_stream_4403(keys, change):
    comm = await opened(ALICE, keys["alice"])
    staff = await opened(ALICE, keys["staff"])
    sessions = Session.objects.filter(sid="s:alice")
    started = time.monotonic()
    if change == "deleted":
        await database_sync_to_async(lambda: sessions.delete())()
    else:
        bob = await database_sync_to_async(get_user_model().objects.get)(username="bob")
        await database_sync_to_async(lambda: sessions.update(owner=bob))()
    code, _ = await closed_after(comm, f"session {change}", started)
    assert code == 4403
    if change == "given to bob":  # staff watch any session: theirs stays open and delivering
        assert await receive_all(staff, session_id="s:alice") == []
    else:  # a session that no longer exists is no stream for anyone (as opening it: 4404)
        assert (await closed_after(staff, "session deleted, staff", started))[0] == 4404
    await staff.disconnect()


async def test_staff_losing_is_staff_loses_the_agent_stream_4403(keys):
    comm = await opened(AGENT, keys["staff"])
    staff = get_user_model().objects.filter(username="sup")
    started = time.monotonic()
    await database_sync_to_async(lambda: staff.update(is_staff=False))()
    code, _ = await closed_after(comm, "is_staff taken", started)
    assert code == 4403


async def test_a_logged_out_browser_session_closes_the_cookie_socket_4401(keys):
    client = Client()
    await database_sync_to_async(client.login)(username="alice", password="alice-pw-123")
    cookie = (b"cookie", f"sessionid={client.cookies['sessionid'].value}".encode())
    comm = await opened(ALICE, headers=[cookie, (b"origin", b"http://testserver")])
    # Another browser of alice's stays logged in, and its socket open.
    other = await opened(
        ALICE,
        headers=[
            (b"cookie", f"sessionid={keys['alice_cookie']}".encode()),
            (b"origin", b"http://testserver"),
        ],
    )
    started = time.monotonic()
    await database_sync_to_async(client.logout)()  # flushes that Django session
    code, _ = await closed_after(comm, "browser logged out", started)
    assert code == 4401
    assert await receive_all(other, session_id="s:alice") == []
    await other.disconnect()


async def test_an_unaffected_socket_stays_open_and_keeps_receiving(keys):
    revoked = await opened(AGENT, keys["agent_key"])
    kept = await opened(AGENT, keys["staff"])
    second_key = (await run(services.agent_key_create, agent="watched"))[1]
    also_kept = await opened(AGENT, second_key)
    started = time.monotonic()
    await run(services.token_revoke, token=keys["agent_key"])
    assert (await closed_after(revoked, "one of three revoked", started))[0] == 4401
    record = (await tag(agent="watched", key="later", data={"n": 1})).record
    for comm in (kept, also_kept):
        event = json.loads(await comm.receive_from(BOUND))
        while event["record"]["key"].startswith("marker-"):  # the other sockets' openings
            event = json.loads(await comm.receive_from(BOUND))
        assert event["record"]["id"] == record.id
        assert await receive_all(comm) == []
        await comm.disconnect()


async def test_the_watch_asks_nothing_once_no_stream_is_open(keys, settings):
    settings.ARTIFACTS_STREAM_RECHECK = 0.05
    comm = await opened(AGENT, keys["agent_key"])
    hub = fanout.hub()
    watch = hub.credentials_watch
    assert watch.task is not None and watch.streams
    await comm.disconnect()
    assert not watch.streams
    await asyncio.wait_for(asyncio.shield(watch.task), BOUND)  # it ends by itself
    assert watch.task is None


def manage(*args: str) -> subprocess.CompletedProcess:
    """``manage.py`` in a process of its own, on the test database (and Redis, when configured)."""
    env = {**os.environ, "DATABASE_URL": live.test_database_url(), "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def revoked_before(prefix: str, seen: datetime) -> float:
    """Seconds from the key's revocation (its ``revoked_at``, written by whichever process) to
    ``seen``."""
    key = ApiKey.objects.get(prefix=prefix)
    assert key.revoked_at is not None
    return (seen - key.revoked_at).total_seconds()


def prefix_of(secret: str) -> str:
    return "_".join(secret.split("_")[:2])  # "aak_<8 hex>" (the rest may hold "_")


async def test_revoke_token_command_in_another_process_closes_the_socket(keys):
    comm = await opened(AGENT, keys["agent_key"])
    kept = await opened(AGENT, keys["staff"])
    command = asyncio.ensure_future(asyncio.to_thread(manage, "revoke_token", keys["agent_key"]))
    # The command's start-up comes first: a wide bound here, the latency measured from the row.
    code, sent = await closed_after(comm, "revoke_token", time.monotonic(), bound=60)
    seen = timezone.now()
    done = await command
    assert done.returncode == 0, done.stderr
    latency = await database_sync_to_async(revoked_before)(prefix_of(keys["agent_key"]), seen)
    print(f"revoke_token (another process): closed {latency:.3f} s after the revocation")
    assert code == 4401 and sent == []
    assert await receive_all(kept) == []
    await kept.disconnect()


@pytest.mark.slow
async def test_revoke_token_command_closes_a_socket_on_a_running_daphne(keys):
    """Everything real: a daphne serving the socket, ``manage.py revoke_token`` in a third
    process, a websocket client; the revoked socket closes 4401, the other keeps receiving."""
    server = live.daphne()
    try:
        url = f"{server.ws_url}{AGENT}"
        bearer = {"Authorization": f"Bearer {keys['agent_key']}"}
        staff = {"Authorization": f"Bearer {keys['staff']}"}
        async with (
            connect_ws(url, additional_headers=bearer) as revoked,
            connect_ws(url, additional_headers=staff) as kept,
        ):
            # Both delivering: a tag made through that daphne reaches both.
            first = await tag_over_http(server, keys["agent_key"], "first")
            for ws in (revoked, kept):
                assert json.loads(await asyncio.wait_for(ws.recv(), 30))["record"]["id"] == first
            command = asyncio.ensure_future(
                asyncio.to_thread(manage, "revoke_token", keys["agent_key"])
            )
            with pytest.raises(ConnectionClosed) as closed:
                await asyncio.wait_for(revoked.recv(), 60)  # the command's start-up first
            seen = timezone.now()
            done = await command
            assert done.returncode == 0, done.stderr
            latency = await database_sync_to_async(revoked_before)(
                prefix_of(keys["agent_key"]), seen
            )
            print(f"\nrevoke_token against daphne: closed {latency:.3f} s after the revocation")
            assert closed.value.rcvd is not None and closed.value.rcvd.code == 4401
            later = await tag_over_http(server, keys["staff"], None)
            assert later is None  # staff do not tag: made with another, live key instead
            second_key = (await run(services.agent_key_create, agent="watched"))[1]
            later = await tag_over_http(server, second_key, "later")
            assert json.loads(await asyncio.wait_for(kept.recv(), 30))["record"]["id"] == later
    finally:
        server.stop()


async def tag_over_http(server, token: str, key: str | None) -> str | None:
    async with httpx.AsyncClient() as http:
        response = await http.post(
            f"{server.base_url}/watched/v1/artifacts",
            json={"key": key or "refused", "data": {}},
            headers={"Authorization": f"Bearer {token}"},
            timeout=30,
        )
    if response.status_code == 403:
        return None
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


def test_credentials_state_is_one_statement_whatever_the_streams(
    keys, django_assert_num_queries, django_user_model
):
    agent = Agent.objects.get(slug="watched")
    live = ApiKey.objects.filter(revoked_at__isnull=True).first()
    alice = django_user_model.objects.get(username="alice")
    services.token_revoke(token=keys["bob"])
    bob_key = ApiKey.objects.get(user__username="bob")
    wanted = [
        selectors.Credentials(key_id=live.pk),
        selectors.Credentials(key_id=bob_key.pk, user_id=bob_key.user_id),
        selectors.Credentials(key_id=10**9),  # deleted
        selectors.Credentials(user_id=alice.pk, cookie=keys["alice_cookie"]),
        selectors.Credentials(user_id=alice.pk, cookie="no-such-session"),
        selectors.Credentials(user_id=alice.pk, session=(agent.pk, "s:alice")),
        selectors.Credentials(user_id=alice.pk, session=(agent.pk, "s:none")),
    ] * 50  # a hundred streams or so, sharing these credentials
    with django_assert_num_queries(1):
        state = selectors.credentials_state(wanted)
    assert state.keys == {live.pk}
    assert state.users[alice.pk] == (True, False) and state.users[bob_key.user_id][0]
    assert state.cookies == {keys["alice_cookie"]}
    assert state.sessions == {(agent.pk, "s:alice"): alice.pk}
    with django_assert_num_queries(0):
        assert selectors.credentials_state([]).keys == frozenset()


class Counted:
    """A guarded stream that counts how often it is asked (the hub's side of the contract)."""

    def __init__(self, credentials: selectors.Credentials) -> None:
        self.credentials = credentials
        self.asked: list[selectors.CredentialsState] = []

    def recheck(self, state: selectors.CredentialsState) -> None:
        self.asked.append(state)


async def test_a_look_with_the_last_looks_answer_asks_no_stream(keys, settings):
    settings.ARTIFACTS_STREAM_RECHECK = 3600  # the looks are made here, not by the task
    key = await database_sync_to_async(ApiKey.objects.get)(agent__slug="watched")
    stream = Counted(selectors.Credentials(key_id=key.pk))
    hub = fanout.hub()
    hub.guard(stream)
    try:
        await hub.credentials_watch.look()
        await hub.credentials_watch.look()  # nothing changed: the same answer, nobody asked
        assert [key.pk in state.keys for state in stream.asked] == [True]
        await run(services.token_revoke, token=keys["agent_key"])
        await hub.credentials_watch.look()
        assert [key.pk in state.keys for state in stream.asked] == [True, False]
    finally:
        hub.unguard(stream)
