"""Pruning: the operator's way to keep the store within bounds (API.md ``prune_artifacts``).

Records are chosen by a keyset walk over the agent's ``(updated_at, id)`` index, oldest first, in
batches, and each batch goes through ``artifacts_delete(reason="pruned")`` — the one
implementation of deleting, so the agent's counters, its event ``seq`` and the stored events stay
exact. Memory and transaction size are bounded by the batch, not by the number of rows pruned.
Stored events older than ``ARTIFACTS_EVENT_RETENTION`` (or ``events_older_than``) go in batches too.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import QuerySet
from django.utils import timezone

from artifacts_app import selectors
from artifacts_app.errors import ArtifactError
from artifacts_app.models import Agent, Artifact, Event, Session
from artifacts_app.names import KIND_RE
from artifacts_app.services.artifacts import artifacts_delete

DURATION_RE = re.compile(r"\s*(\d+)\s*(s|m|h|d|w)\s*")
UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
BATCH_SIZE = 1000
EVENT_BATCH_SIZE = 5000


def parse_duration(value: str, *, option: str) -> timedelta:
    """``30d``, ``12h``, ``15m``, ``45s``, ``2w`` → a timedelta; anything else is refused."""
    match = DURATION_RE.fullmatch(value or "")
    if match is None:
        raise ArtifactError(
            "invalid_duration",
            f"{option} takes a duration such as 30d, 12h, 15m, 45s or 2w; got {value!r}.",
        )
    return timedelta(seconds=int(match.group(1)) * UNITS[match.group(2)])


@dataclass
class PruneReport:
    dry_run: bool
    per_agent: dict[str, int] = field(default_factory=dict)
    events: int = 0

    @property
    def artifacts(self) -> int:
        return sum(self.per_agent.values())


Progress = Callable[[str, int], None]


def _selection(
    agent: Agent, *, kind: str | None, session_pk: int | None, include_pinned: bool
) -> QuerySet[Artifact]:
    qs = Artifact.objects.filter(agent_id=agent.pk)
    if not include_pinned:
        qs = qs.filter(pinned=False)
    if kind is not None:
        qs = qs.filter(kind=kind)
    if session_pk is not None:
        qs = qs.filter(session_id=session_pk)
    return qs


def _agent_prune(
    agent: Agent,
    *,
    kind: str | None,
    session_pk: int | None,
    cutoff: datetime | None,
    keep: int | None,
    dry_run: bool,
    batch_size: int,
    progress: Progress | None,
    include_pinned: bool,
) -> int:
    selection = _selection(agent, kind=kind, session_pk=session_pk, include_pinned=include_pinned)
    if keep:
        # The keep-th newest of the selection: everything strictly older than it may go.
        boundary = list(
            selection.order_by("-updated_at", "-id").values_list("updated_at", "id")[
                keep - 1 : keep
            ]
        )
        if not boundary:
            return 0
        selection = selection.filter(
            selectors.before("updated_at", boundary[0][0], "id", boundary[0][1])
        )
    if cutoff is not None:
        selection = selection.filter(updated_at__lt=cutoff)
    done = 0
    position: tuple[datetime, str] | None = None
    while True:
        page = (
            selection
            if position is None
            else selection.filter(selectors.after("updated_at", position[0], "id", position[1]))
        )
        rows = list(page.order_by("updated_at", "id").values_list("updated_at", "id")[:batch_size])
        if not rows:
            return done
        if dry_run:
            done += len(rows)
        else:
            done += artifacts_delete(
                agent=agent,
                ids=[artifact_id for _, artifact_id in rows],
                reason="pruned",
                updated_at_most=max(updated for updated, _ in rows),
                skip_pinned=not include_pinned,
            )
        position = rows[-1]
        if progress is not None:
            progress(agent.slug, done)


def _sessions_named(agents: list[Agent], session: str, agent: str | None) -> dict[int, int]:
    """agent pk -> session pk of the agents' sessions named ``session``; none is a refusal."""
    sessions = dict(
        Session.objects.filter(agent__in=agents, sid=session).values_list("agent_id", "id")
    )
    if not sessions:
        where = f"agent {agent!r}" if agent is not None else "any agent"
        raise ArtifactError(
            "unknown_session",
            f"There is no session {session!r} in {where}; nothing was pruned.",
        )
    return sessions


def _prune_check(*, kind: str | None, keep: int | None, batch_size: int) -> None:
    """The options refused before anything is read: nothing is pruned on a bad one."""
    if kind is not None and not KIND_RE.fullmatch(kind):
        raise ArtifactError("invalid_kind", f"--kind {kind!r} is not a valid kind name.")
    if keep is not None and (isinstance(keep, bool) or keep < 0):
        raise ArtifactError("invalid_keep", f"--keep must be 0 or more; got {keep}.")
    if batch_size < 1:
        raise ArtifactError("invalid_batch", "The batch size must be at least 1.")


def artifacts_prune(
    *,
    agent: str | None = None,
    kind: str | None = None,
    session: str | None = None,
    older_than: timedelta | None = None,
    keep: int | None = None,
    events_older_than: timedelta | None = None,
    dry_run: bool = False,
    batch_size: int = BATCH_SIZE,
    progress: Progress | None = None,
    include_pinned: bool = False,
) -> PruneReport:
    """Delete (``dry_run``: count) the records the filters select, and stored events past retention.

    With no record filter at all (no agent, kind, session, older_than or keep) no record is touched:
    only stored events are pruned. ``keep`` keeps the newest ``keep`` of the selection per agent.
    Pinned records are never selected (nor counted by ``keep``) unless ``include_pinned``; a
    record's versions go with it.
    """
    _prune_check(kind=kind, keep=keep, batch_size=batch_size)
    report = PruneReport(dry_run=dry_run)
    now = timezone.now()
    agents = (
        [selectors.agent_get(agent)] if agent is not None else list(Agent.objects.order_by("slug"))
    )
    sessions = _sessions_named(agents, session, agent) if session is not None else {}
    selects = any(v is not None for v in (agent, kind, session, older_than, keep))
    if selects:
        cutoff = now - older_than if older_than is not None else None
        for row in agents:
            if session is not None and row.pk not in sessions:
                continue
            count = _agent_prune(
                row,
                kind=kind,
                session_pk=sessions.get(row.pk),
                cutoff=cutoff,
                keep=keep,
                dry_run=dry_run,
                batch_size=batch_size,
                progress=progress,
                include_pinned=include_pinned,
            )
            if count:
                report.per_agent[row.slug] = count
    retention = (
        events_older_than
        if events_older_than is not None
        else timedelta(seconds=int(settings.ARTIFACTS_EVENT_RETENTION))
    )
    report.events = events_prune(
        before=now - retention,
        agent_ids=[a.pk for a in agents] if agent is not None else None,
        dry_run=dry_run,
    )
    return report


def events_prune(
    *,
    before: datetime,
    agent_ids: list[int] | None = None,
    dry_run: bool = False,
    batch_size: int = EVENT_BATCH_SIZE,
) -> int:
    """Delete (``dry_run``: count) stored events created before ``before``, in batches."""
    qs = Event.objects.filter(created_at__lt=before)
    if agent_ids is not None:
        qs = qs.filter(agent_id__in=agent_ids)
    if dry_run:
        return qs.count()
    removed = 0
    while True:
        ids = list(qs.order_by("created_at").values_list("id", flat=True)[:batch_size])
        if not ids:
            return removed
        removed += Event.objects.filter(id__in=ids).delete()[0]
