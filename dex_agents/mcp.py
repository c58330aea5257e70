"""MCP servers' tools as agent tools (``dex_agents.mcp``); needs ``dex-agents[mcp]``.

``McpToolSource`` lists the tools of stdio and Streamable HTTP servers and runs
every call in its own tool Step, with an effect from the tool's annotations or the
Dex MCP conventions. See "MCP tools (dex_agents.mcp)".
"""

from __future__ import annotations

try:
    import mcp as _mcp  # noqa: F401
except ImportError as error:  # pragma: no cover - exercised without the extra
    raise ImportError('dex_agents.mcp needs the MCP SDK: pip install "dex-agents[mcp]"') from error

from dex_agents.adapters.mcp.config import McpStdioServerConfig, McpStreamableHttpServerConfig
from dex_agents.adapters.mcp.errors import McpToolCallInterruptedError
from dex_agents.adapters.mcp.source import McpToolSource
from dex_agents.adapters.mcp.tools import McpTool
from dex_agents.domain.mcp_conventions import (
    IDEMPOTENCY_KEY_META_KEY,
    TOOL_APPROVAL_META_KEY,
    TOOL_EFFECT_META_KEY,
    TOOL_OUTCOME_META_KEY,
)
from dex_agents.domain.mcp_naming import (
    MCP_GET_PROMPT_TOOL_NAME,
    MCP_LIST_RESOURCES_AND_PROMPTS_TOOL_NAME,
    MCP_READ_RESOURCE_TOOL_NAME,
)

__all__ = [
    "IDEMPOTENCY_KEY_META_KEY",
    "MCP_GET_PROMPT_TOOL_NAME",
    "MCP_LIST_RESOURCES_AND_PROMPTS_TOOL_NAME",
    "MCP_READ_RESOURCE_TOOL_NAME",
    "TOOL_APPROVAL_META_KEY",
    "TOOL_EFFECT_META_KEY",
    "TOOL_OUTCOME_META_KEY",
    "McpStdioServerConfig",
    "McpStreamableHttpServerConfig",
    "McpTool",
    "McpToolCallInterruptedError",
    "McpToolSource",
]
