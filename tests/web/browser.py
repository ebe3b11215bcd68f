"""Helpers of the browser tests: Debian's chromium driven by Playwright (nothing downloads a
browser), screenshots of the main views when ``OCTIPUS_SCREENSHOTS`` names a folder."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Final

from playwright.sync_api import Browser, Page, Playwright

__all__ = ["CHROMIUM", "DESKTOP", "PAGE_WAIT_MS", "PHONE", "launch", "no_horizontal_scroll", "screenshot"]

#: Debian's chromium package.
CHROMIUM: Final = "/usr/bin/chromium"
#: Flags for a headless chromium in a test: no sandbox (containers), no network of its own.
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
PHONE: Final = {"width": 380, "height": 800}
DESKTOP: Final = {"width": 1280, "height": 900}
#: Longest wait for something to appear on a page (milliseconds).
PAGE_WAIT_MS: Final = 60_000


def launch(playwright: Playwright) -> Browser:
    """A headless Debian chromium."""
    return playwright.chromium.launch(executable_path=CHROMIUM, args=list(CHROMIUM_ARGS), headless=True)


def screenshot(page: Page, name: str) -> None:
    """Save the whole page as ``<OCTIPUS_SCREENSHOTS>/<name>.png``; nothing when the variable is unset."""
    folder = os.environ.get("OCTIPUS_SCREENSHOTS")
    if not folder:
        return
    Path(folder).mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(Path(folder) / f"{name}.png"), full_page=True)


def no_horizontal_scroll(page: Page) -> bool:
    """Whether the page fits its viewport's width (wide tables and diffs scroll inside their box)."""
    return bool(page.evaluate("document.documentElement.scrollWidth <= window.innerWidth + 1"))
