"""Writes: the one implementation of tagging, deleting, evicting, sessions, agents and secrets.

Every entry point (REST, admin, commands, websocket, Python API, tool) calls these functions with
plain Python values; none of them writes a model itself. Access is decided by the caller through
``access``; these functions enforce the data rules of API.md "Tag" and raise ``ArtifactError``.
"""

from __future__ import annotations

import hashlib
import json
import re
import secrets
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import IO, Any

import orjson
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone
from pydantic import ValidationError

from artifacts_app import blobs, hotsql
from artifacts_app.errors import ArtifactError, ConflictError, NotFoundError, TooLargeError
from artifacts_app.events import DELETED, PINNED, TAGGED, EventBatch
from artifacts_app.models import Agent, ApiKey, Artifact, ArtifactVersion, Session
from artifacts_app.records import (
    DEFAULT_BYTES_TYPE,
    DEFAULT_TEXT_TYPE,
    RECORD_FIELDS,
    ArtifactRecord,
    ContentInfo,
)
from artifacts_app.registry import (
    DEFAULT_KEEP_VERSIONS,
    DEFAULT_MAX,
    FREEFORM_KIND,
    KIND_RE,
    AgentSpec,
    slug_problem,
    spec_for,
)

SESSION_ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,127}")
# RFC 7231 media type with optional parameters, printable ASCII only (it becomes a response header).
CONTENT_TYPE_RE = re.compile(r"[A-Za-z0-9!#$&^_.+-]+/[A-Za-z0-9!#$&^_.+-]+(\s*;\s*[\x20-\x7e]*)?")
MAX_KEY_CHARS = 1024
MAX_TITLE_CHARS = 512
MAX_TURN_CHARS = 128
SOURCES = (Artifact.SOURCE_HOST, Artifact.SOURCE_MODEL)
AGENT_KEY_PREFIX = "aak_"
USER_TOKEN_PREFIX = "aau_"

User = get_user_model()


# --- agents ---------------------------------------------------------------------------------


def agent_get(agent: Agent | str) -> Agent:
    """The agent row for a slug (or the row itself); unknown slugs raise ``NotFoundError``."""
    if isinstance(agent, Agent):
        return agent
    found = hotsql.agent_by_slug(agent) if isinstance(agent, str) else None
    if found is None:
        raise NotFoundError("unknown_agent", f"There is no agent {agent!r}.")
    return found


def agent_create(
    *, slug: str, max_artifacts: int = DEFAULT_MAX, keep_versions: int = DEFAULT_KEEP_VERSIONS
) -> Agent:
    """A freeform agent (no module): any non-empty kind, no tool, capped at ``max_artifacts``
    records of ``keep_versions`` versions each."""
    problem = slug_problem(slug)
    if problem:
        raise ArtifactError("invalid_slug", problem)
    if isinstance(max_artifacts, bool) or not isinstance(max_artifacts, int) or max_artifacts < 1:
        raise ArtifactError(
            "invalid_max", f"max must be a whole number of at least 1; got {max_artifacts!r}."
        )
    if isinstance(keep_versions, bool) or not isinstance(keep_versions, int) or keep_versions < 1:
        raise ArtifactError(
            "invalid_keep_versions",
            f"keep_versions must be a whole number of at least 1 (1 keeps no history); got {keep_versions!r}.",
        )
    try:
        with transaction.atomic():
            return Agent.objects.create(
                slug=slug, max_artifacts=max_artifacts, keep_versions=keep_versions
            )
    except IntegrityError:
        raise ConflictError(
            "agent_exists", f"An agent {slug!r} exists already; choose another slug."
        ) from None


# --- sessions -------------------------------------------------------------------------------


def _user_get(user: AbstractBaseUser | str) -> AbstractBaseUser:
    if isinstance(user, AbstractBaseUser):
        return user
    found = (
        User.objects.filter(**{User.USERNAME_FIELD: user}).first()
        if isinstance(user, str) and "\x00" not in user
        else None
    )
    if found is None:
        raise ArtifactError("unknown_user", f"There is no user {user!r}.")
    return found


