"""The statements of a tag and a delete that are written as SQL, private to ``services.artifacts``.

Measured (bench/tag.py, SQLite, DEBUG off): the ORM's Python around each of a tag's small statements
cost 100–200 µs, as much as the statement. Each function works on SQLite (3.35+, for RETURNING) and
PostgreSQL, quotes names through the connection and prepares values through the model fields, so
it stores what the ORM would. Rows come back named, never by position.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, NamedTuple

from django.db import connection

from artifacts_app.models import Agent, Artifact, Blob, Session
from artifacts_app.selectors._sql import aware, q


class Counters(NamedTuple):
    artifact_count: int
    last_seq: int


class Previous(NamedTuple):
    """What a re-tag needs of the record it replaces."""

    session_id: int | None
    blob_id: str | None
    blob_size: int | None
    content_type: str | None
    created_at: datetime
    session_sid: str | None  # the stream a move leaves (API.md "Events": reason moved)
    kind: str


class Deleted(NamedTuple):
    """A deleted record, as its ``artifact.deleted`` event names it."""

    id: str
    key: str | None
    kind: str
    session_sid: str | None
    turn_id: str | None


def agent_lock(agent_id: int) -> Counters | None:
    """Lock the agent row and answer its counters. On SQLite the IMMEDIATE transaction already
    holds the database's write lock; elsewhere it is ``SELECT … FOR UPDATE``."""
    lock = " FOR UPDATE" if connection.features.has_select_for_update else ""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT artifact_count, last_seq FROM {q(Agent._meta.db_table)} WHERE id = %s{lock}",
            [agent_id],
        )
        row = cursor.fetchone()
    return None if row is None else Counters(*row)


def agent_counters_save(agent_id: int, counters: Counters) -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {q(Agent._meta.db_table)} SET artifact_count = %s, last_seq = %s WHERE id = %s",
            [counters.artifact_count, counters.last_seq, agent_id],
        )


def artifact_previous(artifact_id: str) -> Previous | None:
    artifacts, blobs = q(Artifact._meta.db_table), q(Blob._meta.db_table)
    sessions = q(Session._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT a.session_id, a.blob_id, b.size, a.content_type, a.created_at, s.sid, a.kind "
            f"FROM {artifacts} a LEFT JOIN {blobs} b ON b.sha256 = a.blob_id "
            f"LEFT JOIN {sessions} s ON s.id = a.session_id WHERE a.id = %s",
            [artifact_id],
        )
        row = cursor.fetchone()
    if row is None:
        return None
    previous = Previous(*row)
    return previous._replace(created_at=aware(previous.created_at))


def _delete_returning(where: str, params: list[Any]) -> list[Deleted]:
    # One statement instead of a SELECT and a DELETE. Nothing references an artifact row, so a
    # plain DELETE is all the ORM's collector would have done. ``where`` must let the planner seek
    # (by primary key, or the agent's (updated_at, id) index), never scan.
    artifacts, sessions = q(Artifact._meta.db_table), q(Session._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(
            f"DELETE FROM {artifacts} WHERE {where} RETURNING id, key, kind, "
            f"(SELECT s.sid FROM {sessions} s WHERE s.id = {artifacts}.session_id), turn_id",
            params,
        )
        return sorted(Deleted(*row) for row in cursor.fetchall())


def evict_oldest(agent_id: int, *, keep_id: str, count: int) -> list[Deleted]:
    """Delete the ``count`` oldest-updated artifacts of the agent (ties by id), never ``keep_id``."""
    table = q(Artifact._meta.db_table)
    return _delete_returning(
        f"id IN (SELECT id FROM {table} WHERE agent_id = %s AND id <> %s "
        "ORDER BY updated_at, id LIMIT %s)",
        [agent_id, keep_id, count],
    )


def artifacts_delete_ids(
    agent_id: int, ids: list[str], *, updated_at_most: datetime | None = None
) -> list[Deleted]:
    """Delete these artifacts of the agent (ids of other agents are left alone); with
    ``updated_at_most``, only those not updated after it (prune: a re-tagged record stays)."""
    # `agent_id + 0`: the agent check must not steer SQLite into scanning the agent's index
    # instead of seeking each id by primary key.
    where = f"id IN ({', '.join(['%s'] * len(ids))}) AND agent_id + 0 = %s"
    params: list[Any] = [*ids, agent_id]
    if updated_at_most is not None:
        where += " AND updated_at <= %s"
        params.append(connection.ops.adapt_datetimefield_value(updated_at_most))
    return _delete_returning(where, params)
