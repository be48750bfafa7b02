"""Reads of a record's history: its versions, one version, a diff (API.md "Versions, pins and diffs").

Like every read, each takes ``visible``, the filter ``access.visible`` gives the caller
(None: every version, as for the agent's key and staff). Visibility is by each version's own
session; a version the caller may not see answers 404 exactly like one that does not exist, by
number and through a diff alike.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass

import jsonpatch
from django.db.models import Q, QuerySet

from artifacts_app.errors import ArtifactError, NotFoundError
from artifacts_app.jsontypes import JSON, JSONObject
from artifacts_app.models import Agent, Artifact, ArtifactVersion
from artifacts_app.records import ArtifactRecord, ValuesRow
from artifacts_app.selectors.agents import agent_get
from artifacts_app.selectors.pages import check_limit

VERSION_FIELDS = (
    "number",
    "kind",
    "title",
    "data",
    "session_id",
    "session__sid",
    "turn_id",
    "source",
    "blob_id",
    "blob__size",
    "content_type",
    "created_at",
    "artifact_id",
    "artifact__key",
    "artifact__pinned",
    "artifact__created_at",
)
# The top-level fields a diff compares besides `data`, in their wire names.
DIFF_FIELDS = ("kind", "title", "sessionId", "turnId", "source", "content")


def version_record(row: ValuesRow) -> ArtifactRecord:
    """A version row as the record it was: its own fields and ``version`` = its number;
    ``updatedAt`` is the moment its tag committed, ``createdAt`` and ``pinned`` the record's.
    Built by the one record builder, ``ArtifactRecord.from_values``, from the row renamed."""
    return ArtifactRecord.from_values(
        {
            **row,
            "id": row["artifact_id"],
            "key": row["artifact__key"],
            "version": row["number"],
            "pinned": row["artifact__pinned"],
            "created_at": row["artifact__created_at"],
            "updated_at": row["created_at"],
        }
    )


def version_json(row: ValuesRow) -> JSONObject:
    return version_record(row).to_json()


@dataclass(frozen=True)
class VersionPage:
    rows: list[ValuesRow]
    next_cursor: str | None

    def records(self) -> list[ArtifactRecord]:
        return [version_record(row) for row in self.rows]


def _cursor_encode(number: int) -> str:
    return base64.urlsafe_b64encode(f"v|{number}".encode()).decode().rstrip("=")


def _cursor_decode(cursor: str) -> int:
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        tag, number = base64.urlsafe_b64decode(padded.encode()).decode().split("|", 1)
        if tag != "v" or not (number.isascii() and number.isdigit()) or len(number) > 10:
            raise ValueError
        return int(number)
    except (ValueError, UnicodeError, binascii.Error):
        raise ArtifactError(
            "invalid_cursor",
            "`cursor` is not one this server gave out; start again without it.",
            {"field": "cursor"},
        ) from None


def _unknown_artifact(agent: Agent, artifact_id: str) -> NotFoundError:
    return NotFoundError(
        "unknown_artifact", f"There is no artifact {artifact_id!r} in agent {agent.slug!r}."
    )


def _versions(agent: Agent, artifact_id: str, visible: Q | None) -> QuerySet[ArtifactVersion]:
    # The agent check is on the record: a version belongs to its record, the record to one agent.
    qs = ArtifactVersion.objects.filter(artifact_id=artifact_id, artifact__agent_id=agent.pk)
    return qs if visible is None else qs.filter(visible)


def versions_page(
    *,
    agent: Agent | str,
    artifact_id: str,
    visible: Q | None = None,
    limit: int | None = None,
    cursor: str | None = None,
) -> VersionPage:
    """The versions of a record the caller may see, newest first, a keyset page over the
    (artifact, number) constraint. A record with no version the caller may see is 404."""
    agent = agent_get(agent)
    size = check_limit(limit)
    qs = _versions(agent, artifact_id, visible)
    if cursor:
        qs = qs.filter(number__lt=_cursor_decode(cursor))
    rows = list(qs.order_by("-number").values(*VERSION_FIELDS)[: size + 1])
    if not rows and not cursor:
        raise _unknown_artifact(agent, artifact_id)
    next_cursor = None
    if len(rows) > size:
        rows = rows[:size]
        next_cursor = _cursor_encode(rows[-1]["number"])
    return VersionPage(rows=rows, next_cursor=next_cursor)


def versions_all(
    *, agent: Agent | str, artifact_id: str, visible: Q | None = None
) -> list[ArtifactRecord]:
    """Every version the caller may see, newest first (at most ``keep_versions`` of them)."""
    records: list[ArtifactRecord] = []
    cursor = None
    while True:
        page = versions_page(
            agent=agent, artifact_id=artifact_id, visible=visible, limit=500, cursor=cursor
        )
        records.extend(page.records())
        if page.next_cursor is None:
            return records
        cursor = page.next_cursor


def check_number(value: JSON, *, field: str = "version") -> int:
    """A version number from a path, a query or a caller: a whole number from 1, else 400."""
    number = 0
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, str) and value.isascii() and value.isdigit() and len(value) <= 10:
        number = int(value)
    if not 1 <= number <= 2**31 - 1:
        raise ArtifactError(
            "invalid_version",
            f"`{field}` is a version number: a whole number from 1.",
            {"field": field},
        )
    return number


def version_values(
    *, agent: Agent | str, artifact_id: str, number: int, visible: Q | None = None
) -> ValuesRow:
    """One version's row; missing, dropped (past ``keep_versions``) and hidden alike are 404."""
    agent = agent_get(agent)
    row = (
        _versions(agent, artifact_id, visible).filter(number=number).values(*VERSION_FIELDS).first()
    )
    if row is None:
        if not Artifact.objects.filter(agent_id=agent.pk, pk=artifact_id).exists() or (
            visible is not None and not _versions(agent, artifact_id, visible).exists()
        ):
            raise _unknown_artifact(agent, artifact_id)
        raise NotFoundError(
            "unknown_version",
            f"Artifact {artifact_id!r} has no version {number} that you may see "
            "(a record keeps only its newest versions).",
            {"version": number},
        )
    return row