def session_create(
    *, agent: Agent | str, sid: str | None = None, owner: AbstractBaseUser | str | None = None
) -> Session:
    """A session of ``agent``; ``sid`` None → generated; ``owner`` a user, a username or None."""
    agent = agent_get(agent)
    if sid is None:
        sid = f"s_{secrets.token_hex(12)}"
    elif not isinstance(sid, str) or not SESSION_ID_RE.fullmatch(sid):
        raise ArtifactError(
            "invalid_session_id",
            "A session id is 1–128 of A-Z a-z 0-9 . _ : - starting with a letter or digit.",
            {"field": "id"},
        )
    owner_user = _user_get(owner) if owner is not None else None
    try:
        with transaction.atomic():
            return Session.objects.create(agent=agent, sid=sid, owner=owner_user)
    except IntegrityError:
        raise ConflictError(
            "session_exists",
            f"Session {sid!r} exists already for agent {agent.slug!r}; choose another id.",
        ) from None


# --- tagging --------------------------------------------------------------------------------


@dataclass(frozen=True)
class TagResult:
    record: ArtifactRecord
    created: bool


def keyed_id(slug: str, key: str) -> str:
    """The stable id of a keyed record: the same (agent, key) always has the same id."""
    return "art_" + hashlib.sha256(f"{slug}\x00{key}".encode()).hexdigest()[:24]


def new_id() -> str:
    return "art_" + secrets.token_hex(12)


def _check_text(value: Any, *, field: str, limit: int, code: str) -> None:
    if value is None:
        return
    if not isinstance(value, str):
        raise ArtifactError(code, f"`{field}` must be a string or null.", {"field": field})
    if len(value) > limit:
        raise ArtifactError(
            code, f"`{field}` is {len(value)} characters; the limit is {limit}.", {"field": field}
        )
    if "\x00" in value:
        raise ArtifactError(code, f"`{field}` may not contain NUL (U+0000).", {"field": field})


def _resolve_kind(spec: AgentSpec, kind: Any) -> str:
    if kind is None:
        if spec.kinds:
            raise ArtifactError(
                "unknown_kind",
                f"Name a `kind`: agent {spec.slug!r} declares {', '.join(sorted(spec.kinds))}.",
                {"field": "kind", "allowed": sorted(spec.kinds)},
            )
        return FREEFORM_KIND
    if not isinstance(kind, str) or not KIND_RE.fullmatch(kind):
        raise ArtifactError(
            "invalid_kind",
            "`kind` is 1–64 of A-Z a-z 0-9 . _ : - starting with a letter or digit.",
            {"field": "kind"},
        )
    if spec.kinds and kind not in spec.kinds:
        raise ArtifactError(
            "unknown_kind",
            f"Kind {kind!r} is not declared by agent {spec.slug!r}; use one of {', '.join(sorted(spec.kinds))}.",
            {"field": "kind", "allowed": sorted(spec.kinds)},
        )
    return kind


def parse_data(spec: AgentSpec, kind: str, data: Any) -> Any:
    """Validate ``data`` against the kind's schema and return the JSON form of the parsed value."""
    if data is None:
        raise ArtifactError(
            "data_required", "`data` is required and may not be null.", {"field": "data"}
        )
    declared = spec.kinds.get(kind)
    if declared is not None and declared.adapter is not None:
        try:
            value = declared.adapter.validate_python(data)
        except ValidationError as exc:
            details = json.loads(exc.json(include_url=False))
            first = details[0] if details else {"loc": [], "msg": str(exc)}
            where = ".".join(str(part) for part in first.get("loc", [])) or "data"
            raise ArtifactError(
                "schema_invalid",
                f"`data` does not match kind {kind!r}: {where}: {first.get('msg')}.",
                details,
            ) from None
        return declared.adapter.dump_python(value, mode="json")
    return data


# A JSON escape \u0000 not itself escaped (an even number of backslashes before it).
_NUL_ESCAPE_RE = re.compile(rb"(?<!\\)(?:\\\\)*\\u0000")


def _encoded_json(data: Any) -> bytes:
    try:
        return orjson.dumps(data)
    except (TypeError, orjson.JSONEncodeError) as exc:
        raise ArtifactError(
            "invalid_data", f"`data` must be JSON: {exc}.", {"field": "data"}
        ) from None


