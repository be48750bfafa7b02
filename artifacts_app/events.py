"""Stored events, published after commit (DESIGN.md §5).

Services call ``EventBatch.add`` inside their transaction while they hold the agent row lock, so
``seq`` is gapless per agent and its order is commit order. ``EventBatch.store`` writes the rows in
that transaction and registers one ``on_commit`` hook that hands the payloads to the channel layer:
the group of the agent, and the group of the session when the event has one. A rolled-back
transaction stores nothing and publishes nothing. Channel layers may drop messages; the stored rows
and ``?after=`` replay are what make delivery lossless.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import threading
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from asgiref.sync import SyncToAsync, async_to_sync
from channels.layers import get_channel_layer
from django.db import transaction

from artifacts_app import hotsql
from artifacts_app.records import iso_ms

log = logging.getLogger(__name__)

TAGGED = "artifact.tagged"
DELETED = "artifact.deleted"
REASONS = ("deleted", "evicted", "pruned")


def agent_group(agent_id: int) -> str:
    return f"artifacts.agent.{agent_id}"


def session_group(agent_id: int, session_sid: str) -> str:
    # Session ids may hold ':' which group names refuse; a digest keeps names short and valid.
    digest = hashlib.sha256(session_sid.encode("utf-8")).hexdigest()[:32]
    return f"artifacts.session.{agent_id}.{digest}"


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
    """Hand committed events to the channel layer. Never raises into the caller: the events are
    stored, and subscribers that miss a publish recover them with ``?after=``."""
    layer = get_channel_layer()
    if layer is None or not payloads:
        return
    try:
        if _server_loop() is not None:
            # A worker thread of a running ASGI server: send on the server's loop, where the
            # in-memory layer's subscribers live.
            async_to_sync(_send_all)(layer, agent_id, payloads)
        else:
            # Commands, scripts, plain threads: async_to_sync would make (and tear down) a loop per
            # call — ~0.8 ms, and a new Redis connection each time. Keep one loop per thread instead.
            _thread_loop().run_until_complete(_send_all(layer, agent_id, payloads))
    except Exception:  # a layer outage must not turn a committed tag into an error
        log.exception(
            "publishing %d event(s) of agent %s failed; replay will deliver them",
            len(payloads),
            agent_id,
        )


_local = threading.local()


def _server_loop() -> asyncio.AbstractEventLoop | None:
    """The running loop of the ASGI server whose worker thread this is, if any (asgiref sets it)."""
    if getattr(SyncToAsync.threadlocal, "main_event_loop_pid", None) != os.getpid():
        return None
    loop = getattr(SyncToAsync.threadlocal, "main_event_loop", None)
    return loop if loop is not None and loop.is_running() else None


def _thread_loop() -> asyncio.AbstractEventLoop:
    loop = getattr(_local, "loop", None)
    if loop is None or loop.is_closed():
        loop = _local.loop = asyncio.new_event_loop()
    return loop


async def _send_all(layer: Any, agent_id: int, payloads: list[dict[str, Any]]) -> None:
    for payload in payloads:
        await layer.group_send(agent_group(agent_id), payload)
        if payload["sessionId"] is not None:
            await layer.group_send(session_group(agent_id, payload["sessionId"]), payload)
