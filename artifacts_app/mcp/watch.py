"""Change notifications for MCP clients, driven by the stored events through the fan-out hub.

A ``Watch`` is one MCP client's registration with this process's ``fanout.Hub`` (the same one the
websockets use: one layer subscription per process, so events of other processes arrive with
Redis, in seq order, gaps filled from the stored rows). It turns the agent's events into the two
signals MCP has: *this resource was updated* (for the URIs the client subscribed to) and *the list
changed* (a record came, moved or left). A user's watch counts only events of sessions the user
owns (``access``' rule, by each event's own session), so a record moved into another user's
session shows the first user that it left and nothing after.

Signals are level triggers, so pending ones are coalesced into a set and a flag: a client that
reads slowly gets every signal once, late, never a backlog that grows (nothing is lost). The hub
calls ``offer`` on its loop and it never blocks.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Iterable

import orjson
from channels.db import database_sync_to_async
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from artifacts_app import access, event_schema, fanout, metrics, selectors
from artifacts_app.errors import ArtifactError
from artifacts_app.mcp.reads import record_uri
from artifacts_app.models import Agent

BACKLOG = 10_000  # unexamined events past which a watch signals everything it could

# docs/operations.md "Metrics": this transport's children, looked up once.
_OPEN = metrics.SUBSCRIBERS.labels("mcp")
_DELIVERED = metrics.EVENTS_DELIVERED.labels("mcp")
_LAG = metrics.SUBSCRIBER_LAG.labels("mcp")
_DROPPED = metrics.SUBSCRIBERS_DROPPED.labels("mcp")


class Watch:
    session_sid: str | None = None  # the hub's filter: None, every event of the agent

    def __init__(self, agent: Agent, caller: access.Caller, *, list_changes: bool) -> None:
        self.agent_id = agent.pk
        self.slug = agent.slug
        self.caller = caller
        self.grant = access.Grant(caller=caller, agent=agent, events=False)
        self.revoked: ArtifactError | None = None  # why the watch was ended, once it was
        self.list_changes = list_changes
        self.subscribed: set[str] = set()  # record ids
        self._events: deque[tuple[str, str | None, str]] = deque()
        self._oldest = 0.0  # when the oldest unexamined event was offered (monotonic)
        self._flooded = False
        self._wake = asyncio.Event()
        self._owned: dict[str | None, bool] = {None: False}  # a user's sessions, by sid
        self._joined = False

    # --- the hub side --------------------------------------------------------------------------

    async def join(self) -> None:
        hub = fanout.hub()
        await hub.join(self.agent_id, self)
        self._joined = True
        _OPEN.inc()
        hub.guard(self)

    def leave(self) -> None:
        if self._joined:
            hub = fanout.hub()
            hub.unguard(self)
            hub.leave(self.agent_id, self)
            self._joined = False
            _OPEN.dec()
        self._wake.set()

    @property
    def credentials(self) -> selectors.Credentials:
        return self.grant.credentials

    def recheck(self, state: selectors.CredentialsState) -> None:
        """The hub's credentials watch: credentials that no longer hold end the watch (its
        ``signals`` answer empty, and ``revoked`` says why)."""
        error = access.grant_recheck(self.grant, state)
        if error is not None:
            self.revoked = error
            self.leave()

    def offer(self, event: event_schema.Event, text: str) -> None:
        if self._flooded:
            return
        if len(self._events) >= BACKLOG:
            self._events.clear()
            self._flooded = True
            _DROPPED.inc()
        else:
            if not self._events:
                self._oldest = time.monotonic()
            self._events.append((event["type"], event["sessionId"], event["record"]["id"]))
        self._wake.set()

    # --- the client side -----------------------------------------------------------------------

    def subscribe(self, artifact_ids: Iterable[str]) -> None:
        self.subscribed.update(artifact_ids)

    def unsubscribe(self, artifact_id: str) -> None:
        self.subscribed.discard(artifact_id)

    async def signals(self) -> tuple[bool, list[str]]:
        """Wait for the next signals: (the list changed, the URIs updated). Empty once left."""
        while True:
            await self._wake.wait()
            self._wake.clear()
            if not self._joined:
                return False, []
            listed, updated = await self._examine()
            if listed or updated:
                return listed, [record_uri(self.slug, rid) for rid in sorted(updated)]

    async def _examine(self) -> tuple[bool, set[str]]:
        if self._flooded:
            # More arrived than we kept: say everything we might owe (a superset, never a loss).
            self._flooded = False
            return self.list_changes, set(self.subscribed)
        listed, updated = False, set()
        if self._events:
            _LAG.observe(time.monotonic() - self._oldest)
        delivered = 0
        while self._events:
            kind, sid, rid = self._events.popleft()
            if not await self._visible(sid):
                continue
            delivered += 1
            if rid in self.subscribed:
                updated.add(rid)
            if kind != event_schema.PINNED:
                listed = listed or self.list_changes
        if delivered:
            _DELIVERED.inc(delivered)
        return listed, updated

    async def _visible(self, sid: str | None) -> bool:
        if access.sees_everything(self.caller):
            return True
        owned = self._owned.get(sid)
        if owned is None:
            found = await database_sync_to_async(selectors.session_owner)(self.agent_id, sid)
            owned = found is not None and access.sees_session(self.caller, found.owner_id)
            self._owned[sid] = owned  # a session's owner never changes
        return owned


# --- the standalone GET stream: ended when its credentials no longer hold ----------------------


class _Exchange:
    """One HTTP exchange guarded by the hub's credentials watch."""

    def __init__(self, grant: access.Grant) -> None:
        self.grant = grant
        self.ended = asyncio.Event()

    @property
    def credentials(self) -> selectors.Credentials:
        return self.grant.credentials

    def recheck(self, state: selectors.CredentialsState) -> None:
        if access.grant_recheck(self.grant, state) is not None:
            self.ended.set()


