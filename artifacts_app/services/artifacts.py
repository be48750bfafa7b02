"""Tagging, deleting and evicting artifacts: the one implementation each (DESIGN.md §1).

Every tag stores a new version of its record in the same transaction (API.md "Versions, pins and
diffs"): the record keeps its newest ``keep_versions``, and eviction skips pinned records.

Every write of one agent locks its row first, so eviction is exact and event ``seq`` order is
commit order. A tag runs a fixed number of statements whatever the store holds; the bookkeeping
ones are SQL (``_sql``), the artifact row itself is written by the ORM.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import IO, Any

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from artifacts_app import blobs, media, selectors
from artifacts_app.errors import ConflictError, NotFoundError
from artifacts_app.events import DELETED, TAGGED, EventBatch
from artifacts_app.models import Agent, Artifact
from artifacts_app.names import keyed_id, new_id
from artifacts_app.records import (
    DEFAULT_BYTES_TYPE,
    DEFAULT_TEXT_TYPE,
    ArtifactRecord,
    ContentInfo,
)
from artifacts_app.registry import spec_for
from artifacts_app.services import _sql
from artifacts_app.services.rules import tag_validate

Contents = bytes | str | IO[bytes] | Iterable[bytes]


@dataclass(frozen=True)
class TagResult:
    record: ArtifactRecord
    created: bool


@dataclass(frozen=True)
class _Tag:
    """A tag's values once the rules have passed."""

    agent: Agent
    max: int
    keep_versions: int
    kind: str
    key: str | None
    title: str | None
    data: Any
    session_id: str | None
    turn_id: str | None
    source: str
    artifact_id: str | None = None  # re-tag this existing record (artifact_content_put)


