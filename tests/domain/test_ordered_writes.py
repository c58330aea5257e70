"""Ordered writes: one at a time in model order, and skipped after a write that did not succeed."""

from __future__ import annotations

from typing import Any

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dex_agents.domain.ordered_writes import (
    TOOL_CALL_SKIPPED_AFTER_WRITE_DETAIL,
    OrderedWriteAction,
    OrderedWritesDecision,
    decide_next_ordered_write,
    queue_ordered_writes,
    queued_writes,
    skip_write,
)
from dex_agents.domain.tool_calls import AgentToolCall, CancellationReason, ToolCallStatus
from dex_agents.domain.tool_effects import ToolEffect
from dex_agents.domain.tool_outcomes import cancel_unstarted_tool_call, describe_tool_call_outcome

SKIPPED_ERROR = (
    "the tool did not run, so it is safe to call again: "
    "an earlier write of the same model response did not succeed, so this write was skipped"
)


def _write(call_id: str, order: int, **overrides: Any) -> AgentToolCall:
    fields: dict[str, Any] = {
        "tool_call_id": call_id,
        "tool_name": "crm_update",
        "arguments": "{}",
        "turn_id": "turn-1",
        "effect": ToolEffect.NON_IDEMPOTENT_WRITE,
        "requires_approval": True,
        "status": ToolCallStatus.AWAITING_APPROVAL,
        "deferral_order": order,
        "ordered": True,
    }
    fields.update(overrides)
    return AgentToolCall(**fields)


def _read(call_id: str, order: int, **overrides: Any) -> AgentToolCall:
    fields: dict[str, Any] = {
        "effect": ToolEffect.READ,
        "requires_approval": False,
        "status": ToolCallStatus.APPROVED,
        "ordered": False,
    }
    fields.update(overrides)
    return _write(call_id, order, **fields)


def test_the_skip_detail_and_error() -> None:
    assert TOOL_CALL_SKIPPED_AFTER_WRITE_DETAIL == (
        "an earlier write of the same model response did not succeed, so this write was skipped"
    )
    skipped = skip_write(_write("w2", 2, write_queued=True))
    assert skipped == _write(
        "w2", 2, status=ToolCallStatus.FAILED, skipped=True, error=SKIPPED_ERROR
    )
    assert describe_tool_call_outcome(skipped) == "The tool call failed: " + SKIPPED_ERROR


@pytest.mark.parametrize("status", ["succeeded", "failed", "rejected", "outcome_unknown"])
def test_a_final_record_is_never_skipped(status: str) -> None:
    record = _write("w", 0, status=status, write_queued=True)
    assert skip_write(record) is record


def test_only_the_first_write_of_a_response_starts_while_reads_run() -> None:
    response = (
        _read("r1", 0),
        _write("w1", 1),
        _read("r2", 2),
        _write("w2", 3),
        _write("w3", 4, status=ToolCallStatus.APPROVED),
    )
    assert queue_ordered_writes(response) == (
        _read("r1", 0),
        _write("w1", 1),
        _read("r2", 2),
        _write("w2", 3, write_queued=True),
        _write("w3", 4, status=ToolCallStatus.APPROVED, write_queued=True),
    )


def test_writes_queue_in_model_order_not_in_the_given_order() -> None:
    response = (_write("w2", 2), _write("w1", 1))
    assert queue_ordered_writes(response) == (_write("w2", 2, write_queued=True), _write("w1", 1))


def test_unordered_writes_are_not_queued() -> None:
    response = (_write("a", 0, ordered=False), _write("b", 1, ordered=False))
    assert queue_ordered_writes(response) == response


def test_writes_after_one_recorded_final_without_success_are_skipped_at_once() -> None:
    response = (
        _write("w1", 0, status=ToolCallStatus.REJECTED, rejection_message="planning turn"),
        _write("w2", 1),
        _write("w3", 2),
    )
    assert queue_ordered_writes(response) == (
        response[0],
        skip_write(response[1]),
        skip_write(response[2]),
    )


def test_no_queued_write() -> None:
    records = [_read("r", 0, status="succeeded"), _write("w", 1, status="succeeded")]
    assert decide_next_ordered_write(records) == OrderedWritesDecision(
        action=OrderedWriteAction.NO_QUEUED_WRITE
    )
    assert queued_writes(records) == ()


