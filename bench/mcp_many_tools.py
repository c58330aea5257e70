"""What an MCP server's many tools cost a turn that calls none of them.

Run it from the repository root, with the ``mcp`` extra installed:

    uv run --frozen python bench/mcp_many_tools.py [--tools N] [--turns N]

Every ``RunModel`` lists each tool source and offers every listed tool to the
model. Two MCP servers on loopback (this module's ``build_server()`` under
uvicorn, as the MCP tests serve theirs) offer one tool and ``--tools`` (100) tools,
each with a description of about 170 characters and six string parameters. One
``LocalRuntime`` on a temporary SQLite file serves a session of each, whose
scripted model answers without calling a tool; after warm-up turns (the listing is
cached by then, so no turn talks to a server) their ``--turns`` (40) turns
alternate, and the benchmark prints the median CPU time of the process per turn
for each, and the difference per listed tool. It asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
TOOLS_ENV = "MCP_BENCH_TOOLS"
SESSION = "bench"


def build_server() -> Any:
    """A lowlevel MCP server of ``MCP_BENCH_TOOLS`` read tools that answer ``done``."""
    from mcp import types
    from mcp.server.lowlevel import Server

    properties = {f"p{n}": {"type": "string", "description": "a parameter " * 6} for n in range(6)}
    schema = {"type": "object", "properties": properties, "required": ["p0"]}
    tools = [
        types.Tool.model_validate(
            {
                "name": f"tool_{n}",
                "description": "Does a thing. " * 12,
                "inputSchema": schema,
                "annotations": {"readOnlyHint": True},
            }
        )
        for n in range(int(os.environ[TOOLS_ENV]))
    ]

    async def list_tools(
        ctx: object, params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def call_tool(ctx: object, params: types.CallToolRequestParams) -> types.CallToolResult:
        return types.CallToolResult(content=[types.TextContent(type="text", text="done")])

    return Server("bench-tools", on_list_tools=list_tools, on_call_tool=call_tool)


async def measure(tools: int, turns: int) -> dict[int, list[float]]:
    """CPU seconds of each timed turn, by the number of tools its source lists."""
    sys.path.insert(0, str(ROOT))  # the MCP tests' HTTP server
    from dex_agents.builtin_loop import (
        AgentDefinition,
        ScriptedModelClient,
        ScriptedModelReply,
        builtin_agent_session_flow,
    )
    from dex_agents.local import LocalRuntime
    from dex_agents.mcp import McpStreamableHttpServerConfig, McpToolSource
    from tests.adapters.mcp.http_server import HttpTestServer

    path = os.pathsep.join([str(ROOT / "bench"), str(ROOT)])
    counts = (1, tools)
    servers = [
        HttpTestServer({"PYTHONPATH": path, TOOLS_ENV: str(count)}, module="mcp_many_tools")
        for count in counts
    ]
    sources = [
        McpToolSource([McpStreamableHttpServerConfig(name="bench", url=server.url)])
        for server in servers
    ]
    flows = [
        builtin_agent_session_flow(
            AgentDefinition(
                name="bench",
                instructions="You answer.",
                model=ScriptedModelClient(
                    lambda request: ScriptedModelReply(text="ok"), max_recorded_requests=0
                ),
                tool_sources=[source],
            ),
            flow_type=f"Tools{count}",
        )
        for count, source in zip(counts, sources, strict=True)
    ]
    times: dict[int, list[float]] = {count: [] for count in counts}
    for server in servers:
        server.__enter__()
    try:
        with tempfile.TemporaryDirectory(prefix="dex-mcp-tools-") as directory:
            database = Path(directory) / "tools.sqlite3"
            async with LocalRuntime(database, flows, create=True) as runtime:
                clients = [runtime.sessions(flow) for flow in flows]
                sessions = [f"{SESSION}-{count}" for count in counts]
                for client, session in zip(clients, sessions, strict=True):
                    await client.open_session(session)

                async def turn(position: int, number: int) -> float:
                    started = time.process_time()
                    client, session = clients[position], sessions[position]
                    assert await client.send_user_message(session, f"hi {number}")
                    await client.wait_for_user(session)
                    return time.process_time() - started

                for number in range(5):
                    for position in range(2):
                        await turn(position, number)
                for number in range(turns):
                    order = (0, 1) if number % 2 == 0 else (1, 0)
                    for position in order:
                        times[counts[position]].append(await turn(position, number))
    finally:
        for source in sources:
            await source.aclose()
        for server in servers:
            server.__exit__(None, None, None)
    return times


async def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--tools", type=int, default=100, help="tools of the larger server (100)")
    parser.add_argument("--turns", type=int, default=40, help="timed turns of each session (40)")
    arguments = parser.parse_args(argv)
    times = await measure(arguments.tools, arguments.turns)
    one, many = (statistics.median(times[count]) for count in (1, arguments.tools))
    print("| tools listed | CPU ms per turn |")
    print("| ---: | ---: |")
    print(f"| 1 | {one * 1000:.2f} |")
    print(f"| {arguments.tools} | {many * 1000:.2f} |")
    each = (many - one) / (arguments.tools - 1) * 1e6
    print(f"\neach more tool: {each:.1f} us of CPU per turn (one model call)")
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main(sys.argv[1:])))
