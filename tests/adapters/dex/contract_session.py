"""The engine contract's scripted session: one session on the embedded engine, recorded.

Each scenario reaches Steps, RPCs and failure routes the others do not; turn
numbers are in brackets.

1. [1] A read, an approved write and an ``ask_user`` question.
2. [2-3] A write whose approval a ``steer_user_message`` (text) cancels.
3. [4] A ``durable_wait`` (``AwaitTimer``).
4. [5] A failing model call: ``RunModel`` to ``RecordTurnFailure``.
5. [6] ``cancel_turn`` while an approval waits (``FinishTurnCancellation``).
6. [7-8] Queued messages while an approval waits: ``delete_queued_message`` one,
   steer the turn with the other by its message ID.
7. [9] Tool tasks: one asks a question, is pending once, then answers
   (``PollToolTask``, ``AwaitQuestionAnswer``); a read and a write task whose
   polls keep failing (``PollToolTask`` to ``RecordToolFailure`` and to
   ``RecordToolOutcomeUnknown``).
8. [10] A read that fails its first attempt after saving a checkpoint and
   succeeds on its second from it (its own sub-second retry interval).
9. [11] Failing tools: a read and an idempotent write (``CallTool`` to
   ``RecordToolFailure``) and a non-idempotent write (``CallSingleAttemptTool``
   to ``RecordToolOutcomeUnknown``).
10. [12] Ordered writes: the first succeeds, ``RunModel`` starts the second,
    which fails, and the third is skipped.
11. [13] ``cancel_turn`` while two tasks wait: ``CancelToolTask`` for each, one
    of which keeps failing (``CancelToolTask`` to ``RecordToolOutcomeUnknown``).
12. [14] An approved write whose step options raise (``AwaitToolApproval`` to
    ``RecordToolOutcomeUnknown``).
13. [15-16] Compaction: ``update_session_settings`` makes the summary call fail
    (``CompactContext`` to ``RecordTurnFailure``), then clears the settings and
    the next compaction succeeds.
14. [17-18] Plan mode: a planning turn writes a draft with ``write_todos``;
    ``execute_plan`` starts the executing turn.
15. ``list_agent_messages`` pages and a last ``get_agent_snapshot``.

Polling probes run quietly (unrecorded); the scenario's own RPCs are recorded.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import Any, TypeVar

from dex_agents import AgentSessionClient, AgentSessionFlow
from dex_agents.adapters.local.client import LocalFlowClient
from dex_agents.adapters.local.engine import LocalEngine
from dex_agents.adapters.local.memory_store import MemoryFlowStore
from dex_agents.adapters.local.worker import LocalWorker
from dex_agents.domain.requests import AgentSnapshot
from dex_agents.domain.tool_calls import ToolCallStatus
from dex_agents.ports.engine import Rpc
from tests.adapters.dex.contract_runner import SESSION, SUMMARY_DOWN, contract_flow
from tests.adapters.dex.session_recording import StepRecorder, record_steps

T = TypeVar("T")

PROBE_TIMEOUT_SECONDS = 20.0
"""How long one scenario step may take on the embedded engine (the slowest waits on retries)."""


class _RecordedFlow(AgentSessionFlow):
    """The session Flow whose RPCs a recorder wraps, for the embedded engine's run."""

    recorder: StepRecorder | None = None

    @property
    def rpcs(self) -> Mapping[str, Rpc[Any, Any]]:
        rpcs = super().rpcs
        if self.recorder is None:
            return rpcs
        return {name: self.recorder.recording_rpc(rpc) for name, rpc in rpcs.items()}


def plan_call(*tasks: str) -> str:
    """A ``write_todos`` call of pending ``tasks``, as the scripted model's text."""
    todos = ", ".join(f'{{"content": "{task}", "status": "pending"}}' for task in tasks)
    return f'call write_todos {{"todos": [{todos}]}}'


