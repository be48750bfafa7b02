"""The statements of a tag and a delete, written as SQL, private to the services (the tag's
locked write ``_write``, ``artifacts``, ``history``).

Measured (bench/tag.py, SQLite, DEBUG off): the ORM's Python around each of a tag's small statements
cost 100–200 µs, as much as the statement; building the statements' text on every call (quoting
names through the connection proxy) cost another ~15% of a tag. So each statement's text is built
once per database vendor (``_statements``), and a tag runs all of its statements on one cursor,
which its caller opens and passes in. Each statement works on SQLite (3.35+, for RETURNING) and
PostgreSQL, quotes names through the connection and takes values prepared by the model fields
(``prepared``), so it stores what the ORM would.

Rows by name: a write's columns are declared once, each with the name of its value (``_insert``,
``_update``), and its parameters are picked from one mapping by those names; a read's select list
is written from the fields of the named row it is read into (``_select_list``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from operator import itemgetter
from typing import NamedTuple, TypeAlias

from django.db.backends.utils import CursorWrapper

from artifacts_app.models import Agent, Artifact, ArtifactVersion, Blob, Session
from artifacts_app.selectors._sql import aware

# A Django cursor (``connection.cursor()``): statements run through it are counted and logged
# like the ORM's.
Cursor: TypeAlias = CursorWrapper

# A value as a statement takes it, prepared by the model field that stores it (a JSON column's is
# its text on SQLite and the driver's JSON wrapper on PostgreSQL).
Param: TypeAlias = bool | int | float | str | bytes | datetime | None

Quote = Callable[[str], str]


class Write:
    """An INSERT or UPDATE whose placeholders are named: ``names`` is the value each ``%s``
    takes, so that its parameters are picked from one mapping by name, never lined up by hand."""

    __slots__ = ("_pick", "names", "sql")

    def __init__(self, sql: str, names: tuple[str, ...]) -> None:
        self.sql = sql
        self.names = names
        # ``itemgetter`` picks them in C: a tag's writes stay as cheap as hand-kept lists were.
        self._pick = itemgetter(*names) if len(names) > 1 else lambda values: (values[names[0]],)

    def params(self, values: Mapping[str, Param]) -> tuple[Param, ...]:
        picked: tuple[Param, ...] = self._pick(values)
        return picked


def _insert(quote: Quote, table: str, columns: Mapping[str, str]) -> Write:
    """``INSERT INTO table (column, …) VALUES (%s, …)``; ``columns`` maps each column to the
    name of its value."""
    return Write(
        f"INSERT INTO {table} ({', '.join(quote(column) for column in columns)}) "
        f"VALUES ({', '.join(['%s'] * len(columns))})",
        tuple(columns.values()),
    )


def _update(
    quote: Quote, table: str, columns: Mapping[str, str], where: Mapping[str, str]
) -> Write:
    """``UPDATE table SET column = %s, … WHERE column = %s AND …``; both map a column to the
    name of its value."""
    sets = ", ".join(f"{quote(column)} = %s" for column in columns)
    matches = " AND ".join(f"{quote(column)} = %s" for column in where)
    return Write(f"UPDATE {table} SET {sets} WHERE {matches}", (*columns.values(), *where.values()))


def _same(*columns: str) -> dict[str, str]:
    """Columns whose values go by the columns' own names."""
    return {column: column for column in columns}


def _select_list(quote: Quote, row: type[tuple[object, ...]], exprs: Mapping[str, str]) -> str:
    """The select (or RETURNING) list of a named row: each of ``row``'s fields, in its order,
    as ``expression AS field``. The row is then read with ``row._make``: the list is written from
    the row's own fields, so a column cannot land in another's field."""
    fields: tuple[str, ...] = row._fields  # type: ignore[attr-defined]  # a NamedTuple class
    if set(exprs) != set(fields):
        raise RuntimeError(f"{row.__name__}: expressions for {sorted(exprs)}, fields {fields}")
    return ", ".join(f"{exprs[name]} AS {quote(name)}" for name in fields)


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


class _PinRead(NamedTuple):
    pinned: bool
    key: str | None
    kind: str
    session_sid: str | None
    turn_id: str | None


