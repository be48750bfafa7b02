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
    backwards = staff_client.get(url, {"from": 2, "to": 1, "view": "unified"}).content.decode()
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


@pytest.fixture
def texts(reviewer):
    common = {"agent": reviewer, "kind": "report", "key": "notes.md"}
    old = "".join(f"line {n}\n" for n in range(40))
    new = old.replace("line 20\n", "line twenty\n") + "an added line\n"
    services.artifact_tag(**common, data={}, contents=old, content_type="text/markdown")
    services.artifact_tag(**common, data={}, contents=new, content_type="text/markdown")
    return services.keyed_id("reviewer", "notes.md")


def test_text_contents_are_compared_side_by_side(staff_client, texts):
    url = reverse("admin:artifacts_app_artifact_diff", args=[texts])
    page = staff_client.get(url, {"from": 1, "to": 2}).content.decode()
    content = page.split('<div class="content-lines">')[1].split("</div>")[0]
    assert '<td class="removed">line 20</td>' in content
    assert '<td class="added">line twenty</td>' in content
    assert '<td class="added">an added line</td>' in content
    assert '<td class="blank"></td>' in content  # the added line has no old side
    assert "line 5<" not in content  # unchanged runs fold to the lines around a change
    assert '<td class="same">line 17</td>' in content


def test_text_contents_unified(staff_client, texts):
    url = reverse("admin:artifacts_app_artifact_diff", args=[texts])
    page = staff_client.get(url, {"from": 1, "to": 2, "view": "unified"}).content.decode()
    content = page.split('<div class="content-lines">')[1].split("</div>")[0]
    assert '<span class="removed">-line 20</span>' in content
    assert '<span class="added">+line twenty</span>' in content


def test_json_contents_are_pretty_printed_before_comparing(staff_client, reviewer):
    common = {"agent": reviewer, "kind": "report", "key": "r.json", "data": {}}
    services.artifact_tag(
        **common, contents='{"b": 1, "a": [1, 2]}', content_type="application/json"
    )
    services.artifact_tag(
        **common, contents='{"a": [1, 3], "b": 1}', content_type="application/json"
    )
    url = reverse(
        "admin:artifacts_app_artifact_diff", args=[services.keyed_id("reviewer", "r.json")]
    )
    page = staff_client.get(url, {"from": 1, "to": 2, "view": "unified"}).content.decode()
    content = page.split('<div class="content-lines">')[1].split("</div>")[0]
    assert '<span class="removed">-    2</span>' in content
    assert '<span class="added">+    3</span>' in content


def test_contents_past_one_mib_or_not_text_are_not_compared_and_say_so(
    staff_client, reviewer, settings
):
    common = {"agent": reviewer, "kind": "report", "key": "big.txt", "data": {}}
    services.artifact_tag(**common, contents="a\n" * 600_000, content_type="text/plain")
    services.artifact_tag(**common, contents="b\n", content_type="text/plain")
    url = reverse(
        "admin:artifacts_app_artifact_diff", args=[services.keyed_id("reviewer", "big.txt")]
    )
    page = staff_client.get(url, {"from": 1, "to": 2}).content.decode()
    assert 'class="content-lines"' not in page
    assert "past the 1.0 MiB compared line by line" in page
    binary = {"agent": reviewer, "kind": "report", "key": "b.bin", "data": {}}
    services.artifact_tag(**binary, contents=b"\x00\x01", content_type="application/octet-stream")
    services.artifact_tag(**binary, contents=b"\x00\x02", content_type="application/octet-stream")
    url = reverse(
        "admin:artifacts_app_artifact_diff", args=[services.keyed_id("reviewer", "b.bin")]
    )
    page = staff_client.get(url, {"from": 1, "to": 2}).content.decode()
    assert "not text: it is not compared line by line" in page
