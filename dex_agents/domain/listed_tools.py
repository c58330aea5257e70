"""A tool that a tool source lists at run time, such as an MCP server's tool."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

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
