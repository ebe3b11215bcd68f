"""The pipeline pages in real headless Chromium on the web listener (issue 27 item 7), against a real
octipusd whose store holds pipelines as a walker leaves them: the list and the pipeline page (its
graph's node states, items by stages, attempts linking their runs, the incomplete attempt), the
agent's text inert, live updates from the pipeline's stream as its record changes, the stop button
reaching the API; and no page without the page's token."""

from __future__ import annotations

import getpass
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest
from playwright.sync_api import Browser, expect

from octipusd.store import Store
from octipusd.store.pipeline_records import ItemStatus, NodeStatus, PipelineStatus
from octipusd.testing.harness import DaemonHarness
from tests.unit.pipelines.seed import HOSTILE, Seeded, seed_pipeline
from tests.web.browser import DESKTOP, PAGE_WAIT_MS, screenshot

expect.set_options(timeout=PAGE_WAIT_MS)  # waits for what the page shows, not a timing assertion

MISSING_BINARY = Path("/nonexistent/octipus-pipelines/vendor")


@dataclass
class Site:
    url: str
    base: str
    login: str
    stopped: Seeded
    running: Seeded


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    root = tmp_path_factory.mktemp("pipeline-page")
    workspace = root / "d" / "workspace"
    workspace.mkdir(parents=True)
    url = f"sqlite:///{root / 'octipus.db'}"
    me = getpass.getuser()
    with Store.open(url) as store:
        stopped = seed_pipeline(store, user=me, workspace=str(workspace))
    with DaemonHarness(
        root / "d", "http://127.0.0.1:9", MISSING_BINARY, {"OCTIPUS_DATABASE_URL": url}
    ) as daemon:
        with Store.open(url) as store:  # after the start-up, which pauses a pipeline left running
            running = seed_pipeline(store, user=me, workspace=str(workspace), status=PipelineStatus.RUNNING)
        login = daemon.web_url()
        parts = urlsplit(login)
        yield Site(url, f"{parts.scheme}://{parts.netloc}", login, stopped, running)


def test_the_pipeline_page_shows_the_graph_items_and_attempts_inertly_and_live(
    browser: Browser, site: Site
) -> None:
    with httpx.Client(base_url=site.base, verify=False, timeout=30) as http:
        for path in (
            "/pipelines",
            f"/pipelines/{site.running.pipeline_id}",
            f"/v1/pipelines/{site.running.pipeline_id}",
        ):
            assert http.get(path).status_code == 401, path  # no page without the page's token
    context = browser.new_context(viewport=DESKTOP)  # type: ignore[arg-type]
    page = context.new_page()
    page.set_default_timeout(PAGE_WAIT_MS)
    page.goto(site.login)
    page.goto(f"{site.base}/pipelines")
    rows = page.locator(".pipeline-row")
    expect(rows).to_have_count(2)
    rows.filter(has=page.locator(f'a[href="/pipelines/{site.running.pipeline_id}"]')).locator("a").click()

    expect(page.locator(".pipeline-status .badge")).to_have_text("running")
    expect(page.locator('[data-node="n0"] .badge')).to_have_text("completed")
    expect(page.locator('[data-node="n1"] .badge')).to_have_text("pending")
    first = page.locator(f'[data-item="{site.running.item_ids[0]}"]')
    expect(first.locator("strong")).to_have_text(f"first {HOSTILE}")  # the agent's markup as text
    expect(first.locator(f'a[href="/runs/{site.running.run_id}"]')).to_have_count(1)  # the attempt's run
    expect(page.locator(".incomplete-text")).to_contain_text("halfway")
    assert page.locator("#pwned").count() == 0  # nothing an agent wrote became an element
    expect(page.locator("button", has_text="Stop")).to_have_count(1)
    expect(page.locator("button", has_text="Resume")).to_have_count(0)  # running: nothing to resume
    screenshot(page, "pipeline-desktop")

    # the walker's writes reach the open page through the pipeline's stream
    with Store.open(site.url) as store:
        store.set_pipeline_node(site.running.pipeline_id, "n1", NodeStatus.RUNNING)
        store.set_pipeline_item(site.running.item_ids[1], ItemStatus.DONE, result="done")
        store.append_pipeline_event(site.running.pipeline_id, "stage_started", {"stage": "implement"})
    expect(page.locator('[data-node="n1"] .badge')).to_have_text("running")
    expect(page.locator(f'[data-item="{site.running.item_ids[1]}"] .badge').first).to_have_text("done")

    with page.expect_request(f"**/v1/pipelines/{site.running.pipeline_id}/stop") as sent:
        page.once("dialog", lambda dialog: dialog.accept())
        page.locator("button", has_text="Stop").click()
    assert sent.value.method == "POST"
    expect(page.locator(".pipeline-controls .form-status")).not_to_be_empty()  # the daemon's answer shown
    context.close()


def test_a_stopped_pipeline_offers_resume_from_a_stage(browser: Browser, site: Site) -> None:
    context = browser.new_context(viewport=DESKTOP)  # type: ignore[arg-type]
    page = context.new_page()
    page.goto(site.login)
    page.goto(f"{site.base}/pipelines/{site.stopped.pipeline_id}")
    expect(page.locator(".pipeline-status .badge")).to_have_text("stopped")
    expect(page.locator("button", has_text="Resume")).to_have_count(1)
    expect(page.locator("input[name=fromStage]")).to_have_count(1)
    expect(page.locator("button", has_text="Stop")).to_have_count(0)
    context.close()
