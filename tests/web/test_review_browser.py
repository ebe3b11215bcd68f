"""The review pages in real headless Chromium (issue 16 item 2) on the web listener, against a real
octipusd with a seeded store and the real claude on a scripted model:

* the inbox shows an approval live (the ``/v1/activity`` feed) as the run asks for it, and the
  browser notification fires;
* a comment on a diff line reaches the session's live run as steering;
* the journal, worktree diff, usage and health pages render at phone and desktop widths
  (screenshots when ``OCTIPUS_SCREENSHOTS`` is set).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import pytest
from playwright.sync_api import Browser, Page, Route, expect

from octipusd.ctl.client import Client
from octipusd.testing.anthropic_server import ScriptedAnthropicServer
from octipusd.testing.harness import DaemonHarness, claude_binary
from tests.web.browser import DESKTOP, PAGE_WAIT_MS, PHONE, no_horizontal_scroll, screenshot
from tests.web.review_fixtures import CHANGED_FILE, WORKTREE_ID, ReviewSeed, seed_review

expect.set_options(timeout=PAGE_WAIT_MS)  # waits for what the page shows, not a timing assertion

#: Claude asks to run Bash (ASK by default: an approval waits), then ends its turn.
SCRIPT: dict[str, Any] = {
    "steps": [
        {
            "content": [
                {"type": "tool_use", "name": "Bash", "input": {"command": "bash -c 'echo hi > hi.txt'"}}
            ]
        },
        {"content": [{"type": "text", "text": "done"}]},
        {"content": [{"type": "text", "text": "noted"}]},
        {"content": [{"type": "text", "text": "noted again"}]},
    ]
}


@dataclass
class Site:
    daemon: DaemonHarness
    client: Client
    seed: ReviewSeed
    base: str
    login: str


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    root = tmp_path_factory.mktemp("review-browser")
    workspace = root / "octipus" / "workspace"
    workspace.mkdir(parents=True)
    seed = seed_review(root, workspace)
    env = {"OCTIPUS_DATABASE_URL": seed.url, "OCTIPUS_WORKTREES_DIR": str(seed.worktrees)}
    with ScriptedAnthropicServer(SCRIPT) as model:
        daemon = DaemonHarness(root / "octipus", model.base_url, claude_binary(), extra_env=env)
        with daemon:
            login = daemon.web_url()
            parts = urlsplit(login)
            yield Site(daemon, daemon.client(), seed, f"{parts.scheme}://{parts.netloc}", login)


def open_page(browser: Browser, site: Site, viewport: dict[str, int]) -> Page:
    """A new page logged in with the token URL (the session cookie), notifications allowed."""
    context = browser.new_context(viewport=viewport)  # type: ignore[arg-type]
    context.grant_permissions(["notifications"], origin=site.base)
    page = context.new_page()
    page.set_default_timeout(PAGE_WAIT_MS)
    page.goto(site.login)
    # the landing page follows the activity (notifications are allowed): wait until it does, so its
    # stream's request is not counted as one of the next page's
    expect(page.locator("body[data-activity-state=open]")).to_have_count(1)
    return page


def test_the_inbox_shows_an_approval_live_and_a_diff_comment_steers_the_run(
    browser: Browser, site: Site
) -> None:
    page = open_page(browser, site, PHONE)
    feeds: list[str] = []
    page.on("request", lambda request: feeds.append(request.url) if "/v1/activity" in request.url else None)
    failed: list[str] = []  # e.g. a live part fetching a wrong URL (once "/true")
    page.on("response", lambda response: failed.append(response.url) if response.status >= 400 else None)
    page.goto(f"{site.base}/inbox")
    expect(page.locator("body[data-activity-state=open]")).to_have_count(1)  # following the feed
    expect(page.locator("#live-status")).to_contain_text("Live")
    expect(page.locator("#enable-notifications")).to_be_hidden()  # allowed already: nothing to ask
    elsewhere = open_page(browser, site, DESKTOP)  # a page without live parts notifies as well
    elsewhere.goto(f"{site.base}/health")
    expect(elsewhere.locator("body[data-activity-state=open]")).to_have_count(1)
    seeded = page.locator(f'[data-approval-id="{site.seed.approval_id}"]')
    expect(seeded).to_be_visible()

    session_id = site.seed.usage.with_row
    run_id = site.client.request("POST", f"/sessions/{session_id}/turns", json={"prompt": "go"})["id"]
    approval = site.daemon.wait_until(
        lambda: site.client.request("GET", "/approvals", params={"run_id": run_id}), 90, "the run's approval"
    )[0]
    live = page.locator(f'[data-approval-id="{approval["id"]}"]')
    expect(live).to_be_visible()  # arrived without a reload
    expect(live).to_contain_text("cli-native:Bash")
    for notified in (page, elsewhere):
        notified.wait_for_function("(window.octipusNotifications || 0) >= 1")
        note = notified.evaluate("window.octipusLastNotification")
        assert "cli-native:Bash" in note["body"] and "hi.txt" in note["body"], note  # tool and subject
        assert note["url"] == f"{site.base}/approvals/{approval['id']}", note  # no token in it
    assert len(feeds) == 1, feeds  # the live list and the notifications share one stream
    assert failed == [], failed  # every fetch of the inbox page found what it asked for
    screenshot(page, "inbox-phone")

    diff = open_page(browser, site, DESKTOP)
    diff.goto(f"{site.base}/worktrees/{WORKTREE_ID}")
    diff.locator('tr.dl.add[data-line="2"]').click()
    form = diff.locator("#diff-comment")
    expect(form.locator(".where")).to_have_text(f"{CHANGED_FILE}:2")
    form.locator("textarea").fill("Keep it lower case, please.")
    form.locator("button[type=submit]").click()
    expect(form.locator(".form-status")).to_contain_text(f"Sent to run {run_id[:12]}")
    steered = [
        e["data"]["text"]
        for e in site.client.request("GET", f"/runs/{run_id}/events", params={"limit": 10000})
        if e["kind"] in ("steering_submitted", "steering_queued")
    ]
    assert len(steered) == 1 and f"{CHANGED_FILE}:2" in steered[0] and "Keep it lower case" in steered[0]
    assert "> TWO <b>bold</b>" in steered[0]  # the line quoted as text
    screenshot(diff, "worktree-diff-desktop")

    site.client.request("POST", f"/approvals/{approval['id']}", json={"decision": "deny"})
    site.daemon.wait_until(
        lambda: site.client.request("GET", f"/runs/{run_id}")["status"] in ("succeeded", "failed"),
        90,
        "the run's end",
    )


@pytest.mark.parametrize("viewport", [PHONE, DESKTOP], ids=["phone", "desktop"])
def test_review_pages_render_at_phone_and_desktop_width(
    browser: Browser, site: Site, viewport: dict[str, int]
) -> None:
    page = open_page(browser, site, viewport)
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    width = "phone" if viewport is PHONE else "desktop"
    for path, ready in (
        ("/actions", f"#action-{site.seed.action_id}"),
        (f"/worktrees/{WORKTREE_ID}", ".diff-file"),
        ("/usage", 'table[data-by="model_row"]'),
        ("/", "#sessions"),
        ("/health", ".card.adapter"),
    ):
        page.goto(f"{site.base}{path}")
        expect(page.locator(ready).first).to_be_visible()
        assert no_horizontal_scroll(page), f"{path} is wider than the {width} viewport"
        rows = "new Set([...document.querySelectorAll('header.top nav a')].map((a) => a.offsetTop)).size"
        assert page.evaluate(rows) == 1, f"the nav wraps at {width} width"  # one row, never wrapped
        screenshot(page, f"{path.strip('/').split('/')[0] or 'home'}-{width}")
    assert errors == []
    page.goto(f"{site.base}/usage")
    cost = page.locator('table[data-by="run"] th.cost-col').bounding_box()
    assert cost and cost["x"] + cost["width"] <= viewport["width"], cost  # the Cost column is in view
    health = site.client.request("GET", "/health")
    page.goto(f"{site.base}/health")
    for adapter in health["adapters"]:
        expect(page.locator(f'[data-adapter="{adapter["adapter"]}"]')).to_contain_text(adapter["binary"])


def test_a_page_whose_session_ended_says_so_and_stops_retrying(browser: Browser, site: Site) -> None:
    page = open_page(browser, site, PHONE)
    feeds: list[str] = []
    health: list[str] = []

    def ending_stream(route: Route) -> None:  # a stream the daemon ends at once: the page reconnects
        feeds.append(route.request.url)
        route.fulfill(status=200, headers={"Content-Type": "text/event-stream"}, body="retry: 100\n\n")

    def health_check(route: Route) -> None:  # the first check finds no daemon (a network error)
        health.append(route.request.url)
        route.abort("internetdisconnected") if len(health) == 1 else route.continue_()

    page.route("**/v1/activity", ending_stream)
    page.route("**/v1/health", health_check)
    page.goto(f"{site.base}/inbox")
    expect(page.locator("#inbox")).to_be_visible()
    page.context.clear_cookies()  # as after a daemon restart: the page's web session is unknown
    banner = page.locator(".session-ended")
    expect(banner).to_contain_text("run `octipusctl web` and open the new link")
    expect(page.locator("body[data-activity-state=ended]")).to_have_count(1)
    expect(page.locator("#live-status")).to_contain_text("octipusd restarted")
    assert len(health) >= 2 and len(feeds) >= 2, (health, feeds)  # retried after the network error
    tried = len(feeds)
    page.evaluate("new Promise((done) => setTimeout(done, 2500))")  # longer than the first retry wait
    assert len(feeds) == tried, feeds  # stopped: no new attempt to open the stream
    screenshot(page, "session-ended-phone")

    other = open_page(browser, site, DESKTOP)
    other.goto(f"{site.base}/usage")
    other.context.clear_cookies()
    message = other.evaluate("window.octipus.api('GET', '/v1/health').then(() => 'ok', (e) => e.message)")
    assert message != "ok"
    expect(other.locator(".session-ended")).to_have_count(1)  # any API call answering 401 says so too
