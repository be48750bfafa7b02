"""The delivery of webhooks: cursors over the stored events (DESIGN.md §16), claimed with row locks.

A deliverer (``runner``: a thread of the site's process, or ``manage.py deliver_webhooks``) asks
``claim`` for webhooks that are due — active, with events after its cursor, its next attempt time
past, no live lease — and leases it: on PostgreSQL with ``SELECT … FOR UPDATE SKIP LOCKED`` (any
number of processes share the work, each webhook held by one), on SQLite under the process's own
lock inside the IMMEDIATE transaction (which holds off every other process's writers). Healthy
webhooks are claimed several at once (``CLAIM_MANY``), a failing one alone. ``work`` then sends
each webhook's selected events in seq order, one after the other, and writes the progress of all
its claims (cursors, attempts, the log rows) in one transaction every ``FLUSH_EVERY`` seconds or
``FLUSH_ROWS`` attempts and when it stops, renewing the leases each time: with many webhooks on
one agent, an event costs a few write transactions, not two per webhook. Progress is written only while the lease and the
row's ``generation`` are still the ones claimed: a change made through the API meanwhile (filters,
url, secret, replay, deactivation) wins, and the deliverer, which looks at the generation every
``RECHECK_EVERY`` while it sends, stops within that.

Per webhook, an event is sent only once every earlier selected one was delivered: a failure stops
the batch and sets the next attempt after ``ARTIFACTS_WEBHOOK_RETRY_DELAYS`` (1 s, 5 s, 30 s, 2 min,
10 min, 30 min, then hourly). A 410 answer, or failing for ``ARTIFACTS_WEBHOOK_GIVE_UP``, deactivates
the webhook with its ``disabled_reason``; so does a cursor that fell behind the event retention.

At least once: a process killed mid-batch leaves the lease to run out, and the next deliverer
sends again what was sent after the last write (the only duplicates; none in steady state).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import orjson
from django.conf import settings
from django.db import connection, transaction
from django.db.models import F, Min, Q, Sum
from django.utils import timezone

from artifacts_app import metrics
from artifacts_app.models import Webhook, WebhookDelivery
from artifacts_app.selectors import webhooks as webhook_reads
from artifacts_app.webhooks import signing
from artifacts_app.webhooks.transport import Answer, Sender

log = logging.getLogger(__name__)

BATCH = 200  # events read per query
FLUSH_EVERY = 0.25  # seconds between progress writes while sending
FLUSH_ROWS = 100  # attempts between progress writes
CLAIM_MANY = 16  # healthy webhooks claimed together
RECHECK_EVERY = 0.05  # seconds between looks at a webhook's generation while sending to it
OWNER = f"{socket.gethostname()}:{os.getpid()}"
_sqlite_lock = threading.Lock()  # SQLite: the process's own lock around a claim


def lease_seconds() -> float:
    """The lease: long enough for a delivery that takes the whole timeout, and a write."""
    return max(
        float(settings.ARTIFACTS_WEBHOOK_LEASE), 2 * float(settings.ARTIFACTS_WEBHOOK_TIMEOUT) + 1
    )


def retry_delay(attempts: int) -> float:
    """Seconds before the next try of an event tried ``attempts`` times (≥ 1)."""
    delays = list(settings.ARTIFACTS_WEBHOOK_RETRY_DELAYS) or [1.0]
    return float(delays[min(attempts, len(delays)) - 1])


def message_id(public_id: str, seq: int, replays: int, replay_upto: int) -> str:
    """``webhook-id``: one per event and webhook, the same on every retry; a replayed event gets
    the id of its replay (a receiver that drops ids it has seen would drop a replay otherwise)."""
    base = f"msg_{public_id.removeprefix('wh_')}_{seq}"
    return f"{base}_r{replays}" if replays and seq <= replay_upto else base


@dataclass(eq=False)  # compared by identity: a claim is one lease
class Claim:
    """A leased webhook, as it was when claimed, and the progress made since."""

    pk: int
    public_id: str
    agent_id: int
    slug: str
    url: str
    events: list[str]
    kinds: list[str]
    secret: str = field(repr=False)  # never in a log line, even by accident
    generation: int
    replays: int
    replay_upto: int
    upto: int  # the agent's last seq when claimed: every event up to it is committed
    token: str
    cursor: int
    attempts: int
    failing_since: datetime | None
    next_attempt_at: datetime
    active: bool = True
    disabled_reason: str = ""
    last: tuple[int, int | None, datetime] | None = None
    log_rows: list[WebhookDelivery] = field(default_factory=list)
    checked_at: float = field(default_factory=time.monotonic)  # when ``generation`` was read


_CLAIM_FIELDS = (
    "pk",
    "public_id",
    "agent_id",
    "agent__slug",
    "agent__last_seq",
    "url",
    "events",
    "kinds",
    "secret",
    "generation",
    "replays",
    "replay_upto",
    "cursor",
    "attempts",
    "failing_since",
    "next_attempt_at",
)


def _due(now: datetime) -> Any:
    return Webhook.objects.filter(
        active=True, next_attempt_at__lte=now, cursor__lt=F("agent__last_seq")
    ).filter(Q(lease_until__isnull=True) | Q(lease_until__lt=now))


def claim(now: datetime | None = None, *, limit: int = 1) -> list[Claim]:
    """Lease due webhooks (the longest due first): up to ``limit`` healthy ones together, or one
    that is failing alone (a receiver that times out must not hold up the others). Empty when
    none is due."""
    if connection.vendor == "sqlite":
        with _sqlite_lock:
            return _claim(now, limit)
    return _claim(now, limit)


def _claim(now: datetime | None, limit: int) -> list[Claim]:
    with transaction.atomic():
        now = now or timezone.now()
        qs = _due(now).order_by("next_attempt_at")
        if connection.features.has_select_for_update_skip_locked:
            qs = qs.select_for_update(skip_locked=True, of=("self",))
        rows = list(qs.values(*_CLAIM_FIELDS)[: max(1, limit)])
        if not rows:
            return []
        rows = rows[:1] if rows[0]["attempts"] else [r for r in rows if not r["attempts"]]
        token = uuid.uuid4().hex
        Webhook.objects.filter(pk__in=[r["pk"] for r in rows]).update(
            lease_until=now + timedelta(seconds=lease_seconds()), lease_token=token
        )
    return [
        Claim(
            pk=row["pk"],
            public_id=row["public_id"],
            agent_id=row["agent_id"],
            slug=row["agent__slug"],
            url=row["url"],
            events=list(row["events"] or []),
            kinds=list(row["kinds"] or []),
            secret=row["secret"],
            generation=row["generation"],
            replays=row["replays"],
            replay_upto=row["replay_upto"],
            upto=row["agent__last_seq"],
            token=token,
            cursor=row["cursor"],
            attempts=row["attempts"],
            failing_since=row["failing_since"],
            next_attempt_at=row["next_attempt_at"],
        )
        for row in rows
    ]


def next_due(now: datetime | None = None) -> datetime | None:
    """When the next claim may succeed (None: nothing is waiting); a deliverer sleeps till then."""
    now = now or timezone.now()
    waiting = Webhook.objects.filter(active=True, cursor__lt=F("agent__last_seq"))
    free = waiting.filter(Q(lease_until__isnull=True) | Q(lease_until__lt=now)).aggregate(
        m=Min("next_attempt_at")
    )["m"]
    held = waiting.filter(lease_until__gte=now).aggregate(m=Min("lease_until"))["m"]
    found = [m for m in (free, held) if m is not None]
    return min(found) if found else None


def _deactivate(claim: Claim, reason: str) -> None:
    claim.active = False
    claim.disabled_reason = reason[:500]
    log.warning("webhook %s of agent %s deactivated: %s", claim.public_id, claim.slug, reason)


class _Progress:
    """When the claims' progress was last written, and how many attempts since."""

    def __init__(self) -> None:
        self.at = time.monotonic()
        self.attempts = 0

    def due(self) -> bool:
        return self.attempts >= FLUSH_ROWS or time.monotonic() - self.at > FLUSH_EVERY


