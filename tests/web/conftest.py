"""Fixtures of the page tests: a real octipusd and the real claude on a scripted model (the e2e
``octipus`` factory), an HTTP client for the pages on the daemon's Unix socket, and one headless
chromium per test module (:mod:`tests.web.browser`)."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from playwright.sync_api import Browser, sync_playwright

from tests.e2e.conftest import Env, claude, octipus
from tests.web.browser import launch

__all__ = ["browser", "claude", "octipus", "pages"]


def pages(env: Env) -> httpx.Client:
    """A client for the daemon's pages (``/``, ``/runs/...``) over its Unix socket (no access checks
    there); close it after use."""
    return httpx.Client(
        transport=httpx.HTTPTransport(uds=str(env.daemon.socket)), base_url="http://octipusd", timeout=30
    )


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """One headless chromium for the module's tests."""
    with sync_playwright() as playwright:
        launched = launch(playwright)
        try:
            yield launched
        finally:
            launched.close()
