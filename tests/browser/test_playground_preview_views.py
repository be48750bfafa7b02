"""The playground's preview route, server side (Django test client): the fragment of the one
renderer (artifacts_app/previews.py) for a content the caller may see; refusals are plain text."""

from __future__ import annotations

import pytest

from artifacts_app import services

pytestmark = pytest.mark.django_db

URL = "/playground/preview"
REPORT = "# Weekly\n\n| pr | verdict |\n|---|---|\n| 7 | approve |\n\n<script>alert(1)</script>\n"


@pytest.fixture
def records(reviewer, alice, bob):
    services.session_create(agent=reviewer, sid="s_a", owner=alice)
    services.session_create(agent=reviewer, sid="s_b", owner=bob)

    def tag(key, session, contents=None, content_type=None):
        return services.artifact_tag(
            agent=reviewer,
            kind="report",
            key=key,
            data={},
            session_id=session,
            contents=contents,
            content_type=content_type,
        ).record

    return {
        "md": tag("report.md", "s_a", REPORT, "text/markdown"),
        "html": tag("page", "s_a", "<script>alert(1)</script>", "text/html"),
        "svg": tag("pic", "s_a", "<svg onload='alert(1)'/>", "image/svg+xml"),
        "bare": tag("bare", "s_a"),
        "bobs": tag("bobs", "s_b", "# Bob's", "text/markdown"),
    }


def get(client, **query):
    return client.get(URL, {"agent": "reviewer", **query})


def test_markdown_is_rendered_and_sanitized(client, alice, records):
    client.force_login(alice)
    response = get(client, id=records["md"].id)
    assert response.status_code == 200 and response["X-Preview-Kind"] == "markdown"
    body = response.content.decode()
    assert "<h1>Weekly</h1>" in body and "<table>" in body and "<td>approve</td>" in body
    assert "<script>" not in body
    assert f'href="/reviewer/v1/artifacts/{records["md"].id}/content"' in body
    assert 'download="report.md"' in body


@pytest.mark.parametrize("name", ["html", "svg"])
def test_html_and_svg_are_only_a_download(client, alice, records, name):
    client.force_login(alice)
    response = get(client, id=records[name].id)
    assert response.status_code == 200 and response["X-Preview-Kind"] == "download"
    body = response.content.decode()
    assert "<script" not in body and "<svg" not in body and "Download" in body


def test_a_version_is_previewed_by_its_own_visibility(client, alice, records, reviewer):
    services.artifact_tag(
        agent=reviewer,
        kind="report",
        key="report.md",
        data={},
        session_id="s_a",
        contents="# Second",
        content_type="text/markdown",
    )
    client.force_login(alice)
    first = get(client, id=records["md"].id, version="1").content.decode()
    assert "<h1>Weekly</h1>" in first and "/versions/1/content" in first
    assert "<h1>Second</h1>" in get(client, id=records["md"].id).content.decode()


def test_hidden_missing_and_bare_records_are_404(client, alice, records):
    client.force_login(alice)
    hidden = get(client, id=records["bobs"].id)
    missing = get(client, id="art_nope")
    assert hidden.status_code == missing.status_code == 404
    assert "Bob" not in hidden.content.decode()
    assert get(client, id=records["bare"].id).status_code == 404
    assert client.get(URL, {"agent": "nobody", "id": "x"}).status_code == 404
    assert get(client, id=records["md"].id, version="9").status_code == 404


@pytest.mark.parametrize(
    "query", [{"id": "art\x00x"}, {"id": "x", "version": "two"}, {"id": "x", "version": "0"}]
)
def test_bad_input_is_a_400_sentence(client, alice, records, query):
    client.force_login(alice)
    response = get(client, **query)
    assert response.status_code == 400 and response["Content-Type"].startswith("text/plain")


def test_anonymous_gets_401_not_the_login_page(client, records):
    response = get(client, id=records["md"].id)
    assert response.status_code == 401 and "Log in" in response.content.decode()
    assert client.post(URL, {"agent": "reviewer"}).status_code in (401, 403, 405)
