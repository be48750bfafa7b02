"""The statements of a tag and a delete that are written as SQL, private to the services (the
tag's locked write ``_write``, ``artifacts``, ``history``).

Measured (bench/tag.py, SQLite, DEBUG off): the ORM's Python around each of a tag's small statements
cost 100–200 µs, as much as the statement. Each function works on SQLite (3.35+, for RETURNING) and
PostgreSQL, quotes names through the connection and prepares values through the model fields, so
it stores what the ORM would. Rows come back named, never by position.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, NamedTuple

from django.db import connection

from artifacts_app.models import Agent, Artifact, ArtifactVersion, Blob, Session
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
    version: int
    pinned: bool
    oldest_version: int | None  # the oldest kept version's number (None: no version row)
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
    versions = q(ArtifactVersion._meta.db_table)
    sessions = q(Session._meta.db_table)
    with connection.cursor() as cursor:
        # The oldest kept version: a seek on the (artifact, number) constraint, in the same
        # statement, so that the tag knows whether its new version replaces the oldest.
        cursor.execute(
            f"SELECT a.session_id, a.blob_id, b.size, a.content_type, a.created_at, a.version, "
            f"a.pinned, (SELECT MIN(v.number) FROM {versions} v WHERE v.artifact_id = a.id), "
            f"s.sid, a.kind "
            f"FROM {artifacts} a LEFT JOIN {blobs} b ON b.sha256 = a.blob_id "
            f"LEFT JOIN {sessions} s ON s.id = a.session_id WHERE a.id = %s",
            [artifact_id],
        )
        row = cursor.fetchone()
    if row is None:
        return None
    previous = Previous(*row)
    return previous._replace(created_at=aware(previous.created_at), pinned=bool(previous.pinned))


_VERSION_COLUMNS = (
    "artifact_id",
    "number",
    "kind",
    "title",
    "data",
    "session_id",
    "turn_id",
    "source",
    "blob_id",
    "content_type",
    "created_at",
)


def _version_values(fields: dict[str, Any], at: datetime) -> list[Any]:
    data_field = ArtifactVersion._meta.get_field("data")
    return [
        fields["kind"],
        fields["title"],
        data_field.get_db_prep_save(fields["data"], connection),
        fields["session_id"],
        fields["turn_id"],
        fields["source"],
        fields["blob_id"],
        fields["content_type"],
        connection.ops.adapt_datetimefield_value(at),
    ]


def version_insert(artifact_id: str, number: int, fields: dict[str, Any], at: datetime) -> None:
    """Store version ``number`` of a record: what its tag stored (``fields`` as the tag writes them
    to the record). The (artifact, number) constraint makes a duplicate number an error, never a
    second row."""
    columns = ", ".join(q(name) for name in _VERSION_COLUMNS)
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {q(ArtifactVersion._meta.db_table)} ({columns}) "
            f"VALUES ({', '.join(['%s'] * len(_VERSION_COLUMNS))})",
            [artifact_id, number, *_version_values(fields, at)],
        )


def version_recycle(
    artifact_id: str, oldest: int, number: int, fields: dict[str, Any], at: datetime
) -> None:
    """Turn the oldest kept version into version ``number`` (what one tag adds and drops when the
    history is full): one UPDATE instead of an INSERT and a DELETE."""
    columns = _VERSION_COLUMNS[1:]  # all but artifact_id
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {q(ArtifactVersion._meta.db_table)} SET "
            f"{', '.join(f'{q(name)} = %s' for name in columns)} "
            "WHERE artifact_id = %s AND number = %s",
            [number, *_version_values(fields, at), artifact_id, oldest],
        )


def versions_trim(artifact_id: str, *, up_to: int) -> None:
    """Drop the versions of a record numbered ``up_to`` or less (a seek on (artifact, number))."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"DELETE FROM {q(ArtifactVersion._meta.db_table)} WHERE artifact_id = %s AND number <= %s",
            [artifact_id, up_to],
        )


