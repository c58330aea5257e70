"""Fixtures of the MCP adapter tests: the test server over stdio and HTTP, and its call log."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dex_agents.mcp import McpStdioServerConfig, McpStreamableHttpServerConfig
from tests.adapters.mcp.http_server import HttpTestServer

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


@pytest.fixture
def http_test_server(call_log: CallLog) -> Iterator[HttpTestServer]:
    with HttpTestServer({"MCP_TEST_CALL_LOG": str(call_log.path)}) as server:
        yield server


@pytest.fixture
def http_server(http_test_server: HttpTestServer) -> McpStreamableHttpServerConfig:
    return McpStreamableHttpServerConfig(name="notes", url=http_test_server.url)
