"""A result whose content the MCP SDK cannot read is still the server's answer ("What a call does").

Found by an audit: a ``tools/call`` result holding a content block of a type the
SDK's models do not know (MCP 2026-07-28 lets it through the protocol's own check)
raised a ``ValidationError`` in the SDK after the answer came, which the source
recorded as an interrupted call: a read ran again up to three times and then
failed, and a write that ran recorded ``outcome_unknown``. The design records a
result with its text blocks joined with newlines and other content as JSON, as
a task's completed result already was.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from dex_agents.domain.errors import ToolExecutionError
from dex_agents.mcp import McpStreamableHttpServerConfig, McpToolSource
from tests.adapters.mcp.http_server import HttpTestServer

TEXT = 'the widget\n{"size":3,"type":"widget"}'


@pytest.fixture
def source() -> Iterator[McpToolSource]:
    with HttpTestServer({}, module="tests.adapters.mcp.unread_content_server") as server:
        yield McpToolSource([McpStreamableHttpServerConfig(name="odd", url=server.url)])


@pytest.mark.parametrize("tool", ["odd__read_widget", "odd__write_widget"])
async def test_a_result_with_a_block_the_sdk_cannot_read_succeeds_with_it_as_json(
    source: McpToolSource, tool: str
) -> None:
    await source.list_tools()
    result = await source.call_tool(tool, {}, idempotency_key="flow/turn-1/call-1")
    await source.aclose()
    assert (result.output, result.images) == (TEXT, ())


async def test_an_is_error_result_with_such_a_block_records_failed(
    source: McpToolSource,
) -> None:
    await source.list_tools()
    with pytest.raises(ToolExecutionError) as raised:
        await source.call_tool("odd__failed_widget", {})
    await source.aclose()
    assert str(raised.value) == TEXT


async def test_other_content_is_shown_as_the_server_sent_it(source: McpToolSource) -> None:
    # Found by an audit: a result the SDK could read was shown as its models dumped it,
    # without a null or a field of the server's own, though the same result from a task,
    # or with a block the models cannot read, was shown as sent.
    await source.list_tools()
    result = await source.call_tool("odd__linked_note", {})
    await source.aclose()
    assert result.output == (
        '{"name":"a","title":null,"type":"resource_link","uri":"note://a","x-owner":"ops"}'
    )
