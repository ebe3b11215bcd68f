"""The schedules page in real headless Chromium on the web listener (issue 28 item 8), against a real
octipusd: the user's schedules with their cron, target and status, the prompt inert, and the
resume, pause and remove buttons reaching the API (the durable engine starts on the first of them)."""

from __future__ import annotations

import getpass
from pathlib import Path
from urllib.parse import urlsplit

import httpx
from playwright.sync_api import Browser, expect

from octipusd.store import Store
from octipusd.store.schedule_records import ScheduleKind, ScheduleStatus
from octipusd.testing.harness import DaemonHarness
from tests.web.browser import DESKTOP, PAGE_WAIT_MS

expect.set_options(timeout=PAGE_WAIT_MS)  # waits for what the page shows, not a timing assertion

MISSING_BINARY = Path("/nonexistent/octipus-schedules/vendor")
HOSTILE_PROMPT = "<img src=x onerror=alert(1)> check the nightly build"


def test_the_schedules_page_lists_and_resumes_pauses_and_removes(browser: Browser, tmp_path: Path) -> None:
    workspace = tmp_path / "d" / "workspace"
    workspace.mkdir(parents=True)
    url = f"sqlite:///{tmp_path / 'octipus.db'}"
    with Store.open(url) as store:  # paused: the daemon starts no engine for it
        schedule = store.create_schedule(
            user=getpass.getuser(),
            cron="0 7 * * 1-5",
            kind=ScheduleKind.PROMPT,
            session_id=None,
            workspace=str(workspace),
            prompt=HOSTILE_PROMPT,
            pipeline=None,
            params={},
        )
        store.set_schedule_status(schedule.id, ScheduleStatus.PAUSED)
    with DaemonHarness(
        tmp_path / "d", "http://127.0.0.1:9", MISSING_BINARY, {"OCTIPUS_DATABASE_URL": url}
    ) as daemon:
        login = daemon.web_url()
        base = "{0.scheme}://{0.netloc}".format(urlsplit(login))
        with httpx.Client(base_url=base, verify=False, timeout=30) as http:
            assert http.get("/schedules").status_code == 401  # no page without the page's token
        page = browser.new_context(viewport=DESKTOP).new_page()  # type: ignore[arg-type]
        page.set_default_timeout(PAGE_WAIT_MS)
        page.goto(login)
        page.goto(f"{base}/schedules")
        row = page.locator(f'[data-schedule="{schedule.id}"]')
        expect(row.locator(".badge")).to_have_text("paused")
        expect(row.locator(".prompt")).to_have_text(HOSTILE_PROMPT)  # text, never markup
        expect(row.locator("code")).to_have_text("0 7 * * 1-5")

        row.locator("button", has_text="Resume").click()
        expect(row.locator(".badge")).to_have_text("active")
        row.locator("button", has_text="Pause").click()
        expect(row.locator(".badge")).to_have_text("paused")
        page.once("dialog", lambda dialog: dialog.accept())
        row.locator("button", has_text="Remove").click()
        expect(page.locator(".schedules")).to_contain_text("No schedule yet")
    with Store.open(url) as store:
        assert store.list_schedules() == []
