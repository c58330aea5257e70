"""A source call's stored reference, and routing a stored call back to its source by it.

The runner stores a source's own ``tool_source_reference`` wrapped with the
source's name, ``{"stepwise_tool_source": <source_name>, "reference": ...}``, so
the tool Step, ``PollToolTask`` and a cancellation reach the same source on any
Worker without a listing; a reference without that key is no source's (a
framework's or a function tool's).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from typing import Any

import attrs

from dex_agents.domain.runner_outcomes import DeferredToolOutcome, ToolTaskPollOutcome
from dex_agents.domain.tool_calls import AgentToolCall
from dex_agents.ports.runner import DeferredToolExecution, ToolTaskPoll
from dex_agents.ports.tool_source import ToolSource

TOOL_SOURCE_REFERENCE_KEY = "stepwise_tool_source"
"""The key of the source name in a stored ``tool_source_reference``."""


def encode_source_reference(source_name: str, reference: str | None) -> str:
    """The stored ``tool_source_reference`` of a source's call: the source's name and its own."""
    return json.dumps(
        {TOOL_SOURCE_REFERENCE_KEY: source_name, "reference": reference},
        separators=(",", ":"),
        sort_keys=True,
    )


def decode_source_reference(text: str | None) -> tuple[str, str | None] | None:
    """The source name and inner reference of a stored reference, or ``None`` for another's."""
    if text is None:
        return None
    try:
        data: Any = json.loads(text)
    except ValueError:
        return None
    if not isinstance(data, dict) or not isinstance(data.get(TOOL_SOURCE_REFERENCE_KEY), str):
        return None
    inner = data.get("reference")
    if inner is not None and not isinstance(inner, str):
        raise ValueError(f"stored tool_source_reference {text!r} has a reference that is not text")
    return data[TOOL_SOURCE_REFERENCE_KEY], inner


def route_source_call(
    sources: Mapping[str, ToolSource], record: AgentToolCall
) -> tuple[ToolSource, AgentToolCall] | None:
    """The source of a stored call and the record with the source's own reference.

    ``None`` when the call is no source's; ``LookupError`` when its source name is
    not among ``sources`` (this Worker lacks it).
    """
    decoded = decode_source_reference(record.tool_source_reference)
    if decoded is None:
        return None
    name, inner = decoded
    source = sources.get(name)
    if source is None:
        # LookupError, not ToolExecutionError: the call's effect class decides the outcome.
        raise LookupError(
            f"tool call {record.tool_call_id} belongs to tool source {name}, "
            "which this agent does not have"
        )
    return source, attrs.evolve(record, tool_source_reference=inner)


async def execute_source_call(
    sources: Mapping[str, ToolSource], call: DeferredToolExecution
) -> DeferredToolOutcome | None:
    """Run a source's call in that source, or ``None`` when the call is no source's."""
    routed = route_source_call(sources, call.tool_call)
    if routed is None:
        return None
    source, record = routed
    return await source.execute_deferred_tool_call(dataclasses.replace(call, tool_call=record))


async def poll_source_task(
    sources: Mapping[str, ToolSource], poll: ToolTaskPoll
) -> ToolTaskPollOutcome | None:
    """Poll a source call's task in that source, or ``None`` when the call is no source's."""
    routed = route_source_call(sources, poll.tool_call)
    if routed is None:
        return None
    source, record = routed
    return await source.poll_tool_task(dataclasses.replace(poll, tool_call=record))


__all__ = [
    "TOOL_SOURCE_REFERENCE_KEY",
    "decode_source_reference",
    "encode_source_reference",
    "execute_source_call",
    "poll_source_task",
    "route_source_call",
]
