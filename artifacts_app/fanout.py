"""Per-process fan-out of events to this process's websockets (DESIGN.md §5).

The plain Channels pattern makes every socket its own layer channel and group member, so one event
costs one layer message per socket. Here each event loop that serves websockets has one ``Hub``: the
sockets register with it, it holds ONE layer channel for the whole process (Redis only) joined to the
groups of the agents its sockets watch, and it hands each event to its local sockets, filtered per
session, serialized once.

Order and completeness live here too. Per agent, ``seq`` is gapless and in commit order, but two
transactions' publishes can arrive swapped, and a layer may drop a message. A feed therefore keeps
``next_seq``: an event past a hole waits; if the hole is not filled within ``ARTIFACTS_WS_GAP_WAIT``
seconds the missing events are read from the stored rows. So every socket sees the agent's events in
seq order, none missing, none twice.

A socket is a ``Subscriber``: ``offer`` must not block (it puts into the socket's bounded buffer, and
a socket whose buffer is full is dropped by its consumer, not waited for).
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import threading
from dataclasses import dataclass, field
from typing import Any, Protocol

import orjson
from channels.db import database_sync_to_async
from django.conf import settings

from artifacts_app import events

log = logging.getLogger(__name__)


class Subscriber(Protocol):
    session_sid: str | None  # None: the agent stream (every event)

    def offer(self, seq: int, text: str) -> None: ...


@dataclass
class _Feed:
    agent_id: int
    subscribers: set[Any] = field(default_factory=set)
    next_seq: int | None = None  # None until the stored last_seq was read
    pending: dict[int, dict[str, Any]] = field(default_factory=dict)
    gap_timer: asyncio.TimerHandle | None = None
    filling: bool = False
    ready: asyncio.Event = field(default_factory=asyncio.Event)


class Hub:
    """The fan-out of one event loop (one per server process in practice)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.feeds: dict[int, _Feed] = {}
        self.remote = events.remote_enabled()
        self.layer: Any = None
        self.channel: str | None = None
        self.reader: asyncio.Task | None = None
        self._layer_lock = asyncio.Lock()
        self.gap_wait = float(getattr(settings, "ARTIFACTS_WS_GAP_WAIT", 0.5))

    # --- sockets -------------------------------------------------------------------------------

    async def join(self, agent_id: int, subscriber: Subscriber) -> None:
        """Register a socket. When this returns, every event of the agent not yet delivered here
        reaches it, so a replay read afterwards misses nothing."""
        feed = self.feeds.get(agent_id)
        if feed is None:
            feed = self.feeds[agent_id] = _Feed(agent_id)
            feed.subscribers.add(subscriber)
            try:
                if self.remote:
                    await self._group_add(agent_id)
                last_seq = await database_sync_to_async(events.agent_last_seq)(agent_id)
            except BaseException:
                feed.subscribers.discard(subscriber)
                self._drop_if_idle(feed)
                raise
            # Events up to last_seq are stored; what arrived meanwhile and is newer stays pending.
            feed.next_seq = last_seq + 1
            feed.pending = {s: p for s, p in feed.pending.items() if s > last_seq}
            feed.ready.set()
            self._flush(feed)
        else:
            feed.subscribers.add(subscriber)
            await feed.ready.wait()

    def leave(self, agent_id: int, subscriber: Subscriber) -> None:
        feed = self.feeds.get(agent_id)
        if feed is None:
            return
        feed.subscribers.discard(subscriber)
        self._drop_if_idle(feed)

    def _drop_if_idle(self, feed: _Feed) -> None:
        if feed.subscribers or self.feeds.get(feed.agent_id) is not feed:
            return
        del self.feeds[feed.agent_id]
        if feed.gap_timer is not None:
            feed.gap_timer.cancel()
        if self.remote and self.channel is not None:
            self.loop.create_task(self._group_discard(feed.agent_id))

    # --- events in -----------------------------------------------------------------------------

    def deliver(self, agent_id: int, payloads: list[dict[str, Any]]) -> None:
        """Take events of an agent (on this hub's loop); hand them out in seq order."""
        feed = self.feeds.get(agent_id)
        if feed is None:
            return
        floor = feed.next_seq or 0
        for payload in payloads:
            seq = payload["seq"]
            if seq >= floor:
                feed.pending.setdefault(seq, payload)
        if feed.next_seq is not None:
            self._flush(feed)

    def _flush(self, feed: _Feed) -> None:
        assert feed.next_seq is not None
        pending = feed.pending
        while feed.next_seq in pending:
            payload = pending.pop(feed.next_seq)
            feed.next_seq += 1
            text = orjson.dumps(payload).decode()
            sid = payload.get("sessionId")
            for subscriber in list(feed.subscribers):
                wanted = subscriber.session_sid
                if wanted is None or wanted == sid:
                    subscriber.offer(payload["seq"], text)
        if pending and feed.gap_timer is None and not feed.filling:
            feed.gap_timer = self.loop.call_later(
                self.gap_wait, self._fill_gap, feed, context=_BLANK.copy()
            )
        elif not pending and feed.gap_timer is not None:
            feed.gap_timer.cancel()
            feed.gap_timer = None

    def _fill_gap(self, feed: _Feed) -> None:
        feed.gap_timer = None
        if not feed.pending or self.feeds.get(feed.agent_id) is not feed:
            return
        feed.filling = True
        self.loop.create_task(self._fill(feed), context=_BLANK.copy())

    async def _fill(self, feed: _Feed) -> None:
        # A later seq arrived, so the missing ones are committed: read them from the stored rows.
        try:
            assert feed.next_seq is not None
            upto = min(feed.pending)
            missing = await database_sync_to_async(events.stored_between)(
                feed.agent_id, feed.next_seq - 1, upto
            )
            log.info("filled %d missing event(s) of agent %s", len(missing), feed.agent_id)
            for payload in missing:
                feed.pending.setdefault(payload["seq"], payload)
            if feed.next_seq not in feed.pending:
                # Not stored (pruned meanwhile): skip the hole rather than stall the stream.
                feed.next_seq = upto
        except Exception:
            log.exception("filling an event gap of agent %s failed", feed.agent_id)
        finally:
            feed.filling = False
        self._flush(feed)

    # --- the one layer subscription of this process (Redis) -------------------------------------

    async def _ensure_channel(self) -> None:
        async with self._layer_lock:
            if self.channel is None:
                self.layer = events.new_layer()
                self.channel = await self.layer.new_channel("artifacts.hub.")
                self.reader = self.loop.create_task(self._read_forever())

    async def _group_add(self, agent_id: int) -> None:
        await self._ensure_channel()
        await self.layer.group_add(events.agent_group(agent_id), self.channel)

    async def _group_discard(self, agent_id: int) -> None:
        if agent_id in self.feeds:  # someone joined again meanwhile
            return
        try:
            await self.layer.group_discard(events.agent_group(agent_id), self.channel)
        except Exception:
            log.exception("leaving the group of agent %s failed", agent_id)

    async def _read_forever(self) -> None:
        me = events.origin()
        refresh = float(getattr(settings, "ARTIFACTS_WS_GROUP_REFRESH", 3600))
        next_refresh = self.loop.time() + refresh
        while True:
            try:
                message = await asyncio.wait_for(self.layer.receive(self.channel), refresh)
            except TimeoutError:
                message = None
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                task = asyncio.current_task()
                if task is not None and task.cancelling():
                    # A cancellation the Redis client turned into its own error (redis-py 8 does):
                    # retrying here would swallow it, and the loop could never close.
                    raise asyncio.CancelledError from exc
                log.exception("receiving from the channel layer failed; retrying")
                await asyncio.sleep(1)
                continue
            if message is not None and message.get("origin") != me:
                self.deliver(int(message["agent"]), list(message["events"]))
            if self.loop.time() >= next_refresh:
                # Group membership expires in the layer (group_expiry): renew it for live feeds.
                next_refresh = self.loop.time() + refresh
                for agent_id in list(self.feeds):
                    await self.layer.group_add(events.agent_group(agent_id), self.channel)


_BLANK = contextvars.Context()
_hubs: dict[asyncio.AbstractEventLoop, Hub] = {}
_hubs_lock = threading.Lock()


def hub() -> Hub:
    """The hub of the running event loop."""
    loop = asyncio.get_running_loop()
    found = _hubs.get(loop)
    if found is None:
        with _hubs_lock:
            for old in [lp for lp in _hubs if lp.is_closed()]:
                del _hubs[old]
            found = _hubs[loop] = Hub(loop)
    return found


def deliver_local(agent_id: int, payloads: list[dict[str, Any]]) -> None:
    """From any thread: give committed events to every hub of this process that watches the agent.
    A hub that does not watch it yet reads them from the stored rows when a socket joins."""
    for loop, found in list(_hubs.items()):
        if agent_id not in found.feeds or loop.is_closed():
            continue
        try:
            # A blank context: the publisher's (asgiref's sync_to_async markers) must not follow the
            # events onto the hub's loop, or the hub's own database calls would think they nest.
            loop.call_soon_threadsafe(found.deliver, agent_id, payloads, context=_BLANK.copy())
        except RuntimeError:  # the loop closed meanwhile
            pass
