"""Runs ``conformance/mcp_tool_names.json``: MCP tool names and the first-wins rule."""

from __future__ import annotations

from typing import Any

from dex_agents.domain.mcp_naming import mcp_tool_name, select_mcp_tool_names
from dex_agents.domain.wire import to_wire

RULE = "mcp_tool_names"


def run(case_input: dict[str, Any]) -> Any:
    """The tool name of ``server``/``tool``, or the selection of a ``listing``."""
    try:
        if "listing" in case_input:
            listing = [(server, tool) for server, tool in case_input["listing"]]
            return to_wire(select_mcp_tool_names(listing))
        return mcp_tool_name(case_input["server"], case_input["tool"])
    except ValueError as error:
        return {"error": type(error).__name__}
