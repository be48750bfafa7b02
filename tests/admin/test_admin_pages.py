"""The supervisors' admin: every page answers for staff, nobody else gets in, lists narrow."""

from __future__ import annotations

import re

import orjson
import pytest
from django.contrib.admin.utils import quote
from django.urls import reverse

from artifacts_app import services
from artifacts_app.models import ApiKey, Artifact, Event

pytestmark = pytest.mark.django_db

LIST = reverse("admin:artifacts_app_artifact_changelist")


def artifact_url(view: str, artifact_id: str) -> str:
    """As the admin builds it: ids pass through ``quote`` ("art_25…" would otherwise unquote to "art%…")."""
    return reverse(f"admin:artifacts_app_artifact_{view}", args=[quote(artifact_id)])


@pytest.fixture
def world(reviewer, freeform, alice):
    s1 = services.session_create(agent=reviewer, sid="s_one", owner=alice)
    a = services.artifact_tag(
        agent=reviewer,
        kind="reviewed-pr",
        key="https://github.com/o/r/pull/7",
        title="Reviewed PR 7",
        data={"url": "https://github.com/o/r/pull/7", "verdict": "approve"},
        session_id=s1.sid,
        turn_id="t-1",
        contents="# notes",
        content_type="text/markdown",
    ).record
    b = services.artifact_tag(
        agent=reviewer, kind="report", title="Weekly report", data={"n": 1}, source="model"
    ).record
    c = services.artifact_tag(agent=freeform, kind="note", key="free-1", data=["x"]).record
    key, _ = services.agent_key_create(agent=reviewer, label="ci")
    token, _ = services.user_token_create(user=alice, label="laptop")
    return {"s1": s1, "a": a, "b": b, "c": c, "key": key, "token": token}


def titles(response) -> str:
    return response.content.decode()


def test_every_page_answers_for_staff(staff_client, super_client, world, reviewer, alice):
    pages = [
        reverse("admin:index"),
        LIST,
        LIST + "?agent=free",
        artifact_url("change", world["a"].id),
        artifact_url("change", world["b"].id),
        reverse("admin:artifacts_app_agent_changelist"),
        reverse("admin:artifacts_app_agent_change", args=[reviewer.pk]),
        reverse("admin:artifacts_app_agent_add"),
        reverse("admin:artifacts_app_session_changelist"),
        reverse("admin:artifacts_app_session_change", args=[world["s1"].pk]),
        reverse("admin:artifacts_app_apikey_changelist"),
        artifact_url("delete", world["a"].id),
    ]
    for url in pages:
        assert staff_client.get(url).status_code == 200, url
    for url in (
        reverse("admin:auth_user_changelist"),
        reverse("admin:auth_user_change", args=[alice.pk]),
        reverse("admin:artifacts_app_apikey_revoke", args=[world["key"].pk]),
    ):
        assert super_client.get(url).status_code == 200, url


def test_non_staff_and_anonymous_are_sent_to_log_in(client, alice, world):
    urls = [
        LIST,
        artifact_url("change", world["a"].id),
        reverse("admin:artifacts_app_agent_changelist"),
        reverse("admin:artifacts_app_session_changelist"),
    ]
    for url in urls:
        response = client.get(url)
        assert response.status_code == 302 and "/admin/login/" in response["Location"]
    client.force_login(alice)
    for url in urls:
        response = client.get(url)
        assert response.status_code == 302 and "/admin/login/" in response["Location"], url
    response = client.post(
        reverse("admin:artifacts_app_agent_create_key", args=[world["key"].agent_id])
    )
    assert response.status_code == 302
    assert ApiKey.objects.filter(kind="agent").count() == 1


def test_changelist_columns_and_newest_first(staff_client, world):
    body = titles(staff_client.get(LIST + "?agent=reviewer"))
    assert body.index("Weekly report") < body.index("Reviewed PR 7")  # b was updated last
    assert "reviewed-pr" in body and "s_one" in body and "text/markdown" in body
    assert "7 B" in body  # "# notes"
    assert "free-1" not in body  # another agent


def test_filters_narrow(staff_client, world):
    def shown(query):
        body = titles(staff_client.get(LIST + query))
        return {name for name in ("Reviewed PR 7", "Weekly report", "free-1") if name in body}

    assert shown("") == {"free-1"}  # no agent chosen: the first by slug
    assert shown("?agent=free") == {"free-1"}
    assert shown("?agent=reviewer&kind=report") == {"Weekly report"}
    assert shown("?agent=reviewer&source__exact=model") == {"Weekly report"}
    assert shown("?agent=reviewer&source__exact=host") == {"Reviewed PR 7"}
    assert shown("?agent=reviewer&has_content=yes") == {"Reviewed PR 7"}
    assert shown("?agent=reviewer&has_content=no") == {"Weekly report"}
    year = world["a"].updated_at.year
    assert shown(f"?agent=reviewer&updated_at__year={year}") == {"Reviewed PR 7", "Weekly report"}
    assert shown(f"?agent=reviewer&updated_at__year={year - 1}") == set()


