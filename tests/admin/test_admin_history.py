"""The admin's history of a record (each version's data, a readable diff, downloads) and pins."""

from __future__ import annotations

import pytest
from django.contrib.admin.utils import quote
from django.urls import reverse

from artifacts_app import services
from artifacts_app.models import Artifact, Event

pytestmark = pytest.mark.django_db

LIST = reverse("admin:artifacts_app_artifact_changelist")
PR = "https://github.com/o/r/pull/7"


def change_url(artifact_id: str) -> str:
    return reverse("admin:artifacts_app_artifact_change", args=[quote(artifact_id)])


@pytest.fixture
def history(reviewer, alice):
    services.session_create(agent=reviewer, sid="s_one", owner=alice)
    common = {"agent": reviewer, "kind": "reviewed-pr", "key": PR, "session_id": "s_one"}
    services.artifact_tag(**common, data={"url": PR, "verdict": "approve"}, contents="# first")
    services.artifact_tag(**common, title="<b>v2</b>", data={"url": PR, "verdict": "reject"})
    return services.keyed_id("reviewer", PR)


def test_history_shows_each_version_its_diff_and_downloads(staff_client, history):
    page = staff_client.get(change_url(history)).content.decode()
    assert "v2 · " in page and "v1 · " in page
    assert "Changes from v1:" in page
    assert "replace /verdict = &quot;reject&quot;" in page
    assert "title: null → &quot;&lt;b&gt;v2&lt;/b&gt;&quot;" in page  # escaped, never HTML
    assert "<b>v2</b>" not in page
    assert "The oldest version kept." in page
    for n in (1, 2):  # v2 carried v1's content (same session): both download it
        assert f"/reviewer/v1/artifacts/{history}/versions/{n}/content" in page


def test_staff_download_a_version_with_the_session_cookie(staff_client, history):
    response = staff_client.get(f"/reviewer/v1/artifacts/{history}/versions/1/content")
    assert response.status_code == 200


def test_pin_and_unpin_actions_go_through_the_service(staff_client, history, reviewer):
    response = staff_client.post(
        LIST + "?agent=reviewer", {"action": "pin_selected", "_selected_action": [history]}
    )
    assert response.status_code == 302
    assert Artifact.objects.get(pk=history).pinned
    staff_client.post(
        LIST + "?agent=reviewer", {"action": "unpin_selected", "_selected_action": [history]}
    )
    assert not Artifact.objects.get(pk=history).pinned
    events = Event.objects.filter(agent=reviewer, type="artifact.pinned").order_by("seq")
    assert [e.payload["record"]["pinned"] for e in events] == [True, False]
    listed = staff_client.get(LIST + "?agent=reviewer&pinned__exact=0").content.decode()
    assert "Reviewed" in listed or PR[:40] in listed


def test_non_staff_cannot_pin(client, alice, history):
    client.force_login(alice)
    response = client.post(
        LIST + "?agent=reviewer", {"action": "pin_selected", "_selected_action": [history]}
    )
    assert response.status_code == 302 and "/login/" in response["Location"]
    assert not Artifact.objects.get(pk=history).pinned
