"""The supervisors' UI in real Chromium at 1280×800 with the sidebar open: the home (what shipped,
every agent), rows told apart, the pin mark, live rows, filters; no admin page scrolls sideways
(long keys, long titles, deep JSON); text contents compared in a version diff; the versions and
the admin log told apart; ``/`` leads somewhere; dark mode.

Screenshots go to ``var/screenshots/`` (``ARTIFACTS_SCREENSHOTS=1``: ``docs/img/``, the ones
docs/supervisors.md shows).
"""

from __future__ import annotations

import json
import os
import re

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import live_ready
from tests.browser.server import LiveServer
from tests.browser.test_admin_ui import png
from tests.servers import ROOT

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.timeout(420),
    pytest.mark.skipif(not live_ready(), reason="needs the REST API"),
]

LONG = "https://github.com/some-organisation/a-rather-long-repository-name/pull/"
TITLE = "Reviewed a pull request whose title is far longer than any column could ever show whole"


def shot(name: str, *, doc: bool = False) -> str:
    """Where a screenshot goes: ``var/screenshots/``; the ones docs/supervisors.md shows go to
    ``docs/img/`` when ``ARTIFACTS_SCREENSHOTS=1``."""
    to_docs = doc and os.environ.get("ARTIFACTS_SCREENSHOTS") == "1"
    folder = ROOT / ("docs/img" if to_docs else "var/screenshots")
    folder.mkdir(parents=True, exist_ok=True)
    return str(folder / name)


def deep(levels: int) -> dict:
    value: dict = {"leaf": "a value at the bottom, long enough to need wrapping " * 3}
    for n in range(levels):
        value = {f"level_{levels - n}": value, "url": f"{LONG}{n}"}
    return value


SEED = """
import json
from artifacts_app import services
from artifacts_app.models import Artifact
plan = json.loads(PLAN)
services.agent_create(slug="writer")
services.session_create(agent="writer", sid="s_writing-session-with-a-long-identifier-0001")
out = {}
for n in range(3):
    r = services.artifact_tag(
        agent="reviewer", kind="reviewed-pr", key=plan["long"] + str(123456 + n),
        title=plan["title"] + " #" + str(n), data={"url": plan["long"] + str(123456 + n),
        "verdict": ["approve", "reject", "comment"][n]}, session_id="s_view", turn_id=f"t-{n}",
    ).record
    out[f"pr{n}"] = r.id
md = "# A report heading\\n\\n## A second heading\\n\\nThe first line of the body.\\n" + "more\\n" * 20
out["md"] = services.artifact_tag(agent="writer", kind="report", key="reports/weekly.md",
    title="Weekly report", data={"words": 240, "lang": "en", "sections": 4, "draft": False},
    contents=md.encode(), content_type="text/markdown").record.id
out["img"] = services.artifact_tag(agent="writer", kind="chart", key="charts/fill.png",
    title="Fill chart", data={"w": 40}, contents=bytes.fromhex(plan["png"]),
    content_type="image/png").record.id
out["deep"] = services.artifact_tag(agent="writer", kind="analysis", key=plan["long"] + "deep",
    title=plan["title"] + " (deep)", data=plan["deep"],
    session_id="s_writing-session-with-a-long-identifier-0001", turn_id="t-" + "x" * 100).record.id
old = "".join(f"line {n}: the same words on every line\\n" for n in range(30))
new = old.replace("line 12: the same", "line 12: other") + "a line added at the end\\n"
for text in (old, new):
    r = services.artifact_tag(agent="writer", kind="log", key="logs/run.txt", title="Run log",
        data={"run": 1}, contents=text.encode(), content_type="text/plain").record
out["log"] = r.id
services.artifact_pin(agent="writer", artifact_id=out["md"], pinned=True)
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    server = LiveServer(tmp_path_factory.mktemp("live-home"))
    server.prepare()
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def seeded(live) -> dict:
    plan = {"long": LONG, "title": TITLE, "png": png().hex(), "deep": deep(9)}
    code = SEED.replace("PLAN", repr(json.dumps(plan)))
    return json.loads(live.python(code).strip().splitlines()[-1])


@pytest.fixture(scope="module")
def sup(live, browser):
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    page = context.new_page()
    page.goto(f"{live.url}/admin/login/?next=/admin/")
    page.fill("#id_username", "sup")
    page.fill("#id_password", "sup-pw-12345")
    page.click("input[type=submit]")
    page.wait_for_url(f"{live.url}/admin/")
    yield page
    context.close()


FITS = """() => {
  const width = document.documentElement.clientWidth;
  const wide = [];
  for (const el of document.querySelectorAll('#content *')) {
    const box = el.getBoundingClientRect();
    const where = el.closest('[class*=field-]');
    if (box.width && box.right > width + 1) wide.push(el.tagName + '.' + el.className + (where ? ' in ' + where.className : '') + ' ' + Math.round(box.right));
  }
  return {scroll: document.documentElement.scrollWidth, width, wide: wide.slice(0, 8)};
}"""


def fits(page) -> None:
    """No sideways scroll, and nothing in the content reaching past the window's right edge."""
    found = page.evaluate(FITS)
    assert found["scroll"] <= found["width"], (page.url, found)
    assert found["wide"] == [], (page.url, found)


