"""The Steps of the built-in tools ``ask_user`` and ``durable_wait``.

``write_todos`` needs no Step: it settles in ``RunModel``'s own commit.
"""

from __future__ import annotations

from typing import Any

from dex_agents.app.session import SessionRuntime
from dex_agents.domain.builtin_tools import BuiltInTool
from dex_agents.domain.tool_calls import AgentToolCall
from dex_agents.ports.engine import Step, StepMovement


class UnsupportedBuiltInToolError(NotImplementedError):
    """A built-in tool this release of the session does not route yet."""


def movement_for(runtime: SessionRuntime, record: AgentToolCall, tool: BuiltInTool) -> StepMovement:
    """The Step a built-in call waits in."""
    raise UnsupportedBuiltInToolError(f"the built-in tool {tool.value} is not routed yet")


def steps(runtime: SessionRuntime) -> list[Step[Any]]:
    """The built-in tools' Steps."""
    return []
