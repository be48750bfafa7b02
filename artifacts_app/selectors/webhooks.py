"""Reads of webhooks: their JSON, the events each one selects, its pending count, its log."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import Min, Q, QuerySet

from artifacts_app.errors import NotFoundError
from artifacts_app.jsontypes import JSONObject
from artifacts_app.models import Event, Webhook, WebhookDelivery
from artifacts_app.records import iso_ms
from artifacts_app.selectors.pages import _row_id, cursor_decode, cursor_encode

WEBHOOK_FIELDS = (
    "id",
    "public_id",
    "agent_id",
    "url",
    "events",
    "kinds",
    "description",
    "active",
    "disabled_reason",
    "cursor",
    "failing_since",
    "last_seq",
    "last_status",
    "last_at",
    "created_at",
)


def selected_events(
    agent_id: int, events: list[str], kinds: list[str], after: int
) -> QuerySet[Event]:
    """The agent's stored events after seq ``after`` that a webhook's filters select (``events``:
    types, ``kinds``: the record's kind; empty: all), in seq order. One rule, for the deliverers
    and for ``pending``."""
    qs = Event.objects.filter(agent_id=agent_id, seq__gt=after)
    if events:
        qs = qs.filter(type__in=events)
    if kinds:
        qs = qs.filter(payload__record__kind__in=kinds)
    return qs.order_by("seq")


def oldest_event_seq(agent_id: int) -> int | None:
    """The seq of the agent's oldest stored event (None: none is stored)."""
    return Event.objects.filter(agent_id=agent_id).aggregate(m=Min("seq"))["m"]


def _at(moment: datetime | None) -> str | None:
    return iso_ms(moment) if moment is not None else None


def webhook_json(row: dict[str, Any]) -> JSONObject:
    """A webhook as the API shows it (never its secret)."""
    last = (
        {"seq": row["last_seq"], "status": row["last_status"], "at": _at(row["last_at"])}
        if row["last_at"] is not None
        else None
    )
    return {
        "id": row["public_id"],
        "url": row["url"],
        "events": row["events"],
        "kinds": row["kinds"],
        "description": row["description"],
        "active": row["active"],
        "disabledReason": row["disabled_reason"] or None,
        "lastDelivery": last,
        "failingSince": _at(row["failing_since"]),
        "pending": selected_events(
            row["agent_id"], row["events"], row["kinds"], row["cursor"]
        ).count(),
        "createdAt": _at(row["created_at"]),
    }


def webhooks_of(agent_id: int) -> list[dict[str, Any]]:
    """The agent's webhooks, oldest first, as rows of ``WEBHOOK_FIELDS``."""
    return list(Webhook.objects.filter(agent_id=agent_id).order_by("id").values(*WEBHOOK_FIELDS))


def webhook_values(agent_id: int, public_id: str) -> dict[str, Any]:
    """One webhook of the agent (``NotFoundError`` ``unknown_webhook`` otherwise)."""
    row = Webhook.objects.filter(agent_id=agent_id, public_id=public_id).values(*WEBHOOK_FIELDS)
    found = row.first()
    if found is None:
        raise NotFoundError(
            "unknown_webhook", f"Webhook {public_id!r} does not exist for this agent."
        )
    return found


def webhook_agent_ids() -> list[int]:
    """The agents that have an active webhook: the ones whose events wake the deliverers."""
    return list(Webhook.objects.filter(active=True).values_list("agent_id", flat=True).distinct())


@dataclass(frozen=True)
class DeliveriesPage:
    rows: list[JSONObject]
    next_cursor: str | None


def delivery_json(row: Mapping[str, Any]) -> JSONObject:
    return {
        "seq": row["seq"],
        "eventType": row["event_type"],
        "attempt": row["attempt"],
        "status": row["status"],
        "error": row["error"] or None,
        "durationMs": row["duration_ms"],
        "at": _at(row["at"]),
    }


def deliveries_page(webhook_pk: int, *, limit: int, cursor: str | None) -> DeliveriesPage:
    """A webhook's delivery attempts, newest first, in keyset pages (``Page.rows`` are JSON)."""
    qs = WebhookDelivery.objects.filter(webhook_id=webhook_pk)
    if cursor:
        _, last = cursor_decode(cursor)
        qs = qs.filter(Q(id__lt=_row_id(last)))
    rows = list(
        qs.order_by("-id").values(
            "id", "seq", "event_type", "attempt", "status", "error", "duration_ms", "at"
        )[: limit + 1]
    )
    next_cursor = None
    if len(rows) > limit:
        rows = rows[:limit]
        next_cursor = cursor_encode(rows[-1]["at"], str(rows[-1]["id"]))
    return DeliveriesPage([delivery_json(r) for r in rows], next_cursor)