def _check_content_type(content_type: Any) -> None:
    if content_type is None:
        return
    if (
        not isinstance(content_type, str)
        or len(content_type) > 255
        or not CONTENT_TYPE_RE.fullmatch(content_type)
    ):
        raise ArtifactError(
            "invalid_content_type",
            "`contentType` must be a media type such as text/markdown or application/pdf.",
            {"field": "contentType"},
        )


def tag_validate(
    *,
    spec: AgentSpec,
    kind: Any,
    key: Any,
    title: Any,
    data: Any,
    session_id: Any,
    turn_id: Any,
    source: Any,
    has_contents: bool,
    content_type: Any,
) -> tuple[str, Any]:
    """Every Tag rule that needs no database; answers the kind in force and the parsed data."""
    _check_text(key, field="key", limit=MAX_KEY_CHARS, code="invalid_key")
    if key == "":
        raise ArtifactError(
            "invalid_key",
            "`key` may not be empty: leave it out for an unkeyed record.",
            {"field": "key"},
        )
    _check_text(title, field="title", limit=MAX_TITLE_CHARS, code="invalid_title")
    _check_text(turn_id, field="turnId", limit=MAX_TURN_CHARS, code="invalid_turn_id")
    if session_id is not None and (
        not isinstance(session_id, str) or not SESSION_ID_RE.fullmatch(session_id)
    ):
        raise ArtifactError(
            "invalid_session_id",
            "`sessionId` is 1–128 of A-Z a-z 0-9 . _ : - starting with a letter or digit.",
            {"field": "sessionId"},
        )
    if source not in SOURCES:
        raise ArtifactError("invalid_source", '`source` is "host" or "model".', {"field": "source"})
    _check_content_type(content_type)
    if content_type is not None and not has_contents:
        raise ArtifactError(
            "content_type_without_contents",
            "`contentType` was given without contents; send the contents too, or leave contentType out.",
            {"field": "contentType"},
        )
    kind_name = _resolve_kind(spec, kind)
    parsed = parse_data(spec, kind_name, data)
    limit = int(settings.ARTIFACTS_MAX_DATA_BYTES)
    encoded = _encoded_json(parsed)
    size = len(encoded)
    if b"\\u0000" in encoded and _NUL_ESCAPE_RE.search(encoded):
        # PostgreSQL's jsonb (and text) cannot hold U+0000: refuse it here, for every entry point.
        raise ArtifactError(
            "invalid_data",
            "`data` may not contain NUL (U+0000) in any string or key; remove it or encode it.",
            {"field": "data"},
        )
    if size > limit:
        raise TooLargeError(
            "data_too_large",
            f"`data` is {size} bytes as JSON; ARTIFACTS_MAX_DATA_BYTES allows {limit}. "
            "Move large payloads into contents.",
            {"field": "data", "limit": limit, "size": size},
        )
    return kind_name, parsed


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
    contents: bytes | str | IO[bytes] | Iterable[bytes] | None = None,
    content_type: str | None = None,
) -> TagResult:
    """Tag an artifact: upsert by ``key``, keep or drop content, evict past ``max``, emit events.

    Every tag stores a new version of its record (a re-tag of a key adds one; the record keeps its
    newest ``keep_versions``). ``contents`` may be bytes, a str (stored as UTF-8) or a binary file,
    which is streamed. Answers the stored record and whether it was created. Refusals raise
    ``ArtifactError`` and leave no record, no blob row, no event and no counter change.
    """
    agent = agent_get(agent)
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
    )
    if contents is not None and session_id is not None:
        if hotsql.session_pk(agent.pk, session_id) is None:
            # Checked before the blob is written, to leave no garbage; checked again under the lock.
            raise _unknown_session(agent, session_id)

    if contents is not None and agent.artifact_count >= spec.max:
        # At the cap, before the blob is stored: refuse a new record that could evict nothing
        # (the same check runs under the lock; this one only spares gc_blobs the garbage).
        artifact_id = keyed_id(agent.slug, key) if key is not None else None
        room = Q(pinned=False) | Q(pk=artifact_id) if artifact_id else Q(pinned=False)
        if not Artifact.objects.filter(room, agent_id=agent.pk).exists():
            raise _cap_reached(agent, spec.max)

    content: ContentInfo | None = None
    if contents is not None:
        stored = blobs.blob_put(contents)
        if content_type is None:
            content_type = DEFAULT_TEXT_TYPE if isinstance(contents, str) else DEFAULT_BYTES_TYPE
        content = ContentInfo(stored.size, content_type, stored.sha256)

    with transaction.atomic():
        count, last_seq = _lock_agent(agent)
        if content is not None:
            hotsql.blob_insert(content.sha256, content.size, timezone.now())
        return _tag_locked(tag, content, count=count, last_seq=last_seq)


