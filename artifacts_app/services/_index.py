"""The search index's writes (API.md "Search", DESIGN.md §15), private to the services: a record's
words written in its tag's transaction (``_write.tag_locked``), a text content's words kept on its
blob row, and the backfill of records stored before the index existed.

SQLite: the FTS5 table and its row table (``selectors.search`` names them); PostgreSQL: the record's
``search_words`` column. A record that goes takes its index rows with it (the migration's trigger
on SQLite; the column itself on PostgreSQL).
"""

from __future__ import annotations

from typing import Any, NamedTuple

from django.db.backends.utils import CursorWrapper

from artifacts_app import search
from artifacts_app.jsontypes import JSON
from artifacts_app.models import Artifact, Blob
from artifacts_app.selectors.search import INDEX_TABLE, ROW_TABLE, VECTOR_COLUMN, agent_rowids


def _q(cursor: CursorWrapper, name: str) -> str:
    return cursor.db.ops.quote_name(name)


def blob_words(cursor: CursorWrapper, sha256: str) -> str | None:
    """The words kept for a blob (None: none kept)."""
    cursor.execute(
        f"SELECT words FROM {_q(cursor, Blob._meta.db_table)} WHERE sha256 = %s", [sha256]
    )
    row = cursor.fetchone()
    return None if row is None else row[0]


def blob_words_keep(cursor: CursorWrapper, sha256: str, words: str) -> None:
    """Keep a blob's words, once (the same bytes always have the same words)."""
    cursor.execute(
        f"UPDATE {_q(cursor, Blob._meta.db_table)} SET words = %s "
        "WHERE sha256 = %s AND words IS NULL",
        [words, sha256],
    )


def index_write(
    cursor: CursorWrapper,
    artifact_id: str,
    *,
    agent_id: int,
    kind: str,
    key: str | None,
    title: str | None,
    data: JSON,
    content: str | None,
    version: int | None = None,
) -> bool:
    """Write a record's words (replacing what it had). ``version``: only while the record is
    still at that version (the backfill, beside live tags); answers whether it wrote."""
    doc = search.document(kind=kind, key=key, title=title, data=data, content=content)
    table = _q(cursor, Artifact._meta.db_table)
    if cursor.db.vendor == "postgresql":
        sql = f"UPDATE {table} SET {VECTOR_COLUMN} = %s::tsvector WHERE id = %s"
        params: list[str | int] = [doc.tsvector(), artifact_id]
        if version is not None:
            sql += " AND version = %s"
            params.append(version)
        cursor.execute(sql, params)
        return bool(cursor.rowcount)
    if version is not None:
        cursor.execute(
            f"SELECT 1 FROM {table} WHERE id = %s AND version = %s", [artifact_id, version]
        )
        if cursor.fetchone() is None:
            return False
    # The record's rowid: kept, or for a new record the next in its agent's range (SQLite runs
    # one write transaction at a time, so the max is this transaction's own). One statement.
    low, high = agent_rowids(agent_id)
    cursor.execute(
        f"INSERT INTO {ROW_TABLE} (id, artifact_id) VALUES ("
        f"(SELECT coalesce(max(id) + 1, %s) FROM {ROW_TABLE} WHERE id BETWEEN %s AND %s), %s) "
        "ON CONFLICT (artifact_id) DO UPDATE SET artifact_id = excluded.artifact_id RETURNING id",
        [low, low, high, artifact_id],
    )
    (rowid,) = cursor.fetchone()
    head, tail = doc.fts()
    cursor.execute(
        f"INSERT OR REPLACE INTO {INDEX_TABLE} (rowid, head, tail) VALUES (%s, %s, %s)",
        [rowid, head, tail],
    )
    return True


class Unindexed(NamedTuple):
    """A record without words, as the backfill reads it (``data`` as the column hands it back:
    JSON text on SQLite, decoded on PostgreSQL)."""

    id: str
    agent_id: int
    kind: str
    key: str | None
    title: str | None
    data: Any
    version: int
    blob_id: str | None
    content_type: str | None
    blob_words: str | None


def unindexed(cursor: CursorWrapper, *, after: str, size: int) -> list[Unindexed]:
    """Up to ``size`` records without words, in id order after ``after``."""
    table = _q(cursor, Artifact._meta.db_table)
    blobs = _q(cursor, Blob._meta.db_table)
    if cursor.db.vendor == "postgresql":
        missing = f"a.{VECTOR_COLUMN} IS NULL"
    else:
        missing = f"NOT EXISTS (SELECT 1 FROM {ROW_TABLE} r WHERE r.artifact_id = a.id)"
    cursor.execute(
        f"SELECT a.id, a.agent_id, a.kind, a.{_q(cursor, 'key')}, a.title, a.data, a.version, a.blob_id, "
        f"a.content_type, b.words FROM {table} a LEFT JOIN {blobs} b ON b.sha256 = a.blob_id "
        f"WHERE a.id > %s AND {missing} ORDER BY a.id LIMIT %s",
        [after, size],
    )
    return [Unindexed(*row) for row in cursor.fetchall()]
