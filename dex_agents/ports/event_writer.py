"""The event writer a runner and its tools write live events with (``AgentEvents``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

from dex_agents.domain.events import EventPayload
from dex_agents.domain.tool_calls import ToolCallStatus


@runtime_checkable
class AgentEventWriter(Protocol):
    """Writes events to the session's ``AgentEvents`` Stream.

    The session binds each writer to the turn, the Step execution and the attempt,
    so every event carries ``turn_id``, ``step_execution_id`` and ``attempt``.

    Contract:

    - Safe to call from any thread, including a framework's worker threads and
      sync callbacks; no method blocks on I/O or needs the event loop.
    - Writes after the call that received the writer (``run_model_step``,
      ``execute_deferred_tool_call``, ``poll_tool_task``) returns are dropped, so a
      background task that outlives the call cannot add text to a finished Step.
    - Events are best effort and written in call order. One ``write_text_delta``
      writes one Stream message; batch very small chunks.
    - A method never raises for a full or failed Stream: a lost event must not
      fail a model call or a tool call.
    """

    def write_text_delta(self, text: str) -> None:
        """Write a ``text_delta`` event: a piece of the model's answer."""
        ...

    def write_reasoning_delta(self, text: str) -> None:
        """Write a ``reasoning_delta`` event: a piece of the model's reasoning summary."""
        ...

    def write_tool_call_started(self, tool_call_id: str, tool_name: str) -> None:
        """Write a ``tool_call_started`` event for a tool the framework runs itself."""
        ...

    def write_tool_call_finished(
        self, tool_call_id: str, tool_name: str, status: ToolCallStatus
    ) -> None:
        """Write a ``tool_call_finished`` event for a tool the framework runs itself."""
        ...

    def write_event(self, event_type: str, payload: Mapping[str, Any] | EventPayload) -> None:
        """Write an event of any type, such as ``mcp.tool_progress``.

        A session event type takes its payload class or a JSON object of its fields;
        any other type takes a JSON object.
        """
        ...
