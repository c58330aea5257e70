"""What a durable MCP read call costs over a direct ``mcp`` client call to the same server.

Run it from the repository root, with the ``mcp`` extra installed:

    uv run --frozen python bench/mcp_overhead.py [--calls N] [--transports stdio,http]

The server is the MCP adapter tests' server (``tests/adapters/mcp/mcp_test_server.py``):
over stdio a new process per request, as ``McpToolSource`` runs it; over
Streamable HTTP one uvicorn process on loopback. For each transport the benchmark
times ``--calls`` (20) rounds, interleaved, each of:

- direct: ``mcp.Client`` opens a new connection (a new process over stdio),
  calls ``read_note`` and closes, as ``McpToolSource`` does for every request;
- direct, TLS kept (HTTP): the same with one SSL context for every call, as
  ``McpToolSource`` keeps one (the SDK's default HTTP client loads the system's
  certificates for each connection); durable over direct uses this one over HTTP;
- durable: one session turn on the embedded SQLite engine (a temporary file,
  each durable commit synced) whose scripted model calls ``read_note`` through an
  ``McpToolSource`` and then answers with its result, from ``send_user_message``
  until ``wait_for_user`` returns; the listing is cached by a warm-up turn;
- plain turn: the same session's turn whose model answers without a tool call,
  so durable minus plain minus direct is what the tool call adds to a turn.

It prints the medians, the durable median over the direct one, and the added time
(durable minus direct) in fsync'd commits: the floor of ``engine_overhead.py``,
measured in every round too (``--floor-commits`` commits, 20) on a file of its
own, because a shared disk's fsync time drifts over a run. It asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ssl
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path

import engine_overhead

from dex_agents import AgentSessionClient
from dex_agents.builtin_loop import (
    AgentDefinition,
    ModelRequest,
    ScriptedModelClient,
    ScriptedModelReply,
    ScriptedToolCall,
    builtin_agent_session_flow,
)
from dex_agents.local import LocalRuntime
from dex_agents.mcp import McpStdioServerConfig, McpStreamableHttpServerConfig, McpToolSource

ROOT = Path(__file__).resolve().parents[1]
SERVER_SCRIPT = ROOT / "tests" / "adapters" / "mcp" / "mcp_test_server.py"
SESSION = "bench"
TOOL = "notes__read_note"
CALL = "call"  # a user message that asks for the tool call; any other gets a plain answer

McpConfig = McpStdioServerConfig | McpStreamableHttpServerConfig


def respond(request: ModelRequest) -> ScriptedModelReply:
    """Call the read tool once when asked to, then answer with its result."""
    results = ScriptedModelClient.tool_results(request)
    if results:
        return ScriptedModelReply(text=results[-1].output)
    if request.user_texts[-1] == CALL:
        return ScriptedModelReply(tool_calls=(ScriptedToolCall(TOOL, {"name": "a"}),))
    return ScriptedModelReply(text="no call")


async def direct_call(config: McpConfig, tls: ssl.SSLContext | None = None) -> float:
    """One new connection, one ``tools/call`` and its close, with the MCP SDK alone; over
    HTTP with ``tls`` kept from call to call when given (the SDK's default HTTP client
    loads the system's certificates anew for each connection)."""
    import httpx2
    from mcp import Client, StdioServerParameters
    from mcp.client.streamable_http import streamable_http_client

    started = time.perf_counter()
    async with contextlib.AsyncExitStack() as stack:
        if isinstance(config, McpStdioServerConfig):
            params = StdioServerParameters(command=config.command, args=list(config.args))
            target = Client(params)
        elif tls is None:
            target = Client(streamable_http_client(config.url))
        else:
            timeout = httpx2.Timeout(30, read=None)
            http = await stack.enter_async_context(httpx2.AsyncClient(verify=tls, timeout=timeout))
            target = Client(streamable_http_client(config.url, http_client=http))
        async with target as client:
            result = await client.call_tool("read_note", {"name": "a"})
    elapsed = time.perf_counter() - started
    assert not result.is_error, result
    return elapsed


async def timed_turn(sessions: AgentSessionClient, text: str, expected: str) -> float:
    started = time.perf_counter()
    assert await sessions.send_user_message(SESSION, text)
    snapshot = await sessions.wait_for_user(SESSION)
    elapsed = time.perf_counter() - started
    assert snapshot.messages[-1].text == expected, snapshot.messages[-1].text
    return elapsed


@asynccontextmanager
async def agent_session(config: McpConfig, db: Path) -> AsyncIterator[AgentSessionClient]:
    source = McpToolSource([config])
    agent = AgentDefinition(
        name="bench",
        instructions="You read notes.",
        model=ScriptedModelClient(respond, max_recorded_requests=0),
        tool_sources=[source],
    )
    flow = builtin_agent_session_flow(agent, flow_type="McpBench")
    try:
        async with LocalRuntime(db, [flow], create=True) as runtime:
            sessions = runtime.sessions(flow)
            await sessions.open_session(SESSION)
            yield sessions
    finally:
        await source.aclose()


@contextmanager
def served(transport: str) -> Iterator[McpConfig]:
    """The test server's config: a command over stdio, or a uvicorn process over HTTP."""
    if transport == "stdio":
        yield McpStdioServerConfig(name="notes", command=sys.executable, args=(str(SERVER_SCRIPT),))
        return
    sys.path.insert(0, str(ROOT))  # the test server's package
    from tests.adapters.mcp.http_server import HttpTestServer

    with HttpTestServer({}) as server:
        yield McpStreamableHttpServerConfig(name="notes", url=server.url)


def floor_sample(directory: Path, commits: int, row_bytes: int) -> float:
    """One mean fsync'd commit, on a new file (``measure_floor`` creates its table)."""
    sample = Path(tempfile.mkdtemp(dir=directory))
    return engine_overhead.measure_floor(sample, commits, row_bytes)


async def measure(
    transport: str, calls: int, directory: Path, floor: Callable[[], float]
) -> dict[str, list[float]]:
    """Interleaved times of direct calls, durable calls, plain turns and fsync'd commits."""
    times: dict[str, list[float]] = {
        "direct": [],
        "kept": [],
        "durable": [],
        "plain": [],
        "floor": [],
    }
    import httpx2

    tls = httpx2.create_ssl_context()  # once, as McpToolSource does
    with served(transport) as config:
        async with agent_session(config, directory / f"{transport}.sqlite3") as sessions:
            # Warm up: the server (its first start), the listing cache, the engine's files.
            await direct_call(config)
            await timed_turn(sessions, CALL, "note a: hello")
            await timed_turn(sessions, "hi", "no call")
            rounds: list[tuple[str, Callable[[], Awaitable[float]]]] = [
                ("direct", lambda: direct_call(config)),
                ("kept", lambda: direct_call(config, tls)),
                ("durable", lambda: timed_turn(sessions, CALL, "note a: hello")),
                ("plain", lambda: timed_turn(sessions, "hi", "no call")),
            ]
            for n in range(calls):
                # Rotate the order so no kind always follows the same one.
                for name, run in rounds[n % 4 :] + rounds[: n % 4]:
                    times[name].append(await run())
                times["floor"].append(floor())
    return times


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f} ms"