def test_after_a_write_succeeded_the_next_queued_write_starts() -> None:
    records = [
        _write("w3", 3, write_queued=True),
        _write("w1", 1, status="succeeded"),
        _write("w2", 2, write_queued=True),
        _read("r", 0, status="failed"),
    ]
    assert decide_next_ordered_write(records) == OrderedWritesDecision(
        action=OrderedWriteAction.START_WRITE, started=_write("w2", 2)
    )


@pytest.mark.parametrize("status", ["failed", "outcome_unknown", "rejected"])
def test_after_a_write_did_not_succeed_every_queued_write_is_skipped(status: str) -> None:
    records = [
        _write("w1", 1, status="succeeded"),
        _write("w2", 2, status=status),
        _write("w3", 3, write_queued=True),
        _write("w4", 4, write_queued=True, status="approved"),
    ]
    assert decide_next_ordered_write(records) == OrderedWritesDecision(
        action=OrderedWriteAction.SKIP_WRITES,
        skipped=(skip_write(records[2]), skip_write(records[3])),
    )


def test_a_write_that_still_runs_holds_the_queue() -> None:
    records = [
        _write("w1", 1, status="waiting_for_task", task_id="t"),
        _write("w2", 2, write_queued=True),
    ]
    assert decide_next_ordered_write(records) == OrderedWritesDecision(
        action=OrderedWriteAction.WAIT_FOR_WRITE, waiting_for="w1"
    )


def test_a_failed_write_of_an_earlier_response_does_not_skip_this_one() -> None:
    records = [
        _write("old-w1", 1, status="failed"),
        _write("old-w2", 2, status="failed", skipped=True, error=SKIPPED_ERROR),
        _write("w1", 3, status="succeeded"),
        _write("w2", 4, write_queued=True),
    ]
    assert decide_next_ordered_write(records).action is OrderedWriteAction.START_WRITE


def test_cancelled_queued_writes_leave_the_queue() -> None:
    records = [
        _write("w1", 1, status="succeeded"),
        cancel_unstarted_tool_call(_write("w2", 2, write_queued=True), CancellationReason.STEERED),
    ]
    assert queued_writes(records) == ()
    assert decide_next_ordered_write(records).action is OrderedWriteAction.NO_QUEUED_WRITE


def _run_response(outcomes: list[ToolCallStatus]) -> list[AgentToolCall]:
    """Drive one response's writes the way the session does, each write ending as given."""
    records = {
        record.tool_call_id: record
        for record in queue_ordered_writes([_write(f"w{n}", n) for n in range(len(outcomes))])
    }
    running = "w0"
    while True:
        records[running] = attrs.evolve(records[running], status=outcomes[int(running[1:])])
        decision = decide_next_ordered_write(records.values())
        if decision.action is OrderedWriteAction.START_WRITE:
            assert decision.started is not None
            running = decision.started.tool_call_id
            records[running] = decision.started
            continue
        for record in decision.skipped:
            records[record.tool_call_id] = record
        assert decision.action in {
            OrderedWriteAction.SKIP_WRITES,
            OrderedWriteAction.NO_QUEUED_WRITE,
        }
        return sorted(records.values(), key=lambda record: record.deferral_order)


@settings(max_examples=75, deadline=None)
@given(
    outcomes=st.lists(
        st.sampled_from(
            [
                ToolCallStatus.SUCCEEDED,
                ToolCallStatus.FAILED,
                ToolCallStatus.OUTCOME_UNKNOWN,
                ToolCallStatus.REJECTED,
            ]
        ),
        min_size=1,
        max_size=6,
    )
)
def test_writes_run_in_order_until_one_does_not_succeed(outcomes: list[ToolCallStatus]) -> None:
    final = _run_response(outcomes)
    first_failure = next(
        (n for n, status in enumerate(outcomes) if status is not ToolCallStatus.SUCCEEDED),
        len(outcomes),
    )
    for n, record in enumerate(final):
        assert record.is_final
        assert record.write_queued is False
        if n <= first_failure:
            assert (record.status, record.skipped) == (outcomes[n], False)
        else:
            assert (record.status, record.skipped, record.error) == (
                ToolCallStatus.FAILED,
                True,
                SKIPPED_ERROR,
            )
