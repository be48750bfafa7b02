"""Secrets in the admin (API.md "Authentication"): ``is_staff`` alone never mints
or revokes agent keys or user tokens; superusers and holders of the API key permissions do. And
every admin write goes through the services, a refusal becoming a message, never a 500."""

from __future__ import annotations

import pytest
from django.contrib.messages import get_messages
from django.urls import reverse

from artifacts_app import services
from artifacts_app.models import Agent, ApiKey, Artifact

pytestmark = pytest.mark.django_db


@pytest.fixture
def secrets(reviewer, alice, superuser):
    key, _ = services.agent_key_create(agent=reviewer, label="ci")
    token, _ = services.user_token_create(user=alice, label="laptop")
    root_token, _ = services.user_token_create(user=superuser, label="root's")
    return {"key": key, "token": token, "root_token": root_token}


def _state() -> list:
    return sorted(ApiKey.objects.values_list("pk", "revoked_at"))


def _messages(response) -> str:
    return " ".join(str(m) for m in get_messages(response.wsgi_request))


def test_staff_without_permissions_cannot_mint_or_revoke(staff_client, reviewer, alice, secrets):
    before = _state()
    create_key = reverse("admin:artifacts_app_agent_create_key", args=[reviewer.pk])
    response = staff_client.post(create_key, {"label": "mine"})
    assert response.status_code == 302 and "secret" not in (response.context or {})
    assert "API key permissions" in _messages(response)
    response = staff_client.post(
        reverse("admin:auth_user_create_token", args=[alice.pk]), {"label": "x"}
    )
    assert response.status_code == 302
    for key in secrets.values():
        url = reverse("admin:artifacts_app_apikey_revoke", args=[key.pk])
        assert staff_client.get(url).status_code == 302
        assert staff_client.post(url).status_code == 302
    response = staff_client.post(
        reverse("admin:artifacts_app_apikey_changelist"),
        {"action": "revoke_selected", "_selected_action": [k.pk for k in secrets.values()]},
    )
    assert response.status_code in (200, 302)
    assert _state() == before
    # And the buttons are not offered.
    page = staff_client.get(reverse("admin:artifacts_app_agent_change", args=[reviewer.pk]))
    assert b"create-agent-key" not in page.content
    listing = staff_client.get(reverse("admin:artifacts_app_apikey_changelist"))
    assert b"revoke_selected" not in listing.content


def test_staff_still_read_delete_and_see_keys(staff_client, reviewer, secrets):
    assert staff_client.get(reverse("admin:artifacts_app_apikey_changelist")).status_code == 200
    page = staff_client.get(reverse("admin:artifacts_app_agent_change", args=[reviewer.pk]))
    assert page.status_code == 200 and secrets["key"].prefix.encode() in page.content


def test_permission_holders_mint_and_revoke_but_not_a_superusers(
    keeper_client, reviewer, alice, secrets
):
    response = keeper_client.post(
        reverse("admin:artifacts_app_agent_create_key", args=[reviewer.pk])
    )
    assert (
        response.status_code == 200
        and services.token_lookup(response.context["secret"]) is not None
    )
    response = keeper_client.post(reverse("admin:auth_user_create_token", args=[alice.pk]))
    assert response.status_code == 200
    keeper_client.post(reverse("admin:artifacts_app_apikey_revoke", args=[secrets["token"].pk]))
    secrets["token"].refresh_from_db()
    assert secrets["token"].revoked_at is not None
    keeper_client.post(
        reverse("admin:artifacts_app_apikey_revoke", args=[secrets["root_token"].pk])
    )
    secrets["root_token"].refresh_from_db()
    assert secrets["root_token"].revoked_at is None
    root = secrets["root_token"].user
    response = keeper_client.post(reverse("admin:auth_user_create_token", args=[root.pk]))
    assert response.status_code == 302
    assert ApiKey.objects.filter(user=root).count() == 1


def test_superusers_mint_and_revoke_anything(super_client, secrets):
    super_client.post(reverse("admin:artifacts_app_apikey_revoke", args=[secrets["root_token"].pk]))
    secrets["root_token"].refresh_from_db()
    assert secrets["root_token"].revoked_at is not None


def test_a_refused_key_label_is_a_message(keeper_client, reviewer):
    before = _state()
    response = keeper_client.post(
        reverse("admin:artifacts_app_agent_create_key", args=[reviewer.pk]), {"label": "a\x00b"}
    )
    assert response.status_code == 302
    assert "NUL" in _messages(response)
    assert _state() == before


def test_agent_add_refused_by_the_service_is_a_message(staff_client, db):
    response = staff_client.post(
        reverse("admin:artifacts_app_agent_add"), {"slug": "fresh", "max_artifacts": "0"}
    )
    assert response.status_code in (200, 302)
    assert not Agent.objects.filter(slug="fresh").exists()


def test_bulk_delete_goes_through_the_service(staff_client, reviewer):
    record = services.artifact_tag(agent=reviewer, kind="report", data={}).record
    response = staff_client.post(
        reverse("admin:artifacts_app_artifact_changelist") + "?agent=reviewer",
        {"action": "delete_selected", "_selected_action": [record.id], "post": "yes"},
    )
    assert response.status_code == 302
    assert not Artifact.objects.filter(pk=record.id).exists()
    reviewer.refresh_from_db()
    assert reviewer.artifact_count == 0