def version_get(
    *, agent: Agent | str, artifact_id: str, number: int, visible: Q | None = None
) -> ArtifactRecord:
    return version_record(
        version_values(agent=agent, artifact_id=artifact_id, number=number, visible=visible)
    )


def _wire_fields(record: ArtifactRecord) -> JSONObject:
    wire = record.to_json()
    return {name: wire[name] for name in DIFF_FIELDS}


def versions_diff(
    *,
    agent: Agent | str,
    artifact_id: str,
    number: int,
    from_: int | None = None,
    visible: Q | None = None,
) -> JSONObject:
    """What changed from version ``from_`` to version ``number``: the top-level fields that differ
    (``{name: {"from", "to"}}``) and an RFC 6902 JSON Patch that turns ``from_``'s data into
    ``number``'s. ``from_`` None: the newest version before ``number`` that the caller may see."""
    agent = agent_get(agent)
    to_row = version_values(agent=agent, artifact_id=artifact_id, number=number, visible=visible)
    if from_ is None:
        before = (
            _versions(agent, artifact_id, visible)
            .filter(number__lt=number)
            .order_by("-number")
            .values(*VERSION_FIELDS)
            .first()
        )
        if before is None:
            raise NotFoundError(
                "unknown_version",
                f"Version {number} of {artifact_id!r} is the first one you may see: there is "
                "nothing before it to compare with; name another version with `from`.",
                {"field": "from"},
            )
        from_row = before
    else:
        from_row = version_values(
            agent=agent, artifact_id=artifact_id, number=from_, visible=visible
        )
    old, new = version_record(from_row), version_record(to_row)
    old_fields, new_fields = _wire_fields(old), _wire_fields(new)
    fields = {
        name: {"from": old_fields[name], "to": new_fields[name]}
        for name in DIFF_FIELDS
        if old_fields[name] != new_fields[name]
    }
    patch = jsonpatch.make_patch(old.data, new.data).patch
    return {"from": old.version, "to": new.version, "fields": fields, "data": patch}
