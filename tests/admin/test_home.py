"""The admin's home, what shipped: every agent's newest records, newest first, one row each with
a preview; filters, keyset pages, bad input as a message; the same statements per page at 10 and
at 10,000 stored records."""

from __future__ import annotations

import datetime

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from artifacts_app import selectors, services
from artifacts_app.models import Agent, Artifact

pytestmark = [pytest.mark.django_db]

HOME = "/admin/"
LONG = "https://github.com/some-organisation/a-rather-long-repository-name/pull/"


@pytest.fixture
def two_agents(db, reviewer):
    """Two agents with records: the declared `reviewer` (made here if a test before this one
    flushed the database) and a freeform `writer`."""
    services.agent_create(slug="writer")
    services.session_create(agent="reviewer", sid="s_a", owner=None)
    services.artifact_tag(
        agent="reviewer", kind="reviewed-pr", key=f"{LONG}123456", title=f"Reviewed {LONG}123456",
        data={"url": f"{LONG}123456", "verdict": "approve"}, session_id="s_a", turn_id="t-1",
    )  # fmt: skip
    services.artifact_tag(
        agent="reviewer", kind="reviewed-pr", key=f"{LONG}123457", title=f"Reviewed {LONG}123457",
        data={"url": f"{LONG}123457", "verdict": "reject"},
    )  # fmt: skip
    services.artifact_tag(
        agent="writer", kind="note", key="notes/today.md", title="Today",
        data={"words": 3}, contents=b"# Heading\n\nFirst line\nsecond\nthird\nfourth\nfifth",
        content_type="text/markdown",
    )  # fmt: skip


def test_admin_opens_on_what_shipped_across_agents_newest_first(staff_client, two_agents):
    response = staff_client.get(HOME)
    assert response.status_code == 200
    html = response.content.decode()
    assert "What shipped" in html
    rows = html.split('<tr data-id="')[1:]
    assert [r.split('data-agent="')[1].split('"')[0] for r in rows] == [
        "writer",
        "reviewer",
        "reviewer",
    ]
    # The distinguishing ends of two long keys are both on the page, whole on hover.
    assert "123457</span>" in rows[1] and "123456</span>" in rows[2]
    assert f'title="Reviewed {LONG}123456 · {LONG}123456' in rows[2]
    # Session and turn, version, a Markdown preview rendered with its first lines only.
    assert "s_a" in rows[2] and "t-1" in rows[2] and ">v1<" in rows[2]
    assert '<p class="p-h">Heading</p>' in rows[0] and "fourth" not in rows[0]
    assert "verdict" in rows[2] and "approve" in rows[2]


def test_pinned_is_an_svg_mark_not_an_emoji(staff_client, two_agents):
    record = selectors.artifacts_page(agent="reviewer").records()[0]
    services.artifact_pin(agent="reviewer", artifact_id=record.id, pinned=True)
    html = staff_client.get(HOME).content.decode()
    assert 'aria-label="pinned"' in html and "📌" not in html


@pytest.mark.parametrize(
    ("query", "agents"),
    [
        ("?agent=writer", ["writer"]),
        ("?kind=reviewed-pr", ["reviewer", "reviewer"]),
        ("?source=model", []),
        ("?session=s_a", ["reviewer"]),
        ("?agent=reviewer&session=s_a", ["reviewer"]),
        ("?since=2000-01-01&until=2000-01-02", []),
    ],
)
def test_filters(staff_client, two_agents, query, agents):
    html = staff_client.get(HOME + query).content.decode()
    rows = html.split('<tr data-id="')[1:]
    assert [r.split('data-agent="')[1].split('"')[0] for r in rows] == agents


@pytest.mark.parametrize(
    "query",
    [
        "?cursor=nonsense",
        "?since=yesterday",
        "?until=9999-12-31",
        "?source=robot",
        "?agent=nobody",
        '?where={"a":',
    ],
)
def test_bad_filters_are_a_message_not_an_error(staff_client, two_agents, query):
    response = staff_client.get(HOME + query)
    assert response.status_code == 200
    assert 'class="error"' in response.content.decode()
    assert response.content.decode().count('<tr data-id="') == 3  # the unfiltered first page