def _current(claim: Claim) -> bool:
    """Whether the row is still as claimed, asked at most every ``RECHECK_EVERY`` seconds: a new
    secret, new filters or a deactivation through the API stop the sending that quickly, not at
    the next progress write."""
    now = time.monotonic()
    if now - claim.checked_at < RECHECK_EVERY:
        return True
    claim.checked_at = now
    return Webhook.objects.filter(pk=claim.pk, generation=claim.generation).exists()


def work(claims: list[Claim], sender: Sender, *, stopping: threading.Event | None = None) -> None:
    """Send each claimed webhook's due events in seq order until one fails, its batch ends, the
    lease's time is half spent or ``stopping`` is set; write the progress of all of them in one
    transaction now and then and at the end, which releases their leases."""
    started = time.monotonic()
    budget = lease_seconds() / 2
    live = list(claims)
    progress = _Progress()
    oldest: dict[int, int | None] = {}
    try:
        for claim in claims:
            if claim not in live:
                continue  # changed meanwhile (a write found it so): its change stands
            if stopping is not None and stopping.is_set():
                return
            if time.monotonic() - started > budget:
                return
            if claim.agent_id not in oldest:
                oldest[claim.agent_id] = webhook_reads.oldest_event_seq(claim.agent_id)
            first = oldest[claim.agent_id]
            if first is None or first > claim.cursor + 1:
                _deactivate(
                    claim,
                    f"events after seq {claim.cursor} were removed by the event retention "
                    "(ARTIFACTS_EVENT_RETENTION) before they were delivered; "
                    "replay from a stored seq to resume",
                )
                continue
            _work_one(claim, sender, live, progress, started, budget, stopping)
    finally:
        _flush(live, release=True)


