"""Spend limits in the session Flow: asked before each model call, told each call's usage."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest

from dex_agents.adapters.local.memory_store import MemoryFlowStore
from dex_agents.adapters.local.sqlite_store import SqliteFlowStore
from dex_agents.app.options import AgentSessionOptions, RunModelLimit
from dex_agents.domain.compaction import CompactionPolicy
from dex_agents.domain.events import TurnFailedPayload
from dex_agents.domain.tool_effects import ToolEffect, ToolPolicy
from dex_agents.domain.usage import AgentUsage
from dex_agents.ports.errors import ModelSpendLimitExceededError
from dex_agents.ports.flow_store import FlowStore
from dex_agents.ports.runner import DeferredToolExecution
from dex_agents.ports.spend_limit import ModelSpendCheck, ModelSpendLimit
from tests.app.compaction_support import SUMMARY_USAGE, CompactingRunner, run_turns
from tests.app.harness import session_stack
from tests.app.scripted_runner import ScriptedRunner

MODEL_USAGE = AgentUsage(model_calls=1, input_tokens=10, output_tokens=5)
BUDGET_REACHED = "the monthly model budget of this account is spent"


@dataclass
class FakeSpendLimit:
    """Counts calls; ``refuse_from`` refuses the n-th check on (1-based) and later ones.

    ``check_errors`` and ``record_errors`` are raised, one per call, before anything else.
    """

    refuse_from: int | None = None
    check_errors: list[Exception] = field(default_factory=list)
    record_errors: list[Exception] = field(default_factory=list)
    checks: list[ModelSpendCheck] = field(default_factory=list)
    recorded: list[tuple[ModelSpendCheck, AgentUsage]] = field(default_factory=list)

    async def check_model_call(self, call: ModelSpendCheck) -> None:
        self.checks.append(call)
        if self.check_errors:
            raise self.check_errors.pop(0)
        if self.refuse_from is not None and len(self.checks) >= self.refuse_from:
            raise ModelSpendLimitExceededError(BUDGET_REACHED)

    async def record_model_usage(self, call: ModelSpendCheck, usage: AgentUsage) -> None:
        if self.record_errors:
            raise self.record_errors.pop(0)
        self.recorded.append((call, usage))


@pytest.fixture(params=["memory", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> FlowStore:
    if request.param == "memory":
        return MemoryFlowStore()
    return SqliteFlowStore(tmp_path / "sessions.sqlite3")


async def lookup(call: DeferredToolExecution) -> str:
    return "found it"


def limited(limit: FakeSpendLimit, **changes: Any) -> AgentSessionOptions:
    return replace(AgentSessionOptions(spend_limit=limit), **changes)


def test_the_fake_is_a_model_spend_limit() -> None:
    assert isinstance(FakeSpendLimit(), ModelSpendLimit)


async def test_each_model_call_is_checked_before_and_its_usage_recorded_after(
    store: FlowStore,
) -> None:
    limit = FakeSpendLimit()
    runner = ScriptedRunner(tools={"lookup": lookup})
    options = limited(limit, tool_policies={"lookup": ToolPolicy(ToolEffect.READ)})
    async with session_stack(store, runner, options) as session:
        await session.sessions.start_session(
            "s1", "call lookup {}", session_settings={"account": "acme"}
        )
        await session.idle()
        # Two model calls: the tool call, then the answer with its result.
        assert [
            (c.flow_id, c.turn_id, c.step_type, c.attempt, dict(c.session_settings))
            for c in limit.checks
        ] == [
            ("s1", "turn-1", "RunModel", 1, {"account": "acme"}),
            ("s1", "turn-1", "RunModel", 1, {"account": "acme"}),
        ]
        ids = [check.step_execution_id for check in limit.checks]
        assert all(step_id.startswith("RunModel-") for step_id in ids)
        assert len(set(ids)) == 2
        assert limit.recorded == [(check, MODEL_USAGE) for check in limit.checks]
        assert len(runner.model_calls) == 2


async def test_a_refused_call_fails_the_turn_at_once_with_the_limits_message(
    store: FlowStore,
) -> None:
    limit = FakeSpendLimit(refuse_from=1)
    runner = ScriptedRunner()
    async with session_stack(store, runner, limited(limit)) as session:
        await session.sessions.start_session("s1", "hello")
        snapshot = await session.idle()
        assert snapshot.state is not None
        assert snapshot.state.last_turn_error == BUDGET_REACHED
        assert runner.model_calls == []
        assert len(limit.checks) == 1  # no retry
        assert limit.recorded == []
        assert snapshot.usage == AgentUsage()
        assert [m.text for m in snapshot.messages] == ["hello"]
        events = await session.events()
        assert [event.type for event in events] == ["turn_started", "turn_failed"]
        assert events[-1].payload == TurnFailedPayload(error=BUDGET_REACHED)
        history = [entry.step_type for entry in await session.client.read_step_history("s1")]
        assert history.count("RunModel") == 1
        assert "RecordTurnFailure" not in history
        # Once the application allows calls again, the next turn runs.
        limit.refuse_from = None
        assert await session.sessions.send_user_message("s1", "again")
        snapshot = await session.idle(turns=2)
        assert snapshot.state is not None
        assert snapshot.state.last_turn_error is None
        assert snapshot.messages[-1].text == "echo: again"


async def test_a_refusal_after_tool_calls_leaves_the_turn_failure_note() -> None:
    limit = FakeSpendLimit(refuse_from=2)
    runner = ScriptedRunner(tools={"lookup": lookup})
    options = limited(limit, tool_policies={"lookup": ToolPolicy(ToolEffect.READ)})
    async with session_stack(MemoryFlowStore(), runner, options) as session:
        await session.sessions.start_session("s1", "call lookup {}")
        snapshot = await session.idle()
        assert snapshot.state is not None
        assert snapshot.state.last_turn_error == BUDGET_REACHED
        assert len(runner.model_calls) == 1
        note = snapshot.messages[-1].text or ""
        assert note.startswith("[Dex] The previous turn failed after these tool calls ran:\n")
        assert "- lookup {} -> succeeded: found it" in note


async def test_another_check_error_fails_the_attempt_and_the_retry_asks_again() -> None:
    limit = FakeSpendLimit(check_errors=[ConnectionError("the counter service is down")])
    runner = ScriptedRunner()
    options = limited(limit, run_model_limit=RunModelLimit(maximum_attempts=2))
    async with session_stack(MemoryFlowStore(), runner, options) as session:
        await session.sessions.start_session("s1", "hello")
        snapshot = await session.idle()
        assert snapshot.state is not None
        assert snapshot.state.last_turn_error is None
        assert [check.attempt for check in limit.checks] == [1, 2]
        assert len(runner.model_calls) == 1
        assert [(check.attempt, usage) for check, usage in limit.recorded] == [(2, MODEL_USAGE)]


async def test_a_failing_usage_report_is_ignored_and_never_reruns_the_call() -> None:
    limit = FakeSpendLimit(record_errors=[ConnectionError("the counter service is down")])
    runner = ScriptedRunner()
    async with session_stack(MemoryFlowStore(), runner, limited(limit)) as session:
        await session.sessions.start_session("s1", "hello")
        snapshot = await session.idle()
        assert snapshot.state is not None
        assert snapshot.state.last_turn_error is None
        assert len(runner.model_calls) == 1
        assert len(limit.checks) == 1
        assert limit.recorded == []
        assert snapshot.usage == MODEL_USAGE


def compaction_options(limit: FakeSpendLimit) -> AgentSessionOptions:
    return limited(limit, compaction=CompactionPolicy(context_window_tokens=100))


async def test_a_summary_call_is_checked_and_recorded_as_compact_context() -> None:
    limit = FakeSpendLimit()
    runner = CompactingRunner(always_high=True)
    async with session_stack(MemoryFlowStore(), runner, compaction_options(limit)) as session:
        await run_turns(session, 1, 2)
        assert len(runner.summary_requests) == 1
        # turn-2: RunModel moves to CompactContext without a model call, so without a check.
        assert [(c.turn_id, c.step_type) for c in limit.checks] == [
            ("turn-1", "RunModel"),
            ("turn-2", "CompactContext"),
            ("turn-2", "RunModel"),
        ]
        assert [usage for _, usage in limit.recorded] == [MODEL_USAGE, SUMMARY_USAGE, MODEL_USAGE]
        assert limit.checks[1].step_execution_id.startswith("CompactContext-")


async def test_a_refused_summary_call_fails_the_turn_without_a_summary() -> None:
    limit = FakeSpendLimit(refuse_from=2)
    runner = CompactingRunner(always_high=True)
    async with session_stack(MemoryFlowStore(), runner, compaction_options(limit)) as session:
        await run_turns(session, 1, 2)
        snapshot = await session.sessions.get_agent_snapshot("s1")
        assert snapshot.state is not None
        assert snapshot.state.last_turn_error == BUDGET_REACHED
        assert snapshot.context_summary is None
        assert runner.summary_requests == []
        assert len(runner.model_calls) == 1
        assert [(c.turn_id, c.step_type) for c in limit.checks] == [
            ("turn-1", "RunModel"),
            ("turn-2", "CompactContext"),
        ]
        types = [event.type for event in await session.events() if event.turn_id == "turn-2"]
        assert types == ["turn_started", "turn_failed"]
