"""A record's history, the writes: restore a version, pin and unpin (API.md "Versions, pins and
diffs"). Restore is a tag: it goes through the tag's one locked write (``_write.tag_locked``);
pinning locks the agent row too, for its event's ``seq``. The reads are ``selectors.versions``.
"""

from __future__ import annotations

from django.db import connection, transaction
from django.utils import timezone

from artifacts_app import selectors
from artifacts_app.errors import ArtifactError, ConflictError, NotFoundError
from artifacts_app.events import EventBatch
from artifacts_app.models import Agent, Artifact, ArtifactVersion
from artifacts_app.records import DEFAULT_BYTES_TYPE, ArtifactRecord, ContentInfo, ValuesRow
from artifacts_app.registry import spec_for
from artifacts_app.services import _sql
from artifacts_app.services._write import (
    Tag,
    TagResult,
    lock_agent,
    tag_locked,
    unknown_artifact,
)
from artifacts_app.services.rules import tag_validate


def artifact_restore(
    *, agent: Agent | str, artifact_id: str, number: int, turn_id: str | None = None
) -> TagResult:
    """Tag version ``number`` of a record again, as its newest version: its kind, title and data,
    ``source="host"``, in the record's **current** session; its content only when that version was
    tagged in that same session (content never crosses sessions). Emits ``artifact.tagged``.

    The kind and data pass today's rules again (a kind no longer declared is refused). An unkeyed
    record has one version and nothing to restore (409 ``not_keyed``).
    """
    agent = selectors.agent_get(agent)
    spec = spec_for(agent)
    if isinstance(number, bool) or not isinstance(number, int) or number < 1:
        raise ArtifactError(
            "invalid_version", "A version number is a whole number from 1.", {"field": "version"}
        )
    with transaction.atomic():
        # Read the record and the version under the lock the tag takes (again, in this same
        # transaction), so that a concurrent re-tag cannot move the record in between.
        with connection.cursor() as cursor:
            lock_agent(agent, cursor)
        current, old = _restore_rows(agent, artifact_id, number)
        kind_name, parsed = tag_validate(
            spec=spec,
            kind=old["kind"],
            key=current["key"],
            title=old["title"],
            data=old["data"],
            session_id=current["session__sid"],
            turn_id=turn_id,
            source=Artifact.SOURCE_HOST,
            has_contents=False,
            content_type=None,
        )
        content = None
        if old["blob_id"] and old["session_id"] == current["session_id"]:
            content = ContentInfo(
                old["blob__size"], old["content_type"] or DEFAULT_BYTES_TYPE, old["blob_id"]
            )
        tag = Tag(
            agent=agent,
            max=spec.max,
            keep_versions=spec.keep_for(kind_name),
            kind=kind_name,
            key=current["key"],
            title=old["title"],
            data=parsed,
            session_id=current["session__sid"],
            turn_id=turn_id,
            source=Artifact.SOURCE_HOST,
        )
        return tag_locked(tag, content, carry_content=False)


def _restore_rows(agent: Agent, artifact_id: str, number: int) -> tuple[ValuesRow, ValuesRow]:
    """The record as it is and its version ``number``, read under the agent's lock: a record gone
    (404), unkeyed (409 ``not_keyed``) or without that version (404) is refused."""
    current = (
        Artifact.objects.filter(agent_id=agent.pk, pk=artifact_id)
        .values("key", "session_id", "session__sid")
        .first()
    )
    if current is None:
        raise unknown_artifact(agent, artifact_id)
    if current["key"] is None:
        raise ConflictError(
            "not_keyed",
            f"Artifact {artifact_id!r} has no key, so it has one version and nothing to restore.",
        )
    old = (
        ArtifactVersion.objects.filter(artifact_id=artifact_id, number=number)
        .values("kind", "title", "data", "session_id", "blob_id", "blob__size", "content_type")
        .first()
    )
    if old is None:
        raise NotFoundError(
            "unknown_version",
            f"Artifact {artifact_id!r} has no version {number} (only the newest are kept).",
            {"version": number},
        )
    return current, old


def artifact_pin(*, agent: Agent | str, artifact_id: str, pinned: bool = True) -> ArtifactRecord:
    """Pin (or unpin) a record: a pinned record is never evicted. Emits ``artifact.pinned`` when
    the pin changes (pinning a pinned record changes nothing and emits nothing); ``updatedAt``
    does not move, so the record keeps its place in lists and in eviction order."""
    agent = selectors.agent_get(agent)
    with transaction.atomic(), connection.cursor() as cursor:
        count, last_seq = lock_agent(agent, cursor)
        change = _sql.artifact_pin(cursor, agent.pk, artifact_id, bool(pinned))
        if change is None:
            raise unknown_artifact(agent, artifact_id)
        if change.changed:
            batch = EventBatch(agent_id=agent.pk, last_seq=last_seq)
            batch.pinned(
                artifact_id=artifact_id,
                key=change.key,
                kind=change.kind,
                session_sid=change.session_sid,
                turn_id=change.turn_id,
                pinned=bool(pinned),
                at=timezone.now(),
            )
            batch.store(cursor)
            _sql.agent_counters_save(cursor, agent.pk, _sql.Counters(count, batch.last_seq))
        return selectors.artifact_get(agent=agent, artifact_id=artifact_id)
