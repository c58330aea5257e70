"""The session's persistence schema: the spec's names, kinds and value types.

Shared by every agent Flow type and by every engine, so the embedded engine and
Dex store the same values under the same names.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dex_agents.domain.context_summary import ContextSummary
from dex_agents.domain.events import AgentEvent
from dex_agents.domain.interrupts import AgentInterrupt, AgentInterruptResolution
from dex_agents.domain.message_index import AgentMessageChunk, AgentMessageIndex
from dex_agents.domain.messages import AgentMessage, AgentUserMessage
from dex_agents.domain.plans import AgentPlan, PlanExecutionRequest
from dex_agents.domain.state import (
    AgentState,
    TurnCancellationRequest,
    TurnControlRequest,
    TurnReplySequence,
    TurnSessionSettings,
)
from dex_agents.domain.tool_calls import AgentToolCall, ToolCallCancellation, ToolCallCompleted
from dex_agents.domain.usage import AgentUsage
from dex_agents.ports.persistence import (
    AttributeDef,
    AttributeMapDef,
    ChannelDef,
    ChannelMapDef,
    StreamDef,
)

DEFAULT_EVENT_STREAM_CAPACITY_BYTES = 10 * 1024 * 1024
"""The ``AgentEvents`` Stream capacity unless the session options change it (10 MiB)."""

AGENT_STATE: AttributeDef[AgentState] = AttributeDef("AgentState", AgentState)
# A message is set once at its sequence's key, then deleted when it moves into a chunk.
AGENT_MESSAGES: AttributeMapDef[AgentMessage] = AttributeMapDef(
    "AgentMessages", AgentMessage, write_once=True
)
AGENT_MESSAGE_CHUNKS: AttributeMapDef[AgentMessageChunk] = AttributeMapDef(
    "AgentMessageChunks", AgentMessageChunk, write_once=True
)
AGENT_MESSAGE_INDEX: AttributeDef[AgentMessageIndex] = AttributeDef(
    "AgentMessageIndex", AgentMessageIndex
)
TURN_REPLY_SEQUENCE: AttributeDef[TurnReplySequence] = AttributeDef(
    "TurnReplySequence", TurnReplySequence
)
FRAMEWORK_RUN_STATE: AttributeDef[str] = AttributeDef("FrameworkRunState", str)
AGENT_TOOL_CALLS: AttributeMapDef[AgentToolCall] = AttributeMapDef("AgentToolCalls", AgentToolCall)
PENDING_INTERRUPTS: AttributeDef[tuple[AgentInterrupt, ...]] = AttributeDef(
    "PendingInterrupts", tuple[AgentInterrupt, ...]
)
AGENT_USAGE: AttributeDef[AgentUsage] = AttributeDef("AgentUsage", AgentUsage)
QUEUED_USER_MESSAGES: ChannelDef[AgentUserMessage] = ChannelDef(
    "QueuedUserMessages", AgentUserMessage
)
INTERRUPT_RESOLUTIONS: ChannelMapDef[AgentInterruptResolution] = ChannelMapDef(
    "InterruptResolutions", AgentInterruptResolution
)
TOOL_CALL_RESULTS: ChannelDef[ToolCallCompleted] = ChannelDef("ToolCallResults", ToolCallCompleted)
STEERED_USER_MESSAGES: ChannelDef[AgentUserMessage] = ChannelDef(
    "SteeredUserMessages", AgentUserMessage
)
TURN_CONTROL_REQUESTS: ChannelDef[TurnControlRequest] = ChannelDef(
    "TurnControlRequests", TurnControlRequest
)
TURN_CANCELLATION_REQUEST: AttributeDef[TurnCancellationRequest] = AttributeDef(
    "TurnCancellationRequest", TurnCancellationRequest
)
TOOL_CALL_CANCELLATIONS: ChannelMapDef[ToolCallCancellation] = ChannelMapDef(
    "ToolCallCancellations", ToolCallCancellation
)
AGENT_TRACE_CONTEXT: AttributeDef[str] = AttributeDef("AgentTraceContext", str)
AGENT_PLAN: AttributeDef[AgentPlan] = AttributeDef("AgentPlan", AgentPlan)
PLAN_EXECUTIONS: ChannelMapDef[PlanExecutionRequest] = ChannelMapDef(
    "PlanExecutions", PlanExecutionRequest
)
PENDING_PLAN_EXECUTION: AttributeDef[PlanExecutionRequest] = AttributeDef(
    "PendingPlanExecution", PlanExecutionRequest
)
CONTEXT_SUMMARY: AttributeDef[ContextSummary] = AttributeDef("ContextSummary", ContextSummary)
SESSION_SETTINGS: AttributeDef[Mapping[str, Any]] = AttributeDef(
    "SessionSettings", Mapping[str, Any]
)
TURN_SESSION_SETTINGS: AttributeDef[TurnSessionSettings] = AttributeDef(
    "TurnSessionSettings", TurnSessionSettings
)


def agent_events_stream(
    capacity_bytes: int = DEFAULT_EVENT_STREAM_CAPACITY_BYTES,
) -> StreamDef[AgentEvent]:
    """The ``AgentEvents`` Stream (``flow.agent_events``), one per Flow type."""
    return StreamDef("AgentEvents", AgentEvent, capacity_bytes)


SESSION_SCHEMA: tuple[
    AttributeDef[Any] | AttributeMapDef[Any] | ChannelDef[Any] | ChannelMapDef[Any], ...
] = (
    AGENT_STATE,
    AGENT_MESSAGES,
    AGENT_MESSAGE_CHUNKS,
    AGENT_MESSAGE_INDEX,
    TURN_REPLY_SEQUENCE,
    FRAMEWORK_RUN_STATE,
    AGENT_TOOL_CALLS,
    PENDING_INTERRUPTS,
    AGENT_USAGE,
    QUEUED_USER_MESSAGES,
    INTERRUPT_RESOLUTIONS,
    TOOL_CALL_RESULTS,
    STEERED_USER_MESSAGES,
    TURN_CONTROL_REQUESTS,
    TURN_CANCELLATION_REQUEST,
    TOOL_CALL_CANCELLATIONS,
    AGENT_TRACE_CONTEXT,
    AGENT_PLAN,
    PLAN_EXECUTIONS,
    PENDING_PLAN_EXECUTION,
    CONTEXT_SUMMARY,
    SESSION_SETTINGS,
    TURN_SESSION_SETTINGS,
)
"""Every Attribute, AttributeMap, Channel and ChannelMap of a session; the Stream is per Flow type."""