def test_home_shows_what_shipped_across_agents_told_apart(live, seeded, sup):
    page = sup
    page.goto(f"{live.url}/admin/")
    expect(page.locator("#nav-sidebar")).to_be_visible()
    expect(page.locator("#content h1")).to_contain_text("What shipped")
    rows = page.locator("#shipped tbody tr")
    expect(rows.first).to_be_visible()
    agents = {row.get_attribute("data-agent") for row in rows.all()}
    assert agents == {"reviewer", "writer"}
    # Three long keys that differ at the end: each row shows its own end.
    for n in range(3):
        row = page.locator(f"#shipped tr[data-id='{seeded[f'pr{n}']}']")
        assert str(123456 + n) in row.locator(".c-title").inner_text()
        link = row.locator("a.row-link")
        assert f"{LONG}{123456 + n}" in link.get_attribute("title")
    # The pin mark is drawn (an SVG with a label), not an emoji.
    pinned = page.locator(f"#shipped tr[data-id='{seeded['md']}'] .c-pinned svg")
    expect(pinned).to_be_visible()
    assert pinned.get_attribute("aria-label") == "pinned"
    assert pinned.bounding_box()["width"] >= 10
    # Previews: a thumbnail that decoded, Markdown headings no larger than the row's text.
    thumb = page.locator(f"#shipped tr[data-id='{seeded['img']}'] img.p-thumb")
    page.wait_for_function("() => document.querySelector('img.p-thumb').complete")
    assert thumb.evaluate("img => img.naturalWidth") == 40
    heading = page.locator(f"#shipped tr[data-id='{seeded['md']}'] .p-md .p-h").first
    expect(heading).to_have_text("A report heading")
    title_size = page.locator(f"#shipped tr[data-id='{seeded['md']}'] a.row-link")
    px = lambda loc: float(loc.evaluate("e => getComputedStyle(e).fontSize")[:-2])  # noqa: E731
    assert px(heading) <= px(title_size)
    fits(page)
    page.screenshot(path=shot("home.png"))


def test_home_filters_by_agent_kind_and_session(live, seeded, sup):
    page = sup
    page.goto(f"{live.url}/admin/")
    page.select_option("#f-agent", "writer")
    page.click("#shipped-filters input[type=submit]")
    page.wait_for_url(re.compile(r"agent=writer"))
    assert {r.get_attribute("data-agent") for r in page.locator("#shipped tbody tr").all()} == {
        "writer"
    }
    page.fill("#f-kind", "log")
    page.click("#shipped-filters input[type=submit]")
    expect(page.locator("#shipped tbody tr")).to_have_count(1)
    page.goto(f"{live.url}/admin/?session=s_view")
    expect(page.locator("#shipped tbody tr")).to_have_count(3)
    fits(page)


def test_new_records_appear_without_a_reload(live, seeded, sup):
    page = sup
    page.goto(f"{live.url}/admin/")
    expect(page.locator("#live-status")).to_have_text("(live)")
    record = live.tag(kind="report", key=f"{LONG}live", title="Arrived live", data={"n": 1})
    top = page.locator("#shipped tbody tr").first
    expect(top).to_have_attribute("data-id", record["id"])
    expect(top).to_contain_text("Arrived live")
    expect(top).to_have_class(re.compile("live"))
    live.delete(record["id"])
    expect(page.locator(f"#shipped tr[data-id='{record['id']}']")).to_have_count(0)


