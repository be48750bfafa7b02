"""The artifact changelist at 100,000 rows: no COUNT, every query bounded (asserted on the SQL)."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from artifacts_app.models import Artifact

pytestmark = [pytest.mark.django_db, pytest.mark.slow]

ROWS = 100_000
LIST = reverse("admin:artifacts_app_artifact_changelist")


@pytest.fixture
def many(reviewer, freeform):
    """Fixture rows in bulk (tagging 100,000 one by one is the services' benchmark, not this test's)."""
    start = timezone.now() - timedelta(days=30)
    batch = []
    for n in range(ROWS):
        agent = reviewer if n % 10 else freeform
        batch.append(
            Artifact(
                id=f"art_{n:024x}",
                agent=agent,
                kind="report" if n % 3 else "reviewed-pr",
                key=f"k-{n}" if n % 2 else None,
                title=f"Row {n}",
                data={"n": n},
                source="model" if n % 5 == 0 else "host",
                created_at=start + timedelta(seconds=n),
                updated_at=start + timedelta(seconds=n),
            )
        )
        if len(batch) == 5000:
            Artifact.objects.bulk_create(batch)
            batch = []
    return reviewer


def artifact_selects(queries) -> list[str]:
    return [
        q["sql"]
        for q in queries
        if q["sql"].lstrip().upper().startswith("SELECT") and "artifacts_app_artifact" in q["sql"]
    ]


QUERIES = [
    "",
    "?agent=reviewer",
    "?agent=reviewer&p=3",
    "?agent=reviewer&kind=report",
    "?agent=reviewer&source__exact=model&has_content=no",
    "?agent=free&q=Row%2099",
    "?agent=reviewer&updated_at__year=2026",
    "?agent=reviewer&_facets=1",  # facet counts stay off
]


def test_changelist_at_100k_rows_issues_no_unbounded_query(admin_client, many):
    # One test, one 100,000-row fixture: the pages below are all checked against it.
    for query in QUERIES:
        with CaptureQueriesContext(connection) as captured:
            response = admin_client.get(LIST + query)
        assert response.status_code == 200, query
        selects = artifact_selects(captured.captured_queries)
        assert selects, f"{query}: the page read no artifacts at all"
        for sql in selects:
            assert "COUNT(" not in sql.upper(), sql
            assert re.search(r"\bLIMIT\b", sql, re.IGNORECASE), f"{query}: unbounded: {sql}"

    # Paged newest first, without a count: "older" and "newer" links only.
    first = admin_client.get(LIST + "?agent=reviewer").content.decode()
    assert "Row 99999" in first and "older" in first
    second = admin_client.get(LIST + "?agent=reviewer&p=2").content.decode()
    assert "Row 99999" not in second and "newer" in second

    if connection.vendor == "sqlite":  # the page walks the (agent, updated_at, id) index
        with CaptureQueriesContext(connection) as captured:
            admin_client.get(LIST + "?agent=reviewer")
        page_sql = [s for s in artifact_selects(captured.captured_queries) if "ORDER BY" in s]
        with connection.cursor() as cursor:
            cursor.execute("EXPLAIN QUERY PLAN " + page_sql[-1])
            plan = " ".join(str(row) for row in cursor.fetchall())
        assert "artifact_agent_updated" in plan, plan
        assert "TEMP B-TREE" not in plan, plan
