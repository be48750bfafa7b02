"""The playground page's server side (Django test client): login, access, initial records, new session."""

from __future__ import annotations

import json
import re

import pytest

from artifacts_app import services
from artifacts_app.models import Session

pytestmark = pytest.mark.django_db


@pytest.fixture
def sessions(reviewer, alice, bob):
    mine = services.session_create(agent=reviewer, sid="s_alice", owner=alice)
    theirs = services.session_create(agent=reviewer, sid="s_bob", owner=bob)
    services.artifact_tag(
        agent=reviewer,
        kind="report",
        title="<b>mine</b>",
        data={"a": "</script>"},
        session_id="s_alice",
    )
    services.artifact_tag(
        agent=reviewer, kind="report", title="theirs", data={}, session_id="s_bob"
    )
    return mine, theirs


def config(response) -> dict:
    match = re.search(
        r'<script id="playground-config" type="application/json">(.*?)</script>',
        response.content.decode(),
        re.S,
    )
    return json.loads(match.group(1))


def test_login_required(client):
    response = client.get("/playground/")
    assert response.status_code == 302 and response["Location"].startswith("/accounts/login/")
    assert client.get("/accounts/login/").status_code == 200


def test_user_sees_own_session_records_and_the_seq_to_follow_from(
    client, alice, sessions, reviewer
):
    client.force_login(alice)
    response = client.get("/playground/", {"agent": "reviewer", "session": "s_alice"})
    assert response.status_code == 200
    body = response.content.decode()
    assert "s_alice" in body and "s_bob" not in body  # only sessions the user may see
    data = config(response)
    assert [r["title"] for r in data["records"]] == ["<b>mine</b>"]
    assert data["records"][0]["data"] == {"a": "</script>"}  # survived json_script's escaping
    reviewer.refresh_from_db()
    assert data["after"] == reviewer.last_seq and data["session"] == "s_alice"
    assert "<b>mine</b>" not in body  # never raw HTML in the page


def test_other_users_session_and_unknown_ones_look_the_same(client, alice, sessions):
    client.force_login(alice)
    hidden = client.get("/playground/", {"agent": "reviewer", "session": "s_bob"})
    missing = client.get("/playground/", {"agent": "reviewer", "session": "s_nope"})
    assert hidden.status_code == missing.status_code == 404
    assert "theirs" not in hidden.content.decode()
    assert client.get("/playground/", {"agent": "nobody"}).status_code == 404


def test_staff_see_every_session(client, django_user_model, sessions):
    client.force_login(
        django_user_model.objects.create_user("sup", password="x-12345678", is_staff=True)
    )
    response = client.get("/playground/", {"agent": "reviewer", "session": "s_bob"})
    assert response.status_code == 200 and [r["title"] for r in config(response)["records"]] == [
        "theirs"
    ]


def test_new_session_is_owned_by_the_user(client, alice, reviewer):
    client.force_login(alice)
    assert client.get("/playground/sessions").status_code == 405
    response = client.post("/playground/sessions", {"agent": "reviewer"})
    assert response.status_code == 302
    sid = re.search(r"session=([^&]+)", response["Location"]).group(1)
    assert Session.objects.get(agent=reviewer, sid=sid).owner == alice


def test_new_session_refusals_are_messages_not_errors(client, django_user_model, reviewer):
    client.force_login(
        django_user_model.objects.create_user("sup", password="x-12345678", is_staff=True)
    )
    response = client.post("/playground/sessions", {"agent": "reviewer"}, follow=True)
    assert response.status_code == 200 and "Staff supervise" in response.content.decode()
    response = client.post("/playground/sessions", {"agent": "nobody"}, follow=True)
    assert response.status_code == 404 and "no agent" in response.content.decode()
    assert not Session.objects.exists()
