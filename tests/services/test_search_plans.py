"""Search's query plans (API.md "Search"): a ``q``, a ``where`` on an indexed path and the list
across agents never read the whole artifact table, on SQLite and on PostgreSQL."""

from __future__ import annotations

import datetime

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from artifacts_app import access, selectors, services
from artifacts_app.models import Agent, Artifact, Session
from tests.plans import explain

AGENTS = 10
PER_AGENT = 2_000


@pytest.fixture
def store(db, alice):
    """``AGENTS`` agents of ``PER_AGENT`` records each, in bulk, then indexed by the backfill (as a
    store upgraded to search is); a rare word in a few records, a common one in every tenth."""
    now = datetime.datetime.now(datetime.UTC)
    agents = [services.agent_create(slug=f"plan-{a}", max_artifacts=10_000) for a in range(AGENTS)]
    session = Session.objects.create(agent=agents[0], sid="alices", owner=alice)
    rows = []
    for a, agent in enumerate(agents):
        for n in range(PER_AGENT):
            at = now - datetime.timedelta(seconds=a * PER_AGENT + n)
            words = "quince" if n % 500 == 0 else ("common" if n % 10 == 0 else "plain")
            rows.append(
                Artifact(
                    id=f"art_{a:04x}{n:020x}", agent=agent, kind="note", key=f"k-{n}",
                    title=f"Row {n} {words}", data={"pr": {"author": f"u{n % 50}", "n": n}},
                    session=session if a == 0 and n % 100 == 0 else None,
                    created_at=at, updated_at=at,
                )
            )  # fmt: skip
    Artifact.objects.bulk_create(rows, batch_size=5_000)
    Agent.objects.filter(pk__in=[a.pk for a in agents]).update(artifact_count=PER_AGENT)
    assert services.search_backfill(batch=5_000) == AGENTS * PER_AGENT
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")
    return agents


def plans_of(read) -> list[str]:
    with CaptureQueriesContext(connection) as captured:
        page = read()
    assert page.rows, "the search found nothing: the plan would prove nothing"
    sqls = [
        q["sql"]
        for q in captured.captured_queries
        if 'FROM "artifacts_app_artifact"' in q["sql"] and "ORDER BY" in q["sql"]
    ]
    assert len(sqls) == 1
    plans = [explain(sql) for sql in sqls]
    print("\n---", sqls[0], "\n", plans[0])  # for the record (-s)
    return plans


def assert_no_scan(plan: str) -> None:
    if connection.vendor == "postgresql":
        assert "Seq Scan on artifacts_app_artifact" not in plan, plan
    else:
        # A walk of an index in the page's order (stopping at the page's end) is no table scan.
        for line in plan.splitlines():
            if "SCAN artifacts_app_artifact" in line:
                assert "USING INDEX" in line or "USING COVERING INDEX" in line, plan


def test_q_reads_the_words_index_not_the_table(store):
    agent = store[3]
    for q in ("quince", "common", "row common", "qui", '"row 500"'):
        for plan in plans_of(lambda q=q: selectors.artifacts_page(agent=agent, q=q)):
            assert_no_scan(plan)


def test_where_on_a_path_reads_an_index_not_the_table(store):
    agent = store[5]
    for where in (
        {"pr.author": "u7"},
        {"pr.author": {"$in": ["u1", "u2"]}},
        {"pr.n": {"$gte": 1_990}},
        {"pr.author": "u7", "pr.n": {"$lt": 100}},
    ):
        for plan in plans_of(lambda w=where: selectors.artifacts_page(agent=agent, where=w)):
            assert_no_scan(plan)
    for plan in plans_of(
        lambda: selectors.artifacts_page(agent=agent, q="common", where={"pr.author": "u10"})
    ):
        assert_no_scan(plan)


def test_the_list_across_agents_reads_an_index_not_the_table(store, alice, django_user_model):
    staff = django_user_model.objects.create_user("stu", is_staff=True)
    as_staff = access.visible_across(access.caller_from_user(staff))
    as_alice = access.visible_across(access.caller_from_user(alice))
    reads = [
        lambda: selectors.artifacts_across(visible=as_staff),
        lambda: selectors.artifacts_across(visible=as_staff, q="quince"),
        lambda: selectors.artifacts_across(visible=as_staff, where={"pr.author": "u3"}),
        lambda: selectors.artifacts_across(visible=as_staff, agents=["plan-1", "plan-2"]),
        lambda: selectors.artifacts_across(visible=as_alice),
        lambda: selectors.artifacts_across(visible=as_alice, q="common"),
    ]
    for read in reads:
        for plan in plans_of(read):
            assert_no_scan(plan)
