"""Tagging, deleting and evicting artifacts: the one implementation each (DESIGN.md §1).

Every tag stores a new version of its record in the same transaction (API.md "Versions, pins and
diffs"): the record keeps its newest ``keep_versions``, and eviction skips pinned records.

Every write of one agent locks its row first, so eviction is exact and event ``seq`` order is
commit order. Here are the checks before the lock (the rules, the room, the blob); the write under
it is ``_write.tag_locked``, shared with a restore.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import IO

from django.db import connection, transaction
from django.db.models import Q
from django.utils import timezone

from artifacts_app import blobs, media, search, selectors
from artifacts_app.events import EventBatch
from artifacts_app.jsontypes import JSON
from artifacts_app.models import Agent, Artifact
from artifacts_app.names import keyed_id
from artifacts_app.records import DEFAULT_BYTES_TYPE, DEFAULT_TEXT_TYPE, ContentInfo, ValuesRow
from artifacts_app.registry import AgentSpec, spec_for
from artifacts_app.services import _index, _sql
from artifacts_app.services._write import (
    Tag,
    TagResult,
    cap_reached,
    deleted_events,
    evict,
    lock_agent,
    tag_locked,
    unknown_artifact,
    unknown_session,
)
from artifacts_app.services.rules import tag_validate
from artifacts_app.services.uploads import (
    Taken,
    known_contents,
    upload_mark_used,
    upload_take,
)

Contents = bytes | str | IO[bytes] | Iterable[bytes]

__all__ = [
    "Contents",
    "TagResult",
    "artifact_content_put",
    "artifact_delete",
    "artifact_tag",
    "artifacts_delete",
    "artifacts_evict",
]


def artifact_tag(
    *,
    agent: Agent | str,
    data: JSON,
    kind: str | None = None,
    key: str | None = None,
    title: str | None = None,
    session_id: str | None = None,
    turn_id: str | None = None,
    source: str = Artifact.SOURCE_HOST,
    contents: Contents | None = None,
    content_type: str | None = None,
    upload: str | None = None,
    contents_sha256: str | None = None,
    contents_size: int | None = None,
    artifact_id: str | None = None,
) -> TagResult:
    """Tag an artifact: upsert by ``key``, keep or drop content, evict past ``max``, emit events.

    ``contents`` may be bytes, a str (stored as UTF-8) or a binary file, which is streamed.
    Every tag stores a new version of the record (a re-tag of a key adds one; the newest
    ``keep_versions`` are kept). Answers the stored record and whether it was created. Refusals
    raise ``ArtifactError`` and leave no record, no version, no event and no counter change.
    ``artifact_id`` re-tags that existing record (an unkeyed one too; ``artifact_content_put``);
    gone by then: 404.

    Instead of ``contents``: ``upload``, a finished resumable upload of the agent (used once), or
    known contents, ``contents_sha256`` with ``contents_size`` of a blob the agent already stores
    (API.md "Large contents").
    """
    agent = selectors.agent_get(agent)
    spec = spec_for(agent)
    kind_name, parsed = tag_validate(
        spec=spec,
        kind=kind,
        key=key,
        title=title,
        data=data,
        session_id=session_id,
        turn_id=turn_id,
        source=source,
        has_contents=contents is not None,
        content_type=content_type,
        upload=upload,
        contents_sha256=contents_sha256,
        contents_size=contents_size,
    )
    if content_type is not None:
        content_type = media.canonical(content_type)  # stored and served as parsed
    tag = Tag(
        agent=agent,
        max=spec.max,
        keep_versions=spec.keep_for(kind_name),
        kind=kind_name,
        key=key,
        title=title,
        data=parsed,
        session_id=session_id,
        turn_id=turn_id,
        source=source,
        artifact_id=artifact_id,
    )
    stores = contents is not None or upload is not None or contents_sha256 is not None
    if stores and artifact_id is None and agent.artifact_count >= spec.max:
        _room_check(agent, spec.max, key)
    content = head = None
    taken = None
    if contents is not None:
        content, head = _content_store(agent, session_id, contents, content_type)
    elif upload is not None or (contents_sha256 is not None and contents_size is not None):
        _session_check(agent, session_id)
        if upload is not None:
            taken = upload_take(agent=agent, upload_id=upload)
        else:
            assert contents_sha256 is not None and contents_size is not None
            taken = known_contents(agent=agent, sha256=contents_sha256, size=contents_size)
        content = _taken_content(taken, content_type)
        head = _taken_head(content)
    with transaction.atomic():
        if taken is not None:
            upload_mark_used(taken)
        return tag_locked(tag, content, head=head)


def _taken_content(taken: Taken, content_type: str | None) -> ContentInfo:
    if content_type is None and taken.content_type is not None:
        content_type = media.canonical(taken.content_type)
    return ContentInfo(taken.size, content_type or DEFAULT_BYTES_TYPE, taken.sha256)


def _taken_head(content: ContentInfo) -> bytes | None:
    """The first bytes of a text content that did not stream through this tag (a finished
    upload, known contents) whose blob has no words kept yet: read once, bounded by
    ``ARTIFACTS_SEARCH_CONTENT_BYTES``, before the lock, so the tag indexes its words."""
    if not search.searchable_type(content.content_type) or search.content_bytes() < 1:
        return None
    if content.size == 0:
        return b""
    with connection.cursor() as cursor:
        if _index.blob_words(cursor, content.sha256) is not None:
            return None  # kept already: the tag reads them under its lock
    return blobs.blob_read(content.sha256, end=min(content.size, search.content_bytes()) - 1)


def _session_check(agent: Agent, session_id: str | None) -> None:
    if session_id is not None and selectors.session_pk(agent.pk, session_id) is None:
        # Checked before the blob is written, to leave no garbage; checked again under the lock.
        raise unknown_session(agent, session_id)


def _room_check(agent: Agent, cap: int, key: str | None) -> None:
    """At the cap, before the blob is stored: refuse a new record that could evict nothing (the
    same check runs under the lock; this one only spares gc_blobs the garbage). A content PUT
    (artifact_id) re-tags an existing record and never needs room: the caller skips it."""
    keyed = keyed_id(agent.slug, key) if key is not None else None
    room = Q(pinned=False) | Q(pk=keyed) if keyed else Q(pinned=False)
    if not Artifact.objects.filter(room, agent_id=agent.pk).exists():
        raise cap_reached(agent, cap)


def _content_store(
    agent: Agent, session_id: str | None, contents: Contents, content_type: str | None
) -> tuple[ContentInfo, bytes]:
    """Store the blob before the lock (its Blob row, committed, is the gc claim); answers it and
    its first bytes (search reads a text content's words from them)."""
    _session_check(agent, session_id)
    stored = blobs.blob_put(contents)
    if content_type is None:
        content_type = DEFAULT_TEXT_TYPE if isinstance(contents, str) else DEFAULT_BYTES_TYPE
    return ContentInfo(stored.size, content_type, stored.sha256), stored.head


def artifacts_evict(*, agent: Agent, max: int) -> int:
    """Bring ``agent`` down to ``max`` records now (its ``max`` was lowered): the oldest-updated
    unpinned ones go, each with ``artifact.deleted`` (reason ``evicted``); answers how many went.
    Pinned records stay, even past ``max``."""
    with transaction.atomic(), connection.cursor() as cursor:
        count, last_seq = lock_agent(agent, cursor)
        if count <= max:
            return 0
        batch = EventBatch(agent_id=agent.pk, last_seq=last_seq)
        evicted = evict(
            cursor, agent, keep_id="", count=count - max, batch=batch, at=timezone.now()
        )
        batch.store(cursor)
        _sql.agent_counters_save(cursor, agent.pk, _sql.Counters(count - evicted, batch.last_seq))
    return evicted


def artifact_content_put(
    *,
    agent: Agent | str,
    artifact_id: str,
    contents: Contents | None = None,
    content_type: str | None,
    upload: str | None = None,
) -> TagResult:
    """Replace a record's content (API.md, ``PUT artifacts/<id>/content``): a re-tag that keeps
    every other field of the record, with the tag's rules, limit and event.

    The blob is stored first, outside any lock (a body streams for as long as it takes). The
    fields the re-tag keeps are then read under the agent's lock, in the transaction that writes
    it: a tag that commits while the body streams is kept, not overwritten with the fields it
    replaced. They are read once before too, to refuse (404, the rules) before a body is stored.

    ``upload`` instead of ``contents``: a finished resumable upload of the agent (used once);
    ``content_type`` left out is then the upload's metadata's, else bytes.
    """
    agent = selectors.agent_get(agent)
    spec = spec_for(agent)
    before = _retag_row(agent, artifact_id)
    taken = None
    if upload is not None:
        taken = upload_take(agent=agent, upload_id=upload)
        content = _taken_content(taken, content_type)
        content_type = content.content_type
    checked = _retag_validate(spec, before, content_type)
    if taken is None:
        if contents is None or content_type is None:
            raise ValueError("a content PUT takes contents and their type, or an upload")
        stored = blobs.blob_put(contents)
        content = ContentInfo(stored.size, media.canonical(content_type), stored.sha256)
        head: bytes | None = stored.head
    else:
        head = _taken_head(content)
    with transaction.atomic():
        if taken is not None:
            upload_mark_used(taken)
        with connection.cursor() as cursor:
            lock_agent(agent, cursor)  # again in tag_locked, in this same transaction
        row = _retag_row(agent, artifact_id)
        if row != before:  # re-tagged while the body streamed: its fields, checked again
            checked = _retag_validate(spec, row, content_type)
        kind_name, parsed = checked
        tag = Tag(
            agent=agent,
            max=spec.max,
            keep_versions=spec.keep_for(kind_name),
            kind=kind_name,
            key=row["key"],
            title=row["title"],
            data=parsed,
            session_id=row["session__sid"],
            turn_id=row["turn_id"],
            source=row["source"],
            artifact_id=artifact_id,
        )
        return tag_locked(tag, content, head=head)


def _retag_row(agent: Agent, artifact_id: str) -> ValuesRow:
    """The fields a content PUT keeps, as the record holds them now; 404 for a record gone."""
    row = (
        Artifact.objects.filter(agent_id=agent.pk, pk=artifact_id)
        .values("kind", "key", "title", "data", "session__sid", "turn_id", "source")
        .first()
    )
    if row is None:
        raise unknown_artifact(agent, artifact_id)
    return row


def _retag_validate(spec: AgentSpec, row: ValuesRow, content_type: str | None) -> tuple[str, JSON]:
    """The tag's rules over the record's own fields with new contents (a kind no longer
    declared, or data its schema now refuses, is refused as for any tag)."""
    return tag_validate(
        spec=spec,
        kind=row["kind"],
        key=row["key"],
        title=row["title"],
        data=row["data"],
        session_id=row["session__sid"],
        turn_id=row["turn_id"],
        source=row["source"],
        has_contents=True,
        content_type=content_type,
    )


def artifacts_delete(
    *,
    agent: Agent | str,
    ids: list[str],
    reason: str = "deleted",
    updated_at_most: datetime | None = None,
    skip_pinned: bool = False,
) -> int:
    """Delete the artifacts of ``agent`` with these ids, in one transaction; answers how many went.

    ``reason`` is ``deleted`` (a caller asked) or ``pruned`` (an operator's prune). Ids that do not
    exist are skipped: the caller decides whether that is an error. ``updated_at_most`` (prune)
    skips a record re-tagged since the caller chose it, ``skip_pinned`` (prune without
    ``--include-pinned``) one pinned since. A record's versions go with it. A pruned record emits ``artifact.deleted``
    only when it had a session (API.md: prune_artifacts); the counters stay exact either way.
    """
    agent = selectors.agent_get(agent)
    if reason not in ("deleted", "pruned"):
        raise ValueError(f"artifacts_delete reason is 'deleted' or 'pruned', not {reason!r}")
    if not ids:
        return 0
    with transaction.atomic(), connection.cursor() as cursor:
        count, last_seq = lock_agent(agent, cursor)
        batch = EventBatch(agent_id=agent.pk, last_seq=last_seq)
        deleted = _sql.artifacts_delete_ids(
            cursor,
            agent.pk,
            list(dict.fromkeys(ids)),
            updated_at_most=updated_at_most,
            skip_pinned=skip_pinned,
        )
        removed = len(deleted)
        if reason == "pruned":
            deleted = [row for row in deleted if row.session_sid is not None]
        deleted_events(deleted, batch=batch, reason=reason, at=timezone.now())
        if removed:
            batch.store(cursor)
            _sql.agent_counters_save(
                cursor, agent.pk, _sql.Counters(max(count - removed, 0), batch.last_seq)
            )
    return removed


def artifact_delete(*, agent: Agent | str, artifact_id: str) -> None:
    """Delete one artifact (its content goes with it) and emit ``artifact.deleted``."""
    agent = selectors.agent_get(agent)
    if not artifacts_delete(agent=agent, ids=[artifact_id], reason="deleted"):
        raise unknown_artifact(agent, artifact_id)
