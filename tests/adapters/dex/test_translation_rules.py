"""The Dex adapter's pure mappings: values, attempt progress, timeouts and waits."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from dex_agents.adapters.dex.contexts import (
    decode_progress,
    derive_attempt_progress,
    encode_progress,
)
from dex_agents.adapters.dex.schema import build_dex_schema
from dex_agents.adapters.dex.translate import describe_wait, dex_wait, whole_seconds
from dex_agents.adapters.dex.wire_values import dex_type, from_dex, to_dex
from dex_agents.domain.errors import WireFormatError
from dex_agents.domain.interrupts import AgentInterruptResolution
from dex_agents.domain.wire import to_json
from dex_agents.ports.persistence import AttributeDef, AttributeMapDef
from dex_agents.ports.session_schema import (
    INTERRUPT_RESOLUTIONS,
    PENDING_INTERRUPTS,
    TOOL_CALL_RESULTS,
)
from dex_agents.ports.step_contexts import AttemptProgress
from dex_agents.ports.step_waits import ChannelCondition, TimerCondition, Wait
from tests.app.scripted_runner import ScriptedRunner


@pytest.mark.parametrize(
    ("type_hint", "value", "carried"),
    [
        (str, "call-7", "call-7"),
        (int, 3, 3),
        (bool, True, True),
        (type(None), None, None),
        (
            AgentInterruptResolution,
            AgentInterruptResolution(interrupt_id="call-7", approved=True),
            to_json(AgentInterruptResolution(interrupt_id="call-7", approved=True)),
        ),
        (PENDING_INTERRUPTS.value_type, (), "[]"),
    ],
)
def test_values_cross_natively_or_as_the_one_json_text(
    type_hint: Any, value: Any, carried: Any
) -> None:
    assert to_dex(type_hint, value) == carried
    assert from_dex(type_hint, carried) == value
    assert dex_type(type_hint) is (type_hint if carried is value else str)


def test_json_text_that_does_not_fit_names_the_type() -> None:
    with pytest.raises(WireFormatError, match="AgentInterruptResolution"):
        from_dex(AgentInterruptResolution, '{"nope": 1}')
    with pytest.raises(TypeError, match="expected the JSON text"):
        from_dex(AgentInterruptResolution, 7)


@pytest.mark.parametrize(
    ("last_heartbeat", "failed", "progress"),
    [
        # No heartbeat handed over: nothing proves the Step never started.
        (None, "CallSingleAttemptTool-3", AttemptProgress.NOT_COMPLETED),
        (
            encode_progress("CallSingleAttemptTool-3", False, None),
            "CallSingleAttemptTool-3",
            AttemptProgress.NOT_STARTED,
        ),
        (
            encode_progress("CallSingleAttemptTool-3", True, None),
            "CallSingleAttemptTool-3",
            AttemptProgress.NOT_COMPLETED,
        ),
        # Another execution's mark proves nothing about this one.
        (
            encode_progress("CallTool-2", False, None),
            "CallSingleAttemptTool-3",
            AttemptProgress.NOT_COMPLETED,
        ),
        ("a checkpoint the adapter did not wrap", "CallTool-2", AttemptProgress.NOT_COMPLETED),
    ],
)
def test_a_failure_route_reports_not_started_only_on_proof(
    last_heartbeat: str | None, failed: str, progress: AttemptProgress
) -> None:
    assert derive_attempt_progress(last_heartbeat, failed) is progress


def test_the_progress_mark_carries_the_steps_own_checkpoint() -> None:
    assert decode_progress(encode_progress("PollToolTask-4", True, "cursor=9")) == (
        "PollToolTask-4",
        True,
        "cursor=9",
    )
    assert decode_progress('["not", "ours"]') is None


@pytest.mark.parametrize(
    ("given", "whole"),
    [
        (timedelta(milliseconds=10), timedelta(seconds=1)),
        (timedelta(seconds=30), timedelta(seconds=30)),
        (timedelta(seconds=30.2), timedelta(seconds=31)),
        (timedelta(0), timedelta(seconds=1)),
    ],
)
def test_timeouts_round_up_to_whole_seconds(given: timedelta, whole: timedelta) -> None:
    assert whole_seconds(given) == whole


def test_waits_map_to_dex_conditions_in_order_and_are_described_for_execute() -> None:
    from dex_agents import AgentSessionFlow

    schema = AgentSessionFlow(ScriptedRunner(), flow_type="TriageAgent").dex_schema
    wait = Wait.any_of(
        ChannelCondition(INTERRUPT_RESOLUTIONS, 1, "call-7"),
        TimerCondition(timedelta(seconds=2.5)),
        ChannelCondition(TOOL_CALL_RESULTS, 3),
    )
    mapped = dex_wait(wait, schema)
    assert mapped.kind.name == "ANY_OF"
    assert len(mapped.conditions) == 3
    assert describe_wait(wait) == (
        '[{"channel":"InterruptResolutions","key":"call-7"},{"timer":true},'
        '{"channel":"ToolCallResults","key":null}]'
    )
    assert dex_wait(Wait.skip(), schema).kind.name == "SKIP_IMMEDIATELY"
    assert dex_wait(Wait.until(TimerCondition(timedelta(0))), schema).kind.name == "ALL_OF"


@pytest.mark.parametrize("value_type", [int, bool])
def test_an_attribute_dex_would_read_as_zero_when_unset_is_refused(value_type: Any) -> None:
    with pytest.raises(ValueError, match="cannot be told unset on Dex"):
        build_dex_schema([AttributeDef("Counter", value_type)], None)
    with pytest.raises(ValueError, match="cannot be told unset on Dex"):
        build_dex_schema([AttributeMapDef("Counters", value_type)], None)
