"""The search index's backfill: records stored before it existed get their words, batch by batch,
beside live tags (API.md "Search"; ``manage.py search_backfill``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson
from django.db import connection, transaction
from django.db.backends.utils import CursorWrapper

from artifacts_app import blobs, search
from artifacts_app.errors import ArtifactError
from artifacts_app.jsontypes import JSON
from artifacts_app.services import _index


def _decoded(data: Any) -> JSON:
    # A JSON column read by SQL: SQLite hands back its text, PostgreSQL the decoded value.
    if isinstance(data, str):
        return orjson.loads(data)
    return data


def _content(
    cursor: CursorWrapper, blob_id: str | None, content_type: str | None, words: str | None
) -> str | None:
    if not blob_id or not search.searchable_type(content_type) or search.content_bytes() < 1:
        return None
    if words is not None:
        return words
    try:
        head = blobs.blob_read(blob_id, end=search.content_bytes() - 1)
    except ArtifactError:
        return None  # its bytes are unreadable now: indexed without them
    words = search.content_words(head)
    _index.blob_words_keep(cursor, blob_id, words)
    return words


def search_backfill(*, batch: int = 500, on_batch: Callable[[int, str], None] | None = None) -> int:
    """Index every record without words, ``batch`` at a time (each its own short transaction, no
    agent lock: a record tagged meanwhile was indexed by its tag, and is left as it is). Safe to
    stop and run again; answers how many records it indexed."""
    done = 0
    after = ""
    while True:
        with transaction.atomic(), connection.cursor() as cursor:
            rows = _index.unindexed(cursor, after=after, size=batch)
            if not rows:
                return done
            for row in rows:
                content = _content(cursor, row.blob_id, row.content_type, row.blob_words)
                if _index.index_write(
                    cursor,
                    row.id,
                    agent_id=row.agent_id,
                    kind=row.kind,
                    key=row.key,
                    title=row.title,
                    data=_decoded(row.data),
                    content=content,
                    version=row.version,
                ):
                    done += 1
            after = rows[-1].id
        if on_batch is not None:
            on_batch(done, after)
