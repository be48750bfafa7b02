"""The admin pages' SQL is bounded: the artifact list, an artifact's page and the agent dashboard
run the same number of statements at 1,000 and at 100,000 stored records and events, and the
dashboard's statements use their indexes (EXPLAIN)."""

from __future__ import annotations

import datetime

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from artifacts_app import services
from artifacts_app.models import Agent, Artifact, Event
from tests.plans import explain

pytestmark = [pytest.mark.django_db, pytest.mark.slow, pytest.mark.timeout(900)]

LIST = reverse("admin:artifacts_app_artifact_changelist")


def add_rows(agent: Agent, start: int, stop: int) -> None:
    """Records and events in bulk (tagging 100,000 one by one is the services' benchmark, not
    this test's), spread over the last 30 days."""
    now = datetime.datetime.now(datetime.UTC)
    artifacts, events = [], []
    for n in range(start, stop):
        at = now - datetime.timedelta(seconds=(n * 26) % (30 * 86400))
        artifacts.append(
            Artifact(
                id=f"art_{n:024x}", agent=agent, kind="report" if n % 3 else "reviewed-pr",
                key=f"k-{n}", title=f"Row {n}", data={"n": n}, created_at=at, updated_at=at,
            )
        )  # fmt: skip
        kind = "artifact.tagged" if n % 4 else "artifact.deleted"
        payload = {"type": kind, "seq": n + 1000, "record": {"id": f"art_{n:024x}"}}
        if kind == "artifact.deleted":
            payload["reason"] = "evicted"
        events.append(
            Event(
                agent=agent, seq=n + 1000, type=kind, artifact_id=f"art_{n:024x}",
                payload=payload, created_at=at,
            )
        )  # fmt: skip
        if len(artifacts) == 5000:
            Artifact.objects.bulk_create(artifacts)
            Event.objects.bulk_create(events)
            artifacts, events = [], []
    Artifact.objects.bulk_create(artifacts)
    Event.objects.bulk_create(events)


def statements(client, url: str) -> list[str]:
    client.get(url)  # warm: per-process caches (content types) fill on a first visit
    with CaptureQueriesContext(connection) as captured:
        response = client.get(url)
    assert response.status_code == 200, url
    return [q["sql"] for q in captured.captured_queries]


def test_admin_pages_run_as_many_statements_at_100k_as_at_1k(staff_client, reviewer):
    record = services.artifact_tag(
        agent=reviewer, kind="report", key="real", data={"a": 1}, contents="# hi",
        content_type="text/markdown",
    ).record  # fmt: skip
    services.artifact_tag(agent=reviewer, kind="report", key="real", data={"a": 2})
    pages = {
        "list": LIST + "?agent=reviewer",
        "list, kind": LIST + "?agent=reviewer&kind=report",
        "list, a year": LIST + f"?agent=reviewer&updated_at__year={record.updated_at.year}",
        "list, a month": LIST
        + f"?agent=reviewer&updated_at__year={record.updated_at.year}"
        + f"&updated_at__month={record.updated_at.month}",
        "artifact": reverse("admin:artifacts_app_artifact_change", args=[record.id]),
        "diff": reverse("admin:artifacts_app_artifact_diff", args=[record.id]) + "?from=1&to=2",
        "dashboard": reverse("admin:artifacts_app_agent_dashboard", args=[reviewer.pk]),
        "agents": reverse("admin:artifacts_app_agent_changelist"),
    }
    add_rows(reviewer, 0, 1_000)
    small = {name: statements(staff_client, url) for name, url in pages.items()}
    add_rows(reviewer, 1_000, 100_000)
    assert Event.objects.filter(agent=reviewer).count() > 100_000
    large = {name: statements(staff_client, url) for name, url in pages.items()}
    for name in pages:
        assert len(large[name]) == len(small[name]), (name, small[name], large[name])
        for sql in large[name]:
            big = "artifacts_app_artifact" in sql or "artifacts_app_event" in sql
            assert not big or "COUNT(" not in sql.upper() or "GROUP BY" in sql.upper(), sql


def test_dashboard_statements_use_their_indexes(reviewer, freeform, capsys):
    from artifacts_app.selectors import dashboard

    # Another agent holds most rows, as on a shared store: the chosen agent's are a small part
    # (its `max`, 1,000: at 10% of the table PostgreSQL's planner may rightly prefer a scan).
    add_rows(reviewer, 0, 1_000)
    add_rows(freeform, 1_000, 50_000)
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")
    with CaptureQueriesContext(connection) as captured:
        dashboard.agent_activity(reviewer.pk)
        dashboard.agent_kind_counts(reviewer.pk)
        dashboard.agent_latest_events(reviewer.pk)
    sqls = [q["sql"] for q in captured.captured_queries]
    assert len(sqls) == 4
    plans = [explain(sql) for sql in sqls]
    with capsys.disabled():  # the plans, for the record
        for sql, plan in zip(sqls, plans, strict=True):
            print(f"\n--- {sql}\n{plan}")
    tags, evictions, kinds, latest = plans
    assert "event_agent_type_created" in tags and "event_agent_type_created" in evictions
    assert (
        "artifact_agent_" in kinds
    )  # an index that starts with the agent (SQLite: kind, covering)
    # the (agent, seq) unique constraint: SQLite names its index sqlite_autoindex_…
    assert "event_agent_seq_uniq" in latest or "autoindex_artifacts_app_event" in latest
    for plan in plans:
        assert "SCAN artifacts_app_event\n" not in plan + "\n"  # never the whole table
