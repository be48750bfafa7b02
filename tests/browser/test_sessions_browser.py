"""Sessions and turns, the picker, pins and the history drawer, in headless Chromium against a real
daphne (DEBUG off, collected static: tests/browser/server.py)."""

from __future__ import annotations

import json
import re

import httpx
import pytest
from playwright.sync_api import expect

from tests.browser.conftest import live_ready, log_in
from tests.browser.test_playground_browser import screenshot_path, tag_inside

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.timeout(300),
    pytest.mark.skipif(not live_ready(), reason="needs the REST API and the session websocket"),
]


def new_session(live, sid: str, owner: str | None = "alice") -> dict:
    code = (
        "import json\nfrom artifacts_app import services, selectors\n"
        f"s = services.session_create(agent='reviewer', sid={sid!r}, owner={owner!r})\n"
        "print(json.dumps({'created': selectors.iso_seconds(s.created_at)}))"
    )
    return json.loads(live.python(code).strip().splitlines()[-1])


def pin(live, artifact_id: str, on: bool = True) -> dict:
    response = httpx.request(
        "PUT" if on else "DELETE",
        f"{live.url}/reviewer/v1/artifacts/{artifact_id}/pin",
        headers={"Authorization": f"Bearer {live.key}"},
        timeout=10,
    )
    assert response.status_code == 200, response.text
    return response.json()


def card(page, artifact_id: str):
    return page.locator(f'#cards .card[data-id="{artifact_id}"]')


def turn_order(page) -> list[str]:
    return page.locator("#cards > .turn").evaluate_all("nodes => nodes.map(n => n.dataset.turn)")


def open_live(page, live, sid: str) -> None:
    log_in(
        page, live, "alice", "alice-pw-12345", next_url=f"/playground/?agent=reviewer&session={sid}"
    )
    expect(page.locator("#status")).to_have_attribute("data-state", "live", timeout=10_000)


def test_playground_groups_by_turn_and_regroups_live(live, page):
    new_session(live, "s_turns")
    first = tag_inside(
        live, kind="report", key="t1a", title="one-a", data={}, session_id="s_turns", turn_id="t-1"
    )
    tag_inside(
        live, kind="report", key="t2a", title="two-a", data={}, session_id="s_turns", turn_id="t-2"
    )
    tag_inside(live, kind="report", key="none", title="no turn", data={}, session_id="s_turns")
    open_live(page, live, "s_turns")
    assert turn_order(page) == ["", "t-2", "t-1"]  # the latest activity first
    expect(page.locator('.turn[data-turn="t-1"] .turn-meta')).to_contain_text("1 artifact ")
    expect(page.locator("#fact-turns")).to_have_text("3")
    expect(page.locator("#fact-count")).to_have_text("3")

    # A new tag of turn t-1 brings that turn to the top, newest card first, and counts it.
    second = live.tag(
        kind="report", key="t1b", title="one-b", data={}, sessionId="s_turns", turnId="t-1"
    )
    expect(card(page, second["id"])).to_be_visible(timeout=5_000)
    expect(page.locator('.turn[data-turn="t-1"] .turn-meta')).to_contain_text(
        "2 artifacts", timeout=5_000
    )
    assert turn_order(page) == ["t-1", "", "t-2"]
    ids = page.locator('.turn[data-turn="t-1"] .card').evaluate_all(
        "ns => ns.map(n => n.dataset.id)"
    )
    assert ids == [second["id"], first["id"]]

    # Re-tagged into another turn: the card moves (the same node), its old turn shrinks.
    card(page, first["id"]).evaluate("node => { node.dataset.marker = 'same'; }")
    live.tag(
        kind="report", key="t1a", title="one-a again", data={}, sessionId="s_turns", turnId="t-2"
    )
    moved = page.locator(f'.turn[data-turn="t-2"] .card[data-id="{first["id"]}"]')
    expect(moved).to_have_count(1, timeout=5_000)
    assert moved.get_attribute("data-marker") == "same"
    expect(page.locator('.turn[data-turn="t-1"] .turn-meta')).to_contain_text("1 artifact ")
    assert turn_order(page)[0] == "t-2"

    # A record moved to another session leaves, and its turn with it when it was the last one.
    live.tag(kind="report", key="t1b", title="gone", data={}, sessionId="s_other")
    expect(card(page, second["id"])).to_have_count(0, timeout=5_000)
    expect(page.locator('.turn[data-turn="t-1"]')).to_have_count(0)
    expect(page.locator("#fact-count")).to_have_text("3")


