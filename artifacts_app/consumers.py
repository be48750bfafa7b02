"""The event streams (API.md "Events"): thin — authorise with ``access.stream_open``, join the
process's fan-out, replay stored events, then forward live ones.

Close codes (the reason says what to do):
  4400  bad ``after`` (not a non-negative integer)
  4401  no credentials, or unknown / revoked ones — also on an open stream whose key or token is
        revoked, whose user is deactivated or deleted, or whose browser session logged out
  4403  not allowed (another user's session, another agent's key, a refused ``Origin``) — also
        on an open stream whose caller lost access (the session changed owner or was deleted,
        staff lost ``is_staff``); open streams are asked again by the hub (``fanout.guard``)
  4404  unknown agent or session
  4429  this client fell behind (its buffer of ``ARTIFACTS_WS_BUFFER`` unsent events filled):
        reconnect with ``?after=<last seq received>``; replay makes it whole.
  4503  the database did not answer (opening the stream, or reading its replay): reconnect
        later with ``?after=<last seq received>``. (A channel layer that goes away or restarts
        closes nothing: the fan-out serves the stored events meanwhile and resyncs, ``fanout``.)
Before replaying, a client whose ``after`` is older than the stored events gets
``{"type": "replay.truncated", "after": n, "oldestSeq": m, "message": …}`` and then what is stored.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any
from urllib.parse import parse_qs

import orjson
from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from django.conf import settings

from artifacts_app import access, event_schema, fanout, faults, metrics, selectors
from artifacts_app.errors import (
    ArtifactError,
    ForbiddenError,
    NotFoundError,
    UnauthenticatedError,
    UnavailableError,
)

log = logging.getLogger(__name__)

# docs/operations.md "Metrics": this transport's children, looked up once.
_OPEN = metrics.SUBSCRIBERS.labels("websocket")
_DELIVERED = metrics.EVENTS_DELIVERED.labels("websocket")
_LAG = metrics.SUBSCRIBER_LAG.labels("websocket")
_DROPPED = metrics.SUBSCRIBERS_DROPPED.labels("websocket")

# Set by ``ws_auth.BearerAuthMiddleware``, which wraps these consumers (agent_site/asgi.py).
CALLER = "artifacts_caller"
REFUSAL = "artifacts_refusal"  # (close code, reason) or None

BAD_REQUEST, UNAUTHENTICATED, FORBIDDEN, NOT_FOUND, LAGGING = 4400, 4401, 4403, 4404, 4429
UNAVAILABLE = 4503
UNAVAILABLE_REASON = (
    "The database did not answer: reconnect later with ?after=<the last seq you received>."
)


def close_code(error: ArtifactError) -> int:
    if isinstance(error, UnauthenticatedError):
        return UNAUTHENTICATED
    if isinstance(error, ForbiddenError):
        return FORBIDDEN
    if isinstance(error, NotFoundError):
        return NOT_FOUND
    if isinstance(error, UnavailableError):
        return UNAVAILABLE
    return BAD_REQUEST


def _unavailable(exc: Exception) -> bool:
    if faults.classify(exc) is None:
        return False
    log.warning("a stream closed with %s: %r", UNAVAILABLE, exc)
    return True


def _reason(text: str) -> str:
    return text.encode("utf-8")[:123].decode("utf-8", "ignore")  # a close frame's limit


def _cookie(scope: dict[str, Any]) -> str | None:
    """The Django session key behind a cookie-authenticated caller (None for a bearer token)."""
    caller = scope.get(CALLER)
    if caller is None or caller.key is not None:
        return None
    return getattr(scope.get("session"), "session_key", None)


def parse_after(scope: dict[str, Any]) -> int | None:
    values = parse_qs(scope.get("query_string", b"").decode("latin-1")).get("after")
    if not values:
        return None
    value = values[-1]
    if not (value.isascii() and value.isdigit()) or len(value) > 19:  # "²".isdigit() is True
        raise ArtifactError(
            "invalid_after", "`after` must be a non-negative integer (an event seq)."
        )
    return int(value)


class EventsConsumer(AsyncWebsocketConsumer):
    # No per-socket layer channel: the process's one subscription lives in ``fanout`` (an alias
    # that is not configured makes Channels skip the layer for this consumer).
    channel_layer_alias = "artifacts-fanout"

    stream: selectors.Stream | None = None
    writer: asyncio.Task | None = None
    session_sid: str | None = None
    counted = False  # counted among the open streams (the metrics' gauge)

    async def refuse(self, code: int, reason: str) -> None:
        # API.md: accepted, then closed at once with the code, so that the client learns why.
        await self.accept()
        await self.close(code=code, reason=_reason(reason))

    async def connect(self) -> None:
        refusal = self.scope.get(REFUSAL)
        if refusal is not None:
            await self.refuse(*refusal)
            return
        kwargs = self.scope["url_route"]["kwargs"]
        if "slug" not in kwargs:
            await self.refuse(NOT_FOUND, "No such stream: see API.md for the event routes.")
            return
        try:
            after = parse_after(self.scope)
            stream = await database_sync_to_async(access.stream_open)(
                self.scope.get(CALLER), kwargs["slug"], kwargs.get("session_id")
            )
        except ArtifactError as error:
            await self.refuse(close_code(error), error.message)
            return
        except Exception as exc:  # the database: 4503, not a dropped handshake
            if not _unavailable(exc):
                raise
            await self.refuse(UNAVAILABLE, UNAVAILABLE_REASON)
            return
        self.stream = stream
        self.session_sid = stream.session_sid
        self.grant = access.stream_grant(self.scope.get(CALLER), stream, _cookie(self.scope))
        # (seq, the event's text, when the hub offered it: the subscriber's lag once written)
        self.buffer: asyncio.Queue[tuple[int, str, float]] = asyncio.Queue(
            maxsize=getattr(settings, "ARTIFACTS_WS_BUFFER", 1000)
        )
        self.lagging = False
        # Join first, then read the stored rows: whatever commits in between arrives live. The
        # handshake completes only once joined, so an open socket misses nothing from then on.
        try:
            await fanout.hub().join(stream.agent_id, self)
        except Exception as exc:
            if not _unavailable(exc):
                raise
            await self.refuse(UNAVAILABLE, UNAVAILABLE_REASON)
            return
        await self.accept()
        _OPEN.inc()
        self.counted = True
        # Asked again while open: a revocation anywhere closes the socket (4401/4403).
        fanout.hub().guard(self)
        self.writer = asyncio.get_running_loop().create_task(self._write(after))

    @property
    def credentials(self) -> selectors.Credentials:
        return self.grant.credentials

    def recheck(self, state: selectors.CredentialsState) -> None:
        """Called by the hub's credentials watch; must not block."""
        error = access.grant_recheck(self.grant, state)
        if error is None or self.lagging:
            return
        self.lagging = True  # nothing more is buffered or sent
        self._leave()
        if self.writer is not None:
            self.writer.cancel()
        asyncio.get_running_loop().create_task(
            self.close(code=close_code(error), reason=_reason(error.message))
        )

    def offer(self, event: event_schema.Event, text: str) -> None:
        """Called by the hub; must not block. A full buffer means the client is not reading."""
        if self.lagging:
            return
        try:
            self.buffer.put_nowait((event["seq"], text, time.monotonic()))
        except asyncio.QueueFull:
            _DROPPED.inc()
            self.lagging = True
            self._leave()
            asyncio.get_running_loop().create_task(self._drop_lagging())

    async def _drop_lagging(self) -> None:
        if self.writer is not None:
            self.writer.cancel()
        await self.close(
            code=LAGGING,
            reason="Too far behind: reconnect with ?after=<the last seq you received>.",
        )

    async def _write(self, after: int | None) -> None:
        try:
            await self._write_all(after)
        except Exception as exc:
            if not _unavailable(exc):
                raise
            self._leave()
            await self.close(code=UNAVAILABLE, reason=UNAVAILABLE_REASON)

    async def _write_all(self, after: int | None) -> None:
        last = -1
        if after is not None:
            last = after
            check = True
            while True:
                page = await database_sync_to_async(selectors.replay_page)(
                    self.stream, last, check_retention=check
                )
                if check and page.truncated_from is not None:
                    notice: event_schema.ReplayTruncated = {
                        "type": "replay.truncated",
                        "after": after,
                        "oldestSeq": page.truncated_from,
                        "message": "Events after this seq are no longer stored "
                        "(ARTIFACTS_EVENT_RETENTION); replay starts at oldestSeq.",
                    }
                    await self.send(text_data=orjson.dumps(notice).decode())
                check = False
                for payload in page.events:
                    await self.send(text_data=orjson.dumps(payload).decode())
                    last = payload["seq"]
                if len(page.events) < selectors.REPLAY_PAGE:
                    break
        buffer = self.buffer
        send = self.base_send
        while True:
            seq, text, offered = await buffer.get()
            _LAG.observe(time.monotonic() - offered)  # the oldest of this write's events
            sent = 0
            while True:
                if seq > last:  # the replay/live seam: skip what replay already sent
                    await send({"type": "websocket.send", "text": text})
                    last = seq
                    sent += 1
                if buffer.empty():  # drain a backlog without a wake-up per event
                    break
                seq, text, _ = buffer.get_nowait()
            if sent:
                _DELIVERED.inc(sent)

    def _leave(self) -> None:
        if self.counted:
            self.counted = False
            _OPEN.dec()
        if self.stream is not None:
            hub = fanout.hub()
            hub.unguard(self)
            hub.leave(self.stream.agent_id, self)

    async def disconnect(self, code: int) -> None:
        self._leave()
        if self.writer is not None:
            self.writer.cancel()

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        pass  # the streams are one-way; what a client sends is ignored