def _work_one(
    claim: Claim,
    sender: Sender,
    live: list[Claim],
    progress: _Progress,
    started: float,
    budget: float,
    stopping: threading.Event | None,
) -> None:
    rows = list(
        webhook_reads.selected_events(claim.agent_id, claim.events, claim.kinds, claim.cursor)
        .filter(seq__lte=claim.upto)
        .values_list("seq", "type", "payload")[:BATCH]
    )
    scanned_to = claim.upto if len(rows) < BATCH else rows[-1][0]
    for seq, event_type, payload in rows:
        if stopping is not None and stopping.is_set():
            return
        if time.monotonic() - started > budget:
            return
        if progress.due():
            live[:] = _flush(live, release=False)
            progress.at, progress.attempts = time.monotonic(), 0
            if claim not in live:
                return
        if not _current(claim):
            return
        progress.attempts += 1
        if not _send(claim, sender, seq, event_type, payload):
            return
    claim.cursor = max(claim.cursor, scanned_to)


def _send(claim: Claim, sender: Sender, seq: int, event_type: str, payload: Any) -> bool:
    """One attempt at event ``seq``; True when it was delivered."""
    body = orjson.dumps({**payload, "agent": claim.slug})
    msg_id = message_id(claim.public_id, seq, claim.replays, claim.replay_upto)
    headers = signing.headers(claim.secret, msg_id, int(time.time()), body)
    timeout = float(settings.ARTIFACTS_WEBHOOK_TIMEOUT)
    answer: Answer = sender.post(claim.public_id, claim.url, body, headers, timeout)
    now = timezone.now()
    attempt = claim.attempts + 1
    claim.log_rows.append(
        WebhookDelivery(
            webhook_id=claim.pk,
            seq=seq,
            event_type=event_type,
            attempt=attempt,
            status=answer.status,
            error=answer.error,
            duration_ms=answer.duration_ms,
            at=now,
        )
    )
    claim.last = (seq, answer.status, now)
    metrics.WEBHOOK_DELIVERY_LATENCY.observe(answer.duration_ms / 1000)
    if answer.delivered:
        metrics.WEBHOOK_DELIVERIES.labels("delivered").inc()
        claim.cursor, claim.attempts, claim.failing_since = seq, 0, None
        return True
    sender.forget(claim.public_id)  # a failing receiver gets a fresh connection next time
    what = f"HTTP {answer.status}" if answer.status is not None else answer.error
    log.info(
        "webhook %s of agent %s: event %s not delivered (try %d): %s",
        claim.public_id,
        claim.slug,
        seq,
        attempt,
        what,
    )
    claim.attempts = attempt
    claim.failing_since = claim.failing_since or now
    give_up = float(settings.ARTIFACTS_WEBHOOK_GIVE_UP)
    if answer.status == 410:
        metrics.WEBHOOK_DELIVERIES.labels("gave_up").inc()
        _deactivate(claim, f"the receiver answered 410 Gone to event {seq}")
    elif (now - claim.failing_since).total_seconds() >= give_up:
        metrics.WEBHOOK_DELIVERIES.labels("gave_up").inc()
        _deactivate(
            claim,
            f"no delivery succeeded for {give_up:g} s (ARTIFACTS_WEBHOOK_GIVE_UP); "
            f"event {seq}'s last try: {what}",
        )
    else:
        metrics.WEBHOOK_DELIVERIES.labels("failed").inc()
        claim.next_attempt_at = now + timedelta(seconds=retry_delay(attempt))
    return False


