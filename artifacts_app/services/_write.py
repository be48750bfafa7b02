"""The tag's one locked write, private to ``services.artifacts`` and ``services.history`` (a
restore is a tag): the agent's lock, then the record, its new version, eviction and events.

Its steps, in the order their statements run: the agent row locked (its counters), the session
resolved, the previous row read, the record upserted, the version written (recycled, inserted or
trimmed), the events batched, eviction past ``max``, the batch and the counters stored. A tag runs
a fixed number of statements whatever the store holds; the bookkeeping ones are SQL (``_sql``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db import connection
from django.utils import timezone

from artifacts_app import search, selectors
from artifacts_app.errors import ConflictError, NotFoundError
from artifacts_app.events import EventBatch
from artifacts_app.jsontypes import JSON
from artifacts_app.models import Agent
from artifacts_app.names import keyed_id, new_id
from artifacts_app.records import DEFAULT_BYTES_TYPE, ArtifactRecord, ContentInfo
from artifacts_app.services import _index, _sql


@dataclass(frozen=True)
class TagResult:
    record: ArtifactRecord
    created: bool


@dataclass(frozen=True, kw_only=True)
class Tag:
    """A tag's values once the rules have passed (by keyword: six of them are ``str | None``)."""

    agent: Agent
    max: int
    keep_versions: int
    kind: str
    key: str | None
    title: str | None
    data: JSON
    session_id: str | None
    turn_id: str | None
    source: str
    artifact_id: str | None = None  # re-tag this existing record (artifact_content_put)


def tag_locked(
    tag: Tag,
    content: ContentInfo | None,
    *,
    carry_content: bool = True,
    head: bytes | None = None,
) -> TagResult:
    """The write of a tag, under the agent's lock: the record, its new version, its search words,
    eviction, events.

    ``carry_content`` False (restore): no content but ``content`` itself, whatever the record had.
    ``head``: the first bytes of a content stored for this tag, as they streamed (``StoredBlob``).
    """
    agent = tag.agent
    # One cursor for every statement of the tag (``_sql``: opening one per statement, through the
    # connection proxy, cost more than some of the statements).
    with connection.cursor() as cursor:
        count, last_seq = lock_agent(agent, cursor)
        session_pk = _session_pk(cursor, agent, tag.session_id)
        now = timezone.now()
        artifact_id, previous = _previous(cursor, agent, tag)
        if content is None and carry_content:
            content = _carried_content(previous, session_pk)
        # The agent's lock serialises every tag of this record: numbers are gapless, and the
        # (artifact, number) constraint would refuse a duplicate rather than store it.
        number = previous.version + 1 if previous is not None else 1
        values = _sql.prepared(cursor, _fields(tag, session_pk, content, number), now)
        if previous is not None:
            _sql.artifact_update(cursor, artifact_id, values)
        else:
            _sql.artifact_insert(cursor, artifact_id, agent.pk, values)
            count += 1
        _versions_write(cursor, artifact_id, previous, number, tag.keep_versions, values)
        _index_write(cursor, tag, artifact_id, content, head)
        record = _record(tag, artifact_id, content, previous, number, now)
        batch = EventBatch(agent_id=agent.pk, last_seq=last_seq, prepared_at=(now, values.at))
        _tag_events(batch, record, previous, session_pk, now)
        if count > tag.max:
            count -= evict(
                cursor, agent, keep_id=artifact_id, count=count - tag.max, batch=batch, at=now
            )
            if count > tag.max and previous is None:
                # Every other record is pinned: refuse, and the transaction takes it all back.
                raise cap_reached(agent, tag.max)
        batch.store(cursor)
        _sql.agent_counters_save(cursor, agent.pk, _sql.Counters(count, batch.last_seq))
    return TagResult(record=record, created=previous is None)


def _index_write(
    cursor: _sql.Cursor,
    tag: Tag,
    artifact_id: str,
    content: ContentInfo | None,
    head: bytes | None,
) -> None:
    """The record's search words, in the tag's transaction (read-your-writes): its fields, and
    the words of a text content — from the bytes as they streamed, or kept on its blob row."""
    words = None
    if content is not None and search.searchable_type(content.content_type):
        if head is not None:
            words = search.content_words(head)
            _index.blob_words_keep(cursor, content.sha256, words)
        else:
            words = _index.blob_words(cursor, content.sha256)
    _index.index_write(
        cursor,
        artifact_id,
        agent_id=tag.agent.pk,
        kind=tag.kind,
        key=tag.key,
        title=tag.title,
        data=tag.data,
        content=words,
    )


def _session_pk(cursor: _sql.Cursor, agent: Agent, session_id: str | None) -> int | None:
    """The session's pk, read under the lock (it may have gone since the rules passed)."""
    if session_id is None:
        return None
    session_pk = selectors.session_pk(agent.pk, session_id, cursor=cursor)
    if session_pk is None:
        raise unknown_session(agent, session_id)
    return session_pk


def _previous(cursor: _sql.Cursor, agent: Agent, tag: Tag) -> tuple[str, _sql.Previous | None]:
    """The record's id and its row as it was: a keyed tag or a re-tag reads it, a new unkeyed
    record has none (a re-tag of a record gone by then: 404)."""
    retag = tag.artifact_id is not None
    if tag.key is not None:
        artifact_id = keyed_id(agent.slug, tag.key)
    else:
        artifact_id = tag.artifact_id or new_id()
    previous = _sql.artifact_previous(cursor, artifact_id) if tag.key is not None or retag else None
    if retag and previous is None:
        raise unknown_artifact(agent, artifact_id)
    return artifact_id, previous