def test_search_by_key_title_and_id(staff_client, world):
    def shown(q, agent="reviewer"):
        body = titles(staff_client.get(LIST, {"agent": agent, "q": q}))
        return {name for name in ("Reviewed PR 7", "Weekly report") if name in body}

    assert shown("pull/7") == {"Reviewed PR 7"}
    assert shown("weekly") == {"Weekly report"}
    assert shown(world["b"].id) == {"Weekly report"}
    assert shown("nothing-like-this") == set()


def test_artifact_page_shows_pretty_data_preview_and_session(staff_client, world):
    body = titles(staff_client.get(artifact_url("change", world["a"].id)))
    assert "&quot;verdict&quot;: &quot;approve&quot;" in body  # pretty JSON, escaped
    assert "# notes" in body
    assert f"/reviewer/v1/artifacts/{world['a'].id}/content" in body
    assert "s_one" in body and "t-1" in body
    assert 'name="_save"' not in body  # read-only: nobody edits a record in place


def test_image_content_is_shown_from_the_content_route(staff_client, reviewer):
    record = services.artifact_tag(
        agent=reviewer,
        kind="report",
        data={},
        contents=b"\x89PNG\r\n\x1a\n",
        content_type="image/png",
    ).record
    body = titles(staff_client.get(artifact_url("change", record.id)))
    assert f'<img src="/reviewer/v1/artifacts/{record.id}/content"' in body


def test_binary_content_is_only_a_download_link(staff_client, reviewer):
    record = services.artifact_tag(
        agent=reviewer,
        kind="report",
        data={},
        contents=b"\x00\x01<script>",
        content_type="application/zip",
    ).record
    body = titles(staff_client.get(artifact_url("change", record.id)))
    assert "Download (10 bytes, application/zip)" in body
    assert '<pre class="artifact-text">' not in body


def test_stored_script_is_shown_escaped(staff_client, reviewer):
    evil = "<script>alert('x')</script>"
    record = services.artifact_tag(
        agent=reviewer,
        kind="report",
        title=evil,
        key=evil,
        data={"html": evil},
        contents=evil,
    ).record
    for url in (LIST + "?agent=reviewer", artifact_url("change", record.id)):
        body = titles(staff_client.get(url))
        assert evil not in body, url
        assert "&lt;script&gt;alert(" in body, url
    page = titles(staff_client.get(artifact_url("change", record.id)))
    assert page.count("&lt;script&gt;alert(") >= 3  # title, data, text content


def test_delete_goes_through_the_service_and_emits_an_event(staff_client, world, reviewer):
    artifact_id = world["a"].id
    url = artifact_url("delete", artifact_id)
    response = staff_client.post(url, {"post": "yes"})
    assert response.status_code == 302
    assert not Artifact.objects.filter(pk=artifact_id).exists()
    event = Event.objects.filter(agent=reviewer, type="artifact.deleted").get()
    assert event.payload["record"]["id"] == artifact_id
    assert event.payload["reason"] == "deleted"
    assert event.session_sid == "s_one"
    reviewer.refresh_from_db()
    assert reviewer.artifact_count == 1


def test_bulk_delete_goes_through_the_service(staff_client, world, reviewer):
    ids = [world["a"].id, world["b"].id]
    response = staff_client.post(
        LIST + "?agent=reviewer",
        {"action": "delete_selected", "_selected_action": ids, "post": "yes"},
    )
    assert response.status_code == 302
    assert not Artifact.objects.filter(pk__in=ids).exists()
    deleted = Event.objects.filter(agent=reviewer, type="artifact.deleted")
    assert sorted(e.payload["record"]["id"] for e in deleted) == sorted(ids)


def test_export_as_json(staff_client, world):
    response = staff_client.post(
        LIST + "?agent=reviewer",
        {"action": "export_as_json", "_selected_action": [world["a"].id, world["b"].id]},
    )
    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"
    assert "attachment" in response["Content-Disposition"]
    records = orjson.loads(response.content)
    assert [r["id"] for r in records] == [world["b"].id, world["a"].id]
    assert records[1]["content"]["contentType"] == "text/markdown"
    assert records[1]["sessionId"] == "s_one" and records[1]["updatedAt"].endswith("Z")


def test_agent_page_shows_count_kinds_schemas_and_keys(staff_client, world, reviewer):
    body = titles(staff_client.get(reverse("admin:artifacts_app_agent_change", args=[reviewer.pk])))
    assert "2 / 1,000" in body
    assert "reviewed-pr" in body and "&quot;verdict&quot;" in body  # its JSON Schema
    assert world["key"].prefix in body
    listing = titles(staff_client.get(reverse("admin:artifacts_app_agent_changelist")))
    assert "reviewed-pr, report" in listing and "freeform" in listing