def _flush(claims: list[Claim], *, release: bool) -> list[Claim]:
    """Write the claims' progress and their log in one transaction (renew or release their
    leases). Answers the claims still held as claimed: one changed meanwhile (through the API, or
    taken over by another deliverer) keeps only its log, and its batch stops."""
    if not claims:
        return []
    now = timezone.now()
    held: list[Claim] = []
    log_rows: list[WebhookDelivery] = []
    try:
        with transaction.atomic():
            for claim in claims:
                progress: dict[str, Any] = {
                    "lease_until": None if release else now + timedelta(seconds=lease_seconds()),
                    "lease_token": "" if release else claim.token,
                }
                if claim.last is not None:
                    progress.update(
                        last_seq=claim.last[0], last_status=claim.last[1], last_at=claim.last[2]
                    )
                state = dict(
                    cursor=claim.cursor,
                    attempts=claim.attempts,
                    failing_since=claim.failing_since,
                    next_attempt_at=claim.next_attempt_at if claim.attempts else now,
                    active=claim.active,
                    disabled_reason=claim.disabled_reason,
                )
                ours = Webhook.objects.filter(pk=claim.pk, lease_token=claim.token)
                if ours.filter(generation=claim.generation).update(**state, **progress):
                    held.append(claim)
                    log_rows.extend(claim.log_rows)
                elif ours.update(**progress) or Webhook.objects.filter(pk=claim.pk).exists():
                    log_rows.extend(claim.log_rows)  # changed meanwhile: only the log is kept
            if log_rows:
                WebhookDelivery.objects.bulk_create(log_rows)
    except Exception:
        log.exception("writing the progress of %d webhook(s) failed", len(claims))
        return []
    finally:
        for claim in claims:
            claim.log_rows = []
    return held


def backlog() -> int:
    """Seqs the active webhooks' cursors have still to pass, summed (events filtered out
    included): the ``webhook_backlog`` gauge, one aggregate however many webhooks there are."""
    total = Webhook.objects.filter(active=True).aggregate(
        n=Sum(F("agent__last_seq") - F("cursor"))
    )["n"]
    return int(total or 0)


def prune_log(now: datetime | None = None) -> int:
    """Delete delivery attempts older than the event retention (their events are gone too)."""
    now = now or timezone.now()
    before = now - timedelta(seconds=int(settings.ARTIFACTS_EVENT_RETENTION))
    deleted, _ = WebhookDelivery.objects.filter(at__lt=before).delete()
    return deleted