class _Scenario:
    """The session's client, with probes that poll unrecorded."""

    def __init__(self, sessions: AgentSessionClient, recorder: StepRecorder) -> None:
        self.sessions = sessions
        self.recorder = recorder
        self.turns = 0

    async def until(self, description: str, probe: Callable[[AgentSnapshot], T | None]) -> T:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + PROBE_TIMEOUT_SECONDS
        while True:
            with self.recorder.quiet():
                snapshot = await self.sessions.get_agent_snapshot(SESSION)
            found = probe(snapshot)
            if found is not None and found is not False:
                return found
            if loop.time() > deadline:
                raise AssertionError(f"timed out waiting for {description}: {snapshot}")
            await asyncio.sleep(0.01)

    async def until_recorded(self, description: str, probe: Callable[[StepRecorder], bool]) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + PROBE_TIMEOUT_SECONDS
        while not probe(self.recorder):
            if loop.time() > deadline:
                raise AssertionError(f"timed out waiting for {description}")
            await asyncio.sleep(0.01)

    async def turn_ends(self, description: str, *, turns: int = 1) -> AgentSnapshot:
        """Wait until ``turns`` more turns started and the session waits for a message."""
        self.turns += turns
        expected = self.turns

        def idle(snapshot: AgentSnapshot) -> AgentSnapshot | None:
            state = snapshot.state
            if state is None or state.turn_count != expected:
                return None
            return snapshot if state.status == "waiting_for_user_message" else None

        return await self.until(description, idle)

    async def pending(self, description: str, count: int = 1) -> AgentSnapshot:
        return await self.until(
            description, lambda s: s if len(s.pending_interrupts) == count else None
        )

    async def send(self, text: str, *, plan_mode: bool = False) -> None:
        assert await self.sessions.send_user_message(SESSION, text, plan_mode=plan_mode)


def _active_turn(snapshot: AgentSnapshot) -> str:
    assert snapshot.state is not None
    assert snapshot.state.active_turn_id is not None
    return snapshot.state.active_turn_id


async def _approvals_questions_and_steering(run: _Scenario) -> None:
    sessions = run.sessions
    await sessions.start_session(
        SESSION,
        'call lookup {"q": 1} and refund {"order": 7} and '
        'ask_user {"question": "Which colour?", "choices": ["red", "blue"]}',
    )
    await run.pending("an approval and a question", 2)
    assert await sessions.resolve_interrupt(SESSION, "call-2", approved=True)
    assert await sessions.answer_question(SESSION, "call-3", "blue")
    await run.turn_ends("the first turn")
    await run.send('call refund {"order": 8}')
    await run.pending("a second approval")
    assert await sessions.steer_user_message(SESSION, text="never mind")
    await run.turn_ends("the steered turn and the turn it started", turns=2)


async def _wait_failure_and_cancellation(run: _Scenario) -> None:
    await run.send('call durable_wait {"duration_seconds": 1, "reason": "build"}')
    await run.turn_ends("the durable wait's turn")
    await run.send("fail")
    await run.turn_ends("the failed turn")
    await run.send('call refund {"order": 9}')
    snapshot = await run.pending("a third approval")
    assert await run.sessions.cancel_turn(SESSION, _active_turn(snapshot))
    await run.turn_ends("the cancelled turn")


async def _queued_messages(run: _Scenario) -> None:
    sessions = run.sessions
    await run.send('call refund {"order": 10}')
    await run.pending("a fourth approval")
    await run.send("drop me")
    await run.send("move me")
    queued = (await sessions.get_agent_snapshot(SESSION)).queued_messages
    assert [message.text for message in queued] == ["drop me", "move me"]
    assert await sessions.delete_queued_message(SESSION, queued[0].message_id)
    assert await sessions.steer_user_message(SESSION, message_id=queued[1].message_id)
    await run.turn_ends("the turn steered by a queued message, and its own", turns=2)