def _tag_locked(
    tag: _Tag,
    content: ContentInfo | None,
    *,
    count: int,
    last_seq: int,
    carry_content: bool = True,
) -> TagResult:
    """The write of a tag, under the agent's lock: the record, its new version, eviction, events.

    ``carry_content`` False (restore): no content but ``content`` itself, whatever the record had.
    """
    agent = tag.agent
    session_pk = None
    if tag.session_id is not None:
        session_pk = hotsql.session_pk(agent.pk, tag.session_id)
        if session_pk is None:
            raise _unknown_session(agent, tag.session_id)
    now = timezone.now()
    artifact_id = keyed_id(agent.slug, tag.key) if tag.key is not None else new_id()
    previous = hotsql.artifact_previous(artifact_id) if tag.key is not None else None
    if (
        content is None
        and carry_content
        and previous
        and previous["blob_id"]
        and previous["session_id"] == session_pk
    ):
        # Rule 3: a re-tag without contents keeps its content while the session stays. A new
        # record without contents, or one that changed session, has none: old content must
        # not follow a record into another user's session.
        content = ContentInfo(
            previous["blob_size"],
            previous["content_type"] or DEFAULT_BYTES_TYPE,
            previous["blob_id"],
        )
    # The agent's lock serialises every tag of this record: numbers are gapless, and the
    # (artifact, number) constraint would refuse a duplicate rather than store it.
    number = previous["version"] + 1 if previous is not None else 1
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
    # number says what this tag must drop. Either way one or two seeks on (artifact, number):
    # the cost per tag does not grow with history or with the store.
    oldest = previous["oldest_version"] if previous is not None else None
    drop_to = number - tag.keep_versions  # versions numbered up to this one go
    if oldest is not None and oldest == drop_to:
        # The steady state of a full history: the oldest version becomes the newest.
        hotsql.version_recycle(artifact_id, oldest, number, fields, now)
    else:
        hotsql.version_insert(artifact_id, number, fields, now)
        if oldest is not None and oldest <= drop_to:
            hotsql.versions_trim(artifact_id, up_to=drop_to)  # keep_versions was lowered

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
        created_at=previous["created_at"] if previous is not None else now,
        updated_at=now,
        version=number,
        pinned=previous["pinned"] if previous is not None else False,
    )
    batch = EventBatch(agent_id=agent.pk, last_seq=last_seq)
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
    hotsql.agent_counters_save(agent.pk, artifact_count=count, last_seq=batch.last_seq)
    return TagResult(record=record, created=previous is None)


def _evict(agent: Agent, *, keep_id: str, count: int, batch: EventBatch, at: datetime) -> int:
    """Eviction: the oldest-updated unpinned records past ``max`` go (ties by id), never the one
    just tagged, each with an ``artifact.deleted`` event of reason ``evicted``."""
    evicted = hotsql.evict_oldest(agent.pk, keep_id=keep_id, count=count)
    return _deleted_events(evicted, batch=batch, reason="evicted", at=at)


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


def _lock_agent(agent: Agent) -> tuple[int, int]:
    """Lock the agent row, answering (artifact_count, last_seq): every write of one agent
    serialises here, which is what makes eviction exact and seq order commit order (DESIGN.md §1)."""
    counters = hotsql.agent_lock(agent.pk)
    if counters is None:
        raise NotFoundError("unknown_agent", f"There is no agent {agent.slug!r}.")
    return counters


