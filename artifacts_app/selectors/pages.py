"""Reads: visible artifacts and sessions as keyset pages, one record, one session (DESIGN.md §6, §7).

Every list is a keyset page over ``(updated_at, id)``, newest first, built from ``.values()`` rows.
``visible`` is the access filter from ``access`` (None: everything of the agent, as for its key).
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar

from django.db.models import Model, Q, QuerySet

from artifacts_app import search
from artifacts_app.errors import ArtifactError, NotFoundError
from artifacts_app.jsontypes import JSON, JSONObject
from artifacts_app.models import Agent, Artifact, Session
from artifacts_app.names import SLUG_RE, keyed_id
from artifacts_app.records import RECORD_FIELDS, ArtifactRecord, ValuesRow, iso_ms
from artifacts_app.selectors.agents import agent_get, session_pk
from artifacts_app.selectors.search import search_filter
from artifacts_app.values import check_text

M = TypeVar("M", bound=Model)

DEFAULT_LIMIT = 50
MAX_LIMIT = 500


@dataclass(frozen=True)
class Page:
    rows: list[ValuesRow]
    next_cursor: str | None

    def records(self) -> list[ArtifactRecord]:
        return [ArtifactRecord.from_values(row) for row in self.rows]


def cursor_encode(updated_at: datetime, artifact_id: str) -> str:
    raw = f"{updated_at.isoformat()}|{artifact_id}".encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def cursor_decode(cursor: str) -> tuple[datetime, str]:
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        stamp, artifact_id = base64.urlsafe_b64decode(padded.encode()).decode().split("|", 1)
        moment = datetime.fromisoformat(stamp)
        if moment.tzinfo is None or not artifact_id or "\x00" in artifact_id:
            raise ValueError
        # In UTC, as the database compares it: a crafted offset near year 1 or 9999 overflows here
        # (OverflowError), not in the query.
        return moment.astimezone(UTC), artifact_id
    except (ValueError, OverflowError, UnicodeError, binascii.Error):
        raise ArtifactError(
            "invalid_cursor",
            "`cursor` is not one this server gave out; start again without it.",
            {"field": "cursor"},
        ) from None


def before(moment: str, at: datetime, tiebreak: str, last: str | int) -> Q:
    """``(moment, tiebreak) < (at, last)`` in the form the planner can seek (DESIGN.md §6)."""
    return Q(**{f"{moment}__lte": at}) & (
        Q(**{f"{moment}__lt": at}) | Q(**{f"{tiebreak}__lt": last})
    )


def after(moment: str, at: datetime, tiebreak: str, last: str | int) -> Q:
    """``(moment, tiebreak) > (at, last)``, the same form mirrored (oldest-first walks)."""
    return Q(**{f"{moment}__gte": at}) & (
        Q(**{f"{moment}__gt": at}) | Q(**{f"{tiebreak}__gt": last})
    )


def keyset_page(
    qs: QuerySet[M],
    *,
    moment: str,
    tiebreak: str,
    fields: Sequence[str],
    size: int,
    cursor: str | None,
    tiebreak_of: Callable[[str], int] | None = None,
) -> Page:
    """One page of ``qs`` newest first by ``(moment, tiebreak)``, after ``cursor`` if given.

    The one keyset implementation behind every list. The predicate is written
    ``moment <= x AND (moment < x OR tiebreak < y)``: that form lets the planner seek the
    ``(…, moment, tiebreak)`` index, where the plain ``moment < x OR (moment = x AND tiebreak < y)``
    scans (DESIGN.md §6).
    """
    if cursor:
        at, last = cursor_decode(cursor)
        qs = qs.filter(before(moment, at, tiebreak, tiebreak_of(last) if tiebreak_of else last))
    rows: list[ValuesRow] = list(
        qs.order_by(f"-{moment}", f"-{tiebreak}").values(*fields)[: size + 1]
    )
    next_cursor = None
    if len(rows) > size:
        rows = rows[:size]
        next_cursor = cursor_encode(rows[-1][moment], str(rows[-1][tiebreak]))
    return Page(rows=rows, next_cursor=next_cursor)


def _row_id(last: str) -> int:
    """A session cursor's tiebreak: the row id, refused unless it is one this server gave out."""
    if not (last.isascii() and last.isdigit()) or len(last) > 18:
        raise ArtifactError(
            "invalid_cursor",
            "`cursor` is not one this server gave out; start again without it.",
            {"field": "cursor"},
        )
    return int(last)


