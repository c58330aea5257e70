"""A gateway's answer in place of the server's, after the server ran the call (Streamable HTTP)."""

from __future__ import annotations

from typing import Any

from dex_agents.domain.tool_outcomes import OUTCOME_UNKNOWN_TOOL_RESULT
from dex_agents.mcp import McpStreamableHttpServerConfig, McpToolSource
from tests.adapters.mcp.conftest import CallLog
from tests.adapters.mcp.gateway_server import GATEWAY_ANSWERS
from tests.adapters.mcp.http_server import HttpTestServer
from tests.adapters.mcp.session_support import calls_then_answer, outputs, session, turn


async def test_an_http_error_status_or_a_body_not_json_rpc_is_an_interruption(
    call_log: CallLog,
) -> None:
    # Found by an audit: the SDK reports a 404 as -32601 and an unexpected content
    # type as -32600, so a call the server ran was recorded failed.
    env = {"MCP_TEST_CALL_LOG": str(call_log.path)}
    with HttpTestServer(env, module="tests.adapters.mcp.gateway_server") as server:
        source = McpToolSource([McpStreamableHttpServerConfig(name="gw", url=server.url)])
        writes = [f"gw_write_{mode}" for mode in GATEWAY_ANSWERS]
        script: list[tuple[str, dict[str, Any]]] = [(f"gw__{tool}", {}) for tool in writes]
        script += [("gw__gw_read_404", {}), ("gw__rpc_error", {"code": -32602})]
        async with session(source, calls_then_answer(*script)) as s:
            *written, read, rpc_error = outputs(await turn(s))
    # Each write may have run: outcome_unknown, and never sent again.
    assert written == [OUTCOME_UNKNOWN_TOOL_RESULT] * len(writes)
    assert [len(call_log.calls(tool)) for tool in writes] == [1] * len(writes)
    # A read is sent again, up to 3 attempts.
    assert "HTTP status 404 (text/plain)" in read
    assert len(call_log.calls("gw_read_404")) == 3
    # A JSON-RPC error body at an error status (400 here) is the server's own answer.
    assert rpc_error == "The tool call failed: MCP error -32602: broken"
    assert len(call_log.calls("rpc_error")) == 1


async def test_a_malformed_input_request_answering_tools_call_fails_the_call(
    call_log: CallLog,
) -> None:
    # The server answered: the SDK's refusal of the request it sent is no interruption, so
    # a write is not recorded outcome_unknown and a read is not sent again.
    env = {"MCP_TEST_CALL_LOG": str(call_log.path)}
    with HttpTestServer(env, module="tests.adapters.mcp.gateway_server") as server:
        source = McpToolSource([McpStreamableHttpServerConfig(name="gw", url=server.url)])
        tools = ["gw_write_input_malformed", "gw_read_input_malformed"]
        script: list[tuple[str, dict[str, Any]]] = [(f"gw__{tool}", {}) for tool in tools]
        async with session(source, calls_then_answer(*script)) as s:
            written, read = outputs(await turn(s))
    for output in (written, read):
        assert output.startswith(
            "The tool call failed: the MCP server asked for input that this agent session "
            "cannot provide yet ("
        ), output
    assert [len(call_log.calls(tool)) for tool in tools] == [1, 1]
