"""Fixtures of the ``DexFlowClient`` tests (``test_dex_flow_client_*.py``)."""

from __future__ import annotations

import pytest

from tests.adapters.dex.fake_async_client import FakeDexClient
from tests.adapters.dex.toy_agent_flow import ToyFlow


@pytest.fixture
def fake() -> FakeDexClient:
    """A fresh fake ``dex.AsyncClient`` with nothing recorded."""
    return FakeDexClient()


@pytest.fixture
def flow() -> ToyFlow:
    """The ``ToyAgent`` Flow definition, bound to Dex."""
    return ToyFlow()
