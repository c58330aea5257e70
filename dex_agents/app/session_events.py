"""The session's ``AgentEventWriter``: events bound to a turn, a Step execution and an attempt."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Mapping
from typing import Any

from dex_agents.domain.events import (
    EVENT_PAYLOAD_TYPES,
    AgentEvent,
    AgentEventType,
    EventPayload,
    InterruptResolvedPayload,
    TextDeltaPayload,
    ToolCallFinishedPayload,
    ToolCallStartedPayload,
)
from dex_agents.domain.exact_values import exactly_decodable
from dex_agents.domain.interrupts import InterruptKind
from dex_agents.domain.tool_calls import CancellationReason, ToolCallStatus
from dex_agents.domain.wire import from_wire, to_wire
from dex_agents.ports.persistence import StreamDef
from dex_agents.ports.step_contexts import StepContext

logger = logging.getLogger("dex_agents.events")


def build_event(
    context: StepContext,
    turn_id: str | None,
    event_type: str,
    payload: Mapping[str, Any] | EventPayload,
) -> AgentEvent:
    """An event of ``context``'s Step execution and attempt; a known type's payload is checked.

    A known type's payload, a JSON object or its payload class, is decoded as a
    reader decodes it, so a field of the wrong type (a ``text_delta`` of
    ``None``) raises ``WireFormatError`` here: once on the Stream, an event that
    no longer decodes would stop every reader at it. A payload of its very class
    whose every field has the type decoding gives (``exactly_decodable``) is that
    decode already, and is kept as it is.
    """
    payload_type = EVENT_PAYLOAD_TYPES.get(event_type)
    # Every event a tool turn writes (eight) is such a payload, and each went through the
    # wire and back (unstructured, then structured again) only to be checked.
    if payload_type is not None and not (
        type(payload) is payload_type and exactly_decodable(payload, payload_type)
    ):
        wire = dict(payload) if isinstance(payload, Mapping) else to_wire(payload)
        payload = from_wire(wire, payload_type)
    return AgentEvent(
        type=event_type,
        payload=payload,
        turn_id=turn_id,
        step_execution_id=context.step_execution_id,
        attempt=context.attempt,
    )


def commit_event(
    context: StepContext,
    stream: StreamDef[AgentEvent],
    turn_id: str | None,
    event_type: str,
    payload: Mapping[str, Any] | EventPayload,
) -> None:
    """Stage an event that commits atomically with the Step's result."""
    context.state.write_event(stream, build_event(context, turn_id, event_type, payload))


def commit_interrupt_resolved(
    context: StepContext,
    stream: StreamDef[AgentEvent],
    turn_id: str | None,
    interrupt_id: str,
    kind: InterruptKind,
    *,
    approved: bool,
    rejection: str | None = None,
    answered: bool = False,
    reason: CancellationReason | None = None,
) -> None:
    """Stage ``interrupt_resolved`` for the ``kind`` interrupt ``interrupt_id``.

    ``rejection`` is the ``rejection_message`` of an interrupt not approved; an
    approved one carries none. ``reason`` is set when steering or ``cancel_turn``
    removed the interrupt.
    """
    payload = InterruptResolvedPayload(
        interrupt_id=interrupt_id,
        approved=approved,
        rejection_message=None if approved else rejection,
        kind=kind,
        answered=answered,
        cancellation_reason=reason,
    )
    commit_event(context, stream, turn_id, AgentEventType.INTERRUPT_RESOLVED, payload)


class SessionEventWriter:
    """Live events of one Step attempt: written at once, best effort, from any thread.

    ``close`` ends it: later writes are dropped, so a task that outlives the
    runner's call cannot add text to a finished Step.
    """

    def __init__(
        self, context: StepContext, stream: StreamDef[AgentEvent], turn_id: str | None
    ) -> None:
        self._context = context
        self._stream = stream
        self._turn_id = turn_id
        self._loop = asyncio.get_running_loop()
        self._thread = threading.get_ident()
        self._closed = False

    def close(self) -> None:
        """Drop every later write."""
        self._closed = True

    def write_event(self, event_type: str, payload: Mapping[str, Any] | EventPayload) -> None:
        """Write an event of any type; a session type takes its payload class or its fields."""
        if self._closed:
            return
        try:
            event = build_event(self._context, self._turn_id, event_type, payload)
        except (TypeError, ValueError):
            logger.warning("dropped a malformed %s event", event_type, exc_info=True)
            return
        if threading.get_ident() == self._thread:
            self._write(event)
        else:
            self._loop.call_soon_threadsafe(self._write, event)

    def _write(self, event: AgentEvent) -> None:
        if self._closed:
            return
        try:
            self._context.write_event(self._stream, event)
        except Exception:  # a lost event must never fail a model or tool call
            logger.warning("could not write a %s event", event.type, exc_info=True)

    def write_text_delta(self, text: str) -> None:
        """Write a ``text_delta`` event."""
        self.write_event(AgentEventType.TEXT_DELTA, TextDeltaPayload(text=text))

    def write_reasoning_delta(self, text: str) -> None:
        """Write a ``reasoning_delta`` event."""
        self.write_event(AgentEventType.REASONING_DELTA, TextDeltaPayload(text=text))

    def write_tool_call_started(self, tool_call_id: str, tool_name: str) -> None:
        """Write a ``tool_call_started`` event."""
        self.write_event(
            AgentEventType.TOOL_CALL_STARTED,
            ToolCallStartedPayload(tool_call_id=tool_call_id, tool_name=tool_name),
        )

    def write_tool_call_finished(
        self, tool_call_id: str, tool_name: str, status: ToolCallStatus
    ) -> None:
        """Write a ``tool_call_finished`` event."""
        self.write_event(
            AgentEventType.TOOL_CALL_FINISHED,
            ToolCallFinishedPayload(tool_call_id=tool_call_id, tool_name=tool_name, status=status),
        )
