"""The supervisors' admin in real Chromium: the artifact list at 1280×800, each kind of
rendered preview, the history diff and pins, and the agent dashboard — against a real daphne with
DEBUG off and collected static files (tests/browser/server.py).

``ARTIFACTS_SCREENSHOTS=1`` writes the README's admin screenshots into docs/img/.
"""

from __future__ import annotations

import json
import re
import struct
import zlib

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import live_ready
from tests.browser.server import LiveServer
from tests.browser.test_playground_browser import screenshot_path, tag_inside

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.timeout(420),  # several manage.py subprocesses per test: slow on a loaded machine
    pytest.mark.skipif(not live_ready(), reason="needs the REST API"),
]

ISO_SECONDS = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")
SCRIPTED = "<script>window.__pwned = 1; document.title = 'pwned'</script>"
REPORT = f"""# Weekly review report

Two pull requests were reviewed this week.

| PR | verdict |
|----|---------|
| o/r#7 | approve |
| o/r#8 | reject |

{SCRIPTED}

<img src=x onerror="window.__pwned = 2">

[the dashboard](https://example.com/dash)
"""


def png(width: int = 40, height: int = 20) -> bytes:
    """A real PNG (solid teal), so that the browser decodes it and gives it a natural size."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    raw = b"".join(b"\x00" + b"\x00\x80\x80" * width for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(raw))
        + chunk(b"IEND", b"")
    )


PDF = (
    b"%PDF-1.4\n1 0 obj<</Type/Catalog/Pages 2 0 R>>endobj\n"
    b"2 0 obj<</Type/Pages/Kids[3 0 R]/Count 1>>endobj\n"
    b"3 0 obj<</Type/Page/Parent 2 0 R/MediaBox[0 0 200 100]>>endobj\n"
    b"trailer<</Root 1 0 R>>\n%%EOF\n"
)


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    """A server of this module's own: the list, the drill-down and the dashboard read exactly the
    records and events these tests make (the session's shared server holds other modules' too)."""
    server = LiveServer(tmp_path_factory.mktemp("live-admin-ui"))
    server.prepare()
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def sup(live, browser):
    """A logged-in supervisor at 1280×800 (the issue's screen), downloads accepted."""
    context = browser.new_context(viewport={"width": 1280, "height": 800}, accept_downloads=True)
    page = context.new_page()
    page.goto(f"{live.url}/admin/login/?next=/admin/")
    page.fill("#id_username", "sup")
    page.fill("#id_password", "sup-pw-12345")
    page.click("input[type=submit]")
    page.wait_for_url(f"{live.url}/admin/")
    yield page
    context.close()


def tag_bytes(live, *, key: str, body: bytes, content_type: str, **fields) -> dict:
    """Tag with bytes through the services inside the server's project."""
    code = (
        "import json\nfrom artifacts_app import services\n"
        f"fields = json.loads({json.dumps(json.dumps(fields))})\n"
        "r = services.artifact_tag(agent='reviewer', kind=fields.pop('kind', 'report'), "
        f"key={key!r}, data=fields.pop('data', {{}}), contents={body!r}, "
        f"content_type={content_type!r}, **fields).record\n"
        "print(json.dumps(r.to_json()))"
    )
    return json.loads(live.python(code).strip().splitlines()[-1])


def open_artifact(page, live, artifact_id: str) -> None:
    page.goto(f"{live.url}/admin/artifacts_app/artifact/{artifact_id}/change/")
    expect(page.locator(".field-content_preview")).to_be_visible()


# --- item 1: lists that fit --------------------------------------------------------------------


def test_artifact_list_fits_1280_with_the_sidebar_open(live, sup, tmp_path):
    long = "https://github.com/some-organisation/a-rather-long-repository-name/pull/123456"
    for n in range(3):
        tag_inside(
            live,
            kind="reviewed-pr",
            key=f"{long}{n}",
            title=f"Reviewed {long}{n} with a title far longer than any column should show",
            data={"url": f"{long}{n}", "verdict": "approve"},
            session_id="s_view",
            contents="Looks good.\n",
            content_type="text/plain; charset=utf-8",
        )
    page = sup
    page.goto(f"{live.url}/admin/artifacts_app/artifact/?agent=reviewer")
    expect(page.locator("#nav-sidebar")).to_be_visible()  # the sidebar is open
    expect(page.locator("#changelist-filter")).to_be_visible()
    widths = page.evaluate(
        """() => ({
            page: document.documentElement.scrollWidth, view: document.documentElement.clientWidth,
            results: document.querySelector('.results').scrollWidth,
            resultsBox: document.querySelector('.results').clientWidth,
            updatedRight: document.querySelector('#result_list td.field-updated').getBoundingClientRect().right,
        })"""
    )
    assert widths["page"] <= widths["view"], widths  # no horizontal scroll on the page
    assert widths["results"] <= widths["resultsBox"], widths  # nor inside the table's box
    assert widths["updatedRight"] <= 1280, widths  # the sort order's column is on screen
    for header in ("title", "key", "kind", "source", "session", "type", "size", "v", "updated"):
        expect(page.locator("#result_list thead")).to_contain_text(header, ignore_case=True)
    first = page.locator("#result_list tbody tr").first
    updated = first.locator("td.field-updated time")
    assert ISO_SECONDS.match(updated.text_content()), updated.text_content()
    assert updated.get_attribute("title").endswith("Z")  # the exact instant, with ms, on hover
    key_cell = first.locator(".field-title_key .cell-sub > span")
    whole = key_cell.get_attribute("title")
    assert whole.startswith(long)  # the whole key on hover…
    shown = key_cell.inner_text()  # …and its middle cut, so the end that tells rows apart shows
    assert "…" in shown and shown.endswith(whole[-8:]) and shown.startswith(whole[:8])
    page.screenshot(path=str(screenshot_path(tmp_path, "admin-artifacts.png")))

    # Ids in URLs are the ids: the row's link, the address bar, the page.
    first.locator(".field-title_key a").first.click()
    shape = re.compile(r"/admin/artifacts_app/artifact/(art_[0-9a-f]{24})/change/(\?.*)?$")
    page.wait_for_url(shape)
    artifact_id = shape.search(page.url).group(1)
    assert "_5F" not in page.url
    expect(page.locator(".field-id .readonly")).to_have_text(artifact_id)


def test_date_drill_down_offers_only_dates_with_records(live, sup):
    page = sup
    page.goto(f"{live.url}/admin/artifacts_app/artifact/?agent=reviewer")
    links = page.locator("nav.toplinks a")
    assert links.count() >= 1
    texts = links.all_inner_texts()
    assert texts == [t for t in texts if t.strip()]  # no blank link
    year = texts[-1].strip()
    links.last.click()
    # The click navigates: read the month links once the year's page is the one shown.
    expect(page).to_have_url(re.compile(r"updated_at__year=\d{4}"))
    expect(page.locator("nav.toplinks a").first).to_be_visible()
    months = page.locator("nav.toplinks a").all_inner_texts()
    # Only this month holds records: the drill-down offers it, and the way back.
    assert any(m.strip() for m in months)
    page.locator("nav.toplinks a").last.click()
    expect(page.locator("#result_list")).to_be_visible()
    assert year.isdigit()


# --- item 2: rendered, safe previews ----------------------------------------------------------


def test_markdown_report_is_rendered_and_its_script_not_run(live, sup, tmp_path):
    record = tag_bytes(
        live,
        key="weekly-report.md",
        body=REPORT.encode(),
        content_type="text/markdown; charset=utf-8",
        title="Weekly review report",
        session_id="s_view",
    )
    page = sup
    open_artifact(page, live, record["id"])
    preview = page.locator(".preview-markdown")
    expect(preview.locator("h1")).to_have_text("Weekly review report")
    expect(preview.locator("table th").first).to_have_text("PR")
    expect(preview.locator("table tbody tr")).to_have_count(2)
    expect(preview.locator("table tbody tr").nth(1)).to_contain_text("reject")
    expect(preview).to_contain_text(SCRIPTED)  # the script is shown as text…
    assert preview.locator("script, img").count() == 0  # …and is no element
    assert page.evaluate("window.__pwned") is None and page.title() != "pwned"
    link = preview.locator("a[href='https://example.com/dash']")
    assert "noopener" in link.get_attribute("rel")
    page.screenshot(path=str(screenshot_path(tmp_path, "admin-artifact.png")), full_page=True)


def test_image_is_shown_inline(live, sup):
    record = tag_bytes(live, key="chart.png", body=png(), content_type="image/png")
    page = sup
    open_artifact(page, live, record["id"])
    image = page.locator(".preview-image img, img.preview-image")
    expect(image).to_be_visible()
    page.wait_for_function("() => document.querySelector('img.preview-image').complete")
    assert image.evaluate("img => img.naturalWidth") == 40


def test_pdf_is_in_a_sandboxed_frame(live, sup):
    record = tag_bytes(live, key="paper.pdf", body=PDF, content_type="application/pdf")
    page = sup
    url = f"/reviewer/v1/artifacts/{record['id']}/content"
    with page.expect_response(lambda r: r.url.endswith(url)) as framed:
        open_artifact(page, live, record["id"])
    frame = page.locator("iframe.preview-pdf")
    expect(frame).to_be_visible()
    assert frame.get_attribute("sandbox") == ""  # an empty sandbox: every restriction on
    assert frame.get_attribute("src") == url
    assert framed.value.status == 200  # the frame loaded the content: framing is allowed
    # Framing is allowed to our own origin only, and the route's sandbox CSP stays (the headers
    # as sent; Chromium's PDF viewer takes the response over inside the frame).
    sent = page.request.get(live.url + url)
    assert sent.headers["content-type"] == "application/pdf"
    assert sent.headers["x-frame-options"] == "SAMEORIGIN"
    assert sent.headers["content-security-policy"] == "sandbox"
    page.screenshot(path="/tmp/ui_pdf.png")


def test_json_is_pretty_and_foldable(live, sup):
    body = json.dumps({"verdict": "approve", "files": ["a.py", "b.py"], "score": 0.9}).encode()
    record = tag_bytes(live, key="result.json", body=body, content_type="application/json")
    page = sup
    open_artifact(page, live, record["id"])
    tree = page.locator(".field-content_preview .json-tree")
    expect(tree).to_contain_text('"verdict": "approve"')
    files = tree.locator("details.json-fold").nth(1)  # the root, then the array
    expect(files.locator("li").first).to_be_visible()
    files.locator("summary").first.click()  # fold the array
    expect(files.locator("li").first).to_be_hidden()
    expect(files.locator("summary")).to_contain_text("2 items")


def test_long_text_is_capped_with_show_all(live, sup):
    lines = "".join(f"line {n:05d}\n" for n in range(3000))
    record = tag_bytes(live, key="log.txt", body=lines.encode(), content_type="text/plain")
    page = sup
    open_artifact(page, live, record["id"])
    preview = page.locator(".preview-text").first
    expect(preview).to_contain_text("line 00000")
    rest = page.locator(".preview-rest")
    expect(rest).to_be_hidden()
    assert "line 02999" not in preview.inner_text()
    page.locator(".preview-more summary").click()
    expect(rest).to_be_visible()
    expect(rest).to_contain_text("line 02999")


@pytest.mark.parametrize(
    ("content_type", "name"), [("image/svg+xml", "logo.svg"), ("text/html", "page.html")]
)
def test_svg_and_html_are_only_downloadable(live, sup, content_type, name):
    body = (
        b'<svg xmlns="http://www.w3.org/2000/svg" onload="window.__pwned=3"><script>'
        b"window.__pwned=4</script><rect width='10' height='10'/></svg>"
        if "svg" in content_type
        else b"<html><body><h1 id='rendered'>hi</h1><script>window.__pwned=5</script></body></html>"
    )
    record = tag_bytes(live, key=name, body=body, content_type=content_type)
    page = sup
    open_artifact(page, live, record["id"])
    preview = page.locator(".field-content_preview .preview")
    assert "preview-download" in preview.get_attribute("class")
    assert preview.locator("img, iframe, svg, object, embed, pre, #rendered").count() == 0
    assert page.evaluate("window.__pwned") is None
    with page.expect_download() as download:
        preview.locator("a[download]").click()
    assert download.value.suggested_filename == name


# --- item 3: history -------------------------------------------------------------------------


def test_history_diff_of_two_versions_shows_the_changed_field(live, sup, tmp_path):
    common = {
        "kind": "reviewed-pr",
        "key": "https://github.com/o/r/pull/42",
        "session_id": "s_view",
    }
    url = "https://github.com/o/r/pull/42"
    tag_inside(
        live, **common, title="PR 42", data={"url": url, "verdict": "comment"}, contents="v1"
    )
    tag_inside(live, **common, title="PR 42", data={"url": url, "verdict": "approve"})
    record = tag_inside(
        live, **common, title="PR 42, merged", data={"url": url, "verdict": "reject"}
    )
    page = sup
    open_artifact(page, live, record["id"])
    history = page.locator("table.artifact-history")
    expect(history.locator("tbody tr")).to_have_count(3)
    page.check("input[name=from][value='1']")
    page.check("input[name=to][value='3']")
    page.click("#history-compare-button")
    page.wait_for_url(re.compile(r"/diff/\?(?=.*from=1)(?=.*to=3)"))
    expect(page.locator(".diff-fields")).to_contain_text("title")
    expect(page.locator(".diff-fields")).to_contain_text('"PR 42, merged"')
    ops = page.locator(".diff-ops")
    expect(ops).to_contain_text("replace")
    expect(ops).to_contain_text("/verdict")
    expect(ops).to_contain_text('"reject"')
    # The data's lines side by side (the default), then unified.
    expect(page.locator(".data-lines td.removed")).to_contain_text('"verdict": "comment"')
    expect(page.locator(".data-lines td.added")).to_contain_text('"verdict": "reject"')
    page.click("#view-unified")
    expect(page.locator(".diff-lines .removed")).to_contain_text('"verdict": "comment"')
    expect(page.locator(".diff-lines .added")).to_contain_text('"verdict": "reject"')
    page.screenshot(path=str(screenshot_path(tmp_path, "admin-diff.png")), full_page=True)

    # Pin and unpin from the page; restore is shown, and unavailable.
    open_artifact(page, live, record["id"])
    expect(page.locator("#restore-button")).to_be_disabled()
    page.click("#pin-button")
    expect(page.locator(".messagelist")).to_contain_text("Pinned")
    expect(page.locator("#pin-button")).to_have_text("Unpin")
    page.click("#pin-button")
    expect(page.locator("#pin-button")).to_have_text("Pin")
    # A version's content downloads from its own route.
    with page.expect_download() as download:
        history.locator("a[download]").first.click()
    assert download.value.suggested_filename


# --- item 5: the agent dashboard ---------------------------------------------------------------

SEED_DAY = """
import datetime, json
from artifacts_app import services
from artifacts_app.models import Agent, Event
agent = services.agent_create(slug="dash", max_artifacts=50)
for n in range(5):
    services.artifact_tag(agent=agent, kind="note" if n % 2 else "summary", key=f"k{n}", data={})
agent.refresh_from_db()
now = datetime.datetime.now(datetime.UTC).replace(minute=30, second=0, microsecond=0)
plan = json.loads(PLAN)
rows, seq = [], agent.last_seq
for hours_ago, (tags, evictions) in plan.items():
    at = now - datetime.timedelta(hours=int(hours_ago))
    for kind, count in (("artifact.tagged", tags), ("artifact.deleted", evictions)):
        for _ in range(count):
            seq += 1
            payload = {"type": kind, "seq": seq, "at": at.isoformat(), "record": {"id": "art_x"}}
            if kind == "artifact.deleted":
                payload["reason"] = "evicted"
            rows.append(Event(agent=agent, seq=seq, type=kind, artifact_id="art_x",
                              payload=payload, created_at=at))
Event.objects.bulk_create(rows)
Agent.objects.filter(pk=agent.pk).update(last_seq=seq)
print(json.dumps({"pk": agent.pk}))
"""
# A day of work, hours ago → (tags, evictions); nothing in the current hour, which the 5 tags
# above (made now) fill.
DAY = {
    "2": (4, 0),
    "3": (9, 2),
    "7": (1, 0),
    "12": (6, 6),
    "23": (2, 1),
    "30": (5, 5),
    "100": (3, 0),
}


def test_dashboard_draws_a_seeded_day_and_follows_the_stream(live, sup, tmp_path):
    agent = json.loads(
        live.python(SEED_DAY.replace("PLAN", repr(json.dumps(DAY)))).strip().splitlines()[-1]
    )
    page = sup
    page.goto(f"{live.url}/admin/artifacts_app/agent/")
    page.locator(f"a[href='/admin/artifacts_app/agent/{agent['pk']}/dashboard/']").click()
    page.wait_for_url(re.compile(r"/dashboard/$"))
    expect(page.locator("#fill-count")).to_have_text("5")
    expect(page.locator("#fill-max")).to_have_text("50")
    now_hour = page.locator("#tags-24h rect.bar").last
    assert now_hour.get_attribute("data-count") == "5"  # this hour: the 5 tags made now
    day_tags = {n: t for n, (t, _) in DAY.items() if int(n) < 24}
    bars = page.locator("#tags-24h rect.bar")
    expect(bars).to_have_count(24)
    for hours_ago, tags in day_tags.items():
        assert bars.nth(23 - int(hours_ago)).get_attribute("data-count") == str(tags), hours_ago
    assert page.locator("#tags-24h").get_attribute("data-total") == str(sum(day_tags.values()) + 5)
    evicted = page.locator("#evictions-24h rect.bar")
    assert evicted.nth(23 - 12).get_attribute("data-count") == "6"
    assert page.locator("#evictions-24h").get_attribute("data-total") == "9"  # 2 + 6 + 1
    week_total = sum(t for t, _ in DAY.values()) + 5
    assert page.locator("#tags-7d").get_attribute("data-total") == str(week_total)
    assert page.locator("#evictions-7d").get_attribute("data-total") == "14"
    # Drawn: the tallest bar of the day is the 9 tags of 3 hours ago, at full height.
    heights = [float(b.get_attribute("height")) for b in bars.all()]
    assert max(heights) == heights[23 - 3] > 0 and heights[23 - 7] == pytest.approx(
        heights[20] / 9, abs=0.1
    )
    expect(page.locator("#kind-counts")).to_contain_text("summary")
    expect(page.locator("#kind-counts tbody tr").first).to_contain_text("3")
    page.screenshot(path=str(screenshot_path(tmp_path, "admin-dashboard.png")), full_page=True)

    # The live feed: reviewer's dashboard, a tag over HTTP arrives on top without a reload.
    page.goto(f"{live.url}/admin/artifacts_app/agent/{_reviewer_pk(live)}/dashboard/")
    expect(page.locator("#feed-status")).to_have_text("(live)")
    record = live.tag(kind="report", key="dash-live", title="Arrives live", data={})
    top = page.locator("#event-feed tbody tr").first
    expect(top).to_contain_text("Arrives live")
    expect(top).to_contain_text("artifact.tagged")
    assert top.get_attribute("data-seq")
    assert page.locator(f"#event-feed span[title='{record['id']}']").count() == 1


def _reviewer_pk(live) -> str:
    code = "from artifacts_app.models import Agent; print(Agent.objects.get(slug='reviewer').pk)"
    return live.python(code).strip().splitlines()[-1]
