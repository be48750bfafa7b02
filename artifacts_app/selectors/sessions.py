"""Sessions at a glance (owner, creation, last activity, a bounded artifact count) and a session's
newest artifacts grouped by turn: the admin's session pages and the playground's picker read here.

Every figure is a bounded, indexed read, so a page costs the same at a thousand or a million
records (tests/admin/test_session_queries.py counts the statements at 1k and 100k):
- last activity: the newest ``updated_at`` of the session's artifacts, one backward seek of the
  ``(session, updated_at, id)`` index per session row (the session's creation when it has none);
- the artifact count: ``COUNT(*)`` over at most ``cap + 1`` entries of that same index, so a page
  says "100+" rather than paying for an exact count of a large session. No counter is kept: an
  exact one would have to be maintained by every tag, move, delete, eviction and prune;
- search by id: the exact id through the ``(agent, sid)`` unique index, then ids that start with
  the text among the agent's newest ``SEARCH_WINDOW`` sessions: a range of ``session_agent_newest``
  bounded by the window's oldest creation time (a prefix can use no index under PostgreSQL's
  non-C collations, nor under SQLite's case-insensitive LIKE).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime

from django.db import connection
from django.db.models import OuterRef, Q, QuerySet, Subquery
from django.db.models.expressions import RawSQL

from artifacts_app.errors import ArtifactError, NotFoundError
from artifacts_app.models import Agent, Artifact, Session
from artifacts_app.records import ArtifactRecord, ValuesRow
from artifacts_app.selectors._sql import aware
from artifacts_app.selectors.agents import agent_get
from artifacts_app.selectors.pages import (
    DEFAULT_LIMIT,
    SESSION_FIELDS,
    Page,
    _row_id,
    artifacts_page,
    check_limit,
    keyset_page,
)
from artifacts_app.values import check_text

PICKER_CAP = 100  # a list of sessions counts each one's artifacts up to this, then says "100+"
SESSION_CAP = 1000  # one session's page counts up to this
SEARCH_WINDOW = 5000  # prefix search looks at the agent's newest sessions only
TURN_WINDOW = 200  # a session's page groups its newest artifacts by turn, this many at most

SUMMARY_FIELDS = (*SESSION_FIELDS, "last_activity", "artifact_count")


def _bounded_count(cap: int) -> RawSQL:
    """The session row's artifacts, counted up to ``cap + 1`` (more than ``cap`` means "cap+")."""
    quote = connection.ops.quote_name
    artifacts, sessions = quote(Artifact._meta.db_table), quote(Session._meta.db_table)
    # The ORDER BY is the index's own order: without it PostgreSQL may plan the LIMIT as a
    # sequential scan expected to stop early, which reads the whole table for a small session
    # (measured: 35 ms a session at 100k records, against an index walk of at most cap + 1).
    return RawSQL(
        f"SELECT COUNT(*) FROM (SELECT 1 FROM {artifacts} bounded_a "
        f"WHERE bounded_a.session_id = {sessions}.id "
        "ORDER BY bounded_a.updated_at DESC, bounded_a.id DESC LIMIT %s) bounded",
        [cap + 1],
    )


def with_activity(qs: QuerySet[Session], *, cap: int) -> QuerySet[Session]:
    """``qs`` (sessions) annotated with ``last_activity`` and ``artifact_count`` (bounded)."""
    newest = (
        Artifact.objects.filter(session_id=OuterRef("pk"))
        .order_by("-updated_at", "-id")
        .values("updated_at")[:1]
    )
    return qs.annotate(last_activity=Subquery(newest), artifact_count=_bounded_count(cap))


@dataclass(frozen=True)
class SessionSummary:
    sid: str
    pk: int
    owner: str | None
    created_at: datetime
    last_activity: datetime
    artifact_count: int
    count_capped: bool  # the true count is above ``artifact_count``

    @classmethod
    def from_row(cls, row: ValuesRow, *, cap: int) -> SessionSummary:
        count = int(row["artifact_count"] or 0)
        last = row["last_activity"]
        if isinstance(last, str):  # SQLite may hand a subquery's datetime back as text
            last = aware(last)
        return cls(
            sid=row["sid"],
            pk=row["pk"],
            owner=row["owner__username"],
            created_at=row["created_at"],
            last_activity=last or row["created_at"],
            artifact_count=min(count, cap),
            count_capped=count > cap,
        )

    @property
    def count_label(self) -> str:
        return f"{self.artifact_count}+" if self.count_capped else str(self.artifact_count)