async def _tool_tasks_and_retries(run: _Scenario) -> None:
    sessions = run.sessions
    await run.send("call publish {} and doomed_read_task {} and doomed_pay_task {}")
    await run.until(
        "the task's question",
        lambda s: any(i.interrupt_id == "call-1-input-1" for i in s.pending_interrupts),
    )
    assert await sessions.answer_question(SESSION, "call-1-input-1", "yes")
    await run.turn_ends("the tasks' turn")
    await run.send("call flaky {}")
    await run.turn_ends("the retried read's turn")
    await run.send("call broken_read {} and broken_sync {} and broken_charge {}")
    await run.turn_ends("the failing tools' turn")
    await run.send('call ship {"n": 1} and broken_ship {"n": 2} and ship {"n": 3}')
    await run.turn_ends("the ordered writes' turn")


async def _abandoned_tasks(run: _Scenario) -> None:
    await run.send("call stuck_task {} and stubborn_task {}")

    def both_waiting(snapshot: AgentSnapshot) -> AgentSnapshot | None:
        statuses = [record.status for record in snapshot.tool_calls]
        return snapshot if statuses == [ToolCallStatus.WAITING_FOR_TASK] * 2 else None

    snapshot = await run.until("both tasks", both_waiting)
    assert await run.sessions.cancel_turn(SESSION, _active_turn(snapshot))
    await run.turn_ends("the turn whose tasks were abandoned")
    # The stubborn task's cancellation retries after the turn ends; let its route finish.
    await run.until_recorded(
        "the failure route of the stubborn task's cancellation",
        lambda recorder: any(
            execution.step_type == "RecordToolOutcomeUnknown" and execution.input == "call-2"
            for execution in recorder.executions
        ),
    )


async def _failing_approval(run: _Scenario) -> None:
    await run.send("call misconfigured_refund {}")
    await run.pending("the misconfigured write's approval")
    assert await run.sessions.resolve_interrupt(SESSION, "call-1", approved=True)
    await run.turn_ends("the turn whose approval Step failed")


async def _compaction_and_plans(run: _Scenario) -> None:
    sessions = run.sessions
    assert await sessions.update_session_settings(SESSION, SUMMARY_DOWN)
    await run.send("compact the context")
    snapshot = await run.turn_ends("the turn whose summary call failed")
    assert snapshot.state is not None
    assert snapshot.state.last_turn_error == "the summary model is down"
    assert await sessions.update_session_settings(SESSION, {})
    await run.send("compact it again")
    snapshot = await run.turn_ends("the compacted turn")
    assert snapshot.context_summary is not None
    await run.send(plan_call("back up", "migrate"), plan_mode=True)
    snapshot = await run.turn_ends("the planning turn")
    assert snapshot.plan is not None
    assert await sessions.execute_plan(SESSION, snapshot.plan.revision)
    await run.turn_ends("the executing turn")
    page = await sessions.list_agent_messages(SESSION, limit=5)
    assert len(page.messages) == 5
    await sessions.list_agent_messages(SESSION, after_sequence=page.messages[-1].sequence)
    await sessions.get_agent_snapshot(SESSION)


async def run_scripted_session() -> StepRecorder:
    """Every scenario, in order, on the embedded engine; the recording of it."""
    flow = contract_flow(_RecordedFlow)
    assert isinstance(flow, _RecordedFlow)
    recorder = record_steps(flow)
    flow.recorder = recorder
    engine = LocalEngine(MemoryFlowStore(), [flow], poll_interval=timedelta(milliseconds=20))
    worker = LocalWorker(engine)
    task = asyncio.create_task(worker.run())
    run = _Scenario(AgentSessionClient(LocalFlowClient(engine), flow), recorder)
    try:
        await _approvals_questions_and_steering(run)
        await _wait_failure_and_cancellation(run)
        await _queued_messages(run)
        await _tool_tasks_and_retries(run)
        await _abandoned_tasks(run)
        await _failing_approval(run)
        await _compaction_and_plans(run)
    finally:
        await worker.stop()
        await task
        engine.close()
    return recorder