def _deleted_events(
    rows: list[tuple[Any, ...]], *, batch: EventBatch, reason: str, at: datetime
) -> int:
    """Add an ``artifact.deleted`` event for each deleted (id, key, kind, session sid, turn) row."""
    for artifact_id, key, kind, session_sid, turn_id in rows:
        batch.add(
            DELETED,
            at=at,
            session_sid=session_sid,
            artifact_id=artifact_id,
            turn_id=turn_id,
            record={"id": artifact_id, "key": key, "kind": kind},
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
    agent = agent_get(agent)
    if reason not in ("deleted", "pruned"):
        raise ValueError(f"artifacts_delete reason is 'deleted' or 'pruned', not {reason!r}")
    if not ids:
        return 0
    with transaction.atomic():
        count, last_seq = _lock_agent(agent)
        batch = EventBatch(agent_id=agent.pk, last_seq=last_seq)
        deleted = hotsql.artifacts_delete_ids(
            agent.pk,
            list(dict.fromkeys(ids)),
            updated_at_most=updated_at_most,
            skip_pinned=skip_pinned,
        )
        removed = len(deleted)
        if reason == "pruned":
            deleted = [row for row in deleted if row[3] is not None]
        _deleted_events(deleted, batch=batch, reason=reason, at=timezone.now())
        if removed:
            batch.store()
            hotsql.agent_counters_save(
                agent.pk, artifact_count=max(count - removed, 0), last_seq=batch.last_seq
            )
    return removed


def artifact_delete(*, agent: Agent | str, artifact_id: str) -> None:
    """Delete one artifact (its content goes with it) and emit ``artifact.deleted``."""
    agent = agent_get(agent)
    if not artifacts_delete(agent=agent, ids=[artifact_id], reason="deleted"):
        raise NotFoundError(
            "unknown_artifact", f"There is no artifact {artifact_id!r} in agent {agent.slug!r}."
        )


# --- versions and pins ----------------------------------------------------------------------


def artifact_restore(
    *, agent: Agent | str, artifact_id: str, number: int, turn_id: str | None = None
) -> TagResult:
    """Tag version ``number`` of a record again, as its newest version: its kind, title and data,
    ``source="host"``, in the record's **current** session; its content only when that version was
    tagged in that same session (content never crosses sessions). Emits ``artifact.tagged``.

    The kind and data pass today's rules again (a kind no longer declared is refused). An unkeyed
    record has one version and nothing to restore (409 ``not_keyed``).
    """
    agent = agent_get(agent)
    spec = spec_for(agent)
    if isinstance(number, bool) or not isinstance(number, int) or number < 1:
        raise ArtifactError(
            "invalid_version", "A version number is a whole number from 1.", {"field": "version"}
        )
    with transaction.atomic():
        # Read the record and the version under the lock the tag takes (again, in this same
        # transaction), so that a concurrent re-tag cannot move the record in between.
        count, last_seq = _lock_agent(agent)
        current = (
            Artifact.objects.filter(agent_id=agent.pk, pk=artifact_id)
            .values("key", "session_id", "session__sid")
            .first()
        )
        if current is None:
            raise NotFoundError(
                "unknown_artifact", f"There is no artifact {artifact_id!r} in agent {agent.slug!r}."
            )
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
        tag = _Tag(
            agent,
            spec.max,
            spec.keep_for(kind_name),
            kind_name,
            current["key"],
            old["title"],
            parsed,
            current["session__sid"],
            turn_id,
            Artifact.SOURCE_HOST,
        )
        return _tag_locked(tag, content, count=count, last_seq=last_seq, carry_content=False)


def artifact_pin(*, agent: Agent | str, artifact_id: str, pinned: bool = True) -> ArtifactRecord:
    """Pin (or unpin) a record: a pinned record is never evicted. Emits ``artifact.pinned`` when
    the pin changes (pinning a pinned record changes nothing and emits nothing); ``updatedAt``
    does not move, so the record keeps its place in lists and in eviction order."""
    agent = agent_get(agent)
    with transaction.atomic():
        count, last_seq = _lock_agent(agent)
        row = hotsql.artifact_pin(agent.pk, artifact_id, bool(pinned))
        if row is None:
            raise NotFoundError(
                "unknown_artifact", f"There is no artifact {artifact_id!r} in agent {agent.slug!r}."
            )
        if row["changed"]:
            batch = EventBatch(agent_id=agent.pk, last_seq=last_seq)
            batch.add(
                PINNED,
                at=timezone.now(),
                session_sid=row["session_sid"],
                artifact_id=artifact_id,
                turn_id=row["turn_id"],
                record={
                    "id": artifact_id,
                    "key": row["key"],
                    "kind": row["kind"],
                    "pinned": bool(pinned),
                },
            )
            batch.store()
            hotsql.agent_counters_save(agent.pk, artifact_count=count, last_seq=batch.last_seq)
        found = Artifact.objects.filter(pk=artifact_id).values(*RECORD_FIELDS).first()
    return ArtifactRecord.from_values(found)


# --- the model's tag_artifact tool (issue 5) ------------------------------------------------


def tool_run(
    *,
    agent: Agent | str,
    input: Any,  # noqa: A002 - the tool call's input, as the model sent it (dict or JSON text)
    session_id: str | None = None,
    turn_id: str | None = None,
) -> TagResult:
    """Run a model's ``tag_artifact`` call: tag with ``source="model"``.

    Refusals of the model's input raise ``tool.ToolInputError`` (400, naming the field, e.g.
    ``artifact.data.verdict``); ``tool.ToolResult.refused`` turns one into a tool result.
    """
    from artifacts_app import tool  # late: tool imports registry only, but keep services light

    agent = agent_get(agent)
    spec = spec_for(agent)
    tool.require_tool(spec)
    call = tool.parse_call(spec, input)
    try:
        return artifact_tag(
            agent=agent,
            kind=call.kind,
            key=call.key,
            title=call.title,
            data=call.data,
            session_id=session_id,
            turn_id=turn_id,
            source=Artifact.SOURCE_MODEL,
        )
    except ArtifactError as exc:
        raise tool.model_facing(exc) from None


# --- keys and tokens ------------------------------------------------------------------------


def _hash_secret(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def _new_secret(prefix: str) -> tuple[str, str]:
    public = prefix + secrets.token_hex(4)
    return public, f"{public}_{secrets.token_urlsafe(32)}"


def agent_key_create(*, agent: Agent | str, label: str = "") -> tuple[ApiKey, str]:
    """A new agent key: full rights over that one agent. The secret is returned once, never stored."""
    agent = agent_get(agent)
    public, secret = _new_secret(AGENT_KEY_PREFIX)
    key = ApiKey.objects.create(
        kind=ApiKey.KIND_AGENT,
        agent=agent,
        prefix=public,
        secret_hash=_hash_secret(secret),
        label=label[:100],
    )
    return key, secret


def user_token_create(*, user: AbstractBaseUser | str, label: str = "") -> tuple[ApiKey, str]:
    """A new user token: acts as that user. The secret is returned once, never stored."""
    user_obj = _user_get(user)
    public, secret = _new_secret(USER_TOKEN_PREFIX)
    key = ApiKey.objects.create(
        kind=ApiKey.KIND_USER,
        user=user_obj,
        prefix=public,
        secret_hash=_hash_secret(secret),
        label=label[:100],
    )
    return key, secret


def token_lookup(secret: str) -> ApiKey | None:
    """The active key or token with this secret, or None (unknown or revoked)."""
    if not isinstance(secret, str) or not secret.startswith((AGENT_KEY_PREFIX, USER_TOKEN_PREFIX)):
        return None
    return (
        ApiKey.objects.select_related("agent", "user")
        .filter(secret_hash=_hash_secret(secret), revoked_at__isnull=True)
        .first()
    )


def token_revoke(*, token: str) -> ApiKey:
    """Revoke the agent key or user token with this secret; unknown or revoked → ``NotFoundError``."""
    key = token_lookup(token)
    if key is None:
        raise NotFoundError(
            "unknown_token", "That token is unknown or already revoked; nothing was changed."
        )
    return api_key_revoke(key_id=key.pk)


def api_key_revoke(*, key_id: int) -> ApiKey:
    """Revoke a key or token by its row id (the admin's way: it never sees the secret)."""
    updated = ApiKey.objects.filter(pk=key_id, revoked_at__isnull=True).update(
        revoked_at=timezone.now()
    )
    if not updated:
        raise NotFoundError(
            "unknown_token", "That token is unknown or already revoked; nothing was changed."
        )
    return ApiKey.objects.get(pk=key_id)
