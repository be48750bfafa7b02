"""The statements of a tag and a delete, written as SQL, private to the services (the tag's
locked write ``_write``, ``artifacts``, ``history``).

Measured (bench/tag.py, SQLite, DEBUG off): the ORM's Python around each of a tag's small statements
cost 100–200 µs, as much as the statement; building the statements' text on every call (quoting
names through the connection proxy) cost another ~15% of a tag. So each statement's text is built
once per database vendor (``_statements``), and a tag runs all of its statements on one cursor,
which its caller opens and passes in. Each statement works on SQLite (3.35+, for RETURNING) and
PostgreSQL, quotes names through the connection and takes values prepared by the model fields
(``prepared_*``), so it stores what the ORM would. Rows come back named, never by position.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, NamedTuple

from artifacts_app.models import Agent, Artifact, ArtifactVersion, Blob, Session
from artifacts_app.selectors._sql import aware

# A Django cursor (``connection.cursor()``): statements run through it are counted and logged
# like the ORM's.
Cursor = Any


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


# The columns a tag writes: what a version keeps of its record (``_content_values``, in this
# order), with the record's key and the version's number around them.
_CONTENT_COLUMNS = (
    "kind",
    "title",
    "data",
    "session_id",
    "turn_id",
    "source",
    "blob_id",
    "content_type",
)
_RECORD_COLUMNS = ("key", *_CONTENT_COLUMNS, "version", "updated_at")
_VERSION_COLUMNS = ("number", *_CONTENT_COLUMNS, "created_at")


class Statements(NamedTuple):
    agent_lock: str
    counters_save: str
    previous: str
    artifact_insert: str
    artifact_update: str
    version_insert: str
    version_recycle: str
    versions_trim: str
    pin_read: str
    pin_write: str
    delete_returning: str  # ``{where}`` to fill
    evict_where: str


def _statements(quote: Any, for_update: bool) -> Statements:
    """Every statement's text, with names quoted and locking as one vendor's connection does."""
    agents, artifacts = quote(Agent._meta.db_table), quote(Artifact._meta.db_table)
    versions, blobs = quote(ArtifactVersion._meta.db_table), quote(Blob._meta.db_table)
    sessions = quote(Session._meta.db_table)

    def marks(n: int) -> str:
        return ", ".join(["%s"] * n)

    insert_columns = ("id", "agent_id", *_RECORD_COLUMNS, "pinned", "created_at")
    version_columns = ("artifact_id", *_VERSION_COLUMNS)
    return Statements(
        agent_lock=f"SELECT artifact_count, last_seq FROM {agents} WHERE id = %s"
        + (" FOR UPDATE" if for_update else ""),
        counters_save=f"UPDATE {agents} SET artifact_count = %s, last_seq = %s WHERE id = %s",
        # The oldest kept version: a seek on the (artifact, number) constraint, in the same
        # statement, so that the tag knows whether its new version replaces the oldest.
        previous=(
            "SELECT a.session_id, a.blob_id, b.size, a.content_type, a.created_at, a.version, "
            f"a.pinned, (SELECT MIN(v.number) FROM {versions} v WHERE v.artifact_id = a.id), "
            f"s.sid, a.kind FROM {artifacts} a LEFT JOIN {blobs} b ON b.sha256 = a.blob_id "
            f"LEFT JOIN {sessions} s ON s.id = a.session_id WHERE a.id = %s"
        ),
        artifact_insert=(
            f"INSERT INTO {artifacts} ({', '.join(quote(c) for c in insert_columns)}) "
            f"VALUES ({marks(len(insert_columns))})"
        ),
        artifact_update=(
            f"UPDATE {artifacts} SET {', '.join(f'{quote(c)} = %s' for c in _RECORD_COLUMNS)} "
            "WHERE id = %s"
        ),
        version_insert=(
            f"INSERT INTO {versions} ({', '.join(quote(c) for c in version_columns)}) "
            f"VALUES ({marks(len(version_columns))})"
        ),
        version_recycle=(
            f"UPDATE {versions} SET {', '.join(f'{quote(c)} = %s' for c in _VERSION_COLUMNS)} "
            "WHERE artifact_id = %s AND number = %s"
        ),
        versions_trim=f"DELETE FROM {versions} WHERE artifact_id = %s AND number <= %s",
        pin_read=(
            f"SELECT a.pinned, a.key, a.kind, s.sid, a.turn_id FROM {artifacts} a "
            f"LEFT JOIN {sessions} s ON s.id = a.session_id WHERE a.id = %s AND a.agent_id = %s"
        ),
        pin_write=f"UPDATE {artifacts} SET pinned = %s WHERE id = %s",
        # One statement instead of a SELECT and a DELETE. ``where`` must let the planner seek (by
        # primary key, or the agent's (updated_at, id) index), never scan.
        delete_returning=(
            f"DELETE FROM {artifacts} WHERE {{where}} RETURNING id, key, kind, "
            f"(SELECT s.sid FROM {sessions} s WHERE s.id = {artifacts}.session_id), turn_id"
        ),
        # ``NOT pinned`` is the partial index's own condition, so the planner seeks it however
        # many old records are pinned.
        evict_where=(
            f"id IN (SELECT id FROM {artifacts} WHERE agent_id = %s AND NOT pinned AND id <> %s "
            "ORDER BY updated_at, id LIMIT %s)"
        ),
    )


_BUILT: dict[str, Statements] = {}


def statements(cursor: Cursor) -> Statements:
    """The statements for the cursor's database, built on first use (one vendor's quoting and
    locking are the same for all of its connections)."""
    db = cursor.db
    built = _BUILT.get(db.vendor)
    if built is None:
        built = _BUILT[db.vendor] = _statements(
            db.ops.quote_name, db.features.has_select_for_update
        )
    return built


def versions_table(cursor: Cursor) -> str:
    return str(cursor.db.ops.quote_name(ArtifactVersion._meta.db_table))


class Prepared(NamedTuple):
    """A tag's values as the database takes them, prepared once for the record and its version."""

    fields: dict[str, Any]  # the record's columns (``_RECORD_COLUMNS``), as Python values
    data: Any
    at: Any  # the tag's moment


