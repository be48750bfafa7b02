"""The few statements every tag runs, written as SQL.

Measured on this project's machine (SQLite, DEBUG off): a query through the ORM costs 100–200 µs
of Python around a statement that takes 20–50 µs, and a tag runs five to eight of them. These
functions keep the tag within its target against a plain ``Model.objects.create`` (bench/tag.py).
Each works on SQLite (3.35+, for RETURNING) and PostgreSQL, quotes names through the connection
and prepares JSON and datetimes through the model fields, so they store what the ORM would.
Everything else stays ORM.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from django.db import connection
from django.utils.dateparse import parse_datetime

from artifacts_app.models import Agent, Artifact, Blob, Event, Session


def _q(name: str) -> str:
    return connection.ops.quote_name(name)


def _aware(value: Any) -> datetime:
    # SQLite hands datetimes back as text; PostgreSQL as aware datetimes.
    if isinstance(value, str):
        value = parse_datetime(value)
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


AGENT_FIELDS = tuple(field.attname for field in Agent._meta.concrete_fields)


def agent_by_slug(slug: str) -> Agent | None:
    """The agent row for ``slug``, as the ORM would load it. The Python API and the tool name their
    agent by slug on every call; through the ORM this lookup cost about as much as the rest of a tag."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {', '.join(_q(name) for name in AGENT_FIELDS)} FROM {_q(Agent._meta.db_table)} "
            "WHERE slug = %s",
            [slug],
        )
        row = cursor.fetchone()
    if row is None:
        return None
    values = dict(zip(AGENT_FIELDS, row, strict=True))
    values["created_at"] = _aware(values["created_at"])
    return Agent.from_db(connection.alias, AGENT_FIELDS, list(values.values()))


def agent_lock(agent_id: int) -> tuple[int, int] | None:
    """Lock the agent row and answer (artifact_count, last_seq). On SQLite the IMMEDIATE transaction
    already holds the database's write lock; elsewhere it is ``SELECT … FOR UPDATE``."""
    lock = " FOR UPDATE" if connection.features.has_select_for_update else ""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT artifact_count, last_seq FROM {_q(Agent._meta.db_table)} WHERE id = %s{lock}",
            [agent_id],
        )
        row = cursor.fetchone()
    return None if row is None else (row[0], row[1])


def agent_counters_save(agent_id: int, *, artifact_count: int, last_seq: int) -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {_q(Agent._meta.db_table)} SET artifact_count = %s, last_seq = %s WHERE id = %s",
            [artifact_count, last_seq, agent_id],
        )


def session_pk(agent_id: int, sid: str) -> int | None:
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT id FROM {_q(Session._meta.db_table)} WHERE agent_id = %s AND sid = %s",
            [agent_id, sid],
        )
        row = cursor.fetchone()
    return None if row is None else row[0]