def test_non_staff_never_reach_it(client, django_user_model, two_agents):
    user = django_user_model.objects.create_user("alice", password="alice-pw-123")
    client.force_login(user)
    response = client.get(HOME)
    assert response.status_code == 302 and "/admin/login/" in response["Location"]
    assert client.get(reverse("admin-home-row") + "?agent=writer&id=x").status_code == 302


def test_one_row_for_a_record_that_arrived(staff_client, two_agents):
    record = selectors.artifacts_page(agent="writer").records()[0]
    response = staff_client.get(reverse("admin-home-row") + f"?agent=writer&id={record.id}")
    assert response.status_code == 200
    assert response.content.decode().startswith(f'<tr data-id="{record.id}" data-agent="writer"')
    assert staff_client.get(reverse("admin-home-row") + "?agent=writer&id=nope").status_code == 404


def _bulk(agent: Agent, count: int) -> None:
    now = datetime.datetime.now(datetime.UTC)
    rows = [
        Artifact(
            id=f"art_{agent.pk:04x}{n:020x}", agent=agent, kind="report", key=f"k-{n}",
            title=f"Row {n}", data={"n": n}, created_at=now - datetime.timedelta(seconds=n),
            updated_at=now - datetime.timedelta(seconds=n),
        )
        for n in range(count)
    ]  # fmt: skip
    Artifact.objects.bulk_create(rows, batch_size=2000)


def _statements(client, url: str) -> int:
    client.get(url)  # warm per-process caches
    with CaptureQueriesContext(connection) as captured:
        response = client.get(url)
    assert response.status_code == 200
    return len(captured.captured_queries)


@pytest.mark.slow
def test_the_same_statements_per_page_at_10_and_10000_records(staff_client):
    small = services.agent_create(slug="small")
    _bulk(small, 10)
    urls = [HOME, HOME + "?kind=report", HOME + "?agent=small", HOME + "?q=row"]
    at_10 = [_statements(staff_client, url) for url in urls]
    big = services.agent_create(slug="big")
    _bulk(big, 10_000)
    page = staff_client.get(HOME).content.decode()
    older = page.split('class="older" href="')[-1] if 'class="older"' in page else None
    assert 'href="?cursor=' in page  # a next page, by cursor
    at_10000 = [_statements(staff_client, url) for url in urls]
    assert at_10 == at_10000, (at_10, at_10000)
    cursor = page.split('href="?cursor=')[1].split('"')[0]
    assert _statements(staff_client, HOME + "?cursor=" + cursor) == at_10000[0]
    assert older is not None


@pytest.mark.parametrize(
    ("query", "keys"),
    [
        ("?q=123457", [f"{LONG}123457"]),
        ("?q=reviewed+-reject", [f"{LONG}123456"]),
        ('?where={"verdict":"approve"}', [f"{LONG}123456"]),
        ("?q=heading", ["notes/today.md"]),  # the text of a Markdown content
        ("?agent=writer&q=reviewed", []),
    ],
)
def test_search_box_takes_q_and_where_across_agents(staff_client, two_agents, query, keys):
    html = staff_client.get(HOME + query).content.decode()
    rows = html.split('<tr data-id="')[1:]
    found = [r.split('class="row-link">')[0].split(" · ")[-1].rstrip('"') for r in rows]
    assert len(rows) == len(keys), found
    for row, key in zip(rows, keys, strict=True):
        assert key in row


@pytest.mark.parametrize(
    ("query", "says"),
    [('?where={"$bogus":1}', "$bogus"), ("?where=[1", "where"), ("?q=" + "w+" * 40, "32")],
)
def test_a_malformed_search_is_a_message_naming_the_part(staff_client, two_agents, query, says):
    response = staff_client.get(HOME + query)
    assert response.status_code == 200
    html = response.content.decode()
    message = html.split('class="error"')[1].split("</li>")[0]
    assert says in message


@pytest.mark.parametrize("who", ["anonymous", "staff"])
def test_root_leads_to_the_admin_playground_and_docs(client, django_user_model, who, settings):
    settings.DEBUG = False
    if who == "staff":
        client.force_login(django_user_model.objects.create_user("s", is_staff=True))
    response = client.get("/")
    assert response.status_code == 200  # never a redirect: no loop, logged in or not
    html = response.content.decode()
    for href in ('href="/admin/"', 'href="/playground/"', 'href="/api/docs/"'):
        assert href in html
    assert client.head("/").status_code == 200