def prepared(cursor: Cursor, fields: dict[str, Any], at: datetime) -> Prepared:
    db = cursor.db
    data = Artifact._meta.get_field("data").get_db_prep_save(fields["data"], db)
    return Prepared(fields, data, db.ops.adapt_datetimefield_value(at))


def agent_lock(cursor: Cursor, agent_id: int) -> Counters | None:
    """Lock the agent row and answer its counters. On SQLite the IMMEDIATE transaction already
    holds the database's write lock; elsewhere it is ``SELECT … FOR UPDATE``."""
    cursor.execute(statements(cursor).agent_lock, [agent_id])
    row = cursor.fetchone()
    return None if row is None else Counters(*row)


def agent_counters_save(cursor: Cursor, agent_id: int, counters: Counters) -> None:
    cursor.execute(
        statements(cursor).counters_save,
        [counters.artifact_count, counters.last_seq, agent_id],
    )


def artifact_previous(cursor: Cursor, artifact_id: str) -> Previous | None:
    cursor.execute(statements(cursor).previous, [artifact_id])
    row = cursor.fetchone()
    if row is None:
        return None
    previous = Previous(*row)
    return previous._replace(created_at=aware(previous.created_at), pinned=bool(previous.pinned))


def _content_values(values: Prepared) -> list[Any]:
    fields = values.fields
    return [
        fields["kind"],
        fields["title"],
        values.data,
        fields["session_id"],
        fields["turn_id"],
        fields["source"],
        fields["blob_id"],
        fields["content_type"],
    ]


def _record_values(values: Prepared) -> list[Any]:
    fields = values.fields
    return [fields["key"], *_content_values(values), fields["version"], values.at]


def artifact_insert(cursor: Cursor, artifact_id: str, agent_id: int, values: Prepared) -> None:
    """The new record's row, unpinned, created and updated at the tag's moment."""
    cursor.execute(
        statements(cursor).artifact_insert,
        [artifact_id, agent_id, *_record_values(values), False, values.at],
    )


def artifact_update(cursor: Cursor, artifact_id: str, values: Prepared) -> None:
    """A re-tag's row: every column the tag writes (its pin and creation stay)."""
    cursor.execute(statements(cursor).artifact_update, [*_record_values(values), artifact_id])


def _version_values(values: Prepared) -> list[Any]:
    return [*_content_values(values), values.at]


def version_insert(cursor: Cursor, artifact_id: str, number: int, values: Prepared) -> None:
    """Store version ``number`` of a record: what its tag stored. The (artifact, number)
    constraint makes a duplicate number an error, never a second row."""
    cursor.execute(
        statements(cursor).version_insert, [artifact_id, number, *_version_values(values)]
    )


def version_recycle(
    cursor: Cursor, artifact_id: str, oldest: int, number: int, values: Prepared
) -> None:
    """Turn the oldest kept version into version ``number`` (what one tag adds and drops when the
    history is full): one UPDATE instead of an INSERT and a DELETE."""
    cursor.execute(
        statements(cursor).version_recycle,
        [number, *_version_values(values), artifact_id, oldest],
    )


def versions_trim(cursor: Cursor, artifact_id: str, *, up_to: int) -> None:
    """Drop the versions of a record numbered ``up_to`` or less (a seek on (artifact, number))."""
    cursor.execute(statements(cursor).versions_trim, [artifact_id, up_to])


def versions_delete(cursor: Cursor, artifact_ids: list[str]) -> None:
    """Every version of these records (they are being deleted in the same transaction)."""
    if not artifact_ids:
        return
    cursor.execute(
        f"DELETE FROM {versions_table(cursor)} "
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


def artifact_pin(cursor: Cursor, agent_id: int, artifact_id: str, pinned: bool) -> PinChange | None:
    """Set a record's pin (None: no such record of the agent)."""
    sql = statements(cursor)
    cursor.execute(sql.pin_read, [artifact_id, agent_id])
    row = cursor.fetchone()
    if row is None:
        return None
    was, key, kind, session_sid, turn_id = row
    changed = bool(was) != pinned
    if changed:
        cursor.execute(sql.pin_write, [pinned, artifact_id])
    return PinChange(key, kind, session_sid, turn_id, changed)


def _delete_returning(cursor: Cursor, where: str, params: list[Any]) -> list[Deleted]:
    # The only rows that reference an artifact are its versions, deleted right after.
    cursor.execute(statements(cursor).delete_returning.format(where=where), params)
    rows = sorted(Deleted(*row) for row in cursor.fetchall())
    # Their versions go with them (the foreign key is checked at commit, so the order is free).
    versions_delete(cursor, [row.id for row in rows])
    return rows


def evict_oldest(cursor: Cursor, agent_id: int, *, keep_id: str, count: int) -> list[Deleted]:
    """Delete the ``count`` oldest-updated unpinned artifacts of the agent (ties by id), never
    ``keep_id``; fewer when fewer are unpinned."""
    return _delete_returning(cursor, statements(cursor).evict_where, [agent_id, keep_id, count])


def artifacts_delete_ids(
    cursor: Cursor,
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
        params.append(cursor.db.ops.adapt_datetimefield_value(updated_at_most))
    if skip_pinned:
        where += " AND NOT pinned"
    return _delete_returning(cursor, where, params)
