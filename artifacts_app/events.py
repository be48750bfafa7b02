"""Stored events, published after commit (DESIGN.md §5).

Services call ``EventBatch.add`` inside their transaction while they hold the agent row lock, so
``seq`` is gapless per agent and its order is commit order. ``EventBatch.store`` writes the rows in
that transaction and registers one ``on_commit`` hook that hands the payloads to the channel layer:
``publish`` (below). A rolled-back transaction stores nothing and publishes nothing. Channel layers
may drop messages; the stored rows, ``?after=`` replay and the fan-out's gap filling are what make
delivery lossless.

Publishing never waits on the network and never touches another thread's event loop:

* to this process's websockets, straight into ``fanout`` (each hub is fed on its own loop with
  ``call_soon_threadsafe``) — no channel layer round trip, and no layer object shared between loops
  (the old "BoundedQueue is bound to a different event loop" failure);
* to other processes (Redis layer only), ONE layer message per transaction to the agent's group,
  sent by one publisher thread per process on its own loop with its own layer instance (channels_redis
  pools are per loop). Each process's hub filters per session locally. The in-memory layer reaches
  no other process, so with it nothing goes to the layer at all.
"""

from __future__ import annotations

import asyncio
import atexit
import logging
import os
import threading
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import transaction

from artifacts_app import hotsql
from artifacts_app.records import iso_ms

log = logging.getLogger(__name__)

TAGGED = "artifact.tagged"
DELETED = "artifact.deleted"
REASONS = ("deleted", "evicted", "pruned", "moved")


BATCH = "artifacts.batch"  # the one layer message type: {"type", "origin", "agent", "events"}


def agent_group(agent_id: int) -> str:
    return f"artifacts.agent.{agent_id}"


@dataclass
class EventBatch:
    """The events of one transaction on one locked agent row."""

    agent_id: int
    last_seq: int
    # (seq, type, session_sid, artifact_id, turn_id, payload, at) — the Event columns.
    rows: list[tuple[Any, ...]] = field(default_factory=list)

    def add(
        self,
        type: str,  # noqa: A002
        *,
        at: datetime,
        session_sid: str | None,
        artifact_id: str,
        turn_id: str | None,
        record: dict[str, Any],
        reason: str | None = None,
    ) -> dict[str, Any]:
        self.last_seq += 1
        payload: dict[str, Any] = {
            "type": type,
            "seq": self.last_seq,
            "sessionId": session_sid,
            "at": iso_ms(at),
            "record": record,
        }
        if type == DELETED:
            if reason not in REASONS:
                raise ValueError(f"unknown delete reason {reason!r}")
            payload["reason"] = reason
        self.rows.append((self.last_seq, type, session_sid, artifact_id, turn_id, payload, at))
        return payload

    @property
    def payloads(self) -> list[dict[str, Any]]:
        return [row[5] for row in self.rows]

    def store(self) -> None:
        """Insert the rows (inside the caller's transaction) and publish them once it commits."""
        if not self.rows:
            return
        hotsql.events_insert(self.agent_id, self.rows)
        payloads = self.payloads
        agent_id = self.agent_id
        transaction.on_commit(lambda: publish(agent_id, payloads), robust=True)


def publish(agent_id: int, payloads: list[dict[str, Any]]) -> None:
    """Hand committed events to this process's websockets and, with Redis, to the other processes.
    Never blocks on I/O and never raises into the caller: the events are stored, and subscribers
    that miss a publish recover them (gap filling, ``?after=``)."""
    if not payloads:
        return
    try:
        from artifacts_app import fanout

        fanout.deliver_local(agent_id, payloads)
        if remote_enabled():
            _publisher().submit(agent_id, payloads)
    except Exception:  # an outage must not turn a committed tag into an error
        log.exception(
            "publishing %d event(s) of agent %s failed; replay will deliver them",
            len(payloads),
            agent_id,
        )


def remote_enabled() -> bool:
    """Whether events must cross processes through the channel layer (any non in-memory layer)."""
    conf = getattr(settings, "CHANNEL_LAYERS", {}).get("default")
    return bool(conf) and not conf["BACKEND"].endswith("InMemoryChannelLayer")


def origin() -> str:
    """This process's id in layer messages: a hub skips its own process's batches (already local)."""
    global _origin
    if _origin is None or _origin[0] != os.getpid():
        _origin = (os.getpid(), uuid.uuid4().hex)
    return _origin[1]


_origin: tuple[int, str] | None = None


def new_layer() -> Any:
    """A private instance of the configured layer, for one event loop only."""
    from channels.layers import DEFAULT_CHANNEL_LAYER, channel_layers

    return channel_layers.make_backend(DEFAULT_CHANNEL_LAYER)