def blob_insert(sha256: str, size: int, at: datetime) -> None:
    """Record a stored blob; a blob stored before is left as it is."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {_q(Blob._meta.db_table)} (sha256, size, created_at) VALUES (%s, %s, %s) "
            "ON CONFLICT (sha256) DO NOTHING",
            [sha256, size, connection.ops.adapt_datetimefield_value(at)],
        )


def artifact_previous(artifact_id: str) -> dict[str, Any] | None:
    """What a re-tag needs of the record it replaces: session, content and creation time."""
    artifacts, blobs = _q(Artifact._meta.db_table), _q(Blob._meta.db_table)
    sessions = _q(Session._meta.db_table)
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
    session_id, blob_id, size, content_type, created_at, session_sid, kind = row
    return {
        "session_id": session_id,
        "session_sid": session_sid,  # the stream a move leaves (API.md "Events": reason moved)
        "kind": kind,
        "blob_id": blob_id,
        "blob_size": size,
        "content_type": content_type,
        "created_at": _aware(created_at),
    }


def artifacts_delete_returning(where: str, params: list[Any]) -> list[tuple[Any, ...]]:
    """``DELETE … WHERE <where> RETURNING id, key, kind, session sid, turn_id``, sorted by id.

    One statement instead of a SELECT and a DELETE. Nothing references an artifact row, so a
    plain DELETE is all the ORM's collector would have done. ``where`` must let the planner seek
    (by primary key, or the agent's (updated_at, id) index), never scan.
    """
    artifacts, sessions = _q(Artifact._meta.db_table), _q(Session._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(
            f"DELETE FROM {artifacts} WHERE {where} RETURNING id, key, kind, "
            f"(SELECT s.sid FROM {sessions} s WHERE s.id = {artifacts}.session_id), turn_id",
            params,
        )
        return sorted(cursor.fetchall())


def evict_oldest(agent_id: int, *, keep_id: str, count: int) -> list[tuple[Any, ...]]:
    """Delete the ``count`` oldest-updated artifacts of the agent (ties by id), never ``keep_id``."""
    table = _q(Artifact._meta.db_table)
    return artifacts_delete_returning(
        f"id IN (SELECT id FROM {table} WHERE agent_id = %s AND id <> %s "
        "ORDER BY updated_at, id LIMIT %s)",
        [agent_id, keep_id, count],
    )


def artifacts_delete_ids(
    agent_id: int, ids: list[str], *, updated_at_most: datetime | None = None
) -> list[tuple[Any, ...]]:
    """Delete these artifacts of the agent (ids of other agents are left alone); with
    ``updated_at_most``, only those not updated after it (prune: a re-tagged record stays)."""
    # `agent_id + 0`: the agent check must not steer SQLite into scanning the agent's index
    # instead of seeking each id by primary key.
    where = f"id IN ({', '.join(['%s'] * len(ids))}) AND agent_id + 0 = %s"
    params: list[Any] = [*ids, agent_id]
    if updated_at_most is not None:
        where += " AND updated_at <= %s"
        params.append(connection.ops.adapt_datetimefield_value(updated_at_most))
    return artifacts_delete_returning(where, params)


def blob_claim(sha256: str, size: int, at: datetime) -> None:
    """Claim a blob for a tag about to use it: insert its row, or move its ``created_at`` to now.

    ``gc_blobs`` only removes a blob whose row it has locked and found older than the grace and
    unreferenced, so a claim made before the bytes are checked in storage protects them until the
    tag commits (as long as that takes less than the grace). See artifacts_app/blobgc.py.
    """
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {_q(Blob._meta.db_table)} (sha256, size, created_at) VALUES (%s, %s, %s) "
            "ON CONFLICT (sha256) DO UPDATE SET created_at = EXCLUDED.created_at",
            [sha256, size, connection.ops.adapt_datetimefield_value(at)],
        )


_EVENT_COLUMNS = (
    "agent_id",
    "seq",
    "type",
    "session_sid",
    "artifact_id",
    "turn_id",
    "payload",
    "created_at",
)


def events_insert(agent_id: int, rows: list[tuple[Any, ...]]) -> None:
    """One multi-row INSERT of (seq, type, session_sid, artifact_id, turn_id, payload, at) rows."""
    payload_field = Event._meta.get_field("payload")
    columns = ", ".join(_q(name) for name in _EVENT_COLUMNS)
    row_sql = "(" + ", ".join(["%s"] * len(_EVENT_COLUMNS)) + ")"
    params: list[Any] = []
    for seq, type_, session_sid, artifact_id, turn_id, payload, at in rows:
        params.extend(
            (
                agent_id,
                seq,
                type_,
                session_sid,
                artifact_id,
                turn_id,
                payload_field.get_db_prep_save(payload, connection),
                connection.ops.adapt_datetimefield_value(at),
            )
        )
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {_q(Event._meta.db_table)} ({columns}) "
            f"VALUES {', '.join([row_sql] * len(rows))}",
            params,
        )