async def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--transports", default="stdio,http")
    parser.add_argument("--floor-commits", type=int, default=20)
    parser.add_argument("--row-bytes", type=int, default=1024)
    arguments = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="dex-mcp-bench-") as name:
        directory = Path(name)

        def floor() -> float:
            return floor_sample(directory, arguments.floor_commits, arguments.row_bytes)

        print(
            "| transport | direct | direct, TLS kept | durable call | plain turn "
            "| durable / direct | added | fsync'd commit | added in commits | call's own part |"
        )
        print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
        for transport in arguments.transports.split(","):
            times = await measure(transport, arguments.calls, directory, floor)
            default, kept, durable, plain, commit = (
                statistics.median(times[kind])
                for kind in ("direct", "kept", "durable", "plain", "floor")
            )
            # What McpToolSource does, the TLS settings kept as it keeps them (stdio has none).
            direct = kept if transport == "http" else default
            added = durable - direct
            own = durable - plain - direct
            shown_kept = _ms(kept) if transport == "http" else "-"
            print(
                f"| {transport} | {_ms(default)} | {shown_kept} | {_ms(durable)} | {_ms(plain)} "
                f"| {durable / direct:.2f}x | {_ms(added)} | {_ms(commit)} | {added / commit:.1f} "
                f"| {_ms(own)} ({own / commit:.1f} commits) |"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main(sys.argv[1:])))