def test_picker_owner_time_count_newest_preselected_and_search(live, page):
    facts = new_session(live, "s_newest_pick")
    tag_inside(live, kind="report", title="a", data={}, session_id="s_newest_pick", turn_id="t")
    tag_inside(live, kind="report", title="b", data={}, session_id="s_newest_pick", turn_id="t")
    log_in(page, live, "alice", "alice-pw-12345", next_url="/playground/?agent=reviewer")
    page.wait_for_url(re.compile(r"session=s_newest_pick"))  # the newest, preselected
    picker = page.locator("#session-select")
    assert picker.input_value() == "s_newest_pick"
    option = picker.locator('option[value="s_newest_pick"]')
    expect(option).to_have_text(f"s_newest_pick · alice · {facts['created']} · 2 artifacts")
    assert picker.locator("option[value=s_other]").count() == 0  # not alice's
    expect(page.locator("#fact-owner")).to_have_text("alice")
    expect(page.locator("#fact-created")).to_have_text(facts["created"])

    page.fill("#session-search", "s_vi")  # the start of an id: the picker lists the matches
    page.click("#session-search-go")
    page.wait_for_url(re.compile(r"q=s_vi"))
    values = picker.locator("option").evaluate_all("ns => ns.map(n => n.value).filter(Boolean)")
    assert values == ["s_view"]
    page.select_option("#session-select", "s_view")
    page.wait_for_url(re.compile(r"session=s_view"))

    page.fill("#session-search", "s_live")  # an exact id opens it
    page.click("#session-search-go")
    page.wait_for_url(re.compile(r"session=s_live$"))
    assert picker.input_value() == "s_live"


def test_pinned_badge_follows_the_pinned_event(live, page):
    new_session(live, "s_pins")
    record = tag_inside(
        live, kind="report", key="pin-me", title="Pin me", data={}, session_id="s_pins"
    )
    open_live(page, live, "s_pins")
    target = card(page, record["id"])
    expect(target.locator(".badge.version")).to_have_text("v1")
    expect(target.locator(".badge.pinned")).to_have_count(0)
    pin(live, record["id"])
    expect(target.locator(".badge.pinned")).to_have_text("pinned", timeout=5_000)
    pin(live, record["id"], on=False)
    expect(target.locator(".badge.pinned")).to_have_count(0, timeout=5_000)