def versions_delete(artifact_ids: list[str]) -> None:
    """Every version of these records (they are being deleted in the same transaction)."""
    if not artifact_ids:
        return
    with connection.cursor() as cursor:
        cursor.execute(
            f"DELETE FROM {q(ArtifactVersion._meta.db_table)} "
            f"WHERE artifact_id IN ({', '.join(['%s'] * len(artifact_ids))})",
            artifact_ids,
        )


class PinChange(NamedTuple):
    """A record whose pin was set, as its ``artifact.pinned`` event names it."""

    key: str | None
    kind: str
    session_sid: str | None
    turn_id: str | None
    changed: bool


def artifact_pin(agent_id: int, artifact_id: str, pinned: bool) -> PinChange | None:
    """Set a record's pin (None: no such record of the agent)."""
    artifacts, sessions = q(Artifact._meta.db_table), q(Session._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT a.pinned, a.key, a.kind, s.sid, a.turn_id FROM {artifacts} a "
            f"LEFT JOIN {sessions} s ON s.id = a.session_id WHERE a.id = %s AND a.agent_id = %s",
            [artifact_id, agent_id],
        )
        row = cursor.fetchone()
        if row is None:
            return None
        was, key, kind, session_sid, turn_id = row
        changed = bool(was) != pinned
        if changed:
            cursor.execute(
                f"UPDATE {artifacts} SET pinned = %s WHERE id = %s", [pinned, artifact_id]
            )
    return PinChange(key, kind, session_sid, turn_id, changed)


def _delete_returning(where: str, params: list[Any]) -> list[Deleted]:
    # One statement instead of a SELECT and a DELETE; the only rows that reference an artifact
    # are its versions, deleted right after. ``where`` must let the planner seek
    # (by primary key, or the agent's (updated_at, id) index), never scan.
    artifacts, sessions = q(Artifact._meta.db_table), q(Session._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(
            f"DELETE FROM {artifacts} WHERE {where} RETURNING id, key, kind, "
            f"(SELECT s.sid FROM {sessions} s WHERE s.id = {artifacts}.session_id), turn_id",
            params,
        )
        rows = sorted(Deleted(*row) for row in cursor.fetchall())
    # Their versions go with them (the foreign key is checked at commit, so the order is free).
    versions_delete([row.id for row in rows])
    return rows


def evict_oldest(agent_id: int, *, keep_id: str, count: int) -> list[Deleted]:
    """Delete the ``count`` oldest-updated unpinned artifacts of the agent (ties by id), never
    ``keep_id``; fewer when fewer are unpinned. ``NOT pinned`` is the partial index's own
    condition, so the planner seeks it however many old records are pinned."""
    table = q(Artifact._meta.db_table)
    return _delete_returning(
        f"id IN (SELECT id FROM {table} WHERE agent_id = %s AND NOT pinned AND id <> %s "
        "ORDER BY updated_at, id LIMIT %s)",
        [agent_id, keep_id, count],
    )


def artifacts_delete_ids(
    agent_id: int,
    ids: list[str],
    *,
    updated_at_most: datetime | None = None,
    skip_pinned: bool = False,
) -> list[Deleted]:
    """Delete these artifacts of the agent (ids of other agents are left alone); with
    ``updated_at_most``, only those not updated after it (prune: a re-tagged record stays); with
    ``skip_pinned``, only unpinned ones (prune: a record pinned meanwhile stays)."""
    # `agent_id + 0`: the agent check must not steer SQLite into scanning the agent's index
    # instead of seeking each id by primary key.
    where = f"id IN ({', '.join(['%s'] * len(ids))}) AND agent_id + 0 = %s"
    params: list[Any] = [*ids, agent_id]
    if updated_at_most is not None:
        where += " AND updated_at <= %s"
        params.append(connection.ops.adapt_datetimefield_value(updated_at_most))
    if skip_pinned:
        where += " AND NOT pinned"
    return _delete_returning(where, params)
