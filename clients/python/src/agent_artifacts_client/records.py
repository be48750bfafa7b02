"""The record as the client hands it to host code: snake_case fields, aware datetimes.

The same field names as the server's in-process ``ArtifactRecord`` (API.md "In-process Python API"),
read from the camelCase JSON of API.md "The record".
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any


@dataclass(frozen=True)
class ContentInfo:
    size: int
    content_type: str
    sha256: str


@dataclass(frozen=True)
class ArtifactRecord:
    id: str
    kind: str
    key: str | None
    title: str | None
    data: Any
    session_id: str | None
    turn_id: str | None
    source: str
    content: ContentInfo | None
    created_at: datetime
    updated_at: datetime
    version: int = 1
    pinned: bool = False


def _ts(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def record_from_json(body: dict[str, Any]) -> ArtifactRecord:
    """A record's wire JSON as an ``ArtifactRecord``."""
    content = body.get("content")
    return ArtifactRecord(
        id=body["id"],
        kind=body["kind"],
        key=body.get("key"),
        title=body.get("title"),
        data=body.get("data"),
        session_id=body.get("sessionId"),
        turn_id=body.get("turnId"),
        source=body["source"],
        content=ContentInfo(content["size"], content["contentType"], content["sha256"])
        if content
        else None,
        created_at=_ts(body["createdAt"]),
        updated_at=_ts(body["updatedAt"]),
        version=body.get("version", 1),
        pinned=bool(body.get("pinned", False)),
    )
