"""Reads for an agent's dashboard: tags and evictions per hour, the kinds and their counts, the
latest events. Every statement is bounded by an index, never by the size of the tables:

- per hour: one GROUP BY per series over the ``event_agent_type_created`` range (agent, type,
  the window): it reads the agent's events of that type in the window and nothing else (on
  PostgreSQL an index-only scan for the tags; evictions read the rows of deletions in the window
  for their ``reason``). Two statements draw both charts (the 24 hours are the 7 days' tail).
- kinds: a GROUP BY over the agent's records, the ``artifact_agent_kind_updated`` index; an agent
  holds at most its ``max`` records, so this is bounded by the cap.
- latest events: the newest ``limit`` by the (agent, seq) constraint, read backwards.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass

from django.db.models import Count, QuerySet
from django.db.models.functions import TruncHour

from artifacts_app.event_schema import DELETED, TAGGED
from artifacts_app.jsontypes import JSONObject
from artifacts_app.models import Artifact, Event

WEEK_HOURS = 7 * 24


@dataclass(frozen=True)
class Activity:
    """Counts per UTC hour, oldest first: ``hours[i]`` starts the hour of ``tagged[i]``."""

    hours: list[datetime.datetime]
    tagged: list[int]
    evicted: list[int]

    def last(self, n: int) -> Activity:
        return Activity(self.hours[-n:], self.tagged[-n:], self.evicted[-n:])


def _per_hour(qs: QuerySet[Event], start: datetime.datetime, hours: int) -> list[int]:
    counts = [0] * hours
    rows = qs.annotate(hour=TruncHour("created_at", tzinfo=datetime.UTC)).values("hour")
    for row in rows.annotate(n=Count("*")).order_by():
        index = int((row["hour"] - start).total_seconds() // 3600)
        if 0 <= index < hours:
            counts[index] += row["n"]
    return counts


def agent_activity(
    agent_id: int, *, now: datetime.datetime | None = None, hours: int = WEEK_HOURS
) -> Activity:
    """Tags and evictions of an agent per UTC hour over the ``hours`` up to ``now`` (the current
    hour, so far, is the last): two statements whatever the number of events stored."""
    now = (now or datetime.datetime.now(datetime.UTC)).astimezone(datetime.UTC)
    start = now.replace(minute=0, second=0, microsecond=0) - datetime.timedelta(hours=hours - 1)
    window = Event.objects.filter(agent_id=agent_id, created_at__gte=start, created_at__lte=now)
    tagged = _per_hour(window.filter(type=TAGGED), start, hours)
    evicted = _per_hour(window.filter(type=DELETED, payload__reason="evicted"), start, hours)
    return Activity([start + datetime.timedelta(hours=h) for h in range(hours)], tagged, evicted)


def agent_kind_counts(agent_id: int) -> list[tuple[str, int]]:
    """Each kind the agent holds records of, with how many, the largest first."""
    rows = (
        Artifact.objects.filter(agent_id=agent_id)
        .values("kind")
        .annotate(n=Count("id"))
        .order_by()  # no ORDER BY in SQL: the model's ordering would join the grouping
    )
    return sorted(((row["kind"], row["n"]) for row in rows), key=lambda kn: (-kn[1], kn[0]))


def agent_latest_events(agent_id: int, *, limit: int = 20) -> list[JSONObject]:
    """The agent's newest stored events (their payloads, exactly as the stream sends them)."""
    return list(
        Event.objects.filter(agent_id=agent_id)
        .order_by("-seq")
        .values_list("payload", flat=True)[:limit]
    )
