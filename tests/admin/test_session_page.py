"""The session pages (admin): owner, creation, last activity, bounded counts, artifacts by turn; and
their SQL, the same number of statements at 1,000 and at 100,000 stored records."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from artifacts_app import selectors, services
from artifacts_app.models import Artifact, Session

pytestmark = pytest.mark.django_db

LIST = reverse("admin:artifacts_app_session_changelist")


def change_url(session: Session) -> str:
    return reverse("admin:artifacts_app_session_change", args=[session.pk])


@pytest.fixture
def staff(client, django_user_model):
    client.force_login(
        django_user_model.objects.create_user("sup", password="x-12345678", is_staff=True)
    )
    return client


@pytest.fixture
def turns(reviewer, alice):
    session = services.session_create(agent=reviewer, sid="s_turns", owner=alice)
    tag = services.artifact_tag
    tag(
        agent=reviewer,
        kind="report",
        key="a",
        title="A1",
        data={},
        session_id="s_turns",
        turn_id="t-1",
    )
    tag(
        agent=reviewer,
        kind="report",
        key="b",
        title="B2",
        data={},
        session_id="s_turns",
        turn_id="t-2",
    )
    tag(
        agent=reviewer,
        kind="report",
        key="c",
        title="C1",
        data={},
        session_id="s_turns",
        turn_id="t-1",
    )
    tag(agent=reviewer, kind="report", key="d", title="D0", data={}, session_id="s_turns")
    tag(
        agent=reviewer,
        kind="report",
        key="e",
        title="E2",
        data={},
        session_id="s_turns",
        turn_id="t-2",
    )
    return session


def test_turns_group_newest_first_with_their_counts(turns):
    grouped = selectors.session_turns(agent="reviewer", sid="s_turns")
    assert [t.turn_id for t in grouped.turns] == ["t-2", None, "t-1"]
    assert [[r.title for r in t.records] for t in grouped.turns] == [
        ["E2", "B2"],
        ["D0"],
        ["C1", "A1"],
    ]
    assert grouped.shown == 5 and not grouped.more
    summary = selectors.session_summary(agent="reviewer", sid="s_turns")
    assert (summary.owner, summary.artifact_count, summary.count_label) == ("alice", 5, "5")
    newest = Artifact.objects.get(title="E2").updated_at
    assert summary.last_activity == newest and summary.created_at == turns.created_at


def test_session_page_shows_owner_times_counts_and_turns(staff, turns):
    body = staff.get(change_url(turns)).content.decode()
    summary = selectors.session_summary(agent="reviewer", sid="s_turns")
    assert re.search(r'data-field="owner">alice<', body)
    assert f'data-field="created">{selectors.iso_seconds(turns.created_at)}<' in body
    assert f'data-field="last">{selectors.iso_seconds(summary.last_activity)}<' in body
    assert 'data-field="count">5<' in body and 'data-field="turns">3<' in body
    order = re.findall(r'<section class="session-turn" data-turn="([^"]*)"', body)
    assert order == ["t-2", "", "t-1"]
    counts = re.findall(r'<span class="turn-count">(\d+)</span>', body)
    assert counts == ["2", "1", "2"]
    assert body.index(">E2<") < body.index(">B2<") < body.index(">D0<") < body.index(">C1<")


def test_empty_session_page_and_unknown_session(staff, reviewer):
    empty = services.session_create(agent=reviewer, sid="s_empty")
    body = staff.get(change_url(empty)).content.decode()
    assert "No artifacts in this session." in body and 'data-field="owner">—<' in body
    missing = staff.get(reverse("admin:artifacts_app_session_change", args=[999999]))
    assert missing.status_code == 302  # the admin's "doesn't exist" redirect, not a 500


def test_changelist_columns_and_the_bounded_count(staff, reviewer, alice):
    services.session_create(agent=reviewer, sid="s_many", owner=alice)
    services.session_create(agent=reviewer, sid="s_none")
    session = Session.objects.get(sid="s_many")
    now = timezone.now()
    Artifact.objects.bulk_create(
        Artifact(
            id=f"art_many{n:020x}",
            agent=reviewer,
            kind="report",
            data={},
            session=session,
            created_at=now,
            updated_at=now - timedelta(seconds=n),
        )
        for n in range(selectors.sessions.PICKER_CAP + 20)
    )
    body = staff.get(LIST).content.decode()
    row = re.search(r"<tr>.*?s_many.*?</tr>", body, re.S).group(0)
    assert ">100+<" in row and selectors.iso_seconds(now) in row and "alice" in row
    empty_row = re.search(r"<tr>.*?s_none.*?</tr>", body, re.S).group(0)
    assert ">0<" in empty_row and "—" in empty_row  # no activity, no owner: one sign
    page = staff.get(change_url(session)).content.decode()
    assert 'data-field="count">120<' in page  # the session page counts up to 1,000


# --- the statements at 1k and 100k --------------------------------------------------------------


def _fill(reviewer, sessions: list[Session], start: int, stop: int) -> None:
    base = timezone.now() - timedelta(days=10)
    batch = []
    for n in range(start, stop):
        # Most rows in the big session (the one whose page is read), the rest spread or sessionless.
        session = sessions[0] if n % 4 else (sessions[1 + n % 7] if n % 8 else None)
        batch.append(
            Artifact(
                id=f"art_{n:024x}",
                agent=reviewer,
                kind="report",
                key=None,
                title=f"Row {n}",
                data={"n": n},
                session=session,
                turn_id=f"t-{n // 50}",
                created_at=base + timedelta(seconds=n),
                updated_at=base + timedelta(seconds=n),
            )
        )
        if len(batch) == 5000:
            Artifact.objects.bulk_create(batch)
            batch = []
    Artifact.objects.bulk_create(batch)


def _statements(client, url: str) -> list[str]:
    with CaptureQueriesContext(connection) as captured:
        response = client.get(url)
    assert response.status_code == 200
    return [q["sql"] for q in captured.captured_queries]


def _artifact_reads(statements: list[str]) -> list[str]:
    return [
        s
        for s in statements
        if "artifacts_app_artifact" in s and s.lstrip().upper().startswith("SELECT")
    ]


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_session_pages_cost_the_same_statements_at_1k_and_100k(staff, reviewer, alice):
    sessions = [
        services.session_create(agent=reviewer, sid=f"s_{n}", owner=alice if n % 2 else None)
        for n in range(8)
    ]
    pages = [LIST, f"{LIST}?agent__id__exact={reviewer.pk}", change_url(sessions[0])]
    _fill(reviewer, sessions, 0, 1_000)
    for url in pages:  # warm: the first admin page also loads caches (content types), once
        staff.get(url)
    small = {url: _statements(staff, url) for url in pages}
    _fill(reviewer, sessions, 1_000, 100_000)
    large = {url: _statements(staff, url) for url in pages}
    for url in pages:
        only = set(small[url]) ^ set(large[url])
        assert len(small[url]) == len(large[url]), (url, sorted(s[:200] for s in only))
        for sql in _artifact_reads(large[url]):
            # Every read of the artifact table is bounded: a LIMIT (the page, the newest row, the
            # count's inner walk); a COUNT only over such a bounded walk.
            assert re.search(r"\bLIMIT\b", sql, re.I), sql
            assert "COUNT(*) FROM (SELECT 1" in sql or "COUNT(" not in sql.upper(), sql

    page = staff.get(change_url(sessions[0])).content.decode()
    assert 'data-field="count">1000+<' in page
    assert "The newest 200 artifacts" in page
    assert re.findall(r'data-turn="([^"]*)"', page)[0] == "t-1999"  # newest turn first

    # The session's reads walk an index, never the whole table (on PostgreSQL a LIMIT without the
    # index's ORDER BY was planned as a sequential scan: 35 ms a session at 100k).
    explain, scan = (
        ("EXPLAIN QUERY PLAN ", "SCAN artifacts_app_artifact ")
        if connection.vendor == "sqlite"
        else ("EXPLAIN ", "Seq Scan on artifacts_app_artifact")
    )
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    for url in pages:
        for sql in _artifact_reads(large[url]):
            with connection.cursor() as cursor:
                cursor.execute(explain + sql.replace("%", "%%"))
                plan = " ".join(str(row) for row in cursor.fetchall())
            assert scan not in plan + " ", (url, sql, plan)