def artifact_tag(
    *,
    agent: Agent | str,
    data: Any,
    kind: str | None = None,
    key: str | None = None,
    title: str | None = None,
    session_id: str | None = None,
    turn_id: str | None = None,
    source: str = Artifact.SOURCE_HOST,
    contents: Contents | None = None,
    content_type: str | None = None,
    artifact_id: str | None = None,
) -> TagResult:
    """Tag an artifact: upsert by ``key``, keep or drop content, evict past ``max``, emit events.

    ``contents`` may be bytes, a str (stored as UTF-8) or a binary file, which is streamed.
    Every tag stores a new version of the record (a re-tag of a key adds one; the newest
    ``keep_versions`` are kept). Answers the stored record and whether it was created. Refusals
    raise ``ArtifactError`` and leave no record, no version, no event and no counter change.
    ``artifact_id`` re-tags that existing record (an unkeyed one too; ``artifact_content_put``);
    gone by then: 404.
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
    )
    if content_type is not None:
        content_type = media.canonical(content_type)  # stored and served as parsed
    tag = _Tag(
        agent,
        spec.max,
        spec.keep_for(kind_name),
        kind_name,
        key,
        title,
        parsed,
        session_id,
        turn_id,
        source,
        artifact_id,
    )
    if contents is not None and artifact_id is None and agent.artifact_count >= spec.max:
        # At the cap, before the blob is stored: refuse a new record that could evict nothing
        # (the same check runs under the lock; this one only spares gc_blobs the garbage).
        # A content PUT (artifact_id) re-tags an existing record and never needs room.
        keyed = keyed_id(agent.slug, key) if key is not None else None
        room = Q(pinned=False) | Q(pk=keyed) if keyed else Q(pinned=False)
        if not Artifact.objects.filter(room, agent_id=agent.pk).exists():
            raise _cap_reached(agent, spec.max)
    content: ContentInfo | None = None
    if contents is not None:
        if session_id is not None and selectors.session_pk(agent.pk, session_id) is None:
            # Checked before the blob is written, to leave no garbage; checked again under the lock.
            raise _unknown_session(agent, session_id)
        stored = blobs.blob_put(contents)  # writes the Blob row, committed (the gc claim)
        if content_type is None:
            content_type = DEFAULT_TEXT_TYPE if isinstance(contents, str) else DEFAULT_BYTES_TYPE
        content = ContentInfo(stored.size, content_type, stored.sha256)
    with transaction.atomic():
        return _tag_locked(tag, content)


def _tag_locked(tag: _Tag, content: ContentInfo | None, *, carry_content: bool = True) -> TagResult:
    """The write of a tag, under the agent's lock: the record, its new version, eviction, events.

    ``carry_content`` False (restore): no content but ``content`` itself, whatever the record had.
    """
    agent = tag.agent
    count, last_seq = _lock_agent(agent)
    session_pk = None
    if tag.session_id is not None:
        session_pk = selectors.session_pk(agent.pk, tag.session_id)
        if session_pk is None:
            raise _unknown_session(agent, tag.session_id)
    now = timezone.now()
    retag = tag.artifact_id is not None
    if tag.key is not None:
        artifact_id = keyed_id(agent.slug, tag.key)
    else:
        artifact_id = tag.artifact_id or new_id()
    previous = _sql.artifact_previous(artifact_id) if tag.key is not None or retag else None
    if retag and previous is None:
        raise _unknown_artifact(agent, artifact_id)
    if (
        content is None
        and carry_content
        and previous
        and previous.blob_id
        and previous.session_id == session_pk
    ):
        # Rule 3: a re-tag without contents keeps its content while the session stays. A new
        # record without contents, or one that changed session, has none: old content must
        # not follow a record into another user's session.
        content = ContentInfo(
            previous.blob_size or 0,
            previous.content_type or DEFAULT_BYTES_TYPE,
            previous.blob_id,
        )
    # The agent's lock serialises every tag of this record: numbers are gapless, and the
    # (artifact, number) constraint would refuse a duplicate rather than store it.
    number = previous.version + 1 if previous is not None else 1
    fields: dict[str, Any] = {
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
        "updated_at": now,
    }
    if previous is not None:
        Artifact.objects.filter(pk=artifact_id).update(**fields)
    else:
        Artifact.objects.create(id=artifact_id, agent_id=agent.pk, created_at=now, **fields)
        count += 1
    # History: versions are contiguous (the oldest go first), so the previous row's oldest kept
    # number says what this tag must drop; one or two seeks on (artifact, number) either way,
    # whatever the history or the store holds.
    oldest = previous.oldest_version if previous is not None else None
    drop_to = number - tag.keep_versions  # versions numbered up to this one go
    if oldest is not None and oldest == drop_to:
        # The steady state of a full history: the oldest version becomes the newest.
        _sql.version_recycle(artifact_id, oldest, number, fields, now)
    else:
        _sql.version_insert(artifact_id, number, fields, now)
        if oldest is not None and oldest <= drop_to:
            _sql.versions_trim(artifact_id, up_to=drop_to)  # keep_versions was lowered
    record = ArtifactRecord(
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
    batch = EventBatch(agent_id=agent.pk, last_seq=last_seq)
    if (
        previous is not None
        and previous.session_id is not None
        and previous.session_id != session_pk
    ):
        # API.md "Events": a record moving out of a session first leaves it, so that a viewer of
        # the old session sees it go and never sees its new data.
        batch.add(
            DELETED,
            at=now,
            session_sid=previous.session_sid,
            artifact_id=artifact_id,
            turn_id=tag.turn_id,
            record={"id": artifact_id, "key": tag.key, "kind": previous.kind},
            reason="moved",
        )
    batch.add(
        TAGGED,
        at=now,
        session_sid=tag.session_id,
        artifact_id=artifact_id,
        turn_id=tag.turn_id,
        record=record.event_summary(),
    )
    if count > tag.max:
        count -= _evict(agent, keep_id=artifact_id, count=count - tag.max, batch=batch, at=now)
        if count > tag.max and previous is None:
            # Every other record is pinned: refuse, and the transaction takes it all back.
            raise _cap_reached(agent, tag.max)
    batch.store()
    _sql.agent_counters_save(agent.pk, _sql.Counters(count, batch.last_seq))
    return TagResult(record=record, created=previous is None)


def _evict(agent: Agent, *, keep_id: str, count: int, batch: EventBatch, at: datetime) -> int:
    """Eviction: the oldest-updated unpinned records past ``max`` go (ties by id), never the one
    just tagged, each with an ``artifact.deleted`` event of reason ``evicted``."""
    evicted = _sql.evict_oldest(agent.pk, keep_id=keep_id, count=count)
    return _deleted_events(evicted, batch=batch, reason="evicted", at=at)


def artifacts_evict(*, agent: Agent, max: int) -> int:
    """Bring ``agent`` down to ``max`` records now (its ``max`` was lowered): the oldest-updated
    unpinned ones go, each with ``artifact.deleted`` (reason ``evicted``); answers how many went.
    Pinned records stay, even past ``max``."""
    with transaction.atomic():
        count, last_seq = _lock_agent(agent)
        if count <= max:
            return 0
        batch = EventBatch(agent_id=agent.pk, last_seq=last_seq)
        evicted = _evict(agent, keep_id="", count=count - max, batch=batch, at=timezone.now())
        batch.store()
        _sql.agent_counters_save(agent.pk, _sql.Counters(count - evicted, batch.last_seq))
    return evicted


def artifact_content_put(
    *,
    agent: Agent | str,
    artifact_id: str,
    contents: Contents,
    content_type: str,
) -> TagResult:
    """Replace a record's content (API.md, ``PUT artifacts/<id>/content``): a re-tag that keeps
    every other field of the record, through ``artifact_tag`` (the same rules, limit and event)."""
    agent = selectors.agent_get(agent)
    row = (
        Artifact.objects.filter(agent_id=agent.pk, pk=artifact_id)
        .values("kind", "key", "title", "data", "session__sid", "turn_id", "source")
        .first()
    )
    if row is None:
        raise _unknown_artifact(agent, artifact_id)
    return artifact_tag(
        agent=agent,
        artifact_id=artifact_id,
        kind=row["kind"],
        key=row["key"],
        title=row["title"],
        data=row["data"],
        session_id=row["session__sid"],
        turn_id=row["turn_id"],
        source=row["source"],
        contents=contents,
        content_type=content_type,
    )


def _unknown_artifact(agent: Agent, artifact_id: str) -> NotFoundError:
    return NotFoundError(
        "unknown_artifact", f"There is no artifact {artifact_id!r} in agent {agent.slug!r}."
    )


def _cap_reached(agent: Agent, cap: int) -> ConflictError:
    return ConflictError(
        "cap_reached",
        f"Agent {agent.slug!r} holds its max of {cap} records and every other one is pinned, "
        "so nothing can be evicted: unpin or delete one, or raise max.",
        {"max": cap},
    )


def _unknown_session(agent: Agent, session_id: str) -> NotFoundError:
    return NotFoundError(
        "unknown_session",
        f"Session {session_id!r} does not exist for agent {agent.slug!r}; create it first (POST sessions).",
        {"field": "sessionId"},
    )


def _lock_agent(agent: Agent) -> _sql.Counters:
    """Lock the agent row, answering its counters: every write of one agent serialises here,
    which is what makes eviction exact and seq order commit order (DESIGN.md §1)."""
    counters = _sql.agent_lock(agent.pk)
    if counters is None:
        raise NotFoundError("unknown_agent", f"There is no agent {agent.slug!r}.")
    return counters


def _deleted_events(
    rows: list[_sql.Deleted], *, batch: EventBatch, reason: str, at: datetime
) -> int:
    """Add an ``artifact.deleted`` event for each deleted row."""
    for row in rows:
        batch.add(
            DELETED,
            at=at,
            session_sid=row.session_sid,
            artifact_id=row.id,
            turn_id=row.turn_id,
            record={"id": row.id, "key": row.key, "kind": row.kind},
            reason=reason,
        )
    return len(rows)


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
    with transaction.atomic():
        count, last_seq = _lock_agent(agent)
        batch = EventBatch(agent_id=agent.pk, last_seq=last_seq)
        deleted = _sql.artifacts_delete_ids(
            agent.pk,
            list(dict.fromkeys(ids)),
            updated_at_most=updated_at_most,
            skip_pinned=skip_pinned,
        )
        removed = len(deleted)
        if reason == "pruned":
            deleted = [row for row in deleted if row.session_sid is not None]
        _deleted_events(deleted, batch=batch, reason=reason, at=timezone.now())
        if removed:
            batch.store()
            _sql.agent_counters_save(
                agent.pk, _sql.Counters(max(count - removed, 0), batch.last_seq)
            )
    return removed


def artifact_delete(*, agent: Agent | str, artifact_id: str) -> None:
    """Delete one artifact (its content goes with it) and emit ``artifact.deleted``."""
    agent = selectors.agent_get(agent)
    if not artifacts_delete(agent=agent, ids=[artifact_id], reason="deleted"):
        raise NotFoundError(
            "unknown_artifact", f"There is no artifact {artifact_id!r} in agent {agent.slug!r}."
        )
