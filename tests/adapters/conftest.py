"""Fixtures of the adapter tests: the ``FlowStore`` contract runs on both stores.

A module that defines its own ``store`` fixture (the media store tests do) overrides this one.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from dex_agents.adapters.local.memory_store import MemoryFlowStore
from dex_agents.adapters.local.sqlite_store import SqliteFlowStore
from dex_agents.ports.flow_store import FlowStore


@pytest.fixture(params=["sqlite", "memory"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[FlowStore]:
    opened: FlowStore = (
        SqliteFlowStore(tmp_path / "flows.sqlite3")
        if request.param == "sqlite"
        else MemoryFlowStore()
    )
    yield opened
    opened.close()