def check_limit(limit: JSON) -> int:
    if limit is None:
        return DEFAULT_LIMIT
    try:
        value = int(limit)
    except (TypeError, ValueError):
        value = 0
    if isinstance(limit, bool) or value < 1 or value > MAX_LIMIT:
        raise ArtifactError(
            "invalid_limit", f"`limit` is a whole number from 1 to {MAX_LIMIT}.", {"field": "limit"}
        )
    return value


def artifacts_page(
    *,
    agent: Agent | str,
    visible: Q | None = None,
    kind: str | None = None,
    session_id: str | None = None,
    source: str | None = None,
    key: str | None = None,
    q: str | None = None,
    where: str | JSON | None = None,
    limit: int | None = DEFAULT_LIMIT,
    cursor: str | None = None,
) -> Page:
    """One page of the agent's artifacts, newest-updated first (ties by id descending); ``q``
    and ``where`` search them (API.md "Search": JSON text or the parsed object)."""
    agent = agent_get(agent)
    size = check_limit(limit)
    _check_filters(kind=kind, session_id=session_id, key=key, source=source)
    text, condition = search.check_q(q), search.check_where(where)
    qs = Artifact.objects.filter(agent_id=agent.pk)
    qs = search_filter(qs, text=text, where=condition, agent_id=agent.pk)
    if visible is not None:
        qs = qs.filter(visible)
    if kind is not None:
        qs = qs.filter(kind=kind)
    if source is not None:
        qs = qs.filter(source=source)
    if key is not None:
        qs = qs.filter(pk=keyed_id(agent.slug, key))
    if session_id is not None:
        found = session_pk(agent.pk, session_id)
        if found is None:
            return Page(rows=[], next_cursor=None)
        qs = qs.filter(session_id=found)
    return keyset_page(
        qs, moment="updated_at", tiebreak="id", fields=RECORD_FIELDS, size=size, cursor=cursor
    )


def _check_filters(
    *,
    kind: str | None,
    session_id: str | None,
    key: str | None,
    source: str | None,
    agents: Sequence[str] | None = None,
) -> None:
    """The list's text filters, as one agent's list and the list across agents take them: each
    a text the database can hold, else 400 ``invalid_query`` naming it."""
    for name, value in (
        ("kind", kind),
        ("sessionId", session_id),
        ("key", key),
        ("source", source),
        *(("agent", slug) for slug in agents or ()),
    ):
        check_text(value, field=name, code="invalid_query")


ACROSS_FIELDS = (*RECORD_FIELDS, "agent__slug")
MAX_AGENTS = 100


def artifacts_across(
    *,
    visible: Q | None,
    agents: Sequence[str] | None = None,
    kind: str | None = None,
    session_id: str | None = None,
    source: str | None = None,
    key: str | None = None,
    q: str | None = None,
    where: str | JSON | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    limit: int | None = DEFAULT_LIMIT,
    cursor: str | None = None,
) -> Page:
    """One page of artifacts across agents (API.md "Search", ``GET /api/v1/artifacts``), newest-
    updated first (ties by id), each row with its ``agent__slug``: the list of ``artifacts_page``
    with the same filters and search, over the agents named in ``agents`` (None: all), narrowed by
    ``visible`` (``access.visible_across``: None for staff, the caller's sessions for a user, its
    own agent for an agent key). ``since``/``until`` bound ``updated_at`` (``since`` included,
    ``until`` excluded: the admin's home)."""
    size = check_limit(limit)
    _check_filters(kind=kind, session_id=session_id, key=key, source=source, agents=agents)
    if agents is not None and len(agents) > MAX_AGENTS:
        raise ArtifactError(
            "invalid_query",
            f"Name at most {MAX_AGENTS} agents.",
            {"field": "agent", "max": MAX_AGENTS},
        )
    for slug in agents or ():
        if not SLUG_RE.fullmatch(slug):
            raise ArtifactError(
                "invalid_query",
                f"`agent` is an agent's slug (lower-case letters, digits and -), not {slug!r}.",
                {"field": "agent"},
            )
    text, condition = search.check_q(q), search.check_where(where)
    qs = Artifact.objects.all()
    if visible is not None:
        qs = qs.filter(visible)
    if agents:
        found = dict(
            Agent.objects.filter(slug__in=set(agents)).order_by().values_list("pk", "slug")
        )
        if not found:
            return Page(rows=[], next_cursor=None)
        qs = qs.filter(agent_id__in=sorted(found))
        if key is not None:
            qs = qs.filter(pk__in=[keyed_id(slug, key) for slug in found.values()])
    if kind is not None:
        qs = qs.filter(kind=kind)
    if source is not None:
        qs = qs.filter(source=source)
    if key is not None:
        qs = qs.filter(key=key)
    if session_id is not None:
        qs = qs.filter(session__sid=session_id)
    if since is not None:
        qs = qs.filter(updated_at__gte=since)
    if until is not None:
        qs = qs.filter(updated_at__lt=until)
    qs = search_filter(qs, text=text, where=condition)
    return keyset_page(
        qs, moment="updated_at", tiebreak="id", fields=ACROSS_FIELDS, size=size, cursor=cursor
    )


