"""Fixtures of the LiteLLM client tests: a provider on loopback, and LiteLLM kept offline.

LiteLLM fetches its model price map from the internet when it is imported unless
``LITELLM_LOCAL_MODEL_COST_MAP`` is set, so it is set before any test imports it.
Its import takes seconds, so every test module here shares one import per process.
LiteLLM's own pydantic models warn while LiteLLM builds and logs them; those
warnings, and only those, are not errors here.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.adapters.litellm.provider_server import ProviderServer
from tests.adapters.litellm.recording_output import RecordingOutput

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

HERE = Path(__file__).parent

LITELLM_WARNINGS = (
    "ignore:Item .* is using the `ReadOnly` qualifier:UserWarning",
    "ignore:Pydantic serializer warnings:UserWarning",
    "ignore:Accessing the 'model_(computed_)?fields' attribute on the instance:DeprecationWarning",
)
"""Warnings of LiteLLM's pydantic models, not of the code under test."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.is_relative_to(HERE):
            for warning_filter in LITELLM_WARNINGS:
                item.add_marker(pytest.mark.filterwarnings(warning_filter))


@pytest.fixture(autouse=True)
async def litellm_clients_closed() -> AsyncIterator[None]:
    """Close the HTTP clients LiteLLM cached on this test's event loop as the test ends.

    LiteLLM keeps its clients per event loop, up to 200 for ten minutes, and
    each test runs its own loop: past 200 tests it dropped clients of loops long
    closed, unclosed, and each aiohttp session warned (``ResourceWarning``) in
    whichever later test collected it.
    """
    yield
    import litellm  # here, not above: the environment must be set before its import
    from litellm.llms.custom_httpx.async_client_cleanup import close_litellm_async_clients

    await close_litellm_async_clients()  # type: ignore[no-untyped-call]
    litellm.in_memory_llm_clients_cache.flush_cache()  # type: ignore[no-untyped-call]
    # The module's own client (Gemini's route takes it) is kept for good: only its
    # aiohttp session of this loop is closed, which its transport makes anew.
    await litellm.module_level_aclient.client._transport.aclose()


@pytest.fixture
async def server() -> AsyncIterator[ProviderServer]:
    async with ProviderServer() as running:
        yield running


@pytest.fixture
def output() -> RecordingOutput:
    return RecordingOutput()