class _Publisher:
    """One thread per process with its own loop and layer: sends batches to the agent groups in
    submission order. Bounded, so a layer outage costs memory up to a limit, then drops (logged)."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.loop = asyncio.new_event_loop()
        self.pending = 0
        self.idle = threading.Event()
        self.idle.set()
        self.lock = threading.Lock()
        self.limit = getattr(settings, "ARTIFACTS_WS_PUBLISH_BACKLOG", 10_000)
        self.layer: Any = None
        self.queue: asyncio.Queue[tuple[int, list[dict[str, Any]]]] | None = None
        ready = threading.Event()
        self.thread = threading.Thread(
            target=self._run, args=(ready,), name="artifacts-publisher", daemon=True
        )
        self.thread.start()
        ready.wait()

    def _run(self, ready: threading.Event) -> None:
        asyncio.set_event_loop(self.loop)
        self.queue = asyncio.Queue()
        self.layer = new_layer()
        self.loop.create_task(self._send_forever())
        ready.set()
        self.loop.run_forever()

    def submit(self, agent_id: int, payloads: list[dict[str, Any]]) -> None:
        with self.lock:
            if self.pending >= self.limit:
                log.error("publisher backlog full: dropped events of agent %s", agent_id)
                return
            self.pending += 1
            self.idle.clear()
        self.loop.call_soon_threadsafe(self.queue.put_nowait, (agent_id, payloads))  # type: ignore[union-attr]

    async def _send_forever(self) -> None:
        assert self.queue is not None
        while True:
            # Under load, merge what waits into one message per agent: a group_send is several
            # Redis round trips, whatever its size.
            batches = [await self.queue.get()]
            while not self.queue.empty():
                batches.append(self.queue.get_nowait())
            merged: dict[int, list[dict[str, Any]]] = {}
            for agent_id, payloads in batches:
                merged.setdefault(agent_id, []).extend(payloads)
            for agent_id, payloads in merged.items():
                try:
                    await self.layer.group_send(
                        agent_group(agent_id),
                        {"type": BATCH, "origin": origin(), "agent": agent_id, "events": payloads},
                    )
                except Exception:
                    log.exception("sending events of agent %s to the layer failed", agent_id)
            with self.lock:
                self.pending -= len(batches)
                if not self.pending:
                    self.idle.set()

    def flush(self, timeout: float) -> bool:
        return self.idle.wait(timeout)


_publisher_lock = threading.Lock()
_publisher_instance: _Publisher | None = None


def _publisher() -> _Publisher:
    global _publisher_instance
    with _publisher_lock:
        if _publisher_instance is None or _publisher_instance.pid != os.getpid():
            _publisher_instance = _Publisher()
            atexit.register(flush, 2.0)  # a command's last tags still reach the layer
        return _publisher_instance


def flush(timeout: float = 5.0) -> bool:
    """Wait until every batch handed to the layer has been sent (tests, commands before exit)."""
    if _publisher_instance is None or _publisher_instance.pid != os.getpid():
        return True
    return _publisher_instance.flush(timeout)


# --- reads for the websocket streams ---------------------------------------------------------


def agent_last_seq(agent_id: int) -> int:
    from artifacts_app.models import Agent

    return Agent.objects.filter(pk=agent_id).values_list("last_seq", flat=True).first() or 0


def stored_between(agent_id: int, after: int, before: int) -> list[dict[str, Any]]:
    """Stored payloads of an agent with ``after < seq < before``, in seq order (gap filling)."""
    from artifacts_app.models import Event

    return list(
        Event.objects.filter(agent_id=agent_id, seq__gt=after, seq__lt=before)
        .order_by("seq")
        .values_list("payload", flat=True)
    )


@dataclass(frozen=True)
class Stream:
    """What a websocket may watch: an agent's events, or one session's."""

    agent_id: int
    slug: str
    session_sid: str | None


def stream_open(caller: Any, slug: str, session_sid: str | None) -> Stream:
    """Resolve and authorise a stream with the one access rule; raises ``ArtifactError``s
    (unknown agent or session → ``NotFoundError``; a user learns nothing about sessions it does
    not own: those look forbidden whether or not they exist)."""
    from artifacts_app import access
    from artifacts_app.errors import ForbiddenError, NotFoundError, UnauthenticatedError
    from artifacts_app.models import Session
    from artifacts_app.services import agent_get

    if not caller.is_authenticated:  # before the slug: no credentials learn nothing
        raise UnauthenticatedError(
            "not_authenticated",
            "Send `Authorization: Bearer <agent key or user token>`, or log in.",
        )
    agent = agent_get(slug)
    if session_sid is None:
        access.can_watch_agent(caller, agent)
        return Stream(agent.pk, agent.slug, None)
    row = Session.objects.filter(agent_id=agent.pk, sid=session_sid).values_list("owner_id").first()
    if row is None:
        if caller.kind in (access.AGENT, access.STAFF):
            access.can_watch_agent(caller, agent)  # a wrong agent's key is still 403
            raise NotFoundError(
                "unknown_session", f"Session {session_sid!r} does not exist for agent {slug!r}."
            )
        raise ForbiddenError("forbidden", "This session belongs to someone else.")
    access.can_watch_session(caller, agent, row[0])
    return Stream(agent.pk, agent.slug, session_sid)


REPLAY_PAGE = 1000


@dataclass(frozen=True)
class Replay:
    events: list[dict[str, Any]]
    truncated_from: int | None  # the oldest stored seq when ``after`` is older than what is kept


def replay_page(stream: Stream, after: int, *, check_retention: bool) -> Replay:
    """Stored events of the stream after ``after``, oldest first, at most ``REPLAY_PAGE``."""
    from django.db.models import Min

    from artifacts_app.models import Event

    truncated_from = None
    if check_retention:
        # seq starts at 1 and has no holes, so a first stored seq past after+1 means pruned events.
        oldest = Event.objects.filter(agent_id=stream.agent_id).aggregate(m=Min("seq"))["m"]
        if oldest is None:
            last = agent_last_seq(stream.agent_id)
            if last > after:
                truncated_from = last + 1
        elif oldest > after + 1:
            truncated_from = oldest
    qs = Event.objects.filter(agent_id=stream.agent_id, seq__gt=after)
    if stream.session_sid is not None:
        qs = qs.filter(session_sid=stream.session_sid)
    rows = list(qs.order_by("seq").values_list("payload", flat=True)[:REPLAY_PAGE])
    return Replay(rows, truncated_from)
