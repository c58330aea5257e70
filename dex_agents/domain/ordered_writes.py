"""Ordered writes: the writes of one model response run one at a time, in the model's order.

A tool source marks a write ``DeferredToolCall.ordered`` (every connector write,
and every declared MCP write). Reads of the response run in parallel, but only
its first ordered write starts; the others wait with ``write_queued``.
``RunModel`` starts the next queued write before any model call, and raises its
approval only then. Once a write is not ``SUCCEEDED``, the response's later
writes record ``FAILED`` with ``skipped=True`` and a not-run error, so the model
may call them again ("Connector tools").

Records carry no response ID, so the rules lean on two facts: ``deferral_order``
grows in model order across the turn, and while a response has queued writes no
later response exists, because ``RunModel`` settles the queue before it calls
the model. The write that last started before the first queued one therefore
belongs to the same response.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum

import attrs

from dex_agents.domain.tool_calls import AgentToolCall, ToolCallStatus
from dex_agents.domain.tool_outcomes import not_run_error

TOOL_CALL_SKIPPED_AFTER_WRITE_DETAIL = (
    "an earlier write of the same model response did not succeed, so this write was skipped"
)
"""The detail after ``TOOL_CALL_NOT_RUN_ERROR_PREFIX + ": "`` in a skipped write's ``error``."""


def _in_model_order(records: Iterable[AgentToolCall]) -> list[AgentToolCall]:
    return sorted(records, key=lambda record: (record.deferral_order, record.tool_call_id))


def skip_write(record: AgentToolCall) -> AgentToolCall:
    """A write that never ran because an earlier write of its response did not succeed.

    ``failed`` with ``skipped=True`` and ``TOOL_CALL_NOT_RUN_ERROR_PREFIX:
    TOOL_CALL_SKIPPED_AFTER_WRITE_DETAIL``. A final record comes back unchanged.
    """
    if record.is_final:
        return record
    return attrs.evolve(
        record,
        status=ToolCallStatus.FAILED,
        skipped=True,
        write_queued=False,
        error=not_run_error(TOOL_CALL_SKIPPED_AFTER_WRITE_DETAIL),
    )


def queue_ordered_writes(response_records: Iterable[AgentToolCall]) -> tuple[AgentToolCall, ...]:
    """The records of one new model response, with its ordered writes queued.

    The first ordered write that is not final starts at once; every later one gets
    ``write_queued=True``. When an ordered write that ``RunModel`` already
    recorded final did not succeed, the later ordered writes are skipped instead.
    Reads and other unordered calls are returned unchanged, in the given order.
    """
    records = tuple(response_records)
    replaced: dict[str, AgentToolCall] = {}
    blocked = False
    started = False
    for record in _in_model_order(r for r in records if r.ordered):
        if record.is_final:
            blocked = blocked or record.status is not ToolCallStatus.SUCCEEDED
        elif blocked:
            replaced[record.tool_call_id] = skip_write(record)
        elif started:
            replaced[record.tool_call_id] = attrs.evolve(record, write_queued=True)
        else:
            started = True
    return tuple(replaced.get(record.tool_call_id, record) for record in records)


def queued_writes(records: Iterable[AgentToolCall]) -> tuple[AgentToolCall, ...]:
    """The turn's queued writes that are not final, in model order.

    Steering and ``cancel_turn`` cancel these as they cancel unstarted calls.
    """
    return tuple(_in_model_order(r for r in records if _is_queued(r)))


def _is_queued(record: AgentToolCall) -> bool:
    return record.write_queued and not record.is_final


class OrderedWriteAction(StrEnum):
    """What ``RunModel`` does about the turn's queued writes before any model call."""

    NO_QUEUED_WRITE = "no_queued_write"
    """Nothing is queued: call the model."""
    WAIT_FOR_WRITE = "wait_for_write"
    """The write before the queue is not final yet: it still runs."""
    START_WRITE = "start_write"
    """The write before the queue succeeded: start the next queued write."""
    SKIP_WRITES = "skip_writes"
    """A write of the response did not succeed: record every queued write skipped."""


@attrs.frozen(kw_only=True)
class OrderedWritesDecision:
    """What ``decide_next_ordered_write`` decided.

    ``started`` is the next queued write with ``write_queued`` cleared, for
    ``start_write``; its status is unchanged, so a call that needs approval raises
    its approval now. ``skipped`` holds the skipped records, for ``skip_writes``.
    ``waiting_for`` names the write that still runs, for ``wait_for_write``.
    """

    action: OrderedWriteAction = attrs.field(converter=OrderedWriteAction)
    started: AgentToolCall | None = None
    skipped: tuple[AgentToolCall, ...] = ()
    waiting_for: str | None = None


def decide_next_ordered_write(records: Iterable[AgentToolCall]) -> OrderedWritesDecision:
    """Which queued write of the turn starts next, or whether the queue is skipped.

    ``records`` are the turn's ``AgentToolCalls`` records. The write that gates the
    queue is the ordered write, not queued, latest in model order before the first
    queued one: when it succeeded the first queued write starts; when it is final
    but did not succeed, every queued write is skipped; otherwise it still runs.
    """
    turn_records = _in_model_order(records)
    queue = queued_writes(turn_records)
    if not queue:
        return OrderedWritesDecision(action=OrderedWriteAction.NO_QUEUED_WRITE)
    first = queue[0]
    earlier = [
        record
        for record in turn_records
        if record.ordered
        and not _is_queued(record)
        and (record.deferral_order, record.tool_call_id)
        < (first.deferral_order, first.tool_call_id)
    ]
    gate = earlier[-1] if earlier else None
    if gate is not None and not gate.is_final:
        return OrderedWritesDecision(
            action=OrderedWriteAction.WAIT_FOR_WRITE, waiting_for=gate.tool_call_id
        )
    if gate is not None and gate.status is not ToolCallStatus.SUCCEEDED:
        return OrderedWritesDecision(
            action=OrderedWriteAction.SKIP_WRITES,
            skipped=tuple(skip_write(record) for record in queue),
        )
    return OrderedWritesDecision(
        action=OrderedWriteAction.START_WRITE,
        started=attrs.evolve(first, write_queued=False),
    )
