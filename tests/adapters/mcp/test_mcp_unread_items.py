"""Resource and prompt items the MCP SDK cannot read are still the server's items ("Resources and prompts").

Found by an audit: the outputs are "the server's items as it sent them", and the
source kept each answer as sent, but it still let the SDK read the answer into its
models first, which refused an item they cannot hold (MCP 2026-07-28 lets it through
the protocol's own check). The tool then raised the SDK's ``ValidationError``: a read's
Step ran the request three times and recorded the validation errors as the call's
failure.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from dex_agents.domain.errors import ToolExecutionError
from dex_agents.mcp import (
    MCP_GET_PROMPT_TOOL_NAME,
    MCP_READ_RESOURCE_TOOL_NAME,
    McpStreamableHttpServerConfig,
    McpToolSource,
)
from tests.adapters.mcp.http_server import HttpTestServer
from tests.adapters.mcp.unread_items_server import ITEMLESS, ODD_CONTENTS, ODD_MESSAGE


@pytest.fixture
def source() -> Iterator[McpToolSource]:
    with HttpTestServer({}, module="tests.adapters.mcp.unread_items_server") as server:
        config = McpStreamableHttpServerConfig(name="odd", url=server.url)
        yield McpToolSource([config], resource_and_prompt_tools_enabled=True)


async def _output(source: McpToolSource, tool: str, **arguments: str) -> object:
    await source.list_tools()
    result = await source.call_tool(tool, {"server": "odd", **arguments})
    await source.aclose()
    return json.loads(result.output)


async def test_a_resource_the_sdk_cannot_read_is_read_as_sent(source: McpToolSource) -> None:
    output = await _output(source, MCP_READ_RESOURCE_TOOL_NAME, uri="note://odd")
    assert output == {"contents": [ODD_CONTENTS]}


async def test_a_prompt_message_the_sdk_cannot_read_is_shown_as_sent(
    source: McpToolSource,
) -> None:
    output = await _output(source, MCP_GET_PROMPT_TOOL_NAME, name="odd")
    assert output == {"description": None, "messages": [ODD_MESSAGE]}


@pytest.mark.parametrize(
    ("tool", "arguments", "error"),
    [
        (
            MCP_READ_RESOURCE_TOOL_NAME,
            {"uri": "note://none"},
            "the MCP server's resources/read answer has no 'contents'",
        ),
        (
            MCP_GET_PROMPT_TOOL_NAME,
            {"name": "none"},
            "the MCP server's prompts/get answer has no 'messages'",
        ),
    ],
)
async def test_an_answer_without_its_items_fails_the_call_by_name(
    tool: str, arguments: dict[str, str], error: str
) -> None:
    # Found by an audit: the tool read the items by key and a bare KeyError escaped it.
    env = {ITEMLESS: "1"}
    with HttpTestServer(env, module="tests.adapters.mcp.unread_items_server") as server:
        config = McpStreamableHttpServerConfig(name="odd", url=server.url)
        source = McpToolSource([config], resource_and_prompt_tools_enabled=True)
        await source.list_tools()
        with pytest.raises(ToolExecutionError) as raised:
            await source.call_tool(tool, {"server": "odd", **arguments})
        await source.aclose()
    assert str(raised.value) == error
