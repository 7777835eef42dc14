"""Fixtures of the browser tests: one headless Chromium per test module, a fresh context per test.

(Module scope, not session: Playwright's sync API keeps its own event loop, which is stopped
before the rest of the suite runs its asyncio code.)
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, BrowserContext, sync_playwright
from support.browser import CHROMIUM, CHROMIUM_ARGS, chromium_missing


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """Debian's Chromium, installed by scripts/install_browser.sh when missing. Without root the
    script cannot install it: then the tests skip; as root a failed install is an error."""
    reason = chromium_missing()
    if reason and os.geteuid() != 0:
        pytest.skip(reason)
    if reason:
        pytest.fail(reason, pytrace=False)
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True
        )
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture
def context(browser: Browser) -> Iterator[BrowserContext]:
    """A fresh, isolated browser context (no shared cache, cookies or storage)."""
    ctx = browser.new_context(accept_downloads=True, java_script_enabled=True)
    ctx.set_default_timeout(10_000)
    try:
        yield ctx
    finally:
        ctx.close()
