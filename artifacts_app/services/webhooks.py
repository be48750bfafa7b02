"""Webhooks: created (the secret answered once), changed, deleted, their secret rotated, their
events replayed (API.md "Webhooks"). Every change bumps the row's ``generation``, so a deliverer
working on the webhook stops at its next write and the change stands (``webhooks.engine``)."""

from __future__ import annotations

import secrets
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from artifacts_app import selectors
from artifacts_app.errors import ArtifactError
from artifacts_app.event_schema import EVENT_TYPES
from artifacts_app.jsontypes import JSON
from artifacts_app.models import Agent, Webhook
from artifacts_app.names import KIND_RE
from artifacts_app.registry import spec_for
from artifacts_app.selectors import webhooks as webhook_reads
from artifacts_app.values import check_text
from artifacts_app.webhooks import check, new_secret, wake_local

DESCRIPTION_MAX = 500
FILTER_MAX = 100


def _names(value: JSON, *, field: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise ArtifactError(
            f"invalid_{field}", f"`{field}` must be a list of names.", {"field": field}
        )
    if len(value) > FILTER_MAX:
        raise ArtifactError(
            f"invalid_{field}", f"`{field}` names at most {FILTER_MAX}.", {"field": field}
        )
    out: list[str] = []
    for name in value:
        check_text(name, field=field, code=f"invalid_{field}")
        if name not in out:
            out.append(name)
    return out


def check_events(value: JSON) -> list[str]:
    """The event types a webhook selects ([]: all), every one declared (``event_schema``)."""
    names = _names(value, field="events")
    unknown = [n for n in names if n not in EVENT_TYPES]
    if unknown:
        raise ArtifactError(
            "unknown_event_type",
            f"Unknown event type(s) {', '.join(repr(n) for n in unknown)}; "
            f"the types are {', '.join(EVENT_TYPES)}.",
            {"field": "events", "unknown": unknown},
        )
    return names


def check_kinds(agent: Agent, value: JSON) -> list[str]:
    """The kinds a webhook selects ([]: all): kinds the agent declares (any name when it is
    freeform)."""
    names = _names(value, field="kinds")
    bad = [n for n in names if not KIND_RE.fullmatch(n)]
    if bad:
        raise ArtifactError(
            "invalid_kinds",
            f"`kinds` names {bad[0]!r}, which is not a kind name.",
            {"field": "kinds", "invalid": bad},
        )
    declared = spec_for(agent).kinds
    unknown = [n for n in names if declared and n not in declared]
    if unknown:
        raise ArtifactError(
            "unknown_kind",
            f"Unknown kind(s) {', '.join(repr(n) for n in unknown)} for agent {agent.slug!r}.",
            {"field": "kinds", "unknown": unknown},
        )
    return names


def _description(value: JSON) -> str:
    if value is None:
        return ""
    if not isinstance(value, str) or len(value) > DESCRIPTION_MAX:
        raise ArtifactError(
            "invalid_description",
            f"`description` is a string of at most {DESCRIPTION_MAX} characters.",
            {"field": "description"},
        )
    check_text(value, field="description", code="invalid_description")
    return value


def _url(value: JSON) -> str:
    return check(value).url


def _after_commit_wake() -> None:
    transaction.on_commit(wake_local, robust=True)


@transaction.atomic
def webhook_create(
    *,
    agent: Agent | str,
    url: JSON,
    events: JSON = None,
    kinds: JSON = None,
    description: JSON = None,
) -> tuple[Webhook, str]:
    """A new webhook of ``agent``, delivering the events committed from now on. Answers the row
    and its signing secret (``whsec_…``), which is shown this once."""
    agent = selectors.agent_get(agent)
    checked_events = check_events(events)
    checked_kinds = check_kinds(agent, kinds)
    checked_description = _description(description)
    checked_url = _url(url)
    # The agent row's lock makes the count exact against concurrent creations.
    locked = Agent.objects.select_for_update().only("pk", "last_seq").get(pk=agent.pk)
    limit = int(settings.ARTIFACTS_WEBHOOK_MAX_PER_AGENT)
    if Webhook.objects.filter(agent_id=agent.pk).count() >= limit:
        raise ArtifactError(
            "too_many_webhooks",
            f"Agent {agent.slug!r} has {limit} webhooks, the most it may have "
            "(ARTIFACTS_WEBHOOK_MAX_PER_AGENT); delete one first.",
        )
    secret = new_secret()
    webhook = Webhook.objects.create(
        public_id="wh_" + secrets.token_hex(10),
        agent=agent,
        url=checked_url,
        events=checked_events,
        kinds=checked_kinds,
        description=checked_description,
        secret=secret,
        cursor=locked.last_seq,
        replay_upto=locked.last_seq,
    )
    _after_commit_wake()
    return webhook, secret


def _locked(agent: Agent | str, public_id: str) -> Webhook:
    agent = selectors.agent_get(agent)
    webhook_reads.webhook_values(agent.pk, public_id)  # 404 unknown_webhook
    return Webhook.objects.select_for_update().get(agent_id=agent.pk, public_id=public_id)


def _resume_at(webhook: Webhook) -> int:
    """The cursor a resumed webhook starts from: where it stopped, or — when the events after it
    are no longer stored — before the oldest stored event."""
    oldest = webhook_reads.oldest_event_seq(webhook.agent_id)
    if oldest is None:
        return max(webhook.cursor, Agent.objects.get(pk=webhook.agent_id).last_seq)
    return max(webhook.cursor, oldest - 1)


def _set_active(webhook: Webhook, active: bool, reason: str) -> None:
    if active == webhook.active:
        return
    webhook.active = active
    if active:
        webhook.disabled_reason = ""
        webhook.cursor = _resume_at(webhook)
        webhook.attempts = 0
        webhook.failing_since = None
        webhook.next_attempt_at = timezone.now()
    else:
        webhook.disabled_reason = reason


def _save(webhook: Webhook) -> Webhook:
    # A deliverer holding the row keeps its lease until its next write, which the new generation
    # refuses: it stops there, and the change stands. Two never send to one webhook at once.
    webhook.generation = F("generation") + 1
    webhook.save()
    webhook.refresh_from_db()
    _after_commit_wake()
    return webhook


@transaction.atomic
def webhook_update(
    *, agent: Agent | str, webhook_id: str, changes: dict[str, Any], reason: str = ""
) -> Webhook:
    """Change ``url``, ``events``, ``kinds``, ``description`` and/or ``active`` (a deactivation
    records ``reason``; a re-activation resumes where delivery stopped)."""
    agent = selectors.agent_get(agent)
    webhook = _locked(agent, webhook_id)
    if "url" in changes:
        webhook.url = _url(changes["url"])
    if "events" in changes:
        webhook.events = check_events(changes["events"])
    if "kinds" in changes:
        webhook.kinds = check_kinds(agent, changes["kinds"])
    if "description" in changes:
        webhook.description = _description(changes["description"])
    if "active" in changes:
        active = changes["active"]
        if not isinstance(active, bool):
            raise ArtifactError("invalid_active", "`active` is true or false.", {"field": "active"})
        _set_active(webhook, active, reason or "deactivated through the API")
    return _save(webhook)


@transaction.atomic
def webhook_delete(*, agent: Agent | str, webhook_id: str) -> None:
    """Delete a webhook and its delivery log; a deliverer working on it stops at its next write."""
    _locked(agent, webhook_id).delete()


@transaction.atomic
def webhook_secret_rotate(*, agent: Agent | str, webhook_id: str) -> tuple[Webhook, str]:
    """A new signing secret, answered once; the old one signs nothing from now on."""
    webhook = _locked(agent, webhook_id)
    secret = new_secret()
    webhook.secret = secret
    return _save(webhook), secret


@transaction.atomic
def webhook_replay(*, agent: Agent | str, webhook_id: str, after: JSON) -> Webhook:
    """Deliver again every stored event after seq ``after`` that the webhook selects (under new
    ``webhook-id`` values); events no longer stored are skipped."""
    if not isinstance(after, int) or isinstance(after, bool) or after < 0:
        raise ArtifactError(
            "invalid_after", "`after` is a seq: a whole number, 0 or more.", {"field": "after"}
        )
    webhook = _locked(agent, webhook_id)
    if after < webhook.cursor:
        webhook.replays += 1
        webhook.replay_upto = webhook.cursor
        oldest = webhook_reads.oldest_event_seq(webhook.agent_id)
        webhook.cursor = after if oldest is None else max(after, oldest - 1)
        if oldest is None:
            webhook.cursor = webhook.replay_upto
        webhook.attempts = 0
        webhook.failing_since = None
        webhook.next_attempt_at = timezone.now()
    return _save(webhook)
