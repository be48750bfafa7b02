"""``/healthz`` without credentials answers only the overall status (API.md "Limits on what a caller
can make the server do"): the database vendor, free disk bytes and the channel layer are for staff
(a session) or a monitor sending ``Authorization: Bearer <ARTIFACTS_HEALTH_TOKEN>``."""

from __future__ import annotations

import secrets

import pytest
from django.test import Client

from tests.settings.test_profiles import settings_with

TOKEN = secrets.token_urlsafe(32)


@pytest.fixture
def health_token(settings, db):
    settings.ARTIFACTS_HEALTH_TOKEN = TOKEN
    return TOKEN


def details(body: dict) -> None:
    assert body["status"] == "ok"
    assert set(body["checks"]) == {"database", "storage", "channelLayer"}
    assert body["checks"]["database"]["vendor"] in {"sqlite", "postgresql"}
    assert all(check["status"] == "ok" for check in body["checks"].values())


def test_healthz_without_credentials_answers_only_the_status(health_token):
    response = Client().get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}
    assert response["Cache-Control"].startswith("max-age=0")


def test_healthz_with_the_health_token_answers_each_dependency(health_token):
    response = Client().get("/healthz", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert response.status_code == 200
    details(response.json())


@pytest.mark.parametrize(
    "authorization",
    [f"Bearer {TOKEN[:-1]}", f"Bearer {TOKEN}x", "Bearer ", f"Basic {TOKEN}", "Bearer ünïcode"],
    ids=["shorter", "longer", "empty", "basic", "unicode"],
)
def test_healthz_with_a_wrong_token_answers_only_the_status(health_token, authorization):
    response = Client().get("/healthz", HTTP_AUTHORIZATION=authorization)
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


def test_healthz_without_a_configured_token_lets_no_token_in(settings, db):
    settings.ARTIFACTS_HEALTH_TOKEN = ""
    for authorization in ("Bearer ", "Bearer x", "Bearer"):
        response = Client().get("/healthz", HTTP_AUTHORIZATION=authorization)
        assert response.json() == {"status": "ok"}


def test_healthz_for_staff_answers_each_dependency(health_token, django_user_model):
    client = Client()
    client.force_login(django_user_model.objects.create_user("sup", is_staff=True))
    details(client.get("/healthz").json())
    # A user who is not staff gets what anyone gets.
    other = Client()
    other.force_login(django_user_model.objects.create_user("ann"))
    assert other.get("/healthz").json() == {"status": "ok"}


def test_a_short_health_token_stops_the_settings_with_a_sentence():
    proc = settings_with(ARTIFACTS_HEALTH_TOKEN="short")
    assert proc.returncode != 0
    assert "ImproperlyConfigured" in proc.stderr and "32+ random characters" in proc.stderr


@pytest.mark.parametrize("proxies", ["10.0.0.0/33", "proxy.example.com", "10.0.0.1,,nope"])
def test_bad_trusted_proxies_stop_the_settings_with_a_sentence(proxies):
    proc = settings_with(ARTIFACTS_TRUSTED_PROXIES=proxies)
    assert proc.returncode != 0
    assert "ImproperlyConfigured" in proc.stderr and "ARTIFACTS_TRUSTED_PROXIES" in proc.stderr
