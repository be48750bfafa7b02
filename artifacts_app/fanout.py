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

Events reach the hubs without waiting on the network and without a layer object shared between
loops: ``events.publish`` (on commit) calls ``deliver_local`` (each hub is fed on its own loop with
``call_soon_threadsafe``) and, with Redis, hands the batch to this process's publisher thread, which
sends ONE layer message per transaction to the agent's group from its own loop with its own layer
instance (channels_redis pools are per loop). The in-memory layer reaches no other process, so with
it nothing goes to the layer at all. The hubs read stored events through ``selectors``.

A socket is a ``Subscriber``: ``offer`` must not block (it puts into the socket's bounded buffer, and
a socket whose buffer is full is dropped by its consumer, not waited for).
"""

from __future__ import annotations

import asyncio
import atexit
import contextvars
import logging
import os
import threading
import uuid
from dataclasses import dataclass, field
from typing import Any, Protocol

import orjson
from channels.db import database_sync_to_async
from django.conf import settings

from artifacts_app import layer as layer_servers
from artifacts_app import selectors

log = logging.getLogger(__name__)

BATCH = "artifacts.batch"  # the one layer message type: {"type", "origin", "agent", "events"}


def agent_group(agent_id: int) -> str:
    return f"artifacts.agent.{agent_id}"


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
        self.remote = remote_enabled()
        self.layer: Any = None
        self.channel: str | None = None
        self.reader: asyncio.Task | None = None
        self._layer_lock = asyncio.Lock()
        self.gap_wait = float(getattr(settings, "ARTIFACTS_WS_GAP_WAIT", 0.5))
        # The layer's servers as last seen (their run_ids), and whether they are away now.
        self.watcher: asyncio.Task | None = None
        self.layer_ids: tuple[str, ...] | None = None
        self.layer_away = False

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
                    await self._group_add_or_watch(agent_id)
                last_seq = await database_sync_to_async(selectors.agent_last_seq)(agent_id)
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
            missing = await database_sync_to_async(selectors.events_between)(
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
                self.layer = new_layer()
                self.channel = await self.layer.new_channel("artifacts.hub.")
                self.reader = self.loop.create_task(self._read_forever())
                watch = layer_servers.ServerWatch(timeout=_watch_timeout())
                try:  # before the first group_add: a restart after it is then seen as one
                    self.layer_ids = await watch.server_ids()
                except asyncio.CancelledError:
                    await watch.close()
                    raise
                except Exception:
                    self.layer_away = True
                self.watcher = self.loop.create_task(self._watch_forever(watch))

    async def _group_add(self, agent_id: int) -> None:
        await self._ensure_channel()
        await self.layer.group_add(agent_group(agent_id), self.channel)

    async def _group_add_or_watch(self, agent_id: int) -> None:
        # With the layer away the socket still opens: its feed is served from the stored events
        # until the watcher sees the layer back and joins the group (``_resync``).
        try:
            await self._group_add(agent_id)
        except asyncio.CancelledError:
            raise
        except Exception:
            self._mark_away()

    def _mark_away(self) -> None:
        if not self.layer_away:  # once per outage
            log.warning("channel layer unreachable: serving events from the database")
        self.layer_away = True

    # --- a layer that goes away or restarts (issue 14) -------------------------------------------

    async def _watch_forever(self, watch: layer_servers.ServerWatch) -> None:
        """Every ``ARTIFACTS_WS_LAYER_WATCH`` seconds: ask the layer's servers who they are. While
        they do not answer, catch every feed up from the stored events (other processes' events
        cannot arrive); when they answer again, or answer as other servers (a restart forgot our
        groups), re-add every group at once and catch up what was missed meanwhile."""
        interval = float(getattr(settings, "ARTIFACTS_WS_LAYER_WATCH", 2.0))
        try:
            while True:
                await asyncio.sleep(interval)
                try:
                    ids = await watch.server_ids()
                except asyncio.CancelledError:
                    raise
                except Exception:
                    self._mark_away()
                    await self._catch_up_all()
                    continue
                if self.layer_away or ids != self.layer_ids:
                    log.warning(
                        "channel layer %s: re-adding %d group(s) and catching up",
                        "back" if ids == self.layer_ids else "restarted",
                        len(self.feeds),
                    )
                    await self._resync(ids)
        finally:
            await watch.close()

    async def _add_all_groups(self) -> bool:
        """(Re-)join the group of every watched agent; False (logged) when the layer fails."""
        try:
            for agent_id in list(self.feeds):
                await self.layer.group_add(agent_group(agent_id), self.channel)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.warning("joining the fan-out's groups failed", exc_info=True)
            return False
        return True

    async def _resync(self, ids: tuple[str, ...]) -> None:
        if await self._add_all_groups():
            self.layer_ids, self.layer_away = ids, False
        else:
            self.layer_away = True  # gone again: the next look retries
        # Joined first, then read: what commits in between arrives live, and seqs dedupe.
        await self._catch_up_all()

    async def _catch_up_all(self) -> None:
        for feed in list(self.feeds.values()):
            if feed.next_seq is None or self.feeds.get(feed.agent_id) is not feed:
                continue
            try:
                stored = await database_sync_to_async(_stored_after)(
                    feed.agent_id, feed.next_seq - 1
                )
            except asyncio.CancelledError:
                raise
            except Exception:
                log.warning("catching up agent %s failed; retrying", feed.agent_id, exc_info=True)
                continue
            if stored:
                self.deliver(feed.agent_id, stored)

    async def _group_discard(self, agent_id: int) -> None:
        if agent_id in self.feeds:  # someone joined again meanwhile
            return
        try:
            await self.layer.group_discard(agent_group(agent_id), self.channel)
        except Exception:
            log.exception("leaving the group of agent %s failed", agent_id)

    async def _read_forever(self) -> None:
        me = origin()
        refresh = float(getattr(settings, "ARTIFACTS_WS_GROUP_REFRESH", 3600))
        next_refresh = self.loop.time() + refresh
        task = asyncio.current_task()
        while True:
            if task is not None and task.cancelling():
                # Python 3.11's wait_for returns the inner result when the cancellation arrives
                # just as the receive completes, swallowing it: without this check the reader
                # waits on for the next message and the loop can never close.
                raise asyncio.CancelledError
            try:
                message = await asyncio.wait_for(self.layer.receive(self.channel), refresh)
            except TimeoutError:
                message = None
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                if task is not None and task.cancelling():
                    # A cancellation the Redis client turned into its own error (redis-py 8 does):
                    # retrying here would swallow it, and the loop could never close.
                    raise asyncio.CancelledError from exc
                # Once per outage, not once a second: the watcher says when it is back.
                (log.debug if self.layer_away else log.warning)(
                    "receiving from the channel layer failed; retrying", exc_info=True
                )
                await asyncio.sleep(1)
                continue
            if message is not None and message.get("origin") != me:
                self.deliver(int(message["agent"]), list(message["events"]))
            if self.loop.time() >= next_refresh:
                # Group membership expires in the layer (group_expiry): renew it for live feeds.
                next_refresh = self.loop.time() + refresh
                await self._add_all_groups()


CATCH_UP_LIMIT = 10_000  # stored events read per feed per look; the next look reads on


def _stored_after(agent_id: int, after: int) -> list[dict[str, Any]]:
    last = selectors.agent_last_seq(agent_id)
    return selectors.events_between(agent_id, after, min(last, after + CATCH_UP_LIMIT) + 1)


def _watch_timeout() -> float:
    return max(1.0, float(getattr(settings, "ARTIFACTS_WS_LAYER_WATCH", 2.0)))


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


# --- publishing to other processes (Redis): one thread per process ---------------------------


def remote_enabled() -> bool:
    """Whether events must cross processes through the channel layer (any non in-memory layer)."""
    conf = getattr(settings, "CHANNEL_LAYERS", {}).get("default") or {}
    return bool(conf) and not str(conf["BACKEND"]).endswith("InMemoryChannelLayer")


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


def publisher() -> _Publisher:
    """This process's publisher thread (started on first use, again after a fork)."""
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
