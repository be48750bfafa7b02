"""Each event loop's ``Hub``: the fan-out of events to its websockets and MCP clients, in seq order
with gaps filled, over ONE layer subscription per process (Redis). The package docstring tells the
whole path."""

from __future__ import annotations

import asyncio
import contextvars
import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import orjson
from channels.db import database_sync_to_async
from django.conf import settings

from artifacts_app import event_schema, selectors
from artifacts_app import layer as layer_servers
from artifacts_app.fanout import guard, resync
from artifacts_app.fanout.guard import Guarded
from artifacts_app.fanout.publisher import Batch, agent_group, new_layer, origin, remote_enabled

log = logging.getLogger(__name__)


class Subscriber(Protocol):
    session_sid: str | None  # None: the agent stream (every event)

    def offer(self, event: event_schema.Event, text: str) -> None:
        """``event`` as declared, and ``text`` its JSON, serialized once for every subscriber."""


@dataclass
class _Feed:
    agent_id: int
    subscribers: set[Subscriber] = field(default_factory=set)
    next_seq: int | None = None  # None until the stored last_seq was read
    pending: dict[int, event_schema.Event] = field(default_factory=dict)
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
        self.receiving: asyncio.Task | None = None  # the reader's receive, kept across timeouts
        self._layer_lock = asyncio.Lock()
        self.gap_wait = float(getattr(settings, "ARTIFACTS_WS_GAP_WAIT", 0.5))
        # The watch of the layer's servers (``resync``): it owns what it saw of them.
        self.layer_watch = resync.LayerWatch(self)
        self.closing = False  # set by ``close``: the reader and the watcher stop retrying
        # The open streams whose credentials are asked about again (``guard``), and that watch.
        self.credentials_watch = guard.CredentialsWatch(self, loop, _BLANK)

    async def close(self, timeout: float = 5.0) -> bool:
        """Stop the reader and the watcher, close the layer's pools, leave the registry. Bounded by
        ``timeout``; False (logged) when a task would not stop within it.

        One ``cancel()`` is not enough: a cancellation can be swallowed below the reader (Python
        3.11's ``wait_for`` returning the inner result, a Redis client turning it into its own
        error or retrying), after which ``cancelling()`` reads 0 and nothing stops the loop. So
        ``closing`` is set first (the loops check it at every turn) and each task is cancelled again
        until it is done."""
        self.closing = True
        with _hubs_lock:
            if _hubs.get(self.loop) is self:
                del _hubs[self.loop]
        for feed in self.feeds.values():
            if feed.gap_timer is not None:
                feed.gap_timer.cancel()
        self.feeds.clear()
        deadline = self.loop.time() + timeout
        stopped = True
        self.credentials_watch.streams.clear()
        for task in (
            self.reader,
            self.receiving,
            self.layer_watch.task,
            self.credentials_watch.task,
        ):
            stopped = await _stop(task, deadline) and stopped
        if not stopped:
            log.warning("the fan-out's layer tasks did not stop within %.1f s", timeout)
        if self.layer is not None and hasattr(self.layer, "close_pools"):
            try:
                await asyncio.wait_for(
                    self.layer.close_pools(), max(0.1, deadline - self.loop.time())
                )
            except Exception:
                log.warning("closing the fan-out's layer pools failed", exc_info=True)
        self.reader = self.receiving = None
        return stopped

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

    # --- credentials (``guard``) ---------------------------------------------------------------

    def guard(self, stream: Guarded) -> None:
        """Ask about ``stream``'s credentials again while it is open (it ends itself if they no
        longer hold); ``unguard`` when it closes."""
        self.credentials_watch.add(stream)

    def unguard(self, stream: Guarded) -> None:
        self.credentials_watch.discard(stream)

    # --- events in -----------------------------------------------------------------------------

    def deliver(self, agent_id: int, payloads: Sequence[event_schema.Event]) -> None:
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
            sid = payload["sessionId"]
            for subscriber in list(feed.subscribers):
                wanted = subscriber.session_sid
                if wanted is None or wanted == sid:
                    subscriber.offer(payload, text)
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
            missing = event_schema.stored(
                await database_sync_to_async(selectors.events_between)(
                    feed.agent_id, feed.next_seq - 1, upto
                )
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
                # Before the first group_add: a restart after it is then seen as one.
                await self.layer_watch.start(
                    layer_servers.ServerWatch(timeout=resync.watch_timeout())
                )

    async def _group_add(self, agent_id: int) -> None:
        await self._ensure_channel()
        await self.layer.group_add(agent_group(agent_id), self.channel)

    async def _group_add_or_watch(self, agent_id: int) -> None:
        # With the layer away the socket still opens: its feed is served from the stored events
        # until the watcher sees the layer back and joins the group (``resync``).
        try:
            await self._group_add(agent_id)
        except asyncio.CancelledError:
            raise
        except Exception:
            self.layer_watch.mark_away()

    async def add_all_groups(self) -> bool:
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

    def positions(self) -> list[tuple[int, int]]:
        """(agent, the last seq handed out) of each feed that has started: where a catch-up from
        the stored events begins."""
        return [
            (agent_id, feed.next_seq - 1)
            for agent_id, feed in self.feeds.items()
            if feed.next_seq is not None
        ]

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
        try:
            while not self.closing:
                if task is not None and task.cancelling():
                    raise asyncio.CancelledError
                try:
                    message = await self._receive(refresh)
                except asyncio.CancelledError:
                    raise
                except Exception as exc:
                    if self.closing or (task is not None and task.cancelling()):
                        # A cancellation the Redis client turned into its own error (redis-py 8
                        # does): retrying here would swallow it, and the loop could never close.
                        raise asyncio.CancelledError from exc
                    # Once per outage, not once a second: the watcher says when it is back.
                    (log.debug if self.layer_watch.away else log.warning)(
                        "receiving from the channel layer failed; retrying", exc_info=True
                    )
                    await asyncio.sleep(1)
                    continue
                if message is not None and message.get("origin") != me:
                    self.deliver(message["agent"], message["events"])
                if self.loop.time() >= next_refresh:
                    # Group membership expires in the layer (group_expiry): renew it for live feeds.
                    next_refresh = self.loop.time() + refresh
                    await self.add_all_groups()
        finally:
            if self.receiving is not None:
                self.receiving.cancel()  # ``close`` re-cancels it until it is done

    async def _receive(self, timeout: float) -> Batch | None:
        """The next layer message, or None after ``timeout`` seconds (the receive goes on).

        The receive runs as its own task, kept here, rather than under ``wait_for``: on Python 3.11
        ``wait_for`` cancels its inner receive and waits for it, and a receive that swallows that
        cancellation (the Redis client can) held the reader there for good, with the one
        cancellation spent. A kept task is one ``close`` can cancel again until it ends."""
        if self.receiving is None:
            self.receiving = self.loop.create_task(self.layer.receive(self.channel))
        done, _ = await asyncio.wait({self.receiving}, timeout=timeout)
        if not done:
            return None
        receiving, self.receiving = self.receiving, None
        if receiving.cancelled():
            raise ConnectionError("the layer's receive was cancelled")
        return receiving.result()


async def _stop(task: asyncio.Task | None, deadline: float) -> bool:
    """Cancel ``task`` until it is done (a cancellation may be swallowed below it), up to
    ``deadline`` (loop time). Never raises what the task raised: it is ending anyway."""
    if task is None or task is asyncio.current_task():
        return True
    loop = task.get_loop()
    while not task.done():
        left = deadline - loop.time()
        if left <= 0:
            return False
        task.cancel()
        await asyncio.wait({task}, timeout=min(left, 0.2))
    if not task.cancelled() and task.exception() is not None:
        log.debug("a fan-out task ended with an error", exc_info=task.exception())
    return True


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


async def close_hub(timeout: float = 5.0) -> bool:
    """Close the running loop's hub, if it has one (tests, before their loop closes)."""
    found = _hubs.get(asyncio.get_running_loop())
    return True if found is None else await found.close(timeout)


def deliver_local(agent_id: int, payloads: list[event_schema.Event]) -> None:
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
