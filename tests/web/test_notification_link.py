"""A notification's link clicked on another site (web Slack, webmail, ntfy's web app) opens the
page for a person who has a session (issue 16): ``SameSite=Strict`` withholds the cookie on that
cross-site navigation, so the listener reloads the page once from its own origin, and the cookie
comes along. Real headless Chromium, a real octipusd, and the linking site on another loopback
address (127.0.0.2: another site, not only another port). A browser notification quotes agent
text inert."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from playwright.sync_api import Browser, expect

from octipusd.testing.harness import DaemonHarness
from tests.web.browser import PAGE_WAIT_MS

expect.set_options(timeout=PAGE_WAIT_MS)  # waits for what the page shows, not a timing assertion

UNUSED_MODEL = "http://127.0.0.1:9"
#: The linking site's address: another site than 127.0.0.1 for the browser's cookie rules.
OTHER_SITE = "127.0.0.2"


def _linking_site(link: str) -> ThreadingHTTPServer:
    """A server on :data:`OTHER_SITE` whose page links to ``link`` (serve it in a thread)."""
    body = f'<!doctype html><title>chat</title><a id="go" href="{link}">Approval waiting</a>'.encode()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            return

    return ThreadingHTTPServer((OTHER_SITE, 0), Handler)


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[DaemonHarness]:
    with DaemonHarness(tmp_path / "d", UNUSED_MODEL) as started:
        yield started


def test_a_link_clicked_on_another_site_opens_the_page_with_the_session(
    daemon: DaemonHarness, browser: Browser
) -> None:
    url = daemon.web_url()
    origin = url.split("/?")[0]
    link = f"{origin}/inbox"  # what a notification carries: the page's origin and a path, no token
    server = _linking_site(link)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    context = browser.new_context()
    try:
        page = context.new_page()
        page.goto(url)  # the person opened octipusctl web's link earlier: a session
        expect(page).to_have_url(f"{origin}/")
        page.goto(f"http://{OTHER_SITE}:{server.server_address[1]}/")
        page.click("#go")
        expect(page).to_have_url(link)  # the reload's marker is gone again
        expect(page.locator("h1")).not_to_have_text("Octipus")
        assert "octipusctl web" not in page.content()
        # without a session the same link ends on the page that says what to do, without a loop
        fresh = browser.new_context()
        try:
            stranger = fresh.new_page()
            stranger.goto(f"http://{OTHER_SITE}:{server.server_address[1]}/")
            stranger.click("#go")
            expect(stranger.locator("body")).to_contain_text("octipusctl web")
            assert urlsplit(stranger.url).query == "octipus_continue=1"
        finally:
            fresh.close()
    finally:
        context.close()
        server.shutdown()
        server.server_close()


def test_a_browser_notification_shows_agent_text_inert(daemon: DaemonHarness, browser: Browser) -> None:
    """What a notification quotes of the agent (a command, as the approval's subject) reaches the
    desktop's notifier with its control characters shown as escapes (issue 26 item 2)."""
    url = daemon.web_url()
    origin = url.split("/?")[0]
    context = browser.new_context()
    context.grant_permissions(["notifications"], origin=origin)
    try:
        page = context.new_page()
        page.goto(url)
        expect(page).to_have_url(f"{origin}/")
        note = page.evaluate(
            """() => {
              showNotification("Octipus: approval \\u001b[2J", "cli-native:Bash: ls \\u001b]52;c;aGk=\\u0007"
                + " \\u009b1m\\rapproved\\r\\n", "/inbox", "octipus-test");
              return window.octipusLastNotification;
            }"""
        )
    finally:
        context.close()
    assert note["title"] == "Octipus: approval \\x1b[2J", note
    assert note["body"] == "cli-native:Bash: ls \\x1b]52;c;aGk=\\x07 \\x9b1m\\x0dapproved\n", note
