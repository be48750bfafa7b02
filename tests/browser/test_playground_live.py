"""The playground live: tag, re-tag and delete over HTTP and watch the cards follow within 5 s;
kill the server and watch the page come back and catch up with what it missed (``?after=``).

These need the REST routes (API.md "HTTP routes") and the session websocket (API.md "Events").
"""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import live_ready, log_in
from tests.browser.test_playground_browser import SESSION_URL, tag_inside

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.timeout(300),
    pytest.mark.skipif(
        not live_ready(),
        reason="needs the REST API and the session websocket (branches rest and events) merged",
    ),
]


def open_session(page, live) -> None:
    log_in(page, live, "alice", "alice-pw-12345", next_url=SESSION_URL)
    expect(page.locator("#status")).to_have_attribute("data-state", "live", timeout=10_000)


def card(page, artifact_id: str):
    return page.locator(f'#cards .card[data-id="{artifact_id}"]')


def test_tag_appears_retag_changes_in_place_delete_removes(live, page):
    open_session(page, live)
    record = live.tag(
        kind="reviewed-pr",
        key="https://github.com/o/r/pull/11",
        title="Reviewing PR 11",
        data={"url": "https://github.com/o/r/pull/11", "verdict": "comment"},
        sessionId="s_live",
        turnId="t-live",
        contents="first pass: one question",
    )
    target = card(page, record["id"])
    expect(target).to_be_visible(timeout=5_000)
    expect(target.locator(".title")).to_have_text("Reviewing PR 11")
    expect(target.locator("pre.preview-text")).to_contain_text("first pass", timeout=5_000)
    target.evaluate("node => { node.dataset.marker = 'same-node'; }")

    live.tag(
        kind="reviewed-pr",
        key="https://github.com/o/r/pull/11",
        title="Reviewed PR 11",
        data={"url": "https://github.com/o/r/pull/11", "verdict": "approve"},
        sessionId="s_live",
        source="model",
    )
    expect(target.locator(".title")).to_have_text("Reviewed PR 11", timeout=5_000)
    expect(target.locator(".badge[class*=source-]")).to_have_text("model")
    expect(target.locator(".data")).to_contain_text('"verdict": "approve"')
    expect(target).to_have_count(1)
    assert target.get_attribute("data-marker") == "same-node"  # changed in place, not redrawn
    assert page.locator("#cards .card").first.get_attribute("data-id") == record["id"]

    live.delete(record["id"])
    expect(target).to_have_count(0, timeout=5_000)


def test_recovers_the_events_it_missed_while_the_server_was_down(live, page):
    doomed = tag_inside(
        live, kind="report", key="doomed", title="About to go", data={}, session_id="s_live"
    )
    open_session(page, live)
    expect(card(page, doomed["id"])).to_be_visible()

    live.kill()
    expect(page.locator("#status")).to_have_attribute("data-state", "offline", timeout=10_000)
    missed = tag_inside(
        live,
        kind="report",
        key="missed",
        title="Tagged while offline",
        data={"n": 1},
        session_id="s_live",
    )
    live.python(
        "from artifacts_app import services\n"
        f"services.artifact_delete(agent='reviewer', artifact_id={doomed['id']!r})"
    )
    live.start()

    expect(page.locator("#status")).to_have_attribute("data-state", "live", timeout=15_000)
    expect(card(page, missed["id"])).to_be_visible(timeout=5_000)
    expect(card(page, missed["id"]).locator(".title")).to_have_text("Tagged while offline")
    expect(card(page, doomed["id"])).to_have_count(0, timeout=5_000)


@pytest.mark.parametrize("target", ["s_other", None])
def test_a_record_moved_out_of_the_session_leaves_its_card(live, page, target):
    open_session(page, live)
    record = live.tag(
        kind="report",
        key=f"moving-{target}",
        title="About to move",
        data={"where": "here"},
        sessionId="s_live",
        contents="old content, for this session only",
    )
    target_card = card(page, record["id"])
    expect(target_card).to_be_visible(timeout=5_000)
    expect(target_card.locator("pre.preview-text")).to_contain_text("old content", timeout=5_000)
    live.tag(
        kind="report",
        key=f"moving-{target}",
        title="Moved away",
        data={"where": "elsewhere"},
        sessionId=target,
    )
    expect(target_card).to_have_count(0, timeout=5_000)
    assert "Moved away" not in page.content() and "elsewhere" not in page.content()
    assert page.locator(f'a[href*="{record["id"]}"]').count() == 0  # no dead download link
