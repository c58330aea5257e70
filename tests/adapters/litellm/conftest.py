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


@pytest.fixture
async def server() -> AsyncIterator[ProviderServer]:
    async with ProviderServer() as running:
        yield running


@pytest.fixture
def output() -> RecordingOutput:
    return RecordingOutput()
