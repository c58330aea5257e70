"""The fake-Dex harness invokes a toy Flow's Steps and RPC inside a real ``dex.AsyncWorker``.

Each test starts a real Worker against the fake FlowService and checks, field by
field, what the driver decodes from the Worker's ``wait_for``, ``execute`` and RPC
answers.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import dex
import pytest

from tests.adapters.dex.fake_dex import (
    CLEARED,
    DELETED,
    TIMEOUT_HANDLER_STEP_TYPE,
    ChannelConditionSpec,
    Decision,
    DecisionKind,
    DexWorkerDriver,
    ExecuteOutcome,
    Movement,
    RpcOutcome,
    TimerSpec,
    WaitForOutcome,
    WaitKind,
    WaitSpec,
    WorkerError,
    json_value,
    running_worker,
)
from tests.adapters.dex.harness_flow import KEY, toy_registry


@pytest.fixture
async def driver() -> AsyncIterator[DexWorkerDriver]:
    async with running_worker(toy_registry()) as running:
        yield running


async def test_wait_for_returns_the_mapped_any_of_wait(driver: DexWorkerDriver) -> None:
    outcome = await driver.wait_for("Toy", "Waiter", "Waiter-1", KEY)

    assert outcome == WaitForOutcome(
        wait=WaitSpec(
            kind=WaitKind.ANY_OF,
            timers=(TimerSpec(condition_id="patience", duration=timedelta(minutes=5)),),
            channels=(
                ChannelConditionSpec(
                    condition_id="reply", channel="replies", instance=KEY, at_least=1, at_most=1
                ),
            ),
        ),
        step_locals={"asked": KEY},
    )
    channel = outcome.raw.waiting_condition.channel_conditions[0]
    assert channel.channel_name == "replies/k%201"


async def test_execute_decodes_every_output_of_the_step(driver: DexWorkerDriver) -> None:
    outcome = await driver.execute(
        "Toy",
        "Waiter",
        "Waiter-1",
        KEY,
        attributes={"status": "waiting", "count": 4},
        attribute_map_instances={("notes", KEY): "remember"},
        channel_results={("replies", KEY): ["yes"]},
        timer_fired=False,
        step_locals={"asked": KEY},
    )

    assert outcome == ExecuteOutcome(
        heartbeats=({"asked": KEY, "note": "remember", "status": "waiting"},),
        stream_writes=(("events", "k 1: ['yes'] timer=False"),),
        decision=Decision(
            kind=DecisionKind.GO_TO,
            movements=(
                Movement(
                    step_type="Recover",
                    input="x",
                    options={
                        "execute_timeout_seconds": 120,
                        "execute_retry_policy": {
                            "initial_interval_seconds": 1,
                            "maximum_attempts": 3,
                        },
                        "wait_for_failure_policy": (
                            "WAIT_FOR_METHOD_FAILURE_POLICY_FAIL_FLOW_ON_FAILURE"
                        ),
                        "execute_durability_override": "STEP_DURABILITY_SYNC",
                        "execute_lock_attribute_keys": ["status"],
                        "heartbeat_timeout_seconds": 30,
                        "execute_load_attribute_map_instances": ["notes/k%201"],
                    },
                    skip_wait_for=True,
                ),
            ),
            canceling_step_types=("Boom",),
        ),
        attribute_writes={"status": "answered"},
        attribute_map_writes={("notes", KEY): DELETED},
        channel_publishes=(("inbox", None, "note was remember"), ("replies", "echo", "yes")),
        events={"replies": {"count": 1}},
    )


async def test_a_fired_timer_and_no_channel_result_reach_the_step(
    driver: DexWorkerDriver,
) -> None:
    outcome = await driver.execute(
        "Toy",
        "Waiter",
        "Waiter-1",
        KEY,
        attribute_map_instances={("notes", KEY): None},
        timer_fired=True,
    )

    assert outcome.error is None
    assert outcome.heartbeats == ({"asked": None, "note": None, "status": None},)
    assert outcome.stream_writes == (("events", "k 1: [] timer=True"),)
    assert outcome.channel_publishes == (
        ("inbox", None, "note was None"),
        ("replies", "echo", "none"),
    )


async def test_an_attribute_map_instance_that_is_not_loaded_fails_the_step(
    driver: DexWorkerDriver,
) -> None:
    outcome = await driver.execute("Toy", "Waiter", "Waiter-1", KEY)

    assert outcome.decision is None
    assert outcome.error == WorkerError(
        status_code="UNKNOWN",
        error_type="dex.runtime_errors.AttributeMapNotLoadedError",
        detail="AttributeMap instance was not loaded for this invocation: notes/k%201",
        stack_trace=outcome.error.stack_trace if outcome.error else "",
    )


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        pytest.param(
            {"attributes": {"tags": ["plain"]}},
            {
                "tags": ["plain"],
                "has_checkpoint": False,
                "checkpoint": None,
                "recovery": None,
                "attempt": 1,
            },
            id="first-attempt",
        ),
        pytest.param(
            {
                "attributes": {"tags": json_value(["as", "json"])},
                "attempt": 3,
                "last_heartbeat_value": "halfway",
                "recovery_error": ("boom 7", "tests.BoomError"),
            },
            {
                "tags": ["as", "json"],
                "has_checkpoint": True,
                "checkpoint": "halfway",
                "recovery": ["boom 7", "tests.BoomError"],
                "attempt": 3,
            },
            id="retried-recovery",
        ),
    ],
)
async def test_execute_passes_the_checkpoint_and_recovery_error(
    driver: DexWorkerDriver, extra: dict[str, object], expected: dict[str, object]
) -> None:
    outcome = await driver.execute(
        "Toy",
        "Recover",
        "Recover-2",
        dex.Value(dex.WireKind.STRING, "raw"),
        first_attempt_at=datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC),
        from_step_execution_id="Boom-1",
        **extra,  # type: ignore[arg-type]
    )

    assert outcome == ExecuteOutcome(
        decision=Decision(
            kind=DecisionKind.GRACEFUL_COMPLETE,
            output={
                "input": "raw",
                "first_attempt_at": "2026-01-02T03:04:05+00:00",
                "flow_id": "fake-flow-1",
                "run_id": "fake-run-1",
                "step": "Recover-2",
                "from": "Boom-1",
                **expected,
            },
        )
    )


@pytest.mark.parametrize(
    ("value", "error_type", "detail"),
    [
        (7, "tests.adapters.dex.harness_flow.BoomError", "boom 7"),
        (
            -1,
            "dex.runtime_errors.InvalidStepResultError",
            "Flow Toy Step Boom execute returned an invalid result: negative -1",
        ),
    ],
)
async def test_a_raising_step_reports_the_worker_error_after_its_heartbeats(
    driver: DexWorkerDriver, value: int, error_type: str, detail: str
) -> None:
    outcome = await driver.execute("Toy", "Boom", "Boom-1", value)

    assert outcome.error is not None
    assert "Traceback" in outcome.error.stack_trace
    assert outcome == ExecuteOutcome(
        heartbeats=(value, CLEARED),
        error=WorkerError(
            status_code="UNKNOWN",
            error_type=error_type,
            detail=detail,
            stack_trace=outcome.error.stack_trace,
        ),
    )


async def test_the_flow_timeout_handler_runs_as_its_reserved_step_type(
    driver: DexWorkerDriver,
) -> None:
    outcome = await driver.execute(
        "Toy", TIMEOUT_HANDLER_STEP_TYPE, "timeout-1", None, attributes={"status": "idle"}
    )

    assert outcome == ExecuteOutcome(
        decision=Decision(kind=DecisionKind.FORCE_FAIL, reason="timed out waiting, status idle")
    )


async def test_an_rpc_returns_output_writes_deletions_and_next_steps(
    driver: DexWorkerDriver,
) -> None:
    outcome = await driver.rpc(
        "Toy",
        "nudge",
        "hi",
        attributes={"count": 2},
        pending_channel_messages={"inbox": [("m-1", "old")]},
    )

    assert outcome == RpcOutcome(
        output=1,
        attribute_writes={"status": "hi", "count": 3},
        channel_publishes=(("inbox", None, "HI"), ("replies", KEY, "hi")),
        channel_deletions=(("inbox", None, "m-1"),),
        next_steps=(Movement(step_type="Waiter", input=KEY, options=None, skip_wait_for=False),),
        canceling_step_types=("Recover",),
    )


async def test_a_raising_rpc_reports_the_worker_error(driver: DexWorkerDriver) -> None:
    outcome = await driver.rpc("Toy", "nudge", "")

    assert outcome.error is not None
    assert outcome == RpcOutcome(
        error=WorkerError(
            status_code="UNKNOWN",
            error_type="builtins.LookupError",
            detail="empty nudge",
            stack_trace=outcome.error.stack_trace,
        )
    )


async def test_state_for_an_unknown_definition_is_rejected_by_name(
    driver: DexWorkerDriver,
) -> None:
    with pytest.raises(ValueError, match=r"^Flow Toy has no Attribute named 'notes'$"):
        await driver.execute("Toy", "Recover", "Recover-1", "x", attributes={"notes": "n"})
