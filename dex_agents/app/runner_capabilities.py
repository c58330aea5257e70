"""Which optional ports a session's runner implements, checked once per session Flow.

A runtime Protocol check looks up every method of the Protocol on the object,
about 15 us each on Python 3.11, and a tool turn asked the same runner the same
questions five times. A ``SessionRuntime``'s runner never changes, so its
answers are worked out when the runtime is built: a capability is a method of
the runner as it is then.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dex_agents.ports.runner import (
    ContextCompactionRunner,
    ToolCallStepOptionsProvider,
    ToolTaskPoller,
    UnfinishedTurnMessageBuilder,
)


@dataclass(frozen=True)
class RunnerCapabilities:
    """The runner as each optional port it implements, or ``None`` where it does not."""

    tool_call_step_options: ToolCallStepOptionsProvider | None
    """``ToolCallStepOptionsProvider``: per-call options of tool Steps."""
    tool_task_poller: ToolTaskPoller | None
    """``ToolTaskPoller``: tool calls that run as long tasks."""
    context_compaction: ContextCompactionRunner | None
    """``ContextCompactionRunner``: summaries of older messages."""
    unfinished_turn_messages: UnfinishedTurnMessageBuilder | None
    """``UnfinishedTurnMessageBuilder``: messages of a turn that requested tool calls."""

    @classmethod
    def of(cls, runner: Any) -> RunnerCapabilities:
        """Check ``runner`` against each optional port, once."""
        return cls(
            tool_call_step_options=(
                runner if isinstance(runner, ToolCallStepOptionsProvider) else None
            ),
            tool_task_poller=runner if isinstance(runner, ToolTaskPoller) else None,
            context_compaction=runner if isinstance(runner, ContextCompactionRunner) else None,
            unfinished_turn_messages=(
                runner if isinstance(runner, UnfinishedTurnMessageBuilder) else None
            ),
        )
