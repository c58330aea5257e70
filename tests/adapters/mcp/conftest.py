"""Fixtures of the MCP adapter tests: the test server over stdio, and a call log it writes."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from dex_agents.mcp import McpStdioServerConfig

SERVER_SCRIPT = Path(__file__).with_name("mcp_test_server.py")


class CallLog:
    """The calls the test server received, across its processes, one JSON line each."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def calls(self, tool: str | None = None) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        rows = [json.loads(line) for line in self.path.read_text().splitlines()]
        return [row for row in rows if tool is None or row["tool"] == tool]


@pytest.fixture
def call_log(tmp_path: Path) -> CallLog:
    return CallLog(tmp_path / "calls.jsonl")


@pytest.fixture
def stdio_server(call_log: CallLog) -> McpStdioServerConfig:
    return McpStdioServerConfig(
        name="notes",
        command=sys.executable,
        args=(str(SERVER_SCRIPT),),
        env={"MCP_TEST_CALL_LOG": str(call_log.path)},
    )