def test_agent_key_is_created_and_shown_once(keeper_client, reviewer, world):
    staff_client = keeper_client
    url = reverse("admin:artifacts_app_agent_create_key", args=[reviewer.pk])
    assert staff_client.get(url).status_code == 405
    response = staff_client.post(url, {"label": "deploy"})
    assert response.status_code == 200
    assert "no-store" in response["Cache-Control"]
    secret = response.context["secret"]
    assert secret in response.content.decode()
    key = services.token_lookup(secret)
    assert key is not None and key.agent_id == reviewer.pk and key.label == "deploy"
    # Never again: the agent page lists the prefix, not the secret.
    page = titles(staff_client.get(reverse("admin:artifacts_app_agent_change", args=[reviewer.pk])))
    assert key.prefix in page and secret not in page


def test_revoking_a_key_asks_then_revokes(keeper_client, world):
    staff_client = keeper_client
    url = reverse("admin:artifacts_app_apikey_revoke", args=[world["key"].pk])
    assert "Yes, revoke it" in titles(staff_client.get(url))
    assert staff_client.post(url).status_code == 302
    world["key"].refresh_from_db()
    assert world["key"].revoked_at is not None


def test_revoke_action_on_the_keys_list(keeper_client, world):
    staff_client = keeper_client
    response = staff_client.post(
        reverse("admin:artifacts_app_apikey_changelist"),
        {"action": "revoke_selected", "_selected_action": [world["token"].pk]},
    )
    assert response.status_code == 302
    world["token"].refresh_from_db()
    assert world["token"].revoked_at is not None


def test_user_token_is_created_and_shown_once(super_client, alice):
    response = super_client.post(
        reverse("admin:auth_user_create_token", args=[alice.pk]), {"label": "cli"}
    )
    assert response.status_code == 200
    secret = response.context["secret"]
    assert services.token_lookup(secret).user_id == alice.pk
    page = titles(super_client.get(reverse("admin:auth_user_change", args=[alice.pk])))
    assert "Create user token" in page and secret not in page
    assert services.token_lookup(secret).prefix in page


def test_freeform_agent_is_added_through_the_service(staff_client):
    url = reverse("admin:artifacts_app_agent_add")
    response = staff_client.post(url, {"slug": "helper", "max_artifacts": 10})
    assert response.status_code == 302
    agent = services.agent_get("helper")
    assert agent.max_artifacts == 10 and agent.module == ""
    refused = staff_client.post(url, {"slug": "admin", "max_artifacts": 10})
    assert refused.status_code == 200 and "reserved" in refused.content.decode()


def test_session_page_lists_its_artifacts_and_links_the_playground(staff_client, world):
    body = titles(
        staff_client.get(reverse("admin:artifacts_app_session_change", args=[world["s1"].pk]))
    )
    assert "Reviewed PR 7" in body and "alice" in body
    assert "/playground/?agent=reviewer&amp;session=s_one" in body


def test_ids_that_look_quoted_open_from_the_session_page(staff_client, reviewer, alice):
    """The admin unquotes "_25" to "%" in a URL's id: an id like "art_25…" (about 2% of them) must be
    linked quoted, or its page redirects away as "doesn't exist"."""
    session = services.session_create(agent=reviewer, sid="s_quoted", owner=alice)
    key = next(
        f"k{n}"
        for n in range(10_000)
        if services.keyed_id("reviewer", f"k{n}")[4:6] in {"22", "25", "26"}
    )
    record = services.artifact_tag(
        agent=reviewer, kind="report", key=key, title="Quoted id", data={}, session_id=session.sid
    ).record
    assert record.id[4:6] in {"22", "25", "26"}
    page = titles(
        staff_client.get(reverse("admin:artifacts_app_session_change", args=[session.pk]))
    )
    href = re.search(r'<a href="([^"]+)">Quoted id</a>', page).group(1)
    response = staff_client.get(href)
    assert response.status_code == 200
    assert record.id in response.content.decode()


def test_agent_page_shows_kinds_declared_over_http(staff_client, freeform):
    services.kinds_declare(
        agent=freeform,
        declaration={
            "kinds": {
                "reviewed-pr": {
                    "description": "A pull request this agent reviewed.",
                    "schema": {
                        "type": "object",
                        "properties": {"verdict": {"type": "string", "default": "comment"}},
                    },
                    "keepVersions": 20,
                }
            },
            "agentTool": True,
            "max": 50,
            "keepVersions": 4,
        },
    )
    body = titles(staff_client.get(reverse("admin:artifacts_app_agent_change", args=[freeform.pk])))
    assert "over HTTP (PUT /free/v1/artifacts/kinds); keeps 4 versions per record" in body
    assert "reviewed-pr" in body and "A pull request this agent reviewed." in body
    assert "(keeps 20 versions)" in body and "&quot;verdict&quot;" in body  # its JSON Schema
    assert "0 / 50" in body
    listing = titles(staff_client.get(reverse("admin:artifacts_app_agent_changelist")))
    assert "reviewed-pr" in listing