def test_every_admin_page_fits_1280_with_the_sidebar_open(live, seeded, sup):
    page = sup
    reviewer = live.python(
        "from artifacts_app.models import Agent; print(Agent.objects.get(slug='reviewer').pk)"
    ).split()[-1]
    session = live.python(
        "from artifacts_app.models import Session; print(Session.objects.get(sid='s_view').pk)"
    ).split()[-1]
    pages = {
        "home": "/admin/",
        "list": "/admin/artifacts_app/artifact/?agent=reviewer",
        "record": f"/admin/artifacts_app/artifact/{seeded['deep']}/change/",
        "record-versions": f"/admin/artifacts_app/artifact/{seeded['log']}/change/",
        "admin-log": f"/admin/artifacts_app/artifact/{seeded['deep']}/history/",
        "diff": f"/admin/artifacts_app/artifact/{seeded['log']}/diff/?from=1&to=2",
        "diff-unified": f"/admin/artifacts_app/artifact/{seeded['log']}/diff/?from=1&to=2&view=unified",
        "dashboard": f"/admin/artifacts_app/agent/{reviewer}/dashboard/",
        "sessions": "/admin/artifacts_app/session/",
        "session": f"/admin/artifacts_app/session/{session}/change/",
        "agents": "/admin/artifacts_app/agent/",
        "apps": "/admin/artifacts_app/",
    }
    for name, path in pages.items():
        page.goto(live.url + path)
        if name != "apps":  # Django's app index has no sidebar of its own
            expect(page.locator("#nav-sidebar")).to_be_visible()
        page.screenshot(path=shot(f"fit-{name}.png"), full_page=True)
        fits(page)
    # The deep JSON's levels indent by a little each, not by a column each.
    page.goto(live.url + pages["record"])
    lefts = page.evaluate(
        "() => [...document.querySelectorAll('.field-pretty_data .json-tree ul')].slice(0, 4)"
        ".map(u => u.getBoundingClientRect().left)"
    )
    steps = [b - a for a, b in zip(lefts, lefts[1:], strict=False)]
    assert steps and max(steps) < 40, steps
    # The versions' compare radios are on screen.
    page.goto(live.url + pages["record-versions"])
    for radio in page.locator("table.artifact-history input[type=radio]").all():
        box = radio.bounding_box()
        assert box and box["x"] + box["width"] <= 1280


def test_version_diff_compares_text_contents_side_by_side_and_unified(live, seeded, sup):
    page = sup
    page.goto(f"{live.url}/admin/artifacts_app/artifact/{seeded['log']}/change/")
    # Two histories, told apart: the versions on the page, Django's log on its own.
    expect(page.locator(".object-tools a.historylink")).to_have_text("Admin log")
    expect(page.locator(".object-tools a.versionslink")).to_contain_text("Versions")
    page.check("input[name=from][value='1']")
    page.check("input[name=to][value='2']")
    page.click("#history-compare-button")
    page.wait_for_url(re.compile(r"/diff/\?"))
    side = page.locator(".content-lines table.diff-side")
    expect(side.locator("td.removed")).to_contain_text("line 12: the same")
    expect(side.locator("td.added").first).to_contain_text("line 12: other")
    expect(side.locator("td.added").last).to_have_text("a line added at the end")
    fits(page)
    page.screenshot(path=shot("diff-side.png"), full_page=True)
    page.click("#view-unified")
    expect(page.locator(".content-lines .diff-lines .removed")).to_contain_text("-line 12")
    expect(page.locator(".content-lines .diff-lines .added").first).to_contain_text("+line 12")
    fits(page)
    page.screenshot(path=shot("diff-unified.png"), full_page=True)


def test_root_leads_to_the_admin_playground_and_api_docs(live, browser):
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    page = context.new_page()
    response = page.goto(f"{live.url}/")
    assert response.status == 200 and page.url == f"{live.url}/"  # no redirect
    for href in ("/admin/", "/playground/", "/api/docs/"):
        expect(page.locator(f".landing a[href='{href}']")).to_be_visible()
    page.screenshot(path=shot("root.png"))
    context.close()


