"""Rendered previews in the playground's cards and history drawer (headless Chromium, real daphne):
the server's one renderer (artifacts_app/previews.py) through the playground's preview route."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.browser.test_playground_browser import tag_inside
from tests.browser.test_sessions_browser import card, new_session, open_live

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.timeout(300)]

REPORT = (
    "# Weekly report\n\n| pr | verdict |\n|---|---|\n| o/r#7 | approve |\n\n"
    '<script>window.__pwned = 1</script>\n\n<img src=x onerror="window.__pwned = 1">\n'
)


def test_cards_show_rendered_previews_and_never_render_html_or_svg(live, page):
    new_session(live, "s_previews")
    md = tag_inside(
        live,
        kind="report",
        key="weekly.md",
        title="Weekly",
        data={},
        session_id="s_previews",
        contents=REPORT,
        content_type="text/markdown",
    )
    html = tag_inside(
        live,
        kind="report",
        key="page.html",
        title="Page",
        data={},
        session_id="s_previews",
        contents="<h1 id=evil>hi</h1><script>window.__pwned=1</script>",
        content_type="text/html",
    )
    svg = tag_inside(
        live,
        kind="report",
        key="pic.svg",
        title="Picture",
        data={},
        session_id="s_previews",
        contents="<svg xmlns='http://www.w3.org/2000/svg' onload='window.__pwned=1'/>",
        content_type="image/svg+xml",
    )
    data = tag_inside(
        live,
        kind="report",
        key="numbers.json",
        title="Numbers",
        data={},
        session_id="s_previews",
        contents='{"a": {"b": [1, 2]}}',
        content_type="application/json",
    )
    open_live(page, live, "s_previews")

    report = card(page, md["id"]).locator(".preview-markdown")
    expect(report.locator("h1")).to_have_text("Weekly report", timeout=5_000)
    expect(report.locator("table td").nth(1)).to_have_text("approve")
    assert report.locator("script, img").count() == 0
    for record in (html, svg):
        box = card(page, record["id"]).locator(".content")
        expect(box.locator(".preview-download a")).to_have_count(1, timeout=5_000)
        assert box.locator("iframe, svg, img, #evil, script").count() == 0
        assert "preview-download" in box.inner_html()
    expect(card(page, data["id"]).locator(".preview-json").first).to_contain_text(
        '"b"', timeout=5_000
    )
    assert page.evaluate("window.__pwned") is None


def test_a_version_preview_in_the_history_drawer(live, page):
    new_session(live, "s_version_preview")
    first = tag_inside(
        live,
        kind="report",
        key="notes.md",
        title="Notes",
        data={},
        session_id="s_version_preview",
        contents="# First draft",
        content_type="text/markdown",
    )
    tag_inside(
        live,
        kind="report",
        key="notes.md",
        title="Notes",
        data={},
        session_id="s_version_preview",
        contents="# Second draft",
        content_type="text/markdown",
    )
    open_live(page, live, "s_version_preview")
    target = card(page, first["id"])
    expect(target.locator(".preview-markdown h1")).to_have_text("Second draft", timeout=5_000)
    target.locator(".history-button").click()
    oldest = page.locator('#history .version-item[data-version="1"]')
    oldest.locator(".version-preview-button").click()
    expect(oldest.locator(".preview-markdown h1")).to_have_text("First draft", timeout=5_000)
