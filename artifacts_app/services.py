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
from django.utils import timezone
from pydantic import ValidationError

from artifacts_app import blobs, hotsql, media, values
from artifacts_app.errors import ArtifactError, ConflictError, NotFoundError, TooLargeError
from artifacts_app.events import DELETED, TAGGED, EventBatch
from artifacts_app.models import Agent, ApiKey, Artifact, Session
from artifacts_app.records import (
    DEFAULT_BYTES_TYPE,
    DEFAULT_TEXT_TYPE,
    ArtifactRecord,
    ContentInfo,
)
from artifacts_app.registry import (
    DEFAULT_MAX,
    FREEFORM_KIND,
    KIND_RE,
    SLUG_RE,
    AgentSpec,
    slug_problem,
    spec_for,
)

SESSION_ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,127}")
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
    # A string that cannot be a slug names no agent: answered without a query, so that a NUL or a
    # lone surrogate in a URL never reaches SQL (PostgreSQL would refuse it with a 500).
    found = hotsql.agent_by_slug(agent) if isinstance(agent, str) and SLUG_RE.fullmatch(agent) else None
    if found is None:
        raise NotFoundError("unknown_agent", f"There is no agent {agent!r}.")
    return found


def agent_create(*, slug: str, max_artifacts: int = DEFAULT_MAX) -> Agent:
    """A freeform agent (no module): any non-empty kind, no tool, capped at ``max_artifacts``."""
    problem = slug_problem(slug)
    if problem:
        raise ArtifactError("invalid_slug", problem)
    if isinstance(max_artifacts, bool) or not isinstance(max_artifacts, int) or max_artifacts < 1:
        raise ArtifactError(
            "invalid_max", f"max must be a whole number of at least 1; got {max_artifacts!r}."
        )
    try:
        with transaction.atomic():
            return Agent.objects.create(slug=slug, max_artifacts=max_artifacts)
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
        if isinstance(user, str) and values.text_problem(user) is None
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
    values.check_text(value, field=field, code=code)


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


def _encoded_json(data: Any) -> bytes:
    try:
        return orjson.dumps(data)
    except (TypeError, orjson.JSONEncodeError) as exc:
        raise ArtifactError(
            "invalid_data", f"`data` must be JSON: {exc}.", {"field": "data"}
        ) from None


def _check_content_type(content_type: Any) -> None:
    # Parsed, not pattern-matched (media.py): exactly one media type, or 400 invalid_content_type.
    if content_type is None:
        return
    if not isinstance(content_type, str):
        media.canonical("", field="contentType")
    media.canonical(content_type)


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
    # The one check of what both databases can hold (API.md "Errors"), for every entry point:
    # what is stored is always what can be listed, read and replayed on SQLite and PostgreSQL.
    values.check_value(parsed, field="data", code="invalid_data")
    encoded = _encoded_json(parsed)
    size = len(encoded)
    if size > limit:
        raise TooLargeError(
            "data_too_large",
            f"`data` is {size} bytes as JSON; ARTIFACTS_MAX_DATA_BYTES allows {limit}. "
            "Move large payloads into contents.",
            {"field": "data", "limit": limit, "size": size},
        )
    return kind_name, parsed


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

    ``contents`` may be bytes, a str (stored as UTF-8) or a binary file, which is streamed.
    Answers the stored record and whether it was created. Refusals raise ``ArtifactError`` and
    leave no record, no blob row, no event and no counter change.
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
    if contents is not None and session_id is not None:
        if hotsql.session_pk(agent.pk, session_id) is None:
            # Checked before the blob is written, to leave no garbage; checked again under the lock.
            raise _unknown_session(agent, session_id)

    if content_type is not None:
        content_type = media.canonical(content_type)  # stored and served as parsed
    stored: blobs.StoredBlob | None = None
    if contents is not None:
        stored = blobs.blob_put(contents)
        if content_type is None:
            content_type = DEFAULT_TEXT_TYPE if isinstance(contents, str) else DEFAULT_BYTES_TYPE

    with transaction.atomic():
        count, last_seq = _lock_agent(agent)
        session_pk = None
        if session_id is not None:
            session_pk = hotsql.session_pk(agent.pk, session_id)
            if session_pk is None:
                raise _unknown_session(agent, session_id)
        now = timezone.now()
        if stored is not None:
            hotsql.blob_insert(stored.sha256, stored.size, now)

        artifact_id = keyed_id(agent.slug, key) if key is not None else new_id()
        previous = hotsql.artifact_previous(artifact_id) if key is not None else None
        content: ContentInfo | None = None
        if stored is not None:
            content = ContentInfo(stored.size, content_type or DEFAULT_BYTES_TYPE, stored.sha256)
        elif previous and previous["blob_id"] and previous["session_id"] == session_pk:
            # Rule 3: a re-tag without contents keeps its content while the session stays. A new
            # record without contents, or one that changed session, has none: old content must
            # not follow a record into another user's session.
            content = ContentInfo(
                previous["blob_size"],
                previous["content_type"] or DEFAULT_BYTES_TYPE,
                previous["blob_id"],
            )
        fields: dict[str, Any] = {
            "kind": kind_name,
            "key": key,
            "title": title,
            "data": parsed,
            "session_id": session_pk,
            "turn_id": turn_id,
            "source": source,
            "blob_id": content.sha256 if content else None,
            "content_type": content.content_type if content else None,
            "updated_at": now,
        }
        if previous is not None:
            Artifact.objects.filter(pk=artifact_id).update(**fields)
            created_at = previous["created_at"]
        else:
            Artifact.objects.create(id=artifact_id, agent_id=agent.pk, created_at=now, **fields)
            created_at = now
            count += 1

        record = ArtifactRecord(
            id=artifact_id,
            kind=kind_name,
            key=key,
            title=title,
            data=parsed,
            session_id=session_id,
            turn_id=turn_id,
            source=source,
            content=content,
            created_at=created_at,
            updated_at=now,
        )
        batch = EventBatch(agent_id=agent.pk, last_seq=last_seq)
        if previous is not None and previous["session_id"] is not None and previous["session_id"] != session_pk:
            # API.md "Events": a record moving out of a session first leaves it, so that a viewer
            # of the old session sees it go and never sees its new data.
            batch.add(
                DELETED,
                at=now,
                session_sid=previous["session_sid"],
                artifact_id=artifact_id,
                turn_id=turn_id,
                record={"id": artifact_id, "key": key, "kind": previous["kind"]},
                reason="moved",
            )
        batch.add(
            TAGGED,
            at=now,
            session_sid=session_id,
            artifact_id=artifact_id,
            turn_id=turn_id,
            record=record.event_summary(),
        )
        if count > spec.max:
            evicted = hotsql.evict_oldest(agent.pk, keep_id=artifact_id, count=count - spec.max)
            count -= _deleted_events(evicted, batch=batch, reason="evicted", at=now)
        batch.store()
        hotsql.agent_counters_save(agent.pk, artifact_count=count, last_seq=batch.last_seq)
    return TagResult(record=record, created=previous is None)


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
) -> int:
    """Delete the artifacts of ``agent`` with these ids, in one transaction; answers how many went.

    ``reason`` is ``deleted`` (a caller asked) or ``pruned`` (an operator's prune). Ids that do not
    exist are skipped: the caller decides whether that is an error. ``updated_at_most`` (prune)
    skips a record re-tagged since the caller chose it. A pruned record emits ``artifact.deleted``
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
            agent.pk, list(dict.fromkeys(ids)), updated_at_most=updated_at_most
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
    values.check_text(label, field="label", code="invalid_label")
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
    values.check_text(label, field="label", code="invalid_label")
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
