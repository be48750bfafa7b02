"""Stored events, published after commit (DESIGN.md §5): storing and publishing, nothing else.

Services call ``EventBatch.add`` inside their transaction while they hold the agent row lock, so
``seq`` is gapless per agent and its order is commit order. ``EventBatch.store`` writes the rows in
that transaction (one multi-row INSERT) and registers one ``on_commit`` hook, ``publish``, which hands
the payloads to ``fanout``: this process's hubs at once, other processes through the channel layer
(Redis only). A rolled-back transaction stores nothing and publishes nothing. Channel layers may drop
messages; the stored rows, ``?after=`` replay and the fan-out's gap filling make delivery lossless.
Reads of the stored events live in ``selectors``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, NamedTuple

from django.db import connection, transaction

from artifacts_app import fanout
from artifacts_app.models import Event
from artifacts_app.records import iso_ms

log = logging.getLogger(__name__)

TAGGED = "artifact.tagged"
DELETED = "artifact.deleted"
PINNED = "artifact.pinned"
REASONS = ("deleted", "evicted", "pruned", "moved")


class EventRow(NamedTuple):
    """One event's columns, as ``EventBatch.store`` inserts them."""

    seq: int
    type: str
    session_sid: str | None
    artifact_id: str
    turn_id: str | None
    payload: dict[str, Any]
    at: datetime


@dataclass
class EventBatch:
    """The events of one transaction on one locked agent row."""

    agent_id: int
    last_seq: int
    rows: list[EventRow] = field(default_factory=list)
    # A moment the caller has already prepared for the database (``(at, its column value)``): a
    # tag's events share the tag's moment, and preparing a datetime costs as much as a statement's
    # Python.
    prepared_at: tuple[datetime, Any] | None = None

    def add(
        self,
        type: str,
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
        self.rows.append(
            EventRow(self.last_seq, type, session_sid, artifact_id, turn_id, payload, at)
        )
        return payload

    @property
    def payloads(self) -> list[dict[str, Any]]:
        return [row.payload for row in self.rows]

    def store(self, cursor: Any = None) -> None:
        """Insert the rows (inside the caller's transaction, on its ``cursor`` when it has one
        open) and publish them once it commits."""
        if not self.rows:
            return
        if cursor is None:
            with connection.cursor() as cursor:
                _insert(cursor, self.agent_id, self.rows, self.prepared_at)
        else:
            _insert(cursor, self.agent_id, self.rows, self.prepared_at)
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
        fanout.deliver_local(agent_id, payloads)
        if fanout.remote_enabled():
            fanout.publisher().submit(agent_id, payloads)
    except Exception:  # an outage must not turn a committed tag into an error
        log.exception(
            "publishing %d event(s) of agent %s failed; replay will deliver them",
            len(payloads),
            agent_id,
        )


_COLUMNS = (
    "agent_id",
    "seq",
    "type",
    "session_sid",
    "artifact_id",
    "turn_id",
    "payload",
    "created_at",
)
# The INSERT's text by (vendor, number of rows): built once each (a tag stores one or two rows).
_INSERTS: dict[tuple[str, int], str] = {}


def _insert_sql(db: Any, n: int) -> str:
    sql = _INSERTS.get((db.vendor, n))
    if sql is None:
        q = db.ops.quote_name
        columns = ", ".join(q(name) for name in _COLUMNS)
        row_sql = "(" + ", ".join(["%s"] * len(_COLUMNS)) + ")"
        sql = f"INSERT INTO {q(Event._meta.db_table)} ({columns}) VALUES {', '.join([row_sql] * n)}"
        if n <= 8:  # bounded: larger batches (a prune) are rare
            _INSERTS[(db.vendor, n)] = sql
    return sql


def _insert(
    cursor: Any, agent_id: int, rows: list[EventRow], prepared_at: tuple[datetime, Any] | None
) -> None:
    # One multi-row INSERT: through bulk_create the ORM's Python cost as much as the statement
    # (bench/tag.py). Values are prepared by the model fields, so it stores what the ORM would.
    db = cursor.db
    payload_field = Event._meta.get_field("payload")
    params: list[Any] = []
    at, at_db = prepared_at or (None, None)
    for row in rows:
        if row.at is not at:  # the rows of one batch mostly share their moment
            at, at_db = row.at, db.ops.adapt_datetimefield_value(row.at)
        params.extend(
            (
                agent_id,
                row.seq,
                row.type,
                row.session_sid,
                row.artifact_id,
                row.turn_id,
                payload_field.get_db_prep_save(row.payload, db),
                at_db,
            )
        )
    cursor.execute(_insert_sql(db, len(rows)), params)
