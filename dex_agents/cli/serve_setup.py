"""What ``dex-agents serve``'s worker runs the demo agent's turns with, for the console's pages.

A session's page asks for it (``create_console_app(worker_setup=...)``): the
model ``--model`` named (or the scripted demo model), the ``--api-base`` server,
and each MCP server with the tools the worker offers from it. Imported by
``run_serve`` only, since it needs the ``console`` extra.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from datetime import timedelta
from typing import TYPE_CHECKING

from dex_agents.cli.demo_agent import DEMO_FLOW_TYPE
from dex_agents.console.worker_setup import ToolServerSetup, WorkerSetup
from dex_agents.domain.listed_tools import ListedTool

if TYPE_CHECKING:
    from dex_agents.mcp import McpToolSource

SCRIPTED_MODEL = "the scripted demo model"
"""What the page names as the model when serve was given none."""

LISTING_WAIT = timedelta(seconds=0.25)
"""How long a page's request waits for the servers' first listing before it says it still
runs (the page asks again every second until it ends): an unreachable server's lasts its
connection attempts, a waiting request held serve's Ctrl-C, which waits for every open
response, and it held one of the browser's six connections to the console, beside each
open session page's event stream (with 5 s here and five session tabs open, a snapshot's
read waited 6.5 to 19.5 s)."""


class ServeWorkerSetup:
    """``worker_setup`` of serve's console: the demo Flow type's model, server and MCP tools.

    The tools come from the worker's own ``McpToolSource``, so its cache rules hold
    and the page shows what a turn is offered. The listing runs as a task of its own,
    never cancelled by a page that stops waiting: a cancelled first listing makes the
    source leave the server out of the turns until it ends. ``aclose`` ends it.
    """

    def __init__(self, model: str | None, api_base: str | None, source: McpToolSource | None):
        self._setup = WorkerSetup(model=model or SCRIPTED_MODEL, model_server=api_base)
        self._source = source
        self._listing: asyncio.Task[Sequence[ListedTool]] | None = None

    async def __call__(self, flow_type: str) -> WorkerSetup | None:
        """The setup of ``flow_type``'s turns; ``None`` for a Flow type serve does not run."""
        if flow_type != DEMO_FLOW_TYPE:
            return None
        source = self._source
        if source is None:
            return self._setup
        if self._listing is None or self._listing.done():
            self._listing = asyncio.create_task(source.list_tools())
        listing = self._listing
        await asyncio.wait([listing], timeout=LISTING_WAIT.total_seconds())
        listed = None
        if listing.done() and not listing.cancelled() and listing.exception() is None:
            listed = listing.result()
        return WorkerSetup(
            model=self._setup.model,
            model_server=self._setup.model_server,
            tool_servers=_tool_servers(source, listed),
        )

    async def aclose(self) -> None:
        """End a listing still running."""
        if self._listing is not None:
            self._listing.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._listing


def _tool_servers(
    source: McpToolSource, listed: Sequence[ListedTool] | None
) -> list[ToolServerSetup]:
    from dex_agents.mcp import McpStreamableHttpServerConfig, McpTool

    servers = []
    for server in source.servers:
        tools = None
        if listed is not None:
            tools = [t.name for t in listed if isinstance(t, McpTool) and t.server == server.name]
        url = server.url if isinstance(server, McpStreamableHttpServerConfig) else None
        servers.append(ToolServerSetup(name=server.name, url=url, tools=tools))
    return servers
