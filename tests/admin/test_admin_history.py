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


def test_history_lists_each_version_with_downloads_and_compare_choices(staff_client, history):
    page = staff_client.get(change_url(history)).content.decode()
    assert "<td>v2</td>" in page and "<td>v1</td>" in page
    # v1 and v2 preselected as from and to; the form the radios belong to is the diff page's.
    assert 'name="from" value="1" aria-label="from v1" checked' in page
    assert 'name="to" value="2" aria-label="to v2" checked' in page
    assert f'action="/admin/artifacts_app/artifact/{history}/diff/"' in page
    for n in (1, 2):  # v2 carried v1's content (same session): both download it
        assert f"/reviewer/v1/artifacts/{history}/versions/{n}/content" in page
    assert "<b>v2</b>" not in page and "&lt;b&gt;v2&lt;/b&gt;" in page  # escaped, never HTML
    assert 'id="restore-button" disabled' in page  # restore: agent keys only (API.md)


def test_diff_page_between_any_two_versions(staff_client, history, reviewer):
    services.artifact_tag(
        agent=reviewer,
        kind="reviewed-pr",
        key=PR,
        session_id="s_one",
        data={"url": PR, "verdict": "approve"},
        title="third",
    )
    url = reverse("admin:artifacts_app_artifact_diff", args=[history])
    page = staff_client.get(url, {"from": 1, "to": 3}).content.decode()
    assert "v1 → v3" in page
    assert (
        '<th>title</th><td class="removed">null</td><td class="added">&quot;third&quot;</td>'
        in page
    )
    assert "The data is the same." in page  # v1 and v3 agree: approve
    backwards = staff_client.get(url, {"from": 2, "to": 1}).content.decode()
    assert (
        "<td>replace</td><td><code>/verdict</code></td><td><code>&quot;approve&quot;</code>"
        in backwards
    )
    assert '<th>title</th><td class="removed">&quot;&lt;b&gt;v2&lt;/b&gt;&quot;</td>' in backwards
    assert '<span class="added">+  &quot;verdict&quot;: &quot;approve&quot;</span>' in backwards


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ({"from": "x", "to": "2"}, "`from` is a version number"),
        ({"from": "1"}, "`to` is a version number"),
        ({"from": "1", "to": "99"}, "has no version 99"),
    ],
)
def test_diff_page_refuses_bad_versions_with_a_message(staff_client, history, query, message):
    url = reverse("admin:artifacts_app_artifact_diff", args=[history])
    response = staff_client.get(url, query, follow=True)
    assert response.redirect_chain[-1][0] == change_url(history).replace("_5F", "_")
    assert message in response.content.decode()


def test_pin_button_pins_and_unpins_through_the_service(staff_client, history, reviewer):
    url = reverse("admin:artifacts_app_artifact_pin", args=[history])
    assert staff_client.get(url).status_code == 405
    assert staff_client.post(url, {"pinned": "1"}).status_code == 302
    assert Artifact.objects.get(pk=history).pinned
    assert (
        'value="0" class="button" id="pin-button">Unpin'
        in staff_client.get(change_url(history)).content.decode()
    )
    staff_client.post(url, {"pinned": "0"})
    assert not Artifact.objects.get(pk=history).pinned
    events = Event.objects.filter(agent=reviewer, type="artifact.pinned").order_by("seq")
    assert [e.payload["record"]["pinned"] for e in events] == [True, False]


def test_non_staff_cannot_use_the_diff_or_pin_pages(client, alice, history):
    client.force_login(alice)
    for url in (
        reverse("admin:artifacts_app_artifact_diff", args=[history]) + "?from=1&to=2",
        reverse("admin:artifacts_app_artifact_pin", args=[history]),
    ):
        response = client.post(url, {"pinned": "1"}) if url.endswith("/pin/") else client.get(url)
        assert response.status_code == 302 and "/login/" in response["Location"]
    assert not Artifact.objects.get(pk=history).pinned


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
