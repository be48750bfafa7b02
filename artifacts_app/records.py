"""The record, one shape for every reader: ``ArtifactRecord`` in Python, camelCase JSON on the wire.

Rows are read with ``.values(*RECORD_FIELDS)`` (no model instances on hot paths, DESIGN.md §6) and
turned into either form here, so the REST list, the Python API, the admin export and the events all
render a record the same way.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeAlias

from artifacts_app.jsontypes import JSON, JSONObject

RECORD_FIELDS = (
    "id",
    "kind",
    "key",
    "title",
    "data",
    "session__sid",
    "turn_id",
    "source",
    "blob_id",
    "blob__size",
    "content_type",
    "version",
    "pinned",
    "created_at",
    "updated_at",
)

DEFAULT_BYTES_TYPE = "application/octet-stream"
DEFAULT_TEXT_TYPE = "text/plain; charset=utf-8"


def media_type(content_type: str | None) -> str:
    """The media type of a Content-Type value, without parameters, lower case."""
    return (content_type or "").split(";", 1)[0].strip().lower()


# A row of the ORM's ``.values()``: each field's Python value by name (text, numbers, aware
# datetimes, a JSON column's decoded value), which Django's stubs type as ``Any``.
ValuesRow: TypeAlias = Mapping[str, Any]


def iso_ms(value: datetime) -> str:
    """ISO-8601 UTC with milliseconds and ``Z``, as API.md says."""
    value = value.astimezone(UTC)
    return value.strftime("%Y-%m-%dT%H:%M:%S.") + f"{value.microsecond // 1000:03d}Z"


@dataclass(frozen=True)
class ContentInfo:
    size: int
    content_type: str
    sha256: str

    def to_json(self) -> JSONObject:
        return {"size": self.size, "contentType": self.content_type, "sha256": self.sha256}


@dataclass(frozen=True)
class ArtifactRecord:
    """One artifact as host code sees it (snake_case; ``to_json`` gives the wire form)."""

    id: str
    kind: str
    key: str | None
    title: str | None
    data: JSON
    session_id: str | None
    turn_id: str | None
    source: str
    content: ContentInfo | None
    created_at: datetime
    updated_at: datetime
    version: int = 1
    pinned: bool = False

    @classmethod
    def from_values(cls, row: ValuesRow) -> ArtifactRecord:
        content = None
        if row.get("blob_id"):
            content = ContentInfo(
                size=row["blob__size"],
                content_type=row.get("content_type") or DEFAULT_BYTES_TYPE,
                sha256=row["blob_id"],
            )
        return cls(
            id=row["id"],
            kind=row["kind"],
            key=row["key"],
            title=row["title"],
            data=row["data"],
            session_id=row["session__sid"],
            turn_id=row["turn_id"],
            source=row["source"],
            content=content,
            created_at=row["created_at"],
            updated_at=row["updated_at"],
            version=row.get("version", 1),
            pinned=bool(row.get("pinned", False)),
        )

    def to_json(self) -> JSONObject:
        return {
            "id": self.id,
            "kind": self.kind,
            "key": self.key,
            "title": self.title,
            "data": self.data,
            "sessionId": self.session_id,
            "turnId": self.turn_id,
            "source": self.source,
            "content": self.content.to_json() if self.content else None,
            "version": self.version,
            "pinned": self.pinned,
            "createdAt": iso_ms(self.created_at),
            "updatedAt": iso_ms(self.updated_at),
        }


def record_json(row: ValuesRow) -> JSONObject:
    """A ``.values(*RECORD_FIELDS)`` row straight to its wire form."""
    return ArtifactRecord.from_values(row).to_json()
