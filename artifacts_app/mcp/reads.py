"""What MCP reads: ``artifact://`` URIs, pages of resources, one record or version with its content.

Plain synchronous functions over ``selectors`` and ``access`` (the handlers run them on a thread),
so a caller sees through MCP exactly what REST shows it: the same visibility filters, the same
keyset pages (newest-updated first, never a COUNT or an OFFSET), the same 404 for hidden and
missing. The protocol's cursor is the REST list's cursor.
"""

from __future__ import annotations

import base64
import re
from dataclasses import dataclass

from artifacts_app import access, blobs, media, selectors
from artifacts_app.errors import ArtifactError, NotFoundError
from artifacts_app.jsontypes import JSON, JSONObject
from artifacts_app.models import Agent
from artifacts_app.names import ARTIFACT_ID_PATTERN
from artifacts_app.records import ArtifactRecord, media_type
from artifacts_app.selectors import versions

SCHEME = "artifact://"
INLINE_MAX = 1024 * 1024  # content up to this many bytes is read inline; past it, a link
PAGE = selectors.DEFAULT_LIMIT

_URI = re.compile(
    rf"^artifact://(?P<slug>[^/]+)/(?P<id>{ARTIFACT_ID_PATTERN})(?:/versions/(?P<n>[0-9]{{1,10}}))?$"
)
# Text we hand over as text; everything else (or text that does not decode) is base64.
_TEXT_TYPES = frozenset(
    {
        "application/json",
        "application/xml",
        "application/javascript",
        "application/yaml",
        "application/x-yaml",
        "application/toml",
        "application/x-ndjson",
        "application/sql",
        "image/svg+xml",
    }
)


def record_uri(slug: str, artifact_id: str) -> str:
    return f"{SCHEME}{slug}/{artifact_id}"


def version_uri(slug: str, artifact_id: str, number: int) -> str:
    return f"{SCHEME}{slug}/{artifact_id}/versions/{number}"


def record_template(slug: str) -> str:
    return f"{SCHEME}{slug}/{{id}}"


def version_template(slug: str) -> str:
    return f"{SCHEME}{slug}/{{id}}/versions/{{version}}"


@dataclass(frozen=True)
class Target:
    artifact_id: str
    version: int | None


def parse_uri(slug: str, uri: str) -> Target:
    """A URI of this agent's records, or ``NotFoundError`` naming what a URI here looks like."""
    match = _URI.match(uri)
    if match is None or match["slug"] != slug:
        raise NotFoundError(
            "unknown_resource",
            f"{uri!r} is not a resource of agent {slug!r}; its resources are "
            f"{record_uri(slug, '<id>')} and {version_uri(slug, '<id>', 1)}.",
            {"field": "uri"},
        )
    number = match["n"]
    return Target(match["id"], versions.check_number(number) if number is not None else None)


def content_url(base_url: str, slug: str, artifact_id: str, version: int | None = None) -> str:
    """The HTTP route that serves the content (API.md "Content"): ranges, ETag, streaming."""
    path = f"/{slug}/v1/artifacts/{artifact_id}"
    if version is not None:
        path += f"/versions/{version}"
    return f"{base_url}{path}/content"


def record_json(record: ArtifactRecord, base_url: str, slug: str, *, versioned: bool) -> dict:
    """The record's wire form, plus ``contentUrl`` when it has content."""
    wire = record.to_json()
    if record.content is not None:
        wire["contentUrl"] = content_url(
            base_url, slug, record.id, record.version if versioned else None
        )
    return wire


def resource_of(record: ArtifactRecord, slug: str) -> JSONObject:
    """A resources/list entry (``mcp_types.Resource`` fields)."""
    name = record.title or record.key or record.id
    what = f"{record.kind} artifact, version {record.version}"
    if record.content is not None:
        what += f", with {record.content.size} bytes of {record.content.content_type}"
    return {
        "uri": record_uri(slug, record.id),
        "name": name,
        "title": record.title,
        "description": what,
        "mimeType": "application/json",
    }


def list_page(
    call_agent: Agent,
    caller: access.Caller,
    *,
    cursor: str | None,
    limit: int | None = PAGE,
    kind: str | None = None,
    session_id: str | None = None,
    q: str | None = None,
    where: str | JSON | None = None,
) -> selectors.Page:
    """One keyset page of the records the caller may see: REST's list, the same filter and
    search."""
    visible = access.visible(caller, call_agent)
    return selectors.artifacts_page(
        agent=call_agent,
        visible=visible,
        kind=kind,
        session_id=session_id,
        q=q or None,
        where=where,
        limit=limit,
        cursor=cursor or None,
    )


def read_target(agent: Agent, caller: access.Caller, target: Target) -> ArtifactRecord:
    """The record, or the version, the caller may see (404 otherwise, as REST)."""
    if target.version is None:
        visible = access.visible(caller, agent)
        return selectors.artifact_get(agent=agent, artifact_id=target.artifact_id, visible=visible)
    return versions.version_get(
        agent=agent,
        artifact_id=target.artifact_id,
        number=target.version,
        visible=access.visible(caller, agent),
    )


def _is_text(content_type: str) -> bool:
    kind = media_type(content_type)
    return kind.startswith("text/") or kind in _TEXT_TYPES or kind.endswith(("+json", "+xml"))


def _charset(content_type: str) -> str | None:
    """The content's text encoding (UTF-8 unless it names one); None for a charset that is not a
    text encoding (``media.TEXT_ENCODINGS``): the content is then given as bytes."""
    parsed = media.parse(content_type)
    charset = parsed.param("charset") if parsed is not None else None
    return "utf-8" if charset is None else media.text_encoding(charset)


def _text(raw: bytes, charset: str | None) -> str | None:
    if charset is None:
        return None
    try:
        return raw.decode(charset)
    except UnicodeDecodeError:
        return None


@dataclass(frozen=True)
class Contents:
    """What resources/read answers: the record as JSON, then the content inline or its link."""

    record: JSONObject
    content_uri: str | None = None
    content_type: str | None = None
    text: str | None = None
    blob: str | None = None  # base64
    link: str | None = None  # the HTTP content route, for content past INLINE_MAX


def read_contents(
    agent: Agent, caller: access.Caller, target: Target, base_url: str
) -> tuple[ArtifactRecord, Contents]:
    record = read_target(agent, caller, target)
    wire = record_json(record, base_url, agent.slug, versioned=target.version is not None)
    content = record.content
    if content is None:
        return record, Contents(record=wire)
    uri = (
        record_uri(agent.slug, record.id)
        if target.version is None
        else version_uri(agent.slug, record.id, record.version)
    )
    uri += "/content"
    if content.size > INLINE_MAX:
        return record, Contents(
            record=wire,
            content_uri=uri,
            content_type=content.content_type,
            link=wire["contentUrl"],
        )
    raw = blobs.blob_read(content.sha256)
    if _is_text(content.content_type):
        text = _text(raw, _charset(content.content_type))
        if text is not None:
            return record, Contents(
                record=wire, content_uri=uri, content_type=content.content_type, text=text
            )
    return record, Contents(
        record=wire,
        content_uri=uri,
        content_type=content.content_type,
        blob=base64.b64encode(raw).decode("ascii"),
    )


def check_text_arg(arguments: JSONObject, name: str) -> str | None:
    """An optional string argument of a tool, or a refusal naming it."""
    value = arguments.get(name)
    if value is None or isinstance(value, str):
        return value
    raise ArtifactError("invalid_argument", f"`{name}` is a string or null.", {"field": name})