def _carried_content(previous: _sql.Previous | None, session_pk: int | None) -> ContentInfo | None:
    """Rule 3: a re-tag without contents keeps its content while the session stays. A new record
    without contents, or one that changed session, has none: old content must not follow a record
    into another user's session."""
    if previous and previous.blob_id and previous.session_id == session_pk:
        return ContentInfo(
            previous.blob_size or 0,
            previous.content_type or DEFAULT_BYTES_TYPE,
            previous.blob_id,
        )
    return None


def _fields(
    tag: Tag, session_pk: int | None, content: ContentInfo | None, number: int
) -> dict[str, _sql.Param]:
    """The record's columns a tag writes, by name, to its row and to its new version alike."""
    return {
        "kind": tag.kind,
        "key": tag.key,
        "title": tag.title,
        "data": tag.data,
        "session_id": session_pk,
        "turn_id": tag.turn_id,
        "source": tag.source,
        "blob_id": content.sha256 if content else None,
        "content_type": content.content_type if content else None,
        "version": number,
    }


def _versions_write(
    cursor: _sql.Cursor,
    artifact_id: str,
    previous: _sql.Previous | None,
    number: int,
    keep_versions: int,
    values: _sql.Prepared,
) -> None:
    """History: versions are contiguous (the oldest go first), so the previous row's oldest kept
    number says what this tag must drop; one or two seeks on (artifact, number) either way,
    whatever the history or the store holds."""
    oldest = previous.oldest_version if previous is not None else None
    drop_to = number - keep_versions  # versions numbered up to this one go
    if oldest is not None and oldest == drop_to:
        # The steady state of a full history: the oldest version becomes the newest.
        _sql.version_recycle(cursor, artifact_id, oldest, number, values)
    else:
        _sql.version_insert(cursor, artifact_id, number, values)
        if oldest is not None and oldest <= drop_to:
            _sql.versions_trim(cursor, artifact_id, up_to=drop_to)  # keep_versions was lowered


def _record(
    tag: Tag,
    artifact_id: str,
    content: ContentInfo | None,
    previous: _sql.Previous | None,
    number: int,
    now: datetime,
) -> ArtifactRecord:
    """The stored record, as the tag answers it, built from what was written (no read back)."""
    return ArtifactRecord(
        id=artifact_id,
        kind=tag.kind,
        key=tag.key,
        title=tag.title,
        data=tag.data,
        session_id=tag.session_id,
        turn_id=tag.turn_id,
        source=tag.source,
        content=content,
        created_at=previous.created_at if previous is not None else now,
        updated_at=now,
        version=number,
        pinned=previous.pinned if previous is not None else False,
    )


def _tag_events(
    batch: EventBatch,
    record: ArtifactRecord,
    previous: _sql.Previous | None,
    session_pk: int | None,
    now: datetime,
) -> None:
    """The tag's ``artifact.tagged``, after an ``artifact.deleted`` when it left a session."""
    if (
        previous is not None
        and previous.session_id is not None
        and previous.session_id != session_pk
    ):
        # API.md "Events": a record moving out of a session first leaves it, so that a viewer of
        # the old session sees it go and never sees its new data.
        left = _sql.Deleted(
            id=record.id,
            key=record.key,
            kind=previous.kind,
            session_sid=previous.session_sid,
            turn_id=record.turn_id,
        )
        deleted_events([left], batch=batch, reason="moved", at=now)
    batch.tagged(record, at=now)


def evict(
    cursor: _sql.Cursor, agent: Agent, *, keep_id: str, count: int, batch: EventBatch, at: datetime
) -> int:
    """Eviction: the oldest-updated unpinned records past ``max`` go (ties by id), never the one
    just tagged, each with an ``artifact.deleted`` event of reason ``evicted``."""
    evicted = _sql.evict_oldest(cursor, agent.pk, keep_id=keep_id, count=count)
    return deleted_events(evicted, batch=batch, reason="evicted", at=at)


def deleted_events(
    rows: list[_sql.Deleted], *, batch: EventBatch, reason: str, at: datetime
) -> int:
    """Add an ``artifact.deleted`` event for each deleted row."""
    for row in rows:
        batch.deleted(
            artifact_id=row.id,
            key=row.key,
            kind=row.kind,
            session_sid=row.session_sid,
            turn_id=row.turn_id,
            reason=reason,
            at=at,
        )
    return len(rows)


def lock_agent(agent: Agent, cursor: _sql.Cursor) -> _sql.Counters:
    """Lock the agent row, answering its counters: every write of one agent serialises here,
    which is what makes eviction exact and seq order commit order (DESIGN.md §1)."""
    counters = _sql.agent_lock(cursor, agent.pk)
    if counters is None:
        raise NotFoundError("unknown_agent", f"There is no agent {agent.slug!r}.")
    return counters


def unknown_artifact(agent: Agent, artifact_id: str) -> NotFoundError:
    return NotFoundError(
        "unknown_artifact", f"There is no artifact {artifact_id!r} in agent {agent.slug!r}."
    )


def cap_reached(agent: Agent, cap: int) -> ConflictError:
    return ConflictError(
        "cap_reached",
        f"Agent {agent.slug!r} holds its max of {cap} records and every other one is pinned, "
        "so nothing can be evicted: unpin or delete one, or raise max.",
        {"max": cap},
    )


def unknown_session(agent: Agent, session_id: str) -> NotFoundError:
    return NotFoundError(
        "unknown_session",
        f"Session {session_id!r} does not exist for agent {agent.slug!r}; create it first (POST sessions).",
        {"field": "sessionId"},
    )
