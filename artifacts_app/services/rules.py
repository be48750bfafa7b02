"""The Tag rules that need no database (API.md "Tag"): every entry point's input meets them here,
once, before anything is written (only whether a transaction is open is asked of the connection:
the share of validation time waits only outside one)."""

from __future__ import annotations

import re

from django.conf import settings
from django.db import transaction

from artifacts_app import media
from artifacts_app.errors import ArtifactError, TooLargeError
from artifacts_app.jsontypes import JSON
from artifacts_app.models import Artifact
from artifacts_app.names import KIND_RE, SESSION_ID_RE
from artifacts_app.registry import FREEFORM_KIND, AgentSpec
from artifacts_app.tag_input import (
    CONTENTS_SHA256,
    CONTENTS_SIZE,
    KEY,
    SESSION_ID,
    SHA256_PATTERN,
    SOURCE,
    TITLE,
    TURN_ID,
    UPLOAD,
    UPLOAD_ID_PATTERN,
    TagField,
)
from artifacts_app.values import check_text, check_value

SOURCES = (Artifact.SOURCE_HOST, Artifact.SOURCE_MODEL)
_UPLOAD_RE = re.compile(UPLOAD_ID_PATTERN)
_SHA256_RE = re.compile(SHA256_PATTERN)


def _check_contents_source(
    *, has_contents: bool, upload: JSON, contents_sha256: JSON, contents_size: JSON
) -> None:
    # The contents come one way at most: bytes, a finished upload, or known contents (hash and
    # size, both).
    if upload is not None and not (isinstance(upload, str) and _UPLOAD_RE.fullmatch(upload)):
        raise ArtifactError(
            UPLOAD.code, "`upload` is an upload's id, as POST uploads made it.", {"field": "upload"}
        )
    if contents_sha256 is not None and not (
        isinstance(contents_sha256, str) and _SHA256_RE.fullmatch(contents_sha256)
    ):
        raise ArtifactError(
            CONTENTS_SHA256.code,
            "`contentsSha256` is the contents' sha256 as 64 lowercase hex digits.",
            {"field": CONTENTS_SHA256.name},
        )
    if contents_size is not None and (
        isinstance(contents_size, bool)
        or not isinstance(contents_size, int)
        or not 0 <= contents_size < 2**63
    ):
        raise ArtifactError(
            CONTENTS_SIZE.code,
            "`contentsSize` is the contents' size in bytes: a whole number, 0 or more.",
            {"field": CONTENTS_SIZE.name},
        )
    if (contents_sha256 is None) != (contents_size is None):
        missing = CONTENTS_SIZE if contents_size is None else CONTENTS_SHA256
        raise ArtifactError(
            "known_contents_incomplete",
            "Known contents take both `contentsSha256` and `contentsSize`.",
            {"field": missing.name},
        )
    ways = [has_contents, upload is not None, contents_sha256 is not None]
    if sum(ways) > 1:
        raise ArtifactError(
            "contents_conflict",
            "Send the contents one way: `contents`/`contentsBase64` (or a file part), `upload`, "
            "or `contentsSha256` with `contentsSize`.",
            {"fields": ["contents", "contentsBase64", "upload", "contentsSha256"]},
        )


def check_session_id(sid: JSON, *, field: str) -> None:
    if not isinstance(sid, str) or not SESSION_ID_RE.fullmatch(sid):
        raise ArtifactError(
            "invalid_session_id",
            f"`{field}` is 1–128 of A-Z a-z 0-9 . _ : - starting with a letter or digit."
            if field != "id"
            else "A session id is 1–128 of A-Z a-z 0-9 . _ : - starting with a letter or digit.",
            {"field": field},
        )


def _check_text(value: JSON, declared: TagField) -> None:
    # The limit and the code are the declaration's (tag_input), as the schema shows them.
    if value is None:
        return
    field, code = declared.name, declared.code
    if not isinstance(value, str):
        raise ArtifactError(code, f"`{field}` must be a string or null.", {"field": field})
    limit = declared.max_length
    if limit is not None and len(value) > limit:
        raise ArtifactError(
            code, f"`{field}` is {len(value)} characters; the limit is {limit}.", {"field": field}
        )
    check_text(value, field=field, code=code)


def _resolve_kind(spec: AgentSpec, kind: JSON) -> str:
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


def parse_data(spec: AgentSpec, kind: str, data: JSON) -> JSON:
    """Validate ``data`` against the kind's schema and return the JSON form of the parsed value."""
    if data is None:
        raise ArtifactError(
            "data_required", "`data` is required and may not be null.", {"field": "data"}
        )
    declared = spec.kinds.get(kind)
    if declared is None:
        return data
    # The agent's share of validation time (registry.SchemaKind.parse) waits only where no
    # transaction is open: never under the agent's lock (a restore, a content PUT's second check).
    wait = not transaction.get_connection().in_atomic_block
    return declared.parse(kind, data, agent=spec.slug, wait=wait)


def _check_content_type(content_type: JSON, *, has_contents: bool) -> None:
    if content_type is None:
        return
    # Parsed, not pattern-matched (media.py): exactly one media type, or 400 invalid_content_type.
    media.canonical(content_type if isinstance(content_type, str) else "")
    if not has_contents:
        raise ArtifactError(
            "content_type_without_contents",
            "`contentType` was given without contents; send the contents too, or leave contentType out.",
            {"field": "contentType"},
        )


def _check_data_size(parsed: JSON) -> None:
    # The one check of what both databases can hold (API.md "Errors"), for every entry point:
    # what is stored is always what can be listed, read and replayed on SQLite and PostgreSQL.
    encoded = check_value(parsed, field="data", code="invalid_data")  # its JSON, encoded once
    limit = int(settings.ARTIFACTS_MAX_DATA_BYTES)
    size = len(encoded)
    if size > limit:
        raise TooLargeError(
            "data_too_large",
            f"`data` is {size} bytes as JSON; ARTIFACTS_MAX_DATA_BYTES allows {limit}. "
            "Move large payloads into contents.",
            {"field": "data", "limit": limit, "size": size},
        )


def tag_validate(
    *,
    spec: AgentSpec,
    kind: JSON,
    key: JSON,
    title: JSON,
    data: JSON,
    session_id: JSON,
    turn_id: JSON,
    source: JSON,
    has_contents: bool,
    content_type: JSON,
    upload: JSON = None,
    contents_sha256: JSON = None,
    contents_size: JSON = None,
) -> tuple[str, JSON]:
    """Every Tag rule that needs no database; answers the kind in force and the parsed data.
    ``has_contents``: bytes came (``contents``); ``upload`` and known contents are the other
    ways."""
    _check_contents_source(
        has_contents=has_contents,
        upload=upload,
        contents_sha256=contents_sha256,
        contents_size=contents_size,
    )
    has_contents = has_contents or upload is not None or contents_sha256 is not None
    _check_text(key, KEY)
    if key == "":
        raise ArtifactError(
            KEY.code,
            "`key` may not be empty: leave it out for an unkeyed record.",
            {"field": KEY.name},
        )
    _check_text(title, TITLE)
    _check_text(turn_id, TURN_ID)
    if session_id is not None:
        check_session_id(session_id, field=SESSION_ID.name)
    if source not in SOURCES:
        raise ArtifactError(SOURCE.code, '`source` is "host" or "model".', {"field": SOURCE.name})
    _check_content_type(content_type, has_contents=has_contents)
    kind_name = _resolve_kind(spec, kind)
    parsed = parse_data(spec, kind_name, data)
    _check_data_size(parsed)
    return kind_name, parsed