def _sessions(agent: Agent, visible: Q | None) -> QuerySet[Session]:
    qs = Session.objects.filter(agent_id=agent.pk)
    return qs if visible is None else qs.filter(visible)


def session_summaries(
    *,
    agent: Agent | str,
    visible: Q | None = None,
    limit: int | None = DEFAULT_LIMIT,
    cursor: str | None = None,
    cap: int = PICKER_CAP,
) -> tuple[list[SessionSummary], str | None]:
    """A page of the sessions the caller may see, newest first, each with its owner, last
    activity and bounded artifact count; and the cursor of the next page."""
    agent = agent_get(agent)
    page: Page = keyset_page(
        with_activity(_sessions(agent, visible), cap=cap),
        moment="created_at",
        tiebreak="pk",
        fields=SUMMARY_FIELDS,
        size=check_limit(limit),
        cursor=cursor,
        tiebreak_of=_row_id,
    )
    return [SessionSummary.from_row(row, cap=cap) for row in page.rows], page.next_cursor


def sessions_search(
    *,
    agent: Agent | str,
    text: str,
    visible: Q | None = None,
    limit: int = 20,
    cap: int = PICKER_CAP,
) -> list[SessionSummary]:
    """Sessions whose id is ``text`` (first) or starts with it, newest first (see the module)."""
    agent = agent_get(agent)
    check_text(text, field="q", code="invalid_query")
    text = text.strip()
    if not text:
        raise ArtifactError("invalid_query", "Type a session id (or its start) to search for.")
    # The creation time of the agent's SEARCH_WINDOW-th newest session bounds the prefix walk to
    # a range of ``session_agent_newest``; the exact id is its own statement on the unique index
    # (an OR of the two would walk every session of the agent).
    edge = list(
        Session.objects.filter(agent_id=agent.pk)
        .order_by("-created_at", "-id")
        .values_list("created_at", flat=True)[SEARCH_WINDOW - 1 : SEARCH_WINDOW]
    )
    exact = with_activity(_sessions(agent, visible).filter(sid=text), cap=cap)
    prefixed = _sessions(agent, visible).filter(sid__startswith=text).exclude(sid=text)
    if edge:
        prefixed = prefixed.filter(created_at__gte=edge[0])
    prefixed = with_activity(prefixed, cap=cap)
    rows = list(exact.values(*SUMMARY_FIELDS)[:1]) + list(
        prefixed.order_by("-created_at", "-id").values(*SUMMARY_FIELDS)[:limit]
    )
    # startswith is case-insensitive on SQLite: keep to ids that really start with the text.
    found = [SessionSummary.from_row(row, cap=cap) for row in rows]
    found = [s for s in found if s.sid.startswith(text)][:limit]
    return found


def session_summary(
    *, agent: Agent | str, sid: str, visible: Q | None = None, cap: int = SESSION_CAP
) -> SessionSummary:
    """One session's summary; missing and hidden alike raise ``NotFoundError``."""
    agent = agent_get(agent)
    row = (
        with_activity(_sessions(agent, visible).filter(sid=sid), cap=cap)
        .values(*SUMMARY_FIELDS)
        .first()
    )
    if row is None:
        raise NotFoundError(
            "unknown_session", f"There is no session {sid!r} in agent {agent.slug!r}."
        )
    return SessionSummary.from_row(row, cap=cap)


@dataclass
class Turn:
    """The artifacts of one turn (``turn_id`` None: tagged outside any turn) in a window."""

    turn_id: str | None
    records: list[ArtifactRecord] = field(default_factory=list)

    @property
    def last_activity(self) -> datetime:
        return self.records[0].updated_at

    @property
    def first_created(self) -> datetime:
        return min(record.created_at for record in self.records)


@dataclass(frozen=True)
class Turns:
    turns: list[Turn]
    shown: int  # records in the window
    more: bool  # the session holds older records than the window


def session_turns(
    *,
    agent: Agent | str,
    sid: str,
    visible: Q | None = None,
    limit: int = TURN_WINDOW,
) -> Turns:
    """The session's newest ``limit`` artifacts grouped by turn, the turn with the latest activity
    first, each turn's records newest-updated first (one keyset page, grouped in order)."""
    page = artifacts_page(agent=agent, visible=visible, session_id=sid, limit=limit)
    groups: dict[str | None, Turn] = {}
    for record in page.records():
        groups.setdefault(record.turn_id, Turn(record.turn_id)).records.append(record)
    return Turns(
        turns=list(groups.values()), shown=len(page.rows), more=page.next_cursor is not None
    )


def iso_seconds(moment: datetime) -> str:
    """A time as supervisors read it on these pages: ISO-8601 UTC to the second, with ``Z``."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
