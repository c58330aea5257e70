"""Which listed MCP tools a ``McpToolSource`` offers, and under what session names.

Pure: it builds ``McpTool`` values from the definitions ``tools/list`` returned,
so ``McpToolSource.list_tools`` calls it once per listing, not per model call.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from dex_agents.adapters.mcp.config import McpServerConfig
from dex_agents.adapters.mcp.resources import resource_and_prompt_tools
from dex_agents.adapters.mcp.tools import build_mcp_tool
from dex_agents.domain.listed_tools import ListedTool
from dex_agents.domain.mcp_naming import select_mcp_tool_names

# The warnings keep the logger name they had before this moved out of source.py,
# so a filter on it still sees them.
logger = logging.getLogger("dex_agents.adapters.mcp.source")


def offered_tools(
    listing: Sequence[tuple[McpServerConfig, Sequence[Mapping[str, Any]]]],
    *,
    resource_tool_servers: Sequence[McpServerConfig] | None,
) -> tuple[ListedTool, ...]:
    """The tools a listing offers, under their session names, then the resource and prompt tools.

    ``listing`` is each server's ``tools/list`` definitions, in server order;
    ``select_mcp_tool_names`` names them and says which are left out (each logged
    as a warning). ``resource_tool_servers`` is the servers the resource and prompt
    tools read, or ``None`` when they are not enabled.
    """
    definitions: dict[tuple[str, str], tuple[McpServerConfig, Mapping[str, Any]]] = {}
    listed: list[tuple[str, str]] = []
    for server, tools in listing:
        for tool in tools:
            name = tool.get("name")
            if isinstance(name, str) and name:
                listed.append((server.name, name))  # twice listed: the 2nd is logged
                definitions.setdefault((server.name, name), (server, tool))
    selection = select_mcp_tool_names(listed)
    for left_out in selection.left_out:
        logger.warning("%s", left_out.warning)
    offered: list[ListedTool] = []
    for named in selection.offered:
        server, tool = definitions[(named.server, named.tool)]
        offered.append(
            build_mcp_tool(
                named.name,
                server.name,
                tool,
                trusts_tool_annotations=server.trusts_tool_annotations,
            )
        )
    if resource_tool_servers is not None:
        offered.extend(resource_and_prompt_tools([s.name for s in resource_tool_servers]))
    return tuple(offered)
