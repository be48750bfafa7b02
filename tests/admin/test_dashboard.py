"""The agent dashboard: fill, tags and evictions per hour (24 hours, 7 days), kinds with counts,
the latest events; each figure checked against seeded events at known hours."""

from __future__ import annotations

import datetime
import re

import pytest
from django.urls import reverse

from artifacts_app import services
from artifacts_app.models import Event
from artifacts_app.selectors import dashboard

pytestmark = pytest.mark.django_db

UTC = datetime.UTC


def seed_events(agent, plan: dict[int, tuple[int, int]], *, now: datetime.datetime) -> None:
    """``plan``: hours ago → (tags, evictions), stored as the tag service stores them. Each
    eviction comes with a plain delete beside it, which the chart must not count."""
    rows, seq = [], agent.last_seq
    for hours_ago, (tags, evictions) in plan.items():
        # The start of the hour: never in the future, whatever the minute the test runs at.
        at = now.replace(minute=0, second=0, microsecond=0) - datetime.timedelta(hours=hours_ago)
        for kind, count, reason in (
            ("artifact.tagged", tags, None),
            ("artifact.deleted", evictions, "evicted"),
            ("artifact.deleted", evictions, "deleted"),
        ):
            for _ in range(count):
                seq += 1
                payload = {"type": kind, "seq": seq, "at": at.isoformat(), "record": {"id": "x"}}
                if reason:
                    payload["reason"] = reason
                rows.append(
                    Event(
                        agent=agent, seq=seq, type=kind, artifact_id="x", payload=payload,
                        created_at=at,
                    )
                )  # fmt: skip
    Event.objects.bulk_create(rows, batch_size=2000)
    agent.last_seq = seq
    agent.save(update_fields=["last_seq"])


def test_activity_counts_tags_and_evictions_per_hour(reviewer):
    now = datetime.datetime.now(UTC)
    seed_events(
        reviewer, {0: (3, 1), 5: (7, 2), 23: (1, 0), 24: (4, 4), 100: (2, 1), 200: (9, 9)}, now=now
    )
    week = dashboard.agent_activity(reviewer.pk, now=now)
    assert len(week.hours) == 168 and week.hours[-1] == now.replace(
        minute=0, second=0, microsecond=0
    )
    assert week.tagged[-1] == 3 and week.evicted[-1] == 1
    assert week.tagged[-6] == 7 and week.evicted[-6] == 2
    assert week.tagged[-24] == 1 and week.tagged[-25] == 4 and week.evicted[-25] == 4
    assert week.tagged[-101] == 2
    assert sum(week.tagged) == 3 + 7 + 1 + 4 + 2  # 200 hours ago is out of the week
    assert sum(week.evicted) == 1 + 2 + 4 + 1  # plain deletes are not evictions
    day = week.last(24)
    assert sum(day.tagged) == 3 + 7 + 1 and sum(day.evicted) == 3


def test_kind_counts_and_latest_events(reviewer):
    for n in range(3):
        services.artifact_tag(agent=reviewer, kind="report", key=f"r{n}", data={})
    services.artifact_tag(
        agent=reviewer, kind="reviewed-pr", key="p", data={"url": "https://x/pull/1"}
    )
    assert dashboard.agent_kind_counts(reviewer.pk) == [("report", 3), ("reviewed-pr", 1)]
    latest = dashboard.agent_latest_events(reviewer.pk, limit=2)
    assert [e["seq"] for e in latest] == [4, 3]


def test_dashboard_page_draws_the_seeded_counts(staff_client, reviewer):
    now = datetime.datetime.now(UTC)
    seed_events(reviewer, {0: (3, 1), 5: (7, 2), 30: (4, 4)}, now=now)
    services.artifact_tag(agent=reviewer, kind="report", key="r", title="<b>x</b>", data={})
    url = reverse("admin:artifacts_app_agent_dashboard", args=[reviewer.pk])
    body = staff_client.get(url).content.decode()
    hour = (now - datetime.timedelta(hours=5)).strftime("%Y-%m-%dT%H:00Z")
    assert re.search(rf'id="tags-24h"[^>]*data-total="{3 + 7 + 1}"', body)  # +1: the live tag
    assert re.search(r'id="evictions-24h"[^>]*data-total="3"', body)
    assert re.search(rf'id="tags-7d"[^>]*data-total="{3 + 7 + 4 + 1}"', body)
    assert f'data-hour="{hour}" data-count="7"' in body
    assert '1</strong> of <strong id="fill-max">1000' in body
    assert "<td>report</td>" in body
    assert "&lt;b&gt;x&lt;/b&gt;" in body and "<b>x</b>" not in body  # the feed, escaped
    assert f'data-stream="/reviewer/v1/events" data-after="{reviewer.last_seq + 1}"' in body
    listing = staff_client.get(reverse("admin:artifacts_app_agent_changelist")).content.decode()
    assert f'href="{url}"' in listing


def test_dashboard_is_for_staff_only(client, alice, reviewer):
    url = reverse("admin:artifacts_app_agent_dashboard", args=[reviewer.pk])
    assert client.get(url).status_code == 302
    client.force_login(alice)
    response = client.get(url)
    assert response.status_code == 302 and "/login/" in response["Location"]


def test_dashboard_of_an_unknown_agent_is_404(staff_client):
    assert staff_client.get("/admin/artifacts_app/agent/999999/dashboard/").status_code == 404
