"""Fixtures of the console tests: the Chromium the browser tests share."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest_asyncio

from tests.console.browser import SharedChromium, launched_chromium


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def chromium() -> AsyncIterator[None]:
    """One Chromium for the session's browser tests, on the session's event loop."""
    async with launched_chromium() as browser:
        SharedChromium.browser, SharedChromium.loop = browser, asyncio.get_running_loop()
        try:
            yield
        finally:
            SharedChromium.browser = SharedChromium.loop = None
