"""Stored events, published after commit (DESIGN.md §5): storing and publishing, nothing else.

Services call ``EventBatch``'s method for each event type (``tagged``, ``deleted``, ``pinned``: the
payloads declared in ``event_schema``) inside their transaction while they hold the agent row lock, so
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
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.backends.utils import CursorWrapper

from artifacts_app import event_schema, fanout, metrics
from artifacts_app.models import Event
from artifacts_app.records import ArtifactRecord

log = logging.getLogger(__name__)


class EventRow(NamedTuple):
    """One event's columns, as ``EventBatch.store`` inserts them."""

    seq: int
    type: str
    session_sid: str | None
    artifact_id: str
    turn_id: str | None
    payload: event_schema.Event
    at: datetime


@dataclass
class EventBatch:
    """The events of one transaction on one locked agent row: one method per event type, each
    building its payload with that type's constructor (``event_schema``)."""

    agent_id: int
    last_seq: int
    rows: list[EventRow] = field(default_factory=list)
    # A moment the caller has already prepared for the database (``(at, its column value)``): a
    # tag's events share the tag's moment, and preparing a datetime costs as much as a statement's
    # Python.
    prepared_at: tuple[datetime, Any] | None = None

    def tagged(self, record: ArtifactRecord, *, at: datetime) -> event_schema.Tagged:
        """``artifact.tagged``: ``record`` as the tag (or restore) stored it."""
        payload = event_schema.tagged(
            seq=self.last_seq + 1, session_sid=record.session_id, at=at, record=record
        )
        self._add(payload, record.session_id, record.id, record.turn_id, at)
        return payload

    def deleted(
        self,
        *,
        artifact_id: str,
        key: str | None,
        kind: str,
        session_sid: str | None,
        turn_id: str | None,
        reason: str,
        at: datetime,
    ) -> event_schema.Deleted:
        """``artifact.deleted``: the record left ``session_sid`` for ``reason``."""
        payload = event_schema.deleted(
            seq=self.last_seq + 1,
            session_sid=session_sid,
            at=at,
            artifact_id=artifact_id,
            key=key,
            kind=kind,
            reason=reason,
        )
        self._add(payload, session_sid, artifact_id, turn_id, at)
        return payload

    def pinned(
        self,
        *,
        artifact_id: str,
        key: str | None,
        kind: str,
        session_sid: str | None,
        turn_id: str | None,
        pinned: bool,
        at: datetime,
    ) -> event_schema.Pinned:
        """``artifact.pinned``: the record's pin changed to ``pinned``."""
        payload = event_schema.pinned(
            seq=self.last_seq + 1,
            session_sid=session_sid,
            at=at,
            artifact_id=artifact_id,
            key=key,
            kind=kind,
            pinned=pinned,
        )
        self._add(payload, session_sid, artifact_id, turn_id, at)
        return payload

    def _add(
        self,
        payload: event_schema.Event,
        session_sid: str | None,
        artifact_id: str,
        turn_id: str | None,
        at: datetime,
    ) -> None:
        self.last_seq = payload["seq"]
        self.rows.append(
            EventRow(
                payload["seq"], payload["type"], session_sid, artifact_id, turn_id, payload, at
            )
        )

    @property
    def payloads(self) -> list[event_schema.Event]:
        return [row.payload for row in self.rows]

    def store(self, cursor: CursorWrapper | None = None) -> None:
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


def publish(agent_id: int, payloads: list[event_schema.Event]) -> None:
    """Hand committed events to this process's websockets and, with Redis, to the other processes.
    Never blocks on I/O and never raises into the caller: the events are stored, and subscribers
    that miss a publish recover them (gap filling, ``?after=``)."""
    if not payloads:
        return
    _count(payloads)
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


# Each event type's counter, looked up once (``labels`` takes a lock and checks on every call).
_PUBLISHED = {kind: metrics.EVENTS_PUBLISHED.labels(kind) for kind in event_schema.EVENT_TYPES}


def _count(payloads: list[event_schema.Event]) -> None:
    for payload in payloads:
        kind = payload["type"]
        _PUBLISHED[kind].inc()
        if kind == event_schema.TAGGED:
            metrics.TAGS.inc()
        elif kind == event_schema.DELETED and payload.get("reason") == "evicted":
            metrics.EVICTIONS.inc()


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


def _insert_sql(db: BaseDatabaseWrapper, n: int) -> str:
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
    cursor: CursorWrapper,
    agent_id: int,
    rows: list[EventRow],
    prepared_at: tuple[datetime, Any] | None,
) -> None:
    # One multi-row INSERT: through bulk_create the ORM's Python cost as much as the statement
    # (bench/tag.py). Values are prepared by the model fields, so it stores what the ORM would.
    db: BaseDatabaseWrapper = cursor.db
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