# What a version keeps of its record, written to the record's row and to its new version alike.
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
# A record's columns a tag writes, each taking the value of its own name (``Prepared``), but its
# moment: ``at``.
_RECORD_COLUMNS = {**_same("key", *_CONTENT_COLUMNS, "version"), "updated_at": "at"}
_VERSION_COLUMNS = {**_same("number", *_CONTENT_COLUMNS), "created_at": "at"}


class Statements(NamedTuple):
    agent_lock: str
    counters_save: Write
    previous: str
    artifact_insert: Write
    artifact_update: Write
    version_insert: Write
    version_recycle: Write
    versions_trim: str
    pin_read: str
    pin_write: Write
    delete_returning: str  # ``{where}`` to fill
    evict_where: str


def _statements(quote: Quote, for_update: bool) -> Statements:
    """Every statement's text, with names quoted and locking as one vendor's connection does."""
    agents, artifacts = quote(Agent._meta.db_table), quote(Artifact._meta.db_table)
    versions, blobs = quote(ArtifactVersion._meta.db_table), quote(Blob._meta.db_table)
    sessions = quote(Session._meta.db_table)
    counters = _select_list(quote, Counters, _same(*Counters._fields))
    previous = _select_list(
        quote,
        Previous,
        {
            **{name: f"a.{name}" for name in ("session_id", "blob_id", "content_type")},
            **{name: f"a.{name}" for name in ("created_at", "version", "pinned", "kind")},
            "blob_size": "b.size",
            # The oldest kept version: a seek on the (artifact, number) constraint, in the same
            # statement, so that the tag knows whether its new version replaces the oldest.
            "oldest_version": (
                f"(SELECT MIN(v.number) FROM {versions} v WHERE v.artifact_id = a.id)"
            ),
            "session_sid": "s.sid",
        },
    )
    pin_read = _select_list(
        quote,
        _PinRead,
        {
            **{name: f"a.{name}" for name in ("pinned", "key", "kind", "turn_id")},
            "session_sid": "s.sid",
        },
    )
    deleted = _select_list(
        quote,
        Deleted,
        {
            **_same("id", "key", "kind", "turn_id"),
            "session_sid": f"(SELECT s.sid FROM {sessions} s WHERE s.id = {artifacts}.session_id)",
        },
    )
    by_id = {"id": "artifact_id"}
    return Statements(
        agent_lock=f"SELECT {counters} FROM {agents} WHERE id = %s"
        + (" FOR UPDATE" if for_update else ""),
        counters_save=_update(quote, agents, _same(*Counters._fields), where={"id": "agent_id"}),
        previous=(
            f"SELECT {previous} FROM {artifacts} a LEFT JOIN {blobs} b ON b.sha256 = a.blob_id "
            f"LEFT JOIN {sessions} s ON s.id = a.session_id WHERE a.id = %s"
        ),
        artifact_insert=_insert(
            quote,
            artifacts,
            {
                **by_id,
                **_same("agent_id"),
                **_RECORD_COLUMNS,
                **_same("pinned"),
                "created_at": "at",
            },
        ),
        artifact_update=_update(quote, artifacts, _RECORD_COLUMNS, where=by_id),
        version_insert=_insert(quote, versions, {**_same("artifact_id"), **_VERSION_COLUMNS}),
        version_recycle=_update(
            quote, versions, _VERSION_COLUMNS, where={**_same("artifact_id"), "number": "oldest"}
        ),
        versions_trim=f"DELETE FROM {versions} WHERE artifact_id = %s AND number <= %s",
        pin_read=(
            f"SELECT {pin_read} FROM {artifacts} a "
            f"LEFT JOIN {sessions} s ON s.id = a.session_id WHERE a.id = %s AND a.agent_id = %s"
        ),
        pin_write=_update(quote, artifacts, _same("pinned"), where=by_id),
        # One statement instead of a SELECT and a DELETE. ``where`` must let the planner seek (by
        # primary key, or the agent's (updated_at, id) index), never scan.
        delete_returning=f"DELETE FROM {artifacts} WHERE {{where}} RETURNING {deleted}",
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
    """A tag's values as the database takes them, prepared once for the record and its version:
    ``values`` holds each written column's value by name (``_RECORD_COLUMNS``,
    ``_VERSION_COLUMNS``), ``at`` the tag's moment among them."""

    values: dict[str, Param]
    at: Param  # the tag's moment, as the database takes it


def prepared(cursor: Cursor, fields: Mapping[str, Param], at: datetime) -> Prepared:
    """``fields``: the record's columns a tag writes, by name, as Python values."""
    db = cursor.db
    moment = db.ops.adapt_datetimefield_value(at)
    data = Artifact._meta.get_field("data").get_db_prep_save(fields["data"], db)
    return Prepared({**fields, "data": data, "at": moment}, moment)


def agent_lock(cursor: Cursor, agent_id: int) -> Counters | None:
    """Lock the agent row and answer its counters. On SQLite the IMMEDIATE transaction already
    holds the database's write lock; elsewhere it is ``SELECT … FOR UPDATE``."""
    cursor.execute(statements(cursor).agent_lock, [agent_id])
    row = cursor.fetchone()
    return None if row is None else Counters._make(row)


def agent_counters_save(cursor: Cursor, agent_id: int, counters: Counters) -> None:
    write = statements(cursor).counters_save
    cursor.execute(write.sql, write.params({**counters._asdict(), "agent_id": agent_id}))


def artifact_previous(cursor: Cursor, artifact_id: str) -> Previous | None:
    cursor.execute(statements(cursor).previous, [artifact_id])
    row = cursor.fetchone()
    if row is None:
        return None
    previous = Previous._make(row)
    return previous._replace(created_at=aware(previous.created_at), pinned=bool(previous.pinned))


def artifact_insert(cursor: Cursor, artifact_id: str, agent_id: int, values: Prepared) -> None:
    """The new record's row, unpinned, created and updated at the tag's moment."""
    write = statements(cursor).artifact_insert
    cursor.execute(
        write.sql,
        write.params(
            {**values.values, "artifact_id": artifact_id, "agent_id": agent_id, "pinned": False}
        ),
    )


def artifact_update(cursor: Cursor, artifact_id: str, values: Prepared) -> None:
    """A re-tag's row: every column the tag writes (its pin and creation stay)."""
    write = statements(cursor).artifact_update
    cursor.execute(write.sql, write.params({**values.values, "artifact_id": artifact_id}))


def version_insert(cursor: Cursor, artifact_id: str, number: int, values: Prepared) -> None:
    """Store version ``number`` of a record: what its tag stored. The (artifact, number)
    constraint makes a duplicate number an error, never a second row."""
    write = statements(cursor).version_insert
    cursor.execute(
        write.sql, write.params({**values.values, "artifact_id": artifact_id, "number": number})
    )


def version_recycle(
    cursor: Cursor, artifact_id: str, oldest: int, number: int, values: Prepared
) -> None:
    """Turn the oldest kept version into version ``number`` (what one tag adds and drops when the
    history is full): one UPDATE instead of an INSERT and a DELETE."""
    write = statements(cursor).version_recycle
    cursor.execute(
        write.sql,
        write.params(
            {**values.values, "artifact_id": artifact_id, "number": number, "oldest": oldest}
        ),
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
    was = _PinRead._make(row)
    changed = bool(was.pinned) != pinned
    if changed:
        write = sql.pin_write
        cursor.execute(write.sql, write.params({"pinned": pinned, "artifact_id": artifact_id}))
    return PinChange(
        key=was.key,
        kind=was.kind,
        session_sid=was.session_sid,
        turn_id=was.turn_id,
        changed=changed,
    )


def _delete_returning(cursor: Cursor, where: str, params: list[Param]) -> list[Deleted]:
    # The only rows that reference an artifact are its versions, deleted right after.
    cursor.execute(statements(cursor).delete_returning.format(where=where), params)
    rows = sorted(Deleted._make(row) for row in cursor.fetchall())
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
    params: list[Param] = [*ids, agent_id]
    if updated_at_most is not None:
        where += " AND updated_at <= %s"
        params.append(cursor.db.ops.adapt_datetimefield_value(updated_at_most))
    if skip_pinned:
        where += " AND NOT pinned"
    return _delete_returning(cursor, where, params)