def test_history_drawer_diffs_two_versions(live, page, tmp_path):
    new_session(live, "s_history")
    key = "https://github.com/o/r/pull/21"
    first = tag_inside(
        live,
        kind="reviewed-pr",
        key=key,
        title="Reviewing PR 21",
        data={"url": key, "verdict": "comment"},
        session_id="s_history",
        turn_id="t-1",
        contents="first pass",
        content_type="text/plain",
    )
    tag_inside(
        live,
        kind="reviewed-pr",
        key=key,
        title="Reviewing PR 21",
        data={"url": key, "verdict": "comment"},
        session_id="s_history",
        turn_id="t-1",
        contents="second pass",
        content_type="text/plain",
    )
    open_live(page, live, "s_history")
    live.tag(
        kind="reviewed-pr",
        key=key,
        title="Reviewed PR 21",
        data={"url": key, "verdict": "approve"},
        sessionId="s_history",
        turnId="t-2",
    )
    target = card(page, first["id"])
    expect(target.locator(".badge.version")).to_have_text("v3", timeout=5_000)

    target.locator(".history-button").click()
    drawer = page.locator("#history")
    expect(drawer).to_be_visible()
    items = drawer.locator(".version-item")
    expect(items).to_have_count(3)
    assert items.evaluate_all("ns => ns.map(n => n.dataset.version)") == ["3", "2", "1"]
    listed = httpx.get(
        f"{live.url}/reviewer/v1/artifacts/{first['id']}/versions",
        headers={"Authorization": f"Bearer {live.key}"},
    ).json()["results"]
    for item, version in zip(items.all(), listed, strict=True):  # each version's own moment
        expect(item).to_contain_text(re.sub(r"\.\d+Z$", "Z", version["updatedAt"]))
    expect(items.nth(1).locator("a.download")).to_have_attribute(
        "href", f"/reviewer/v1/artifacts/{first['id']}/versions/2/content"
    )
    # Opened on the two newest: v2 → v3, the changed fields and the data's changed value.
    verdict = drawer.locator('.diff-field[data-field="data/verdict"]')
    expect(verdict.locator(".diff-from")).to_have_text('"comment"', timeout=5_000)
    expect(verdict.locator(".diff-to")).to_have_text('"approve"')
    expect(drawer.locator('.diff-field[data-field="title"] .diff-to')).to_have_text(
        '"Reviewed PR 21"'
    )
    expect(drawer.locator('.diff-field[data-field="turnId"] .diff-from')).to_have_text('"t-1"')
    page.screenshot(path=str(screenshot_path(tmp_path, "playground-history.png")))

    # Any two: v1 → v2 changed only the content.
    page.select_option("#diff-from", "1")
    page.select_option("#diff-to", "2")
    page.click("#diff-go")
    expect(drawer.locator('.diff-field[data-field="content"]')).to_have_count(1, timeout=5_000)
    expect(drawer.locator('.diff-field[data-field="data/verdict"]')).to_have_count(0)
    download = httpx.get(
        f"{live.url}/reviewer/v1/artifacts/{first['id']}/versions/1/content",
        headers={"Authorization": f"Bearer {live.key}"},
    )
    assert download.text == "first pass"


def test_admin_session_page_groups_by_turn(live, page, tmp_path):
    new_session(live, "s_admin_turns")
    for key, turn in (("x1", "t-1"), ("x2", "t-2"), ("x3", "t-1"), ("x4", None)):
        tag_inside(
            live,
            kind="report",
            key=key,
            title=f"title {key}",
            data={},
            session_id="s_admin_turns",
            turn_id=turn,
        )
    pk = (
        live.python(
            "from artifacts_app.models import Session\n"
            "print(Session.objects.get(sid='s_admin_turns').pk)"
        )
        .strip()
        .splitlines()[-1]
    )
    page.goto(f"{live.url}/admin/login/?next=/admin/")
    page.fill("#id_username", "sup")
    page.fill("#id_password", "sup-pw-12345")
    page.click("input[type=submit]")
    page.wait_for_url(re.compile(r"/admin/$"))  # logged in before the next navigation
    page.goto(f"{live.url}/admin/artifacts_app/session/{pk}/change/")
    sections = page.locator(".session-turn")
    expect(sections).to_have_count(3)
    assert sections.evaluate_all("ns => ns.map(n => n.dataset.turn)") == ["", "t-1", "t-2"]
    expect(sections.nth(1).locator(".turn-count")).to_have_text("2")
    expect(sections.nth(1).locator("tbody tr").first).to_contain_text("title x3")
    expect(page.locator('[data-field="owner"]')).to_have_text("alice")
    expect(page.locator('[data-field="count"]')).to_have_text("4")
    page.screenshot(path=str(screenshot_path(tmp_path, "admin-session.png")), full_page=True)
    page.goto(f"{live.url}/admin/artifacts_app/session/?q=s_admin_turns")
    row = page.locator("#result_list tbody tr").first
    expect(row).to_contain_text("alice")
    expect(row.locator("td.field-artifacts")).to_have_text("4")
