"""The events, declared once: each type's name and payload, as API.md "Events" gives them.

Every stored event's payload is built by this module's constructor for its type (``tagged``,
``deleted``, ``pinned``), which ``events.EventBatch`` calls; the fan-out forwards the payload, the
websockets send it as it is, MCP's watch reads it as declared here, and the webhooks send it with
the agent's slug added. The names (``TAGGED``…), the delete reasons (``REASONS``) and the fields
listed in the docs are read from the declarations (``EVENT_TYPES``, ``fields``), not written again:
a new event type, or a new field, is added here and nowhere else.

The payloads are TypedDicts because they are plain JSON objects everywhere they go (a JSON column,
a msgpack layer message, a websocket frame): the declaration types them without wrapping them.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal, TypedDict, cast, get_args, get_type_hints

from artifacts_app.jsontypes import JSON, JSONObject
from artifacts_app.records import ArtifactRecord, iso_ms

DeleteReason = Literal["deleted", "evicted", "pruned", "moved"]


class TaggedRecord(TypedDict):
    """The ``record`` of ``artifact.tagged``: the record as that tag stored it, without content."""

    id: str
    kind: str
    key: str | None
    title: str | None
    data: JSON
    source: str
    version: int
    pinned: bool


class DeletedRecord(TypedDict):
    """The ``record`` of ``artifact.deleted``: which record left (never its data)."""

    id: str
    key: str | None
    kind: str


class PinnedRecord(TypedDict):
    """The ``record`` of ``artifact.pinned``: which record, and its pin now."""

    id: str
    key: str | None
    kind: str
    pinned: bool


class Tagged(TypedDict):
    """A tag (or a restore) stored a record."""

    type: Literal["artifact.tagged"]
    seq: int
    sessionId: str | None
    at: str
    record: TaggedRecord


class Deleted(TypedDict):
    """A record left: deleted by a caller, evicted past ``max``, pruned, or moved out of the
    session (``sessionId`` is the session it left)."""

    type: Literal["artifact.deleted"]
    seq: int
    sessionId: str | None
    at: str
    record: DeletedRecord
    reason: DeleteReason


class Pinned(TypedDict):
    """A record was pinned or unpinned."""

    type: Literal["artifact.pinned"]
    seq: int
    sessionId: str | None
    at: str
    record: PinnedRecord


Event = Tagged | Deleted | Pinned
"""Any stored event's payload."""


class ReplayTruncated(TypedDict):
    """Not an event (it is never stored and has no ``seq``): the first frame of a websocket whose
    ``after`` is older than the stored events."""

    type: Literal["replay.truncated"]
    after: int
    oldestSeq: int
    message: str


def type_name(declared: type) -> str:
    """The ``type`` a declaration's payloads carry (its ``Literal``)."""
    (name,) = get_args(get_type_hints(declared)["type"])
    return str(name)


def fields(declared: type) -> tuple[str, ...]:
    """The payload's fields, in the order they are sent."""
    return tuple(get_type_hints(declared))


def record_fields(declared: type) -> tuple[str, ...]:
    """The fields of the payload's ``record``."""
    return fields(get_type_hints(declared)["record"])


EVENT_TYPES: dict[str, type] = {type_name(t): t for t in (Tagged, Deleted, Pinned)}
"""Every event type by name, in the order API.md introduces them."""

TAGGED, DELETED, PINNED = EVENT_TYPES
REASONS: tuple[str, ...] = get_args(DeleteReason)


def tagged(*, seq: int, session_sid: str | None, at: datetime, record: ArtifactRecord) -> Tagged:
    return {
        "type": "artifact.tagged",
        "seq": seq,
        "sessionId": session_sid,
        "at": iso_ms(at),
        "record": {
            "id": record.id,
            "kind": record.kind,
            "key": record.key,
            "title": record.title,
            "data": record.data,
            "source": record.source,
            "version": record.version,
            "pinned": record.pinned,
        },
    }


def deleted(
    *,
    seq: int,
    session_sid: str | None,
    at: datetime,
    artifact_id: str,
    key: str | None,
    kind: str,
    reason: str,
) -> Deleted:
    if reason not in REASONS:
        raise ValueError(f"unknown delete reason {reason!r}")
    return {
        "type": "artifact.deleted",
        "seq": seq,
        "sessionId": session_sid,
        "at": iso_ms(at),
        "record": {"id": artifact_id, "key": key, "kind": kind},
        "reason": cast(DeleteReason, reason),
    }


def pinned(
    *,
    seq: int,
    session_sid: str | None,
    at: datetime,
    artifact_id: str,
    key: str | None,
    kind: str,
    pinned: bool,
) -> Pinned:
    return {
        "type": "artifact.pinned",
        "seq": seq,
        "sessionId": session_sid,
        "at": iso_ms(at),
        "record": {"id": artifact_id, "key": key, "kind": kind, "pinned": pinned},
    }


def stored(payloads: list[JSONObject]) -> list[Event]:
    """Payloads read back (from the event table, from a layer message): they were built by the
    constructors above, so they are read as declared, without being checked again."""
    return cast(list[Event], payloads)
