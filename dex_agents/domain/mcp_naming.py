"""The names under which an agent session offers MCP tools ("MCP tools (dex_agents.mcp)").

Tool names are ``<server>__<tool>``, made safe for every model provider: at most 64
characters of ASCII letters, digits, ``_`` and ``-``. Key ``ToolPolicy`` entries by
these names.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable

import attrs

MCP_TOOL_NAME_MAX_LENGTH = 64
"""The longest tool name the source offers, in characters."""

MCP_TOOL_NAME_HASH_LENGTH = 16
"""How many hex characters of the SHA-256 end a shortened tool name."""

MCP_TOOL_NAME_SEPARATOR = "__"
"""What joins the server's name and the tool's MCP name."""

MCP_LIST_RESOURCES_AND_PROMPTS_TOOL_NAME = "mcp_list_resources_and_prompts"
"""The ``READ`` tool that lists a configured server's resources, resource templates and prompts."""

MCP_READ_RESOURCE_TOOL_NAME = "mcp_read_resource"
"""The ``READ`` tool that reads one resource of a configured server."""

MCP_GET_PROMPT_TOOL_NAME = "mcp_get_prompt"
"""The ``READ`` tool that gets one prompt of a configured server."""

_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
_PREFIX_LENGTH = MCP_TOOL_NAME_MAX_LENGTH - 1 - MCP_TOOL_NAME_HASH_LENGTH


def mcp_tool_name(server: str, tool: str) -> str:
    """The session tool name of MCP tool ``tool`` of server ``server``.

    The rule, exactly, so that every core gives the same name:

    1. ``full = server + "__" + tool``.
    2. ``safe`` is ``full`` with every Unicode code point other than the ASCII
       letters, digits, ``_`` and ``-`` replaced by one ``_``.
    3. When ``safe`` has at most 64 characters, it is the name.
    4. Otherwise the name is the first 47 characters of ``safe``, then ``_``, then the
       first 16 lowercase hex characters of the SHA-256 of ``full`` (unsanitized) as
       UTF-8, 64 characters in all. Hashing the unsanitized name keeps two long names
       apart that differ only in replaced characters.

    Raises ``ValueError`` for an empty server or tool name.
    """
    if not server:
        raise ValueError("an MCP server name must not be empty")
    if not tool:
        raise ValueError(f"MCP server {server!r} listed a tool with an empty name")
    full = f"{server}{MCP_TOOL_NAME_SEPARATOR}{tool}"
    safe = _UNSAFE.sub("_", full)
    if len(safe) <= MCP_TOOL_NAME_MAX_LENGTH:
        return safe
    # surrogatepass: a lone surrogate, which JSON text can carry, still hashes the same way.
    digest = hashlib.sha256(full.encode("utf-8", "surrogatepass")).hexdigest()
    return f"{safe[:_PREFIX_LENGTH]}_{digest[:MCP_TOOL_NAME_HASH_LENGTH]}"


@attrs.frozen(kw_only=True)
class McpNamedTool:
    """One listed MCP tool and the session tool name it gets."""

    name: str
    server: str
    tool: str


@attrs.frozen(kw_only=True)
class McpLeftOutTool:
    """A listed MCP tool that is not offered because an earlier tool got its name."""

    name: str
    server: str
    tool: str
    kept_server: str
    kept_tool: str

    @property
    def warning(self) -> str:
        """The warning log line for it."""
        return (
            f"MCP tool {self.tool!r} of server {self.server!r} is left out: its name "
            f"{self.name!r} is already used by tool {self.kept_tool!r} of server "
            f"{self.kept_server!r}"
        )


@attrs.frozen(kw_only=True)
class McpToolNameSelection:
    """The tools a listing offers, in listing order, and the ones left out for a repeated name."""

    offered: tuple[McpNamedTool, ...] = ()
    left_out: tuple[McpLeftOutTool, ...] = ()


def select_mcp_tool_names(listing: Iterable[tuple[str, str]]) -> McpToolNameSelection:
    """Name every ``(server, tool)`` of a listing; when two get the same name, the first wins.

    ``listing`` is in server order, then each server's tool order. The first tool of a
    name is offered; every later one, of any server, is left out, for a warning log.
    """
    kept: dict[str, McpNamedTool] = {}
    left_out: list[McpLeftOutTool] = []
    for server, tool in listing:
        name = mcp_tool_name(server, tool)
        first = kept.get(name)
        if first is None:
            kept[name] = McpNamedTool(name=name, server=server, tool=tool)
        else:
            left_out.append(
                McpLeftOutTool(
                    name=name,
                    server=server,
                    tool=tool,
                    kept_server=first.server,
                    kept_tool=first.tool,
                )
            )
    return McpToolNameSelection(offered=tuple(kept.values()), left_out=tuple(left_out))
