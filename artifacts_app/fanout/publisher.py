"""Publishing events to other processes through the channel layer (Redis): the one layer message
type, the agents' groups, and this process's publisher thread (see ``fanout`` for the whole path)."""

from __future__ import annotations

import asyncio
import atexit
import logging
import os
import threading
import uuid
from typing import Any, Literal, TypedDict

from django.conf import settings

from artifacts_app import event_schema

log = logging.getLogger(__name__)

BATCH: Literal["artifacts.batch"] = "artifacts.batch"  # the one layer message type (``Batch``)


class Batch(TypedDict):
    """The one layer message: the events of one agent that one process committed."""

    type: Literal["artifacts.batch"]
    origin: str  # the sending process (``origin``): its own hubs had them already
    agent: int
    events: list[event_schema.Event]


def agent_group(agent_id: int) -> str:
    return f"artifacts.agent.{agent_id}"


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
        self.queue: asyncio.Queue[tuple[int, list[event_schema.Event]]] | None = None
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

    def submit(self, agent_id: int, payloads: list[event_schema.Event]) -> None:
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
            merged: dict[int, list[event_schema.Event]] = {}
            for agent_id, payloads in batches:
                merged.setdefault(agent_id, []).extend(payloads)
            for agent_id, payloads in merged.items():
                message: Batch = {
                    "type": BATCH,
                    "origin": origin(),
                    "agent": agent_id,
                    "events": payloads,
                }
                try:
                    await self.layer.group_send(agent_group(agent_id), message)
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
