from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import urlencode

import pytest

from tests.browser.server import LiveServer

CHROMIUM = os.environ.get("ARTIFACTS_CHROMIUM", "/usr/bin/chromium")
# Playwright must never fetch a browser of its own: the Debian one is installed by bin/test.
os.environ.setdefault("PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD", "1")


def live_ready() -> bool:
    """The REST routes and the session websocket exist (the playground's live half needs both)."""
    from django.urls import Resolver404, resolve

    from artifacts_app import routing

    try:
        resolve("/reviewer/v1/artifacts")
    except Resolver404:
        return False
    return bool(routing.websocket_urlpatterns)


def pytest_collection_modifyitems(config, items):
    if Path(CHROMIUM).exists():
        return
    skip = pytest.mark.skip(
        reason=f"no Chromium at {CHROMIUM}: `apt-get install -y chromium chromium-driver` (bin/test does it as root)"
    )
    for item in items:
        if "browser" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def live(tmp_path_factory):
    server = LiveServer(tmp_path_factory.mktemp("live"))
    server.prepare()
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def browser():
    # Module scope, not session: Playwright's sync API keeps an event loop marked running in this
    # thread until it stops, and async tests collected after the browser tests (tests/client…)
    # would then fail with "This event loop is already running".
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, headless=True)
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1280, "height": 860})
    page = context.new_page()
    yield page
    context.close()


def log_in(page, live, username: str, password: str, next_url: str = "/playground/") -> None:
    page.goto(f"{live.url}/accounts/login/?" + urlencode({"next": next_url}))
    page.fill("#id_username", username)
    page.fill("#id_password", password)
    page.click("#login-submit")
    page.wait_for_load_state("networkidle")