def test_dark_mode_home(live, seeded, browser):
    context = browser.new_context(viewport={"width": 1280, "height": 800}, color_scheme="dark")
    page = context.new_page()
    page.goto(f"{live.url}/admin/login/?next=/admin/")
    page.fill("#id_username", "sup")
    page.fill("#id_password", "sup-pw-12345")
    page.click("input[type=submit]")
    page.wait_for_url(f"{live.url}/admin/")
    background = page.evaluate("() => getComputedStyle(document.body).backgroundColor")
    assert background != "rgb(255, 255, 255)"  # Django's dark palette applies
    fits(page)
    page.screenshot(path=shot("home-dark.png"))
    context.close()


CONTRAST = """() => {
  const rgb = (c) => (c.match(/[\\d.]+/g) || []).map(Number);
  const lum = ([r, g, b]) => [r, g, b].map((v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; })
    .reduce((acc, v, i) => acc + v * [0.2126, 0.7152, 0.0722][i], 0);
  const background = (el) => {
    for (; el; el = el.parentElement) {
      const c = rgb(getComputedStyle(el).backgroundColor);
      if (c.length === 3 || (c.length === 4 && c[3] > 0.5)) return c.slice(0, 3);
    }
    return [255, 255, 255];
  };
  const low = [];
  let checked = 0;
  for (const el of document.querySelectorAll('#content-main *')) {
    const own = [...el.childNodes].some((n) => n.nodeType === 3 && n.textContent.trim());
    if (!own || !el.getClientRects().length) continue;
    const a = lum(rgb(getComputedStyle(el).color).slice(0, 3)), b = lum(background(el));
    const ratio = (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
    checked += 1;
    if (!(ratio >= 4.5)) low.push(el.tagName + '.' + el.className + ' ' + ratio.toFixed(2) + ' ' + el.textContent.trim().slice(0, 20));
  }
  return {checked, low: low.slice(0, 10)};
}"""


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_the_homes_text_has_contrast(live, seeded, browser, scheme):
    context = browser.new_context(viewport={"width": 1280, "height": 800}, color_scheme=scheme)
    page = context.new_page()
    page.goto(f"{live.url}/admin/login/?next=/admin/")
    page.fill("#id_username", "sup")
    page.fill("#id_password", "sup-pw-12345")
    page.click("input[type=submit]")
    page.wait_for_url(f"{live.url}/admin/")
    found = page.evaluate(CONTRAST)
    assert found["checked"] > 50, found  # every row's text was looked at
    assert found["low"] == [], found
    context.close()


def test_keyboard_focus_is_visible_and_controls_labelled(live, seeded, sup):
    page = sup
    page.goto(f"{live.url}/admin/")
    unlabelled = page.evaluate(
        "() => [...document.querySelectorAll('#shipped-filters input:not([type=submit]), "
        "#shipped-filters select')].filter(e => !e.labels || !e.labels.length).map(e => e.name)"
    )
    assert unlabelled == []
    page.focus("#f-kind")
    outline = page.evaluate("() => getComputedStyle(document.activeElement).outlineStyle")
    assert outline != "none"


# --- the playground (a session's owner) -------------------------------------------------------

PLAY = "/playground/?agent=reviewer&session=s_live"


@pytest.fixture(scope="module")
def alice(live, browser, seeded):
    live.python(
        "from artifacts_app import services\n"
        "for n in range(7):\n"
        "    services.artifact_tag(agent='reviewer', kind='report' if n % 2 else 'reviewed-pr',"
        " key=f'play-{n}', title=f'Card {n}', data={'n': n, 'url': f'u{n}'}, session_id='s_live', turn_id='t-1',"
        " contents=b'# A heading in a preview\\n\\nbody text ' + str(n).encode(),"
        " content_type='text/markdown')\n"
        "services.artifact_tag(agent='reviewer', kind='report', key='not-alices',"
        " title='Card in another session', data={}, session_id='s_other')\n"
    )
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    page = context.new_page()
    page.goto(f"{live.url}/accounts/login/?next=/playground/")
    page.fill("#id_username", "alice")
    page.fill("#id_password", "alice-pw-12345")
    page.click("#login-submit")
    page.wait_for_load_state("networkidle")
    yield page
    context.close()


