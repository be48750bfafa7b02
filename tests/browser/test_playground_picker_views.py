"""The playground's session picker, server side (Django test client): owner, time and count per
session, the newest preselected, search by id; hidden sessions never offered."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.utils import timezone

from artifacts_app import selectors, services
from artifacts_app.models import Session

pytestmark = pytest.mark.django_db


@pytest.fixture
def picker(reviewer, alice, bob):
    base = timezone.now() - timedelta(hours=1)
    for n, (sid, owner) in enumerate(
        [("s_old", alice), ("s_bobs", bob), ("s_mid", alice), ("s_new", alice)]
    ):
        services.session_create(agent=reviewer, sid=sid, owner=owner)
        Session.objects.filter(sid=sid).update(created_at=base + timedelta(minutes=n))
    for n in range(3):
        services.artifact_tag(
            agent=reviewer, kind="report", title=f"r{n}", data={}, session_id="s_mid", turn_id="t-1"
        )
    return reviewer


def options(response) -> list[dict[str, str]]:
    body = response.content.decode()
    return [
        dict(re.findall(r'(value|data-owner|data-created|data-count)="([^"]*)"', tag))
        | {"text": text}
        for tag, text in re.findall(r'<option (value="s_[^>]*)>([^<]*)</option>', body)
    ]


def test_no_session_given_opens_the_newest(client, alice, picker):
    client.force_login(alice)
    response = client.get("/playground/", {"agent": "reviewer"})
    assert response.status_code == 302
    assert response["Location"] == "/playground/?agent=reviewer&session=s_new"


def test_picker_shows_owner_time_and_count_of_visible_sessions_newest_first(client, alice, picker):
    client.force_login(alice)
    response = client.get("/playground/", {"agent": "reviewer", "session": "s_new"})
    shown = options(response)
    assert [o["value"] for o in shown] == ["s_new", "s_mid", "s_old"]  # not bob's
    mid = shown[1]
    created = Session.objects.get(sid="s_mid").created_at
    assert mid["data-owner"] == "alice" and mid["data-count"] == "3"
    assert mid["data-created"] == selectors.iso_seconds(created)
    assert mid["text"] == f"s_mid · alice · {selectors.iso_seconds(created)} · 3 artifacts"
    assert re.search(r'<option value="s_new"[^>]*selected', response.content.decode())


def test_an_agent_without_sessions_asks_for_one(client, alice, reviewer):
    client.force_login(alice)
    response = client.get("/playground/", {"agent": "reviewer"})
    assert response.status_code == 200 and "Pick a session" in response.content.decode()


def test_search_by_exact_id_opens_it(client, alice, picker):
    client.force_login(alice)
    response = client.get("/playground/", {"agent": "reviewer", "q": " s_old "})
    assert response.status_code == 302 and response["Location"].endswith("session=s_old")


def test_search_by_the_start_of_an_id_lists_the_matches(client, alice, picker):
    client.force_login(alice)
    response = client.get("/playground/", {"agent": "reviewer", "q": "s_"})
    assert response.status_code == 200
    assert [o["value"] for o in options(response)] == ["s_new", "s_mid", "s_old"]
    assert "3 matches" in response.content.decode()
    response = client.get("/playground/", {"agent": "reviewer", "q": "s_m"})
    assert [o["value"] for o in options(response)] == ["s_mid"]


def test_search_never_finds_a_hidden_session(client, alice, picker):
    client.force_login(alice)
    hidden = client.get("/playground/", {"agent": "reviewer", "q": "s_bobs"})
    missing = client.get("/playground/", {"agent": "reviewer", "q": "s_nothing"})
    assert hidden.status_code == missing.status_code == 200
    for response in (hidden, missing):
        assert options(response) == [] and "has an id starting" in response.content.decode()
    assert "s_bobs</option>" not in hidden.content.decode()


@pytest.mark.parametrize("text", ["   ", "x" * 2000])
def test_odd_searches_are_messages_not_errors(client, alice, picker, text):
    client.force_login(alice)
    response = client.get("/playground/", {"agent": "reviewer", "q": text})
    assert response.status_code == 200 and options(response) == []
    assert 'class="error"' in response.content.decode() or "has an id starting" in (
        response.content.decode()
    )


def test_search_is_bounded_to_the_newest_sessions(client, alice, reviewer, monkeypatch):
    from artifacts_app.selectors import sessions

    monkeypatch.setattr(sessions, "SEARCH_WINDOW", 2)
    base = timezone.now() - timedelta(hours=1)
    for n in range(4):
        services.session_create(agent=reviewer, sid=f"s_w{n}", owner=alice)
        Session.objects.filter(sid=f"s_w{n}").update(created_at=base + timedelta(minutes=n))
    found = selectors.sessions_search(agent=reviewer, text="s_w")
    assert [s.sid for s in found] == ["s_w3", "s_w2"]  # the window
    exact = selectors.sessions_search(agent=reviewer, text="s_w0")
    assert [s.sid for s in exact] == ["s_w0"]  # an exact id is found at any age


def test_session_page_carries_the_facts_and_the_cap_flag(client, alice, picker):
    client.force_login(alice)
    body = client.get("/playground/", {"agent": "reviewer", "session": "s_mid"}).content.decode()
    assert re.search(r'id="fact-owner">alice<', body)
    assert re.search(r'id="fact-count">3<', body)
    assert '"capped": false' in body
