"""Reads of stored events: replay for the streams, gap filling for the fan-out, a turn's tags."""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Min

from artifacts_app.event_schema import TAGGED
from artifacts_app.jsontypes import JSONObject
from artifacts_app.models import Artifact, Event
from artifacts_app.records import RECORD_FIELDS, ArtifactRecord
from artifacts_app.selectors.agents import agent_last_seq

REPLAY_PAGE = 1000


@dataclass(frozen=True)
class Stream:
    """What a websocket may watch: an agent's events, or one session's (``access.stream_open``)."""

    agent_id: int
    slug: str
    session_sid: str | None


@dataclass(frozen=True)
class Replay:
    events: list[JSONObject]
    truncated_from: int | None  # the oldest stored seq when ``after`` is older than what is kept


def events_between(agent_id: int, after: int, before: int) -> list[JSONObject]:
    """Stored payloads of an agent with ``after < seq < before``, in seq order (gap filling)."""
    return list(
        Event.objects.filter(agent_id=agent_id, seq__gt=after, seq__lt=before)
        .order_by("seq")
        .values_list("payload", flat=True)
    )


def replay_page(stream: Stream, after: int, *, check_retention: bool) -> Replay:
    """Stored events of the stream after ``after``, oldest first, at most ``REPLAY_PAGE``."""
    truncated_from = None
    if check_retention:
        # seq starts at 1 and has no holes, so a first stored seq past after+1 means pruned events.
        # The agent's last seq is read first: a tag that commits between the two reads then shows
        # as a stored event, never as an empty table with a newer last seq (a false truncation).
        last = agent_last_seq(stream.agent_id)
        oldest = Event.objects.filter(agent_id=stream.agent_id).aggregate(m=Min("seq"))["m"]
        if oldest is None:
            if last > after:
                truncated_from = last + 1
        elif oldest > after + 1:
            truncated_from = oldest
    qs = Event.objects.filter(agent_id=stream.agent_id, seq__gt=after)
    if stream.session_sid is not None:
        qs = qs.filter(session_sid=stream.session_sid)
    rows = list(qs.order_by("seq").values_list("payload", flat=True)[:REPLAY_PAGE])
    return Replay(rows, truncated_from)


def turn_records(*, agent_id: int, after: int, turn_id: str | None) -> list[ArtifactRecord]:
    """The records as tagged after seq ``after`` (of ``turn_id`` when given), in tag order; a
    re-tag appears again. Content and creation time come from the live record when it is kept."""
    events = Event.objects.filter(agent_id=agent_id, seq__gt=after, type=TAGGED)
    if turn_id is not None:
        events = events.filter(turn_id=turn_id)
    rows = list(events.order_by("seq").values("payload", "session_sid", "turn_id", "created_at"))
    current = {
        row["id"]: row
        for row in Artifact.objects.filter(
            pk__in=[r["payload"]["record"]["id"] for r in rows]
        ).values(*RECORD_FIELDS)
    }
    records = []
    for row in rows:
        summary = row["payload"]["record"]
        live = current.get(summary["id"])
        records.append(
            ArtifactRecord(
                id=summary["id"],
                kind=summary["kind"],
                key=summary["key"],
                title=summary["title"],
                data=summary["data"],
                session_id=row["session_sid"],
                turn_id=row["turn_id"],
                source=summary["source"],
                content=ArtifactRecord.from_values(live).content if live else None,
                created_at=live["created_at"] if live else row["created_at"],
                updated_at=row["created_at"],
            )
        )
    return records