def test_playground_cards_use_the_windows_width_and_headings_stay_small(live, alice):
    page = alice
    page.goto(live.url + PLAY)
    cards = page.locator("#cards .card")
    expect(cards).to_have_count(7)
    expect(cards.first.locator(".preview-markdown h1")).to_be_visible()
    tops = [round(card.bounding_box()["y"]) for card in cards.all()[:4]]
    assert len(set(tops[:3])) == 1, tops  # three cards side by side at 1280 px
    main = page.locator("main").bounding_box()
    assert main["width"] > 1200, main  # the window's width, not a fixed column
    size = lambda loc: float(loc.evaluate("e => getComputedStyle(e).fontSize")[:-2])  # noqa: E731
    assert size(cards.first.locator(".preview-markdown h1")) <= size(cards.first.locator(".title"))
    assert page.evaluate("document.documentElement.scrollWidth") <= 1280
    page.screenshot(path=shot("playground-grid.png"))


def test_playground_counts_agree_and_follow_new_cards(live, alice):
    page = alice
    page.goto(live.url + PLAY)
    expect(page.locator("#cards .card")).to_have_count(7)
    option = page.locator("#session-select option:checked")
    expect(page.locator("#fact-count")).to_have_text("7")
    expect(option).to_contain_text("· 7 artifacts")
    expect(page.locator("#status")).to_have_attribute("data-state", "live", timeout=10_000)
    live.tag(kind="report", key="play-live", title="Card live", data={}, sessionId="s_live")
    expect(page.locator("#fact-count")).to_have_text("8")
    expect(option).to_contain_text("· 8 artifacts")
    live.delete(
        live.python(
            "from artifacts_app import services; print(services.keyed_id('reviewer', 'play-live'))"
        ).split()[-1]
    )
    expect(page.locator("#fact-count")).to_have_text("7")


def test_playground_kind_filter_and_search_of_ones_own_sessions(live, alice):
    page = alice
    page.goto(live.url + PLAY)
    expect(page.locator("#cards .card")).to_have_count(7)
    page.select_option("#card-kind", "report")
    expect(page.locator("#cards .card:visible")).to_have_count(3)
    expect(page.locator("#card-kind-shown")).to_have_text("3 of 7 shown")
    # Search: the caller's own sessions only, by words, with a kind.
    page.fill("#find", "card")
    page.select_option("#find-kind", "report")
    page.click("#find-go")
    page.wait_for_url(re.compile(r"find=card"))
    found = page.locator("#found-cards .card")
    expect(found).to_have_count(3)
    expect(page.locator("#found-cards")).not_to_contain_text("another session")
    page.screenshot(path=shot("playground-search.png"))
    found.first.locator(".title a").click()
    page.wait_for_url(re.compile(r"session=s_live"))


def test_walk_from_what_shipped_today_to_a_version_diff(live, seeded, sup):
    """docs/supervisors.md's walk, step by step, each step a screenshot."""
    page = sup
    today = page.evaluate("() => new Date().toISOString().slice(0, 10)")
    page.goto(f"{live.url}/admin/")
    page.fill("#f-since", today)
    page.click("#shipped-filters input[type=submit]")
    page.wait_for_url(re.compile(r"since=" + today))
    expect(page.locator(f"#shipped tr[data-id='{seeded['log']}']")).to_be_visible()
    page.screenshot(path=shot("supervisors-1-today.png", doc=True))
    page.fill("#f-q", "run log")
    page.click("#shipped-filters input[type=submit]")
    page.wait_for_url(re.compile(r"q=run"))
    expect(page.locator("#shipped tbody tr")).to_have_count(1)
    page.screenshot(path=shot("supervisors-2-search.png", doc=True))
    page.locator("#shipped a.row-link").first.click()
    page.wait_for_url(re.compile(r"/change/$"))
    page.locator("#versions").scroll_into_view_if_needed()
    page.screenshot(path=shot("supervisors-3-record.png", doc=True), full_page=True)
    page.check("input[name=from][value='1']")
    page.check("input[name=to][value='2']")
    page.click("#history-compare-button")
    page.wait_for_url(re.compile(r"/diff/"))
    expect(page.locator(".content-lines td.added").first).to_be_visible()
    page.screenshot(path=shot("supervisors-4-diff.png", doc=True), full_page=True)