ENDING_GRACE = 1.0  # seconds the SDK has to end a stream as for a client that left


async def serve_guarded(
    grant: access.Grant, handle: ASGIApp, scope: Scope, receive: Receive, send: Send
) -> None:
    """Serve one MCP HTTP exchange with ``handle`` (the SDK's session manager). A GET — the
    session's standalone stream of server → client notifications — is guarded: once its
    credentials no longer hold, the SDK is told the client left (``http.disconnect``, the ASGI way
    every server ends a request) and the response is finished, so the client sees its stream end.
    The session's requests then meet the door (401). Other exchanges are short answers; the 2026
    wire's ``subscriptions/listen`` is ended by its own ``Watch``."""
    if scope.get("method") != "GET":
        await handle(scope, receive, send)
        return
    exchange = _Exchange(grant)
    hub = fanout.hub()
    hub.guard(exchange)
    started = finished = False

    async def tracked_send(message: Message) -> None:
        nonlocal started, finished
        if message["type"] == "http.response.start":
            started = True
        elif message["type"] == "http.response.body" and not message.get("more_body", False):
            finished = True
        await send(message)

    async def guarded_receive() -> Message:
        if exchange.ended.is_set():
            return {"type": "http.disconnect"}
        incoming = asyncio.ensure_future(receive())
        ended = asyncio.ensure_future(exchange.ended.wait())
        await asyncio.wait({incoming, ended}, return_when=asyncio.FIRST_COMPLETED)
        ended.cancel()
        if incoming.done():
            return incoming.result()
        incoming.cancel()
        return {"type": "http.disconnect"}

    task = asyncio.ensure_future(handle(scope, guarded_receive, tracked_send))
    ended = asyncio.ensure_future(exchange.ended.wait())
    try:
        await asyncio.wait({task, ended}, return_when=asyncio.FIRST_COMPLETED)
        if not task.done():
            await asyncio.wait({task}, timeout=ENDING_GRACE)
        if not task.done():
            task.cancel()
            await asyncio.wait({task})
        if not task.cancelled():
            task.result()  # what the SDK raised, raised here
    finally:
        ended.cancel()
        if not task.done():  # this exchange itself was cancelled
            task.cancel()
        hub.unguard(exchange)
    if exchange.ended.is_set() and not finished:
        if started:
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        else:
            body = orjson.dumps(
                {"error": {"code": "invalid_token", "message": access.REVOKED_MESSAGE}}
            )
            await send(
                {
                    "type": "http.response.start",
                    "status": 401,
                    "headers": [
                        (b"content-type", b"application/json"),
                        (b"content-length", str(len(body)).encode()),
                    ],
                }
            )
            await send({"type": "http.response.body", "body": body})
