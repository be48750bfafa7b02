"""``/metrics`` (API.md "Limits on what a caller can make the server do"): Prometheus' text, to
staff or ``Authorization: Bearer <ARTIFACTS_METRICS_TOKEN>`` only; requests counted by route (the
URL pattern's name, never the path) and status, with latencies; tags, evictions, events and upload
bytes counted as they commit; each dependency's state asked at the scrape."""

from __future__ import annotations

import secrets

import pytest
from django.test import Client
from prometheus_client.parser import text_string_to_metric_families

from artifacts_app import services
from artifacts_app.errors import ArtifactError
from tests.rest.conftest import bearer

TOKEN = secrets.token_urlsafe(32)


@pytest.fixture
def metrics_token(settings, db):
    settings.ARTIFACTS_METRICS_TOKEN = TOKEN
    return TOKEN


def scrape(client: Client | None = None, token: str = TOKEN) -> dict[tuple[str, tuple], float]:
    """Every sample of ``/metrics``, parsed by prometheus_client's own parser:
    ``{(name, sorted labels): value}``."""
    response = (client or Client()).get("/metrics", **bearer(token))
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("text/plain; version=0.0.4")
    samples = {}
    for family in text_string_to_metric_families(response.content.decode()):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def value(samples, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def test_requests_are_counted_by_route_and_status_with_latencies(metrics_token, reviewer):
    _, key = services.agent_key_create(agent=reviewer)
    before = scrape()
    client = Client()
    for _ in range(3):
        response = client.get("/reviewer/v1/artifacts", **bearer(key))
        assert response.status_code == 200
    assert client.get("/reviewer/v1/artifacts/nope-id", **bearer(key)).status_code == 404
    after = scrape()
    route = {"route": "rest:artifacts", "method": "GET"}
    assert (
        value(after, "artifacts_http_requests_total", **route, status="200")
        - value(before, "artifacts_http_requests_total", **route, status="200")
        == 3
    )
    count = "artifacts_http_request_duration_seconds_count"
    assert value(after, count, **route) - value(before, count, **route) == 3
    assert value(after, "artifacts_http_request_duration_seconds_bucket", **route, le="+Inf") >= 3
    # The route is the pattern's name: no path, no id, no slug in any label.
    names = {dict(labels).get("route") for (_, labels) in after}
    assert {"rest:artifacts", "rest:unknown_route"} <= names
    assert not any("nope-id" in str(labels) or "reviewer" in str(labels) for (_, labels) in after)


def test_unmatched_paths_share_one_label(metrics_token, db):
    before = scrape()
    for path in ("/no-such-page", "/another-one", f"/{secrets.token_hex(8)}"):
        Client().get(path)
    after = scrape()
    labels = {"route": "unmatched", "method": "GET", "status": "404"}
    assert (
        value(after, "artifacts_http_requests_total", **labels)
        - value(before, "artifacts_http_requests_total", **labels)
        == 3
    )


def test_tags_evictions_events_and_upload_bytes_count_what_committed(
    metrics_token, db, django_capture_on_commit_callbacks
):
    agent = services.agent_create(slug="tiny", max_artifacts=2)
    before = scrape()
    for i in range(3):  # the third evicts the first
        with django_capture_on_commit_callbacks(execute=True):
            services.artifact_tag(agent=agent, kind="note", data={"i": i}, contents=b"x" * 10)
    after = scrape()
    assert value(after, "artifacts_tags_total") - value(before, "artifacts_tags_total") == 3
    assert (
        value(after, "artifacts_evictions_total") - value(before, "artifacts_evictions_total") == 1
    )
    published = "artifacts_events_published_total"
    assert (
        value(after, published, type="artifact.tagged")
        - value(before, published, type="artifact.tagged")
        == 3
    )
    assert (
        value(after, published, type="artifact.deleted")
        - value(before, published, type="artifact.deleted")
        == 1
    )
    assert (
        value(after, "artifacts_upload_bytes_total") - value(before, "artifacts_upload_bytes_total")
        == 30
    )


def test_a_refused_tag_counts_nothing(metrics_token, db, django_capture_on_commit_callbacks):
    agent = services.agent_create(slug="tiny", max_artifacts=2)
    before = scrape()
    with django_capture_on_commit_callbacks(execute=True), pytest.raises(ArtifactError):
        services.artifact_tag(agent=agent, kind="note", data={"i": 1}, session_id="gone")
    after = scrape()
    for name in ("artifacts_tags_total", "artifacts_upload_bytes_total"):
        assert value(after, name) == value(before, name)


def test_dependencies_are_reported_up(metrics_token, db):
    samples = scrape()
    for name in ("database", "storage", "channelLayer"):
        assert value(samples, "artifacts_dependency_up", dependency=name) == 1.0


def test_metrics_for_staff_by_session_and_by_token(metrics_token, django_user_model):
    staff = django_user_model.objects.create_user("sup", is_staff=True)
    client = Client()
    client.force_login(staff)
    assert client.get("/metrics").status_code == 200
    _, token = services.user_token_create(user=staff)
    assert Client().get("/metrics", **bearer(token)).status_code == 200


def _refused(response, status: int, code: str) -> None:
    assert response.status_code == status, response.content
    assert response["Content-Type"] == "application/json"
    assert response.json()["error"]["code"] == code
    assert b"artifacts_" not in response.content


def test_metrics_refuses_everyone_else(metrics_token, reviewer, django_user_model):
    _refused(Client().get("/metrics"), 401, "not_authenticated")
    _, key = services.agent_key_create(agent=reviewer)
    _refused(Client().get("/metrics", **bearer(key)), 403, "forbidden")
    user = django_user_model.objects.create_user("ann")
    _, user_token = services.user_token_create(user=user)
    _refused(Client().get("/metrics", **bearer(user_token)), 403, "forbidden")
    session = Client()
    session.force_login(user)
    _refused(session.get("/metrics"), 403, "forbidden")
    for wrong in (TOKEN[:-1], TOKEN + "x", "x" * 43, "ünïcode"):
        _refused(Client().get("/metrics", **bearer(wrong)), 401, "invalid_token")
    _refused(
        Client().get("/metrics", HTTP_AUTHORIZATION=f"Basic {TOKEN}"), 401, "not_authenticated"
    )


def test_without_a_configured_token_no_token_gets_in(settings, db):
    settings.ARTIFACTS_METRICS_TOKEN = ""
    for authorization in ("Bearer ", "Bearer x", "Bearer"):
        response = Client().get("/metrics", HTTP_AUTHORIZATION=authorization)
        assert response.status_code == 401


def test_wrong_tokens_are_counted_against_the_address(metrics_token, settings):
    settings.ARTIFACTS_AUTH_FAILURE_LIMIT = 2
    statuses = [Client().get("/metrics", **bearer("nope")).status_code for _ in range(4)]
    assert statuses[-1] == 429
    assert Client().get("/metrics", **bearer(TOKEN)).status_code == 200


def test_metrics_answers_get_only(metrics_token):
    response = Client().post("/metrics", **bearer(TOKEN))
    _refused(response, 405, "method_not_allowed")
    assert response["Allow"] == "GET, HEAD"