class _Relay:
    """One agent's feed, handed on to a consumer of every agent: the hub offers this agent's
    events here, and they leave with the agent's slug added."""

    session_sid: str | None = None  # every event of the agent

    def __init__(self, consumer: EveryAgentConsumer, slug: str) -> None:
        self.consumer = consumer
        self.prefix = orjson.dumps({"agent": slug}).decode()[:-1] + ","

    def offer(self, event: event_schema.Event, text: str) -> None:
        self.consumer.offer_text(self.prefix + text[1:])


class EveryAgentConsumer(AsyncWebsocketConsumer):
    """``/ws/v1/events``: every agent's events at once, each with ``"agent": <slug>``, for staff
    (``access``: ``WATCH_EVERY_AGENT``) — the admin's home shows what ships as it ships. Live only:
    ``seq`` is per agent, so there is no ``?after=`` here (a client that reconnects reloads its
    list). The agents are those there are when it connects; each joins the process's fan-out like
    an agent stream, and the credentials are asked again while it is open (4401/4403)."""

    channel_layer_alias = "artifacts-fanout"

    relays: dict[int, _Relay] | None = None
    writer: asyncio.Task | None = None

    async def refuse(self, code: int, reason: str) -> None:
        await self.accept()  # then closed at once with the code, as the agent streams do
        await self.close(code=code, reason=_reason(reason))

    async def connect(self) -> None:
        refusal = self.scope.get(REFUSAL)
        if refusal is not None:
            await self.refuse(*refusal)
            return
        caller = self.scope.get(CALLER)
        try:
            streams = await database_sync_to_async(access.every_stream_open)(caller)
        except ArtifactError as error:
            await self.refuse(close_code(error), error.message)
            return
        except Exception as exc:
            if not _unavailable(exc):
                raise
            await self.refuse(UNAVAILABLE, UNAVAILABLE_REASON)
            return
        self.grant = access.Grant(caller=caller, agent=None, cookie=_cookie(self.scope))
        self.buffer: asyncio.Queue[str] = asyncio.Queue(
            maxsize=getattr(settings, "ARTIFACTS_WS_BUFFER", 1000)
        )
        self.lagging = False
        self.relays = {}
        hub = fanout.hub()
        try:
            for stream in streams:
                relay = _Relay(self, stream.slug)
                await hub.join(stream.agent_id, relay)
                self.relays[stream.agent_id] = relay
        except Exception as exc:
            self._leave()
            if not _unavailable(exc):
                raise
            await self.refuse(UNAVAILABLE, UNAVAILABLE_REASON)
            return
        await self.accept()
        hub.guard(self)
        self.writer = asyncio.get_running_loop().create_task(self._write())

    @property
    def credentials(self) -> selectors.Credentials:
        return self.grant.credentials

    def recheck(self, state: selectors.CredentialsState) -> None:
        error = access.grant_recheck(self.grant, state)
        if error is None or self.lagging:
            return
        self.lagging = True
        self._leave()
        if self.writer is not None:
            self.writer.cancel()
        asyncio.get_running_loop().create_task(
            self.close(code=close_code(error), reason=_reason(error.message))
        )

    def offer_text(self, text: str) -> None:
        if self.lagging:
            return
        try:
            self.buffer.put_nowait(text)
        except asyncio.QueueFull:
            self.lagging = True
            self._leave()
            if self.writer is not None:
                self.writer.cancel()
            asyncio.get_running_loop().create_task(
                self.close(code=LAGGING, reason="Too far behind: reconnect and reload the list.")
            )

    async def _write(self) -> None:
        while True:
            text = await self.buffer.get()
            await self.base_send({"type": "websocket.send", "text": text})

    def _leave(self) -> None:
        if self.relays:
            hub = fanout.hub()
            hub.unguard(self)
            for agent_id, relay in self.relays.items():
                hub.leave(agent_id, relay)
            self.relays = {}

    async def disconnect(self, code: int) -> None:
        self._leave()
        if self.writer is not None:
            self.writer.cancel()

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        pass  # one-way
