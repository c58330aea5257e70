"""Fixtures of the ``DexFlowClient`` tests (``test_dex_flow_client_*.py``), and the engine
contract's table of what it replayed, at the end of the output."""

from __future__ import annotations

import pytest

from tests.adapters.dex.contract_replay import REPLAY_TABLE
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


def pytest_terminal_summary(
    terminalreporter: pytest.TerminalReporter, config: pytest.Config
) -> None:
    """Name every Step type and RPC the engine contract replayed, with how many of each."""
    table = config.stash.get(REPLAY_TABLE, None)
    if table is None:
        return
    terminalreporter.write_sep("-", "engine contract: cases replayed on Dex")
    for line in table:
        terminalreporter.write_line(line)
