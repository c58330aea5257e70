"""Fixtures of the session tests: every session test runs on both stores unless it says otherwise."""

from __future__ import annotations

from pathlib import Path

import pytest

from dex_agents.adapters.local.memory_store import MemoryFlowStore
from dex_agents.adapters.local.sqlite_store import SqliteFlowStore
from dex_agents.ports.flow_store import FlowStore


@pytest.fixture(params=["memory", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> FlowStore:
    if request.param == "memory":
        return MemoryFlowStore()
    return SqliteFlowStore(tmp_path / "sessions.sqlite3")
