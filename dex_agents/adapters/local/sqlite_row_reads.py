"""How the SQLite store reads its rows back: the decoders of ``sqlite_schema``'s SELECTs,
kept apart from the encoders in ``sqlite_rows``."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from dex_agents.adapters.local.stored_text import unpack
from dex_agents.ports.flow_rows import (
    EventRow,
    ExecutionRow,
    ExecutionStatus,
    FlowRow,
    FlowStatus,
    MessageRow,
)

_from_text = datetime.fromisoformat


# A status read a hundred times a turn is looked up here: calling the enum costs about ten
# times as much. A StrEnum member hashes and compares as its text, so either finds its
# entry; anything else goes to the enum, which raises ValueError.
_FLOW_STATUSES = {status.value: status for status in FlowStatus}
_EXECUTION_STATUSES = {status.value: status for status in ExecutionStatus}


def _flow_status(text: Any) -> FlowStatus:
    found = _FLOW_STATUSES.get(text) if isinstance(text, str) else None
    return found if found is not None else FlowStatus(text)


def _execution_status(value: Any) -> ExecutionStatus:
    # A status or its stored text; ValueError (from the enum) for anything else.
    found = _EXECUTION_STATUSES.get(value) if isinstance(value, str) else None
    return found if found is not None else ExecutionStatus(value)


def decode_flow(values: Sequence[Any]) -> FlowRow:
    # By name, in FLOW_COLUMNS' order (FlowRow's fields in order): the kept row of a session
    # is decoded afresh for each of the dozen reads of it a turn makes.
    flow_id, flow_type, run_id, status, input_text, created_at, closed_at, output, reason = values
    if created_at is not None:
        created_at = _from_text(created_at)
    if closed_at is not None:
        closed_at = _from_text(closed_at)
    return FlowRow(
        flow_id,
        flow_type,
        run_id,
        _flow_status(status),
        input_text,
        created_at,
        closed_at,
        output,
        reason,
    )


def decode_execution(values: Sequence[Any]) -> ExecutionRow:
    # Each column by name, in EXECUTION_COLUMNS' order (ExecutionRow's fields in order): a turn
    # decodes about 15 rows, and a copy of the values converted by loops over positions cost
    # 17.7 K instructions a row, against 13.7 K.
    (
        flow_id,
        step_type,
        step_execution_id,
        input_text,
        status,
        created_at,
        execution_id,
        options,
        from_step_execution_id,
        wait,
        wait_started_at,
        timer_at,
        wait_result,
        attempt,
        attempt_started,
        first_attempt_at,
        not_before,
        lease_owner,
        lease_expires_at,
        heartbeat_at,
        checkpoint,
        cancel_requested,
        recovery,
        finished_at,
        final_event,
    ) = values
    # Converted in the order of the loops this replaced (the history fields, the times, the
    # status), so a row damaged in more than one column raises the error it raised.
    if isinstance(options, bytes):
        options = unpack(options)
    if isinstance(wait, bytes):
        wait = unpack(wait)
    if isinstance(wait_result, bytes):
        wait_result = unpack(wait_result)
    if created_at is not None:
        created_at = _from_text(created_at)
    if wait_started_at is not None:
        wait_started_at = _from_text(wait_started_at)
    if timer_at is not None:
        timer_at = _from_text(timer_at)
    if first_attempt_at is not None:
        first_attempt_at = _from_text(first_attempt_at)
    if not_before is not None:
        not_before = _from_text(not_before)
    if lease_expires_at is not None:
        lease_expires_at = _from_text(lease_expires_at)
    if heartbeat_at is not None:
        heartbeat_at = _from_text(heartbeat_at)
    if finished_at is not None:
        finished_at = _from_text(finished_at)
    return ExecutionRow(
        flow_id,
        step_type,
        step_execution_id,
        input_text,
        _execution_status(status),
        created_at,
        execution_id,
        options,
        from_step_execution_id,
        wait,
        wait_started_at,
        timer_at,
        wait_result,
        attempt,
        bool(attempt_started),
        first_attempt_at,
        not_before,
        lease_owner,
        lease_expires_at,
        heartbeat_at,
        checkpoint,
        bool(cancel_requested),
        recovery,
        finished_at,
        final_event,
    )


def decode_message(values: Sequence[Any]) -> MessageRow:
    seq, flow_id, channel, key, message_id, value, created_at = values
    return MessageRow(
        seq, flow_id, channel, key, message_id, value, datetime.fromisoformat(created_at)
    )


def decode_event(values: Sequence[Any]) -> EventRow:
    event_id, flow_type, flow_id, value, source, created_at = values
    return EventRow(
        event_id, flow_type, flow_id, unpack(value), source, datetime.fromisoformat(created_at)
    )
