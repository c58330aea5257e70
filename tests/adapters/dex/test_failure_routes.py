"""Failure routes on Dex: a write is recorded ``outcome_unknown`` unless the heartbeat mark proves
its Step never started; a retried attempt keeps the Step's own checkpoint."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import attrs
import dex
import pytest

from dex_agents import TOOL_CALL_NOT_RUN_ERROR_PREFIX, AgentSessionFlow
from dex_agents.adapters.dex.contexts import decode_progress, encode_progress
from dex_agents.domain.runner_outcomes import AgentTurnOutcome
from dex_agents.domain.state import AgentState, AgentStatus
from dex_agents.domain.tool_calls import AgentToolCall, ToolCallStatus
from dex_agents.domain.tool_effects import ToolEffect
from dex_agents.domain.wire import from_json, to_json
from dex_agents.ports.errors import ModelCallError
from dex_agents.ports.runner import AgentTurnContext
from tests.adapters.dex.fake_dex import DexWorkerDriver, running_worker
from tests.app.scripted_runner import ScriptedRunner

FLOW_TYPE = "TriageAgent"
FAILED_STEP = "CallSingleAttemptTool-4"


@pytest.fixture
async def driver() -> AsyncIterator[DexWorkerDriver]:
    flow = AgentSessionFlow(ScriptedRunner(), flow_type=FLOW_TYPE)
    async with running_worker(dex.Registry([flow], allow_async_handlers=True)) as worker:
        yield worker


def _approved_write() -> AgentToolCall:
    return AgentToolCall(
        tool_call_id="call-1",
        tool_name="refund",
        arguments='{"order": 7}',
        turn_id="turn-1",
        effect=ToolEffect.NON_IDEMPOTENT_WRITE,
        requires_approval=True,
        status=ToolCallStatus.APPROVED,
        deferral_order=0,
    )


async def _record_outcome(driver: DexWorkerDriver, last_heartbeat: str | None) -> AgentToolCall:
    outcome = await driver.execute(
        FLOW_TYPE,
        "RecordToolOutcomeUnknown",
        "RecordToolOutcomeUnknown-1",
        "call-1",
        attribute_map_instances={("AgentToolCalls", "call-1"): to_json(_approved_write())},
        loaded_attribute_maps=("AgentToolCalls",),
        recovery_error=("worker lost", "WorkerLost"),
        from_step_execution_id=FAILED_STEP,
        last_heartbeat_value=last_heartbeat,
    )
    assert outcome.error is None, outcome.error
    assert [c for c, _, _ in outcome.channel_publishes] == ["ToolCallResults"]
    return from_json(outcome.attribute_map_writes[("AgentToolCalls", "call-1")], AgentToolCall)


@pytest.mark.parametrize(
    "last_heartbeat",
    [
        None,
        encode_progress(FAILED_STEP, True, None),
        encode_progress("CallTool-2", False, None),
    ],
    ids=["no mark handed over", "started", "another execution's mark"],
)
async def test_a_write_without_proof_that_it_never_ran_is_outcome_unknown(
    driver: DexWorkerDriver, last_heartbeat: str | None
) -> None:
    record = await _record_outcome(driver, last_heartbeat)
    assert record.status is ToolCallStatus.OUTCOME_UNKNOWN
    assert record.error == "WorkerLost: worker lost"


async def test_a_write_whose_step_never_started_is_failed_with_the_not_run_prefix(
    driver: DexWorkerDriver,
) -> None:
    record = await _record_outcome(driver, encode_progress(FAILED_STEP, False, None))
    assert record.status is ToolCallStatus.FAILED
    assert record.error is not None
    assert record.error.startswith(TOOL_CALL_NOT_RUN_ERROR_PREFIX)


async def test_every_execute_marks_entry_before_the_step_code_with_the_earlier_checkpoint(
    driver: DexWorkerDriver,
) -> None:
    final = attrs.evolve(_approved_write(), status=ToolCallStatus.SUCCEEDED)
    outcome = await driver.execute(
        FLOW_TYPE,
        "RecordToolFailure",
        "RecordToolFailure-2",
        "call-1",
        attribute_map_instances={("AgentToolCalls", "call-1"): to_json(final)},
        loaded_attribute_maps=("AgentToolCalls",),
        attempt=2,
        last_heartbeat_value=encode_progress("RecordToolFailure-2", True, "cursor=9"),
    )
    assert outcome.error is None, outcome.error
    # A final record ends the route without a commit, but the mark was sent first; it
    # keeps "started" from the earlier attempt, which reached the Step's code.
    assert [decode_progress(value) for value in outcome.heartbeats] == [
        ("RecordToolFailure-2", True, "cursor=9")
    ]
    assert outcome.attribute_map_writes == {}
    assert outcome.decision is not None
    assert outcome.decision.kind.value == "dead_end"


async def test_a_failed_model_call_routes_to_record_turn_failure_with_run_model_s_null_input(
    driver: DexWorkerDriver,
) -> None:
    # Dex hands a failure route the failed Step's input: RunModel takes none, so null.
    running = AgentState(
        status=AgentStatus.RUNNING_MODEL,
        active_turn_id="turn-1",
        turn_count=1,
        turn_started_at=datetime(2026, 3, 1, tzinfo=UTC),
    )
    outcome = await driver.execute(
        FLOW_TYPE,
        "RecordTurnFailure",
        "RecordTurnFailure-1",
        None,
        attributes={"AgentState": to_json(running)},
        loaded_attribute_maps=("AgentToolCalls", "AgentMessages", "AgentMessageChunks"),
        recovery_error=("model unavailable", "ModelCallError"),
        from_step_execution_id="RunModel-3",
    )
    assert outcome.error is None, outcome.error
    state = from_json(outcome.attribute_writes["AgentState"], AgentState)
    assert state.active_turn_id is None
    assert state.last_turn_error == "model unavailable"
    assert outcome.decision is not None
    assert [movement.step_type for movement in outcome.decision.movements] == ["AwaitUserMessage"]


async def test_a_write_whose_earlier_attempt_started_stays_outcome_unknown_after_a_lost_retry(
    driver: DexWorkerDriver,
) -> None:
    write = attrs.evolve(_approved_write(), effect=ToolEffect.IDEMPOTENT_WRITE)
    # Attempt 2 of CallTool-1, after attempt 1 marked it started (its tool ran): the final
    # record ends it at once, after the entry mark a lost attempt would leave behind.
    retry = await driver.execute(
        FLOW_TYPE,
        "CallTool",
        "CallTool-1",
        "call-1",
        attribute_map_instances={
            ("AgentToolCalls", "call-1"): to_json(
                attrs.evolve(write, status=ToolCallStatus.SUCCEEDED)
            )
        },
        attempt=2,
        last_heartbeat_value=encode_progress("CallTool-1", True, None),
    )
    assert retry.error is None, retry.error
    (entry_mark, *_) = retry.heartbeats
    route = await driver.execute(
        FLOW_TYPE,
        "RecordToolFailure",
        "RecordToolFailure-1",
        "call-1",
        attribute_map_instances={("AgentToolCalls", "call-1"): to_json(write)},
        loaded_attribute_maps=("AgentToolCalls",),
        recovery_error=("heartbeat timed out", "HeartbeatTimeout"),
        from_step_execution_id="CallTool-1",
        last_heartbeat_value=entry_mark,
    )
    assert route.error is None, route.error
    record = from_json(route.attribute_map_writes[("AgentToolCalls", "call-1")], AgentToolCall)
    assert record.status is ToolCallStatus.OUTCOME_UNKNOWN
    assert record.error == "HeartbeatTimeout: heartbeat timed out"


class _RateLimitedRunner(ScriptedRunner):
    """A runner whose model call is refused for now, with the provider's wait."""

    async def run_model_step(self, turn: AgentTurnContext) -> AgentTurnOutcome:
        error = ModelCallError("openai model call failed with HTTP 429: slow down")
        error.retry_after = timedelta(seconds=2.5)
        raise error


async def test_a_model_calls_wait_reaches_dex_as_retry_after_in_whole_seconds() -> None:
    flow = AgentSessionFlow(_RateLimitedRunner(), flow_type=FLOW_TYPE)
    running = AgentState(
        status=AgentStatus.RUNNING_MODEL,
        active_turn_id="turn-1",
        turn_count=1,
        turn_started_at=datetime(2026, 3, 1, tzinfo=UTC),
    )
    async with running_worker(dex.Registry([flow], allow_async_handlers=True)) as worker:
        outcome = await worker.execute(
            FLOW_TYPE,
            "RunModel",
            "RunModel-1",
            None,
            attributes={"AgentState": to_json(running)},
            loaded_attribute_maps=("AgentToolCalls", "AgentMessages", "AgentMessageChunks"),
        )
    assert outcome.error is not None
    # Dex records the model call's own error, and retries 3 seconds later, not sooner.
    assert outcome.error.error_type == "dex_agents.ports.errors.ModelCallError"
    assert outcome.error.detail == "openai model call failed with HTTP 429: slow down"
    assert outcome.error.retry_after_seconds == 3