KINDS_SAMPLE = 1000


def kinds_recent(
    *, agents: Sequence[str] | None = None, visible: Q | None = None, sample: int = KINDS_SAMPLE
) -> list[str]:
    """The kinds among the newest ``sample`` records (of the agents named ``agents``; None: all;
    narrowed by ``visible``), sorted: a bounded walk of the ``(updated_at, id)`` index, where a
    DISTINCT would read every row."""
    qs = Artifact.objects.all()
    if agents:
        qs = qs.filter(agent__slug__in=list(agents))
    if visible is not None:
        qs = qs.filter(visible)
    recent = qs.order_by("-updated_at", "-id").values_list("kind", flat=True)[:sample]
    return sorted(set(recent))


def artifacts_all(**filters: Any) -> list[ArtifactRecord]:
    """Every matching record, newest-updated first, walking the keyset pages."""
    records: list[ArtifactRecord] = []
    cursor = None
    while True:
        page = artifacts_page(limit=MAX_LIMIT, cursor=cursor, **filters)
        records.extend(page.records())
        if page.next_cursor is None:
            return records
        cursor = page.next_cursor


def artifact_values(*, agent: Agent | str, artifact_id: str, visible: Q | None = None) -> ValuesRow:
    """One record's row; missing and hidden alike raise ``NotFoundError`` (DESIGN.md §7)."""
    agent = agent_get(agent)
    qs = Artifact.objects.filter(agent_id=agent.pk, pk=artifact_id)
    if visible is not None:
        qs = qs.filter(visible)
    row = qs.values(*RECORD_FIELDS).first()
    if row is None:
        raise NotFoundError(
            "unknown_artifact", f"There is no artifact {artifact_id!r} in agent {agent.slug!r}."
        )
    return row


def artifact_get(
    *, agent: Agent | str, artifact_id: str, visible: Q | None = None
) -> ArtifactRecord:
    return ArtifactRecord.from_values(
        artifact_values(agent=agent, artifact_id=artifact_id, visible=visible)
    )


# --- sessions (REST) ------------------------------------------------------------------------

SESSION_FIELDS = ("pk", "sid", "owner__username", "created_at")


def session_json(row: ValuesRow) -> JSONObject:
    """A ``.values(*SESSION_FIELDS)`` row in its wire form."""
    return {
        "id": row["sid"],
        "owner": row["owner__username"],
        "createdAt": iso_ms(row["created_at"]),
    }


def sessions_page(
    *,
    agent: Agent | str,
    visible: Q | None = None,
    limit: int | None = DEFAULT_LIMIT,
    cursor: str | None = None,
) -> Page:
    """One page of the agent's sessions the caller may see, newest first (ties by row id)."""
    agent = agent_get(agent)
    size = check_limit(limit)
    qs = Session.objects.filter(agent_id=agent.pk)
    if visible is not None:
        qs = qs.filter(visible)
    return keyset_page(
        qs,
        moment="created_at",
        tiebreak="pk",
        fields=SESSION_FIELDS,
        size=size,
        cursor=cursor,
        tiebreak_of=_row_id,
    )


def session_values(*, agent: Agent | str, sid: str, visible: Q | None = None) -> ValuesRow:
    """One session's row; missing and hidden alike raise ``NotFoundError``."""
    agent = agent_get(agent)
    qs = Session.objects.filter(agent_id=agent.pk, sid=sid)
    if visible is not None:
        qs = qs.filter(visible)
    row = qs.values(*SESSION_FIELDS).first()
    if row is None:
        raise NotFoundError(
            "unknown_session", f"There is no session {sid!r} in agent {agent.slug!r}."
        )
    return row
