"""The playground and the admin in headless Chromium, against a real daphne (tests/browser/server.py)."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import httpx
import pytest
from django.contrib.admin.utils import quote
from playwright.sync_api import expect

from tests.browser.conftest import live_ready, log_in
from tests.browser.server import ROOT

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.timeout(300)]

SESSION_URL = "/playground/?agent=reviewer&session=s_live"  # the live tests' session
VIEW_URL = "/playground/?agent=reviewer&session=s_view"  # this module's: no other test tags into it
EVIL = "<img src=x onerror=window.__pwned=1><script>window.__pwned=1</script>"


def screenshot_path(tmp_path: Path, name: str) -> Path:
    """`ARTIFACTS_SCREENSHOTS=1` writes the README's screenshots into docs/img/; otherwise a temp dir."""
    folder = ROOT / "docs" / "img" if os.environ.get("ARTIFACTS_SCREENSHOTS") == "1" else tmp_path
    folder.mkdir(parents=True, exist_ok=True)
    return folder / name


def tag_inside(live, **kwargs) -> dict:
    """Tag through the services inside the server's project (no REST needed)."""
    code = (
        "import json\nfrom artifacts_app import services\n"
        f"r = services.artifact_tag(agent='reviewer', **json.loads({json.dumps(json.dumps(kwargs))})).record\n"
        "print(json.dumps(r.to_json()))"
    )
    return json.loads(live.python(code).strip().splitlines()[-1])


def test_log_in_and_see_the_session_newest_first_escaped(live, page, tmp_path):
    first = tag_inside(
        live,
        kind="reviewed-pr",
        key="https://github.com/o/r/pull/7",
        title="Reviewed https://github.com/o/r/pull/7",
        data={"url": "https://github.com/o/r/pull/7", "verdict": "approve"},
        session_id="s_view",
        turn_id="t-1",
        contents="Looks good: two nits.\n",
        content_type="text/plain; charset=utf-8",
    )
    second = tag_inside(
        live,
        kind="report",
        key="evil",
        title=EVIL,
        data={"html": EVIL},
        session_id="s_view",
        source="model",
    )
    page.goto(live.url + VIEW_URL)
    assert "/accounts/login/" in page.url  # login required
    log_in(page, live, "alice", "alice-pw-12345", next_url=VIEW_URL)
    cards = page.locator("#cards .card")
    expect(cards).to_have_count(2)
    assert cards.nth(0).get_attribute("data-id") == second["id"]  # newest-updated first
    assert cards.nth(1).get_attribute("data-id") == first["id"]
    expect(cards.nth(0).locator(".title")).to_have_text(EVIL)  # shown as text, never run
    expect(cards.nth(0).locator(".badge[class*=source-]")).to_have_text("model")
    expect(cards.nth(1).locator(".badge[class*=source-]")).to_have_text("host")
    expect(cards.nth(1).locator(".data")).to_contain_text('"verdict": "approve"')
    assert page.evaluate("window.__pwned") is None
    assert page.locator("#session-select").input_value() == "s_view"
    if live_ready():  # with REST: the text preview; with the websocket: "live"
        expect(cards.nth(1).locator("pre.preview-text")).to_have_text("Looks good: two nits.\n")
        expect(page.locator("#status")).to_have_attribute("data-state", "live", timeout=10_000)
    page.screenshot(path=str(screenshot_path(tmp_path, "playground.png")), full_page=True)


def test_someone_elses_session_is_not_shown(live, page):
    log_in(page, live, "alice", "alice-pw-12345")
    response = page.goto(live.url + "/playground/?agent=reviewer&session=s_other")
    assert response.status == 404
    expect(page.locator(".messages")).to_contain_text("that you can see")
    assert page.locator("#session-select option[value=s_other]").count() == 0


def test_new_session_button(live, page):
    log_in(page, live, "alice", "alice-pw-12345", next_url="/playground/?agent=reviewer")
    page.click("#new-session")
    page.wait_for_url(re.compile(r"session=s_[0-9a-f]+"))
    sid = re.search(r"session=(s_[0-9a-f]+)", page.url).group(1)
    assert page.locator("#session-select").input_value() == sid
    expect(page.locator("#empty")).to_be_visible()


def test_static_files_are_served_by_daphne_with_debug_off(live, page):
    log_in(page, live, "alice", "alice-pw-12345", next_url=SESSION_URL)
    src = page.locator("script[src*=playground]").get_attribute("src")
    assert re.search(r"playground\.[0-9a-f]{12}\.js$", src), src  # the manifest's hashed name
    response = httpx.get(live.url + src)
    assert response.status_code == 200 and "max-age" in response.headers["Cache-Control"]
    assert page.evaluate("typeof window.playground") == "object"  # the script ran
    assert httpx.get(live.url + "/static/admin/css/base.css").status_code == 200


def test_admin_artifact_page(live, page, tmp_path):
    record = tag_inside(
        live,
        kind="report",
        key="weekly",
        title="Weekly review report",
        data={"prs": ["o/r#7", "o/r#8"], "note": EVIL},
        session_id="s_live",
        turn_id="t-2",
        contents="# Weekly review report\n\n" + EVIL + "\n",
        content_type="text/markdown",
    )
    page.goto(f"{live.url}/admin/login/?next=/admin/")
    page.fill("#id_username", "sup")
    page.fill("#id_password", "sup-pw-12345")
    page.click("input[type=submit]")
    page.goto(f"{live.url}/admin/artifacts_app/artifact/{quote(record['id'])}/change/")
    # Markdown is rendered with raw HTML shown as text (tests/browser/test_admin_ui.py has the
    # README's admin screenshots and a test per kind of preview).
    expect(page.locator(".preview-markdown h1")).to_have_text("Weekly review report")
    expect(page.locator(".preview-markdown")).to_contain_text(EVIL)
    expect(page.locator(".artifact-json").first).to_contain_text('"note"')
    assert page.evaluate("window.__pwned") is None
    page.goto(f"{live.url}/admin/artifacts_app/artifact/?agent=reviewer")
    expect(page.locator("#result_list")).to_contain_text("Weekly review report")
