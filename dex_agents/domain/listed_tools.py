"""A tool that a tool source lists at run time, such as an MCP server's tool, and its name rules."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

import attrs

from dex_agents.domain.builtin_tools import check_no_reserved_tool_names
from dex_agents.domain.tool_effects import ToolEffect


def _optional_effect(value: ToolEffect | str | None) -> ToolEffect | None:
    return None if value is None else ToolEffect(value)


@attrs.frozen(kw_only=True)
class ListedTool:
    """One tool of a ``ToolSource`` listing, as the runner offers it to the model.

    ``input_schema`` is the JSON Schema of its arguments. ``effect`` and
    ``requires_approval`` are the source's hints for its policy: ``None`` leaves
    the effect to the session's ``default_tool_effect`` and the approval to the
    effect's default. A source's own tool type (``McpTool``) may subclass it.
    """

    name: str
    description: str
    input_schema: Mapping[str, Any] = attrs.field(factory=dict)
    effect: ToolEffect | None = attrs.field(default=None, converter=_optional_effect)
    requires_approval: bool | None = None


def check_listed_tool_names(
    function_tool_names: Collection[str],
    enabled_built_in_tools: Collection[str],
    listings: Sequence[tuple[str, Sequence[str]]],
) -> None:
    """Refuse listed tool names that repeat another tool's, before any model request.

    ``listings`` holds each tool source's ``source_name`` and the names of the tools
    it listed, in ``tool_sources`` order (a source whose listing failed lists
    nothing). Raises ``ValueError`` for the first clash, checking every listed name,
    in order, for each rule before the next:

    1. ``tool <name> uses the name of an enabled built-in tool``;
    2. ``tool <name> of a tool source uses the name of a function tool``;
    3. ``two tool sources list a tool named <name>``.

    A disabled built-in's name is an ordinary tool name. A source that lists one
    name twice raises ``tool source <source_name> lists a tool named <name> twice``,
    as the model could not tell the two apart.
    """
    listed = [
        (position, source_name, name)
        for position, (source_name, names) in enumerate(listings)
        for name in names
    ]
    check_no_reserved_tool_names((name for _, _, name in listed), enabled_built_in_tools)
    for _, _, name in listed:
        if name in function_tool_names:
            raise ValueError(f"tool {name} of a tool source uses the name of a function tool")
    # Positions, not source names, tell sources apart: uniqueness of names is checked elsewhere.
    first_source: dict[str, int] = {}
    for position, _, name in listed:
        if first_source.setdefault(name, position) != position:
            raise ValueError(f"two tool sources list a tool named {name}")
    seen: set[tuple[int, str]] = set()
    for position, source_name, name in listed:
        if (position, name) in seen:
            raise ValueError(f"tool source {source_name} lists a tool named {name} twice")
        seen.add((position, name))
