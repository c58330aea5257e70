"""RPCs that race a turn's cancellation: an answer nobody would consume is refused, and one
that commits first is taken even when ``cancel_turn`` abandons its task."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from datetime import timedelta

from dex_agents import AgentSessionClient, AgentSessionFlow
from dex_agents.adapters.local.client import LocalFlowClient
from dex_agents.adapters.local.engine import LocalEngine
from dex_agents.adapters.local.memory_store import MemoryFlowStore
from dex_agents.adapters.local.worker import LocalWorker
from dex_agents.app.options import AgentSessionOptions
from dex_agents.domain.builtin_tools import BuiltInTool
from dex_agents.domain.requests import AgentSnapshot
from dex_agents.domain.runner_outcomes import (
    ToolExecutionResult,
    ToolInputRequested,
    ToolTaskPollOutcome,
    ToolTaskStarted,
)
from dex_agents.domain.state import AgentStatus
from dex_agents.domain.tool_effects import ToolEffect, ToolPolicy
from dex_agents.ports.runner import DeferredToolExecution, ToolTaskCancellation, ToolTaskPoll
from tests.app.scripted_runner import ScriptedRunner


def _pending(snapshot: AgentSnapshot) -> bool:
    return bool(snapshot.pending_interrupts)


async def _snapshot_until(
    sessions: AgentSessionClient, probe: Callable[[AgentSnapshot], bool] = _pending
) -> AgentSnapshot:
    deadline = asyncio.get_running_loop().time() + 10
    while True:
        snapshot = await sessions.get_agent_snapshot("s1")
        if probe(snapshot):
            return snapshot
        assert asyncio.get_running_loop().time() < deadline, f"timed out; last: {snapshot}"
        await asyncio.sleep(0.01)


def _idle(turns: int) -> Callable[[AgentSnapshot], bool]:
    def probe(snapshot: AgentSnapshot) -> bool:
        state = snapshot.state
        return (
            state is not None
            and state.status is AgentStatus.WAITING_FOR_USER_MESSAGE
            and state.turn_count == turns
        )

    return probe


class _Engine:
    """A memory engine serving one Flow, whose worker a test stops and starts again."""

    def __init__(self, flow: AgentSessionFlow) -> None:
        self.store = MemoryFlowStore()
        self.engine = LocalEngine(self.store, [flow], poll_interval=timedelta(milliseconds=20))
        self.sessions = AgentSessionClient(LocalFlowClient(self.engine), flow)
        self._worker: LocalWorker | None = None
        self._task: asyncio.Task[None] | None = None

    def start_worker(self) -> None:
        self._worker = LocalWorker(self.engine)
        self._task = asyncio.create_task(self._worker.run())

    async def stop_worker(self) -> None:
        if self._worker is not None and self._task is not None:
            await self._worker.stop()
            await self._task
            self._worker = self._task = None


@contextlib.asynccontextmanager
async def _running(flow: AgentSessionFlow) -> AsyncIterator[_Engine]:
    running = _Engine(flow)
    running.start_worker()
    try:
        yield running
    finally:
        await running.stop_worker()
        running.engine.close()
        running.store.close()


async def test_answers_after_cancel_turn_are_refused_before_the_turn_ends() -> None:
    options = AgentSessionOptions(
        built_in_tools=frozenset({BuiltInTool.ASK_USER, BuiltInTool.DURABLE_WAIT})
    )
    flow = AgentSessionFlow(ScriptedRunner(), flow_type="RaceAgent", options=options)
    async with _running(flow) as running:
        sessions = running.sessions
        await sessions.start_session("s1", 'call ask_user {"question": "Which account?"}')
        snapshot = await _snapshot_until(sessions)
        (question,) = snapshot.pending_interrupts
        # No worker runs between the cancellation and the answers, so the turn has
        # not ended yet: its question is still listed as pending.
        await running.stop_worker()
        assert snapshot.state is not None
        assert snapshot.state.active_turn_id is not None
        assert await sessions.cancel_turn("s1", snapshot.state.active_turn_id)
        assert not await sessions.answer_question("s1", question.interrupt_id, "savings")
        assert not await sessions.resolve_interrupt("s1", question.interrupt_id, approved=False)


@dataclass
class AskingTaskRunner(ScriptedRunner):
    """Every tool starts a task that asks once, then reports its answer; it notes cancellations."""

    cancelled: list[ToolTaskCancellation] = field(default_factory=list)

    async def execute_deferred_tool_call(  # type: ignore[override]
        self, call: DeferredToolExecution
    ) -> ToolTaskStarted:
        return ToolTaskStarted(task_id=f"task-{call.tool_call.turn_id}", poll_interval_seconds=0)

    async def poll_tool_task(self, poll: ToolTaskPoll) -> ToolTaskPollOutcome:
        if poll.tool_call.input_request_count == 0:
            return ToolInputRequested("Publish the draft?")
        answer = poll.pending_answer
        return ToolExecutionResult(f"answer={None if answer is None else answer.answer}")

    async def cancel_tool_task(self, cancellation: ToolTaskCancellation) -> None:
        self.cancelled.append(cancellation)


async def test_an_answer_that_beat_cancel_turn_to_a_tasks_question_answers_no_later_question() -> (
    None
):
    runner = AskingTaskRunner()
    options = AgentSessionOptions(tool_policies={"publish": ToolPolicy(ToolEffect.READ)})
    flow = AgentSessionFlow(runner, flow_type="RaceAgent", options=options)
    async with _running(flow) as running:
        sessions = running.sessions
        await sessions.start_session("s1", "call publish {}")
        (question,) = (await _snapshot_until(sessions)).pending_interrupts
        # Both commit while no worker runs, the answer first: cancel_turn cancels the
        # wait that took the answer, which hands it back to InterruptResolutions.
        await running.stop_worker()
        assert await sessions.answer_question("s1", question.interrupt_id, "yes")
        assert await sessions.cancel_turn("s1", "turn-1")
        running.start_worker()
        await _snapshot_until(sessions, _idle(1))
        assert [c.tool_call.task_id for c in runner.cancelled] == ["task-turn-1"]
        # The next turn's task asks with the same interrupt ID, and waits for its own answer.
        await sessions.send_user_message("s1", "call publish {}")
        (again,) = (await _snapshot_until(sessions)).pending_interrupts
        assert (again.interrupt_id, again.turn_id) == (question.interrupt_id, "turn-2")
        assert await sessions.answer_question("s1", again.interrupt_id, "no")
        snapshot = await _snapshot_until(sessions, _idle(2))
        assert snapshot.messages[-1].text == "publish=answer=no"
