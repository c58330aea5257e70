"""The embedded engine's history-retention rule, on each store (``history_retention.py``)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from dex_agents.adapters.local.history_retention import (
    PRUNE_INTERVAL,
    check_step_history_limit,
    prune_due,
)
from dex_agents.local import LocalRuntime, serve_workers
from tests.adapters.engine_flows import EngineTestFlow
from tests.adapters.test_engine import eventually, make_store, running_stack


@pytest.mark.parametrize(
    ("step_execution_id", "limit", "due"),
    [
        ("RunModel-100", 5, True),
        ("Await-Message-200", 1, True),
        ("RunModel-99", 5, False),
        ("RunModel-101", 5, False),
        ("RunModel-100", None, False),
        ("RunModel", 5, False),
    ],
)
def test_the_check_runs_at_every_hundredth_execution_of_a_step_type_in_a_session(
    step_execution_id: str, limit: int | None, due: bool
) -> None:
    assert PRUNE_INTERVAL == 100
    assert prune_due(step_execution_id, limit) is due


@pytest.mark.parametrize("limit", [0, -1, 1.5, True, "10"])
def test_a_limit_must_be_a_whole_number_of_at_least_one(limit: object) -> None:
    with pytest.raises(
        ValueError, match=r"step_history_limit must be None or an int of at least 1"
    ):
        check_step_history_limit(limit)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"step_history_limit"):
        LocalRuntime(None, [EngineTestFlow()], step_history_limit=limit)  # type: ignore[arg-type]


async def test_worker_processes_take_the_same_limit(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"step_history_limit must be None or an int"):
        await serve_workers(tmp_path / "none.sqlite3", [EngineTestFlow()], step_history_limit=0)


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
async def test_a_long_flow_keeps_its_newest_finished_steps_and_no_consumed_message(
    kind: str, tmp_path: Path
) -> None:
    messages = 150
    async with running_stack(make_store(kind, tmp_path), step_history_limit=10) as stack:
        await stack.client.start_flow(stack.flow, "s1", "hello")
        for n in range(messages):
            await stack.client.invoke_rpc(stack.flow, "s1", "send", f"m{n}")

        async def all_taken() -> bool:
            return len(await stack.log("s1")) == messages + 1

        await eventually("every message", all_taken, seconds=60)
        history = await stack.client.read_step_history("s1")
        # Start and AwaitMessage-1 to 149 finished, 150 waits. Finishing AwaitMessage-100
        # kept the 10 newest finished (91 to 100); 101 to 149 came after.
        assert [entry.step_execution_id for entry in history] == [
            f"AwaitMessage-{n}" for n in range(91, messages + 1)
        ]
        assert await stack.log("s1") == ("start:hello", *(f"message:m{n}" for n in range(150)))
        # The flow goes on as before: the waiting Step takes the next message.
        await stack.client.invoke_rpc(stack.flow, "s1", "send", "after")

        async def took_it() -> bool:
            return (await stack.log("s1"))[-1] == "message:after"

        await eventually("the next message", took_it)
    if kind == "sqlite":
        with sqlite3.connect(tmp_path / "engine.sqlite3") as connection:
            (left,) = connection.execute("SELECT count(*) FROM channel_messages").fetchone()
        assert left == 0


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
async def test_executions_that_end_cancelled_run_the_check_too(kind: str, tmp_path: Path) -> None:
    # No worker: each Sleep is cancelled before its wait phase runs, in the RPC's commit.
    async with running_stack(
        make_store(kind, tmp_path), worker=False, step_history_limit=5
    ) as stack:
        await stack.client.start_flow(stack.flow, "s1", "hello")
        for _ in range(250):
            await stack.client.invoke_rpc(stack.flow, "s1", "restart_sleep", None)
        history = await stack.client.read_step_history("s1")
    # Cancelling Sleep-200 kept the 5 newest finished (196 to 200); 201 to 249 came after.
    assert [entry.step_execution_id for entry in history] == [f"Sleep-{n}" for n in range(196, 250)]


async def test_sessions_that_take_turns_each_keep_a_bounded_history(tmp_path: Path) -> None:
    # Two sessions, one Step each in turn: every other store ID is each one's, so a check that
    # went by the store-wide ID never ran for one of them, which kept every finished Step.
    messages, limit = 120, 10
    async with running_stack(make_store("sqlite", tmp_path), step_history_limit=limit) as stack:
        for flow_id in ("s1", "s2"):
            await stack.client.start_flow(stack.flow, flow_id, "hello")
        for n in range(messages):
            for flow_id in ("s1", "s2"):
                await stack.client.invoke_rpc(stack.flow, flow_id, "send", f"m{n}")

                async def taken(flow_id: str = flow_id, n: int = n) -> bool:
                    return len(await stack.log(flow_id)) == n + 2

                await eventually(f"{flow_id} to take m{n}", taken)
        for flow_id in ("s1", "s2"):
            history = await stack.client.read_step_history(flow_id)
            # AwaitMessage-100 kept the 10 newest finished (91 to 100); 101 to 120 came after.
            assert [entry.step_execution_id for entry in history] == [
                f"AwaitMessage-{n}" for n in range(91, messages + 1)
            ]
