"""A server that repeats its list cursor is one that cannot be listed, not a hang."""

from __future__ import annotations

import asyncio
import logging
import sys
from pathlib import Path

import pytest

from dex_agents.domain.errors import ToolExecutionError
from dex_agents.mcp import McpStdioServerConfig, McpToolSource

LOOP_SERVER = McpStdioServerConfig(
    name="loop",
    command=sys.executable,
    args=(str(Path(__file__).with_name("cursor_loop_server.py")),),
)
GUARD_SECONDS = 60
"""Only a guard: a listing that follows the cursor forever would hang the test."""


async def test_a_server_that_repeats_its_cursor_is_left_out_and_the_others_are_listed(
    stdio_server: McpStdioServerConfig, caplog: pytest.LogCaptureFixture
) -> None:
    # Found by an audit: list_tools() followed the cursor forever, hiding every server's tools.
    source = McpToolSource([stdio_server, LOOP_SERVER])
    try:
        with caplog.at_level(logging.WARNING):
            tools = await asyncio.wait_for(source.list_tools(), GUARD_SECONDS)
    finally:
        await source.aclose()
    names = {tool.name for tool in tools}
    assert "notes__read_note" in names
    assert not any(name.startswith("loop__") for name in names)
    assert "MCP server 'loop' could not be listed" in caplog.text


async def test_listing_resources_of_a_server_that_repeats_its_cursor_fails_the_call() -> None:
    source = McpToolSource([LOOP_SERVER], resource_and_prompt_tools_enabled=True)
    try:
        with pytest.raises(ToolExecutionError, match="repeated the list cursor"):
            await asyncio.wait_for(
                source.call_tool("mcp_list_resources_and_prompts", {"server": "loop"}),
                GUARD_SECONDS,
            )
    finally:
        await source.aclose()
