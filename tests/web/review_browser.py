"""Headless Chromium for the review page tests: Debian's ``/usr/bin/chromium`` driven by
Playwright (nothing downloads a browser), and screenshots of the views when
``OCTIPUS_SCREENSHOTS=<dir>`` is set (nothing otherwise)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Final

from playwright.sync_api import Browser, Page, sync_playwright

#: Debian's chromium package (the only browser the tests use).
CHROMIUM: Final = "/usr/bin/chromium"
CHROMIUM_ARGS: Final = (
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)
#: Viewports (CSS pixels): a phone and a desktop.
PHONE: Final = {"width": 380, "height": 820}
DESKTOP: Final = {"width": 1280, "height": 900}
#: Longest wait for something to appear on a page (milliseconds).
PAGE_WAIT_MS: Final = 60_000


@contextmanager
def chromium() -> Iterator[Browser]:
    """A headless Debian chromium, closed on exit."""
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=list(CHROMIUM_ARGS))
        try:
            yield browser
        finally:
            browser.close()


def screenshot(page: Page, name: str) -> None:
    """Save ``<name>.png`` of the whole page under ``$OCTIPUS_SCREENSHOTS`` (a no-op when unset)."""
    folder = os.environ.get("OCTIPUS_SCREENSHOTS")
    if not folder:
        return
    Path(folder).mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(Path(folder) / f"{name}.png"), full_page=True)


def no_horizontal_scroll(page: Page) -> bool:
    """Whether the page fits its viewport's width (wide tables and diffs scroll inside their box)."""
    return bool(page.evaluate("document.documentElement.scrollWidth <= window.innerWidth + 1"))
