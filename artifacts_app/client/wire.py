"""The wire forms the HTTP client reads and writes (API.md "The record")."""

from __future__ import annotations

import base64
from datetime import datetime
from typing import Any

from artifacts_app.records import ArtifactRecord, ContentInfo


def _ts(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def record_from_json(body: dict[str, Any]) -> ArtifactRecord:
    """A record's camelCase JSON as the ``ArtifactRecord`` host code inside the server sees."""
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


def tag_body(
    *,
    data: Any,
    kind: str | None,
    key: str | None,
    title: str | None,
    session_id: str | None,
    turn_id: str | None,
    source: str | None,
    content_type: str | None,
) -> dict[str, Any]:
    """The JSON of a tag, without contents; fields left as None are left out."""
    body = {
        "kind": kind,
        "key": key,
        "title": title,
        "data": data,
        "sessionId": session_id,
        "turnId": turn_id,
        "source": source,
        "contentType": content_type,
    }
    return {name: value for name, value in body.items() if value is not None or name == "data"}


def inline_contents(body: dict[str, Any], contents: str | bytes) -> dict[str, Any]:
    if isinstance(contents, str):
        return {**body, "contents": contents}
    return {**body, "contentsBase64": base64.b64encode(contents).decode("ascii")}
