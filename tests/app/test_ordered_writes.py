"""Ordered writes in the session Flow: the writes of one model response run one at a time,
in the model's order, while reads run in parallel; a write after one that did not succeed is
skipped; steering and ``cancel_turn`` reject queued writes ("Connector tools")."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass, field

import attrs
import pytest

from dex_agents.app.options import AgentSessionOptions
from dex_agents.app.steps.run_model import RunModel
from dex_agents.app.steps.tool_steps import AwaitToolApproval
from dex_agents.app.steps.turn_control import FinishTurnCancellation
from dex_agents.app.steps.turn_end import ResumeTurn, cancel_steered_waits
from dex_agents.domain.errors import ToolExecutionError
from dex_agents.domain.events import AgentEvent, ToolCallFinishedPayload
from dex_agents.domain.interrupts import AgentInterrupt
from dex_agents.domain.messages import MessageRole
from dex_agents.domain.requests import AgentSnapshot
from dex_agents.domain.runner_outcomes import AgentTurnOutcome, ToolCallsRequested
from dex_agents.domain.state import AgentStatus
from dex_agents.domain.tool_calls import AgentToolCall, CancellationReason, ToolCallStatus
from dex_agents.domain.tool_effects import ToolEffect, ToolPolicy
from dex_agents.domain.tool_outcomes import STEERED_TOOL_RESULT, TURN_CANCELLED_TOOL_RESULT
from dex_agents.domain.wire import from_json
from dex_agents.ports.engine import DecisionKind
from dex_agents.ports.flow_store import FlowStore, StoreTransaction
from dex_agents.ports.runner import AgentTurnContext, DeferredToolExecution
from dex_agents.ports.session_schema import (
    AGENT_STATE,
    AGENT_TOOL_CALLS,
    PENDING_INTERRUPTS,
    TOOL_CALL_RESULTS,
)
from tests.app.harness import Session, echo, session_stack
from tests.app.scripted_runner import ScriptedRunner
from tests.app.turn_control_fakes import (
    ACTIVE,
    CANCELLED,
    STEERED,
    FakeStepContext,
    record,
    runtime,
    staged,
    written_record,
)

SKIPPED_ERROR = (
    "the tool did not run, so it is safe to call again: "
    "an earlier write of the same model response did not succeed, so this write was skipped"
)

NO_APPROVAL = AgentSessionOptions(
    tool_policies={
        "crm": ToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE, requires_approval=False),
        "lookup": ToolPolicy(ToolEffect.READ),
    }
)
WITH_APPROVAL = AgentSessionOptions(
    tool_policies={"crm": ToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE)}
)
THREE_WRITES = 'call crm {"n": 1} and crm {"n": 2} and crm {"n": 3}'


@dataclass
class OrderedRunner(ScriptedRunner):
    """Marks the calls of ``ordered_tools`` ordered, as a tool source marks connector writes."""

    ordered_tools: frozenset[str] = frozenset({"crm"})

    async def run_model_step(self, turn: AgentTurnContext) -> AgentTurnOutcome:
        outcome = await super().run_model_step(turn)
        if not isinstance(outcome, ToolCallsRequested):
            return outcome
        calls = [
            attrs.evolve(call, ordered=call.tool_name in self.ordered_tools)
            for call in outcome.tool_calls
        ]
        return attrs.evolve(outcome, tool_calls=calls)


@dataclass
class Gated:
    """A ``crm`` tool whose call ``n`` logs its start, waits for ``gate(n)``, then logs its end."""

    log: list[str] = field(default_factory=list)
    gates: dict[int, asyncio.Event] = field(default_factory=dict)
    failing: frozenset[int] = frozenset()

    def gate(self, n: int) -> asyncio.Event:
        return self.gates.setdefault(n, asyncio.Event())

    async def __call__(self, call: DeferredToolExecution) -> str:
        n = json.loads(call.tool_call.arguments)["n"]
        self.log.append(f"start {n}")
        await asyncio.wait_for(self.gate(n).wait(), 10)
        self.log.append(f"end {n}")
        if n in self.failing:
            raise ToolExecutionError(f"crm write {n} was refused")
        return f"wrote {n}"


def by_id(snapshot: AgentSnapshot) -> dict[str, AgentToolCall]:
    return {record.tool_call_id: record for record in snapshot.tool_calls}


def finished(events: list[AgentEvent]) -> list[tuple[str, str]]:
    payloads = [e.payload for e in events if e.type == "tool_call_finished"]
    return [
        (p.tool_call_id, p.status.value) for p in payloads if isinstance(p, ToolCallFinishedPayload)
    ]


async def leftover_results(store: FlowStore) -> int:
    """``ToolCallResults`` messages no ``ResumeTurn`` consumed."""

    def count(tx: StoreTransaction) -> int:
        return len(tx.pending_messages("s1", TOOL_CALL_RESULTS.name, ""))

    return store.read(count)


async def started(session: Session, gated: Gated, n: int) -> AgentSnapshot:
    await session.until(f"write {n} to start", lambda _: f"start {n}" in gated.log or None)
    return await session.sessions.get_agent_snapshot("s1")


async def test_three_ordered_writes_run_one_at_a_time_in_model_order(store: FlowStore) -> None:
    gated = Gated()
    runner = OrderedRunner(tools={"crm": gated})
    async with session_stack(store, runner, NO_APPROVAL) as session:
        await session.sessions.start_session("s1", THREE_WRITES)
        for n in (1, 2, 3):
            records = by_id(await started(session, gated, n))
            # Each write starts only after the one before it ended, and the later ones wait.
            assert gated.log == [
                f"{verb} {m}" for m in range(1, n) for verb in ("start", "end")
            ] + [f"start {n}"]
            assert [records[f"call-{m}"].status for m in (1, 2, 3)] == [
                ToolCallStatus.SUCCEEDED if m < n else ToolCallStatus.APPROVED for m in (1, 2, 3)
            ]
            assert [records[f"call-{m}"].write_queued for m in (1, 2, 3)] == [
                m > n for m in (1, 2, 3)
            ]
            assert len(runner.model_calls) == 1  # starting a queued write calls no model
            gated.gate(n).set()
        snapshot = await session.idle()
        assert snapshot.messages[-1].text == "; ".join(f"crm=wrote {n}" for n in (1, 2, 3))
        assert len(runner.model_calls) == 2
        history = [entry.step_type for entry in await session.client.read_step_history("s1")]
        assert history.count("RunModel") == 4
        assert history.count("ResumeTurn") == 3
        assert finished(await session.events()) == [
            ("call-1", "succeeded"),
            ("call-2", "succeeded"),
            ("call-3", "succeeded"),
        ]
        assert await leftover_results(store) == 0


async def test_a_read_of_the_response_runs_in_parallel_with_the_first_write(
    store: FlowStore,
) -> None:
    write_started, read_started = asyncio.Event(), asyncio.Event()
    log: list[str] = []

    async def crm(call: DeferredToolExecution) -> str:
        n = json.loads(call.tool_call.arguments)["n"]
        log.append(f"start {n}")
        if n == 1:
            # Ends only once the read, recorded after it, has started: they overlap.
            write_started.set()
            await asyncio.wait_for(read_started.wait(), 10)
        log.append(f"end {n}")
        return f"wrote {n}"

    async def lookup(call: DeferredToolExecution) -> str:
        read_started.set()
        await asyncio.wait_for(write_started.wait(), 10)
        log.append("read")
        return "found"

    runner = OrderedRunner(tools={"crm": crm, "lookup": lookup})
    async with session_stack(store, runner, NO_APPROVAL) as session:
        await session.sessions.start_session(
            "s1", 'call crm {"n": 1} and lookup {} and crm {"n": 2}'
        )
        snapshot = await session.idle()
        assert log.index("start 2") > log.index("end 1")
        assert log[-2:] == ["start 2", "end 2"]
        assert "read" in log[:3]
        assert snapshot.messages[-1].text == ("crm=wrote 1; lookup=found; crm=wrote 2")
        assert await leftover_results(store) == 0


def approval_raised(
    tool_call_id: str,
) -> Callable[[AgentSnapshot], tuple[AgentInterrupt, ...] | None]:
    """A probe for the pending interrupts once the call's approval is among them."""

    def probe(snapshot: AgentSnapshot) -> tuple[AgentInterrupt, ...] | None:
        pending = snapshot.pending_interrupts
        return pending if any(i.tool_call_id == tool_call_id for i in pending) else None

    return probe


async def test_an_ordered_write_raises_its_approval_only_when_its_turn_comes(
    store: FlowStore,
) -> None:
    runner = OrderedRunner(tools={"crm": echo})
    async with session_stack(store, runner, WITH_APPROVAL) as session:
        await session.sessions.start_session("s1", THREE_WRITES)
        for n in (1, 2, 3):
            pending = await session.until(
                f"the approval of write {n}", approval_raised(f"call-{n}")
            )
            assert [i.tool_call_id for i in pending] == [f"call-{n}"]
            records = by_id(await session.sessions.get_agent_snapshot("s1"))
            assert [records[f"call-{m}"].write_queued for m in (1, 2, 3)] == [
                m > n for m in (1, 2, 3)
            ]
            if n < 3:  # a queued write has no interrupt to resolve yet
                assert not await session.sessions.resolve_interrupt(
                    "s1", f"call-{n + 1}", approved=True
                )
            assert await session.sessions.resolve_interrupt("s1", f"call-{n}", approved=True)
        snapshot = await session.idle()
        assert snapshot.pending_interrupts == ()
        assert [call.tool_call.tool_call_id for call in runner.tool_calls] == [
            "call-1",
            "call-2",
            "call-3",
        ]
        types = [e.type for e in await session.events()]
        raised = [i for i, t in enumerate(types) if t == "interrupt_raised"]
        ended = [i for i, t in enumerate(types) if t == "tool_call_finished"]
        assert len(raised) == len(ended) == 3
        # Each later approval is raised only after the write before it finished.
        assert ended[0] < raised[1]
        assert ended[1] < raised[2]
        assert await leftover_results(store) == 0


@pytest.mark.parametrize(
    ("failing", "ran", "statuses"),
    [
        (2, ["1", "2"], ["succeeded", "failed", "failed", "failed"]),
        (1, ["1"], ["failed", "failed", "failed", "failed"]),
    ],
)
async def test_a_failed_write_skips_the_later_queued_writes_and_the_model_sees_them(
    store: FlowStore, failing: int, ran: list[str], statuses: list[str]
) -> None:
    gated = Gated(failing=frozenset({failing}))
    for n in (1, 2, 3, 4):
        gated.gate(n).set()
    runner = OrderedRunner(tools={"crm": gated})
    async with session_stack(store, runner, NO_APPROVAL) as session:
        await session.sessions.start_session(
            "s1", 'call crm {"n": 1} and crm {"n": 2} and crm {"n": 3} and crm {"n": 4}'
        )
        snapshot = await session.idle()
        assert [entry.split()[1] for entry in gated.log if entry.startswith("start")] == ran
        seen = runner.model_calls[-1].tool_calls
        assert [seen[f"call-{n}"].status.value for n in (1, 2, 3, 4)] == statuses
        for n in range(failing + 1, 5):
            skipped = seen[f"call-{n}"]
            assert (skipped.skipped, skipped.write_queued, skipped.error) == (
                True,
                False,
                SKIPPED_ERROR,
            )
        failed = seen[f"call-{failing}"]
        assert (failed.skipped, failed.error) == (False, f"crm write {failing} was refused")
        answer = snapshot.messages[-1].text or ""
        assert answer.split("; ")[failing:] == [f"crm=The tool call failed: {SKIPPED_ERROR}"] * (
            4 - failing
        )
        assert len(runner.model_calls) == 2
        assert finished(await session.events()) == [
            (f"call-{n}", status) for n, status in zip((1, 2, 3, 4), statuses, strict=True)
        ]
        assert await leftover_results(store) == 0


def queued_writes_final(snapshot: AgentSnapshot) -> dict[str, AgentToolCall] | None:
    records = by_id(snapshot)
    queued = [records.get(f"call-{n}") for n in (2, 3)]
    return records if all(r is not None and r.is_final for r in queued) else None


@pytest.mark.parametrize("control", ["steer", "cancel_turn"])
@pytest.mark.parametrize("first_write", ["running", "awaiting_approval"])
async def test_steering_or_cancelling_rejects_the_queued_writes(
    store: FlowStore, control: str, first_write: str
) -> None:
    steer = control == "steer"
    reason = CancellationReason.STEERED if steer else CancellationReason.TURN_CANCELLED
    result = STEERED_TOOL_RESULT if steer else TURN_CANCELLED_TOOL_RESULT
    running = first_write == "running"
    gated = Gated()
    runner = OrderedRunner(tools={"crm": gated})
    async with session_stack(store, runner, NO_APPROVAL if running else WITH_APPROVAL) as session:
        await session.sessions.start_session("s1", THREE_WRITES)
        if running:
            await started(session, gated, 1)
        else:
            await session.until("an approval", lambda s: next(iter(s.pending_interrupts), None))
        if steer:
            assert await session.sessions.steer_user_message("s1", text="stop writing")
        else:
            assert await session.sessions.cancel_turn("s1", "turn-1")
        if running:  # else the turn ends at once, so the note below shows the rejections
            records = await session.until("the queued writes to be rejected", queued_writes_final)
            for n in (2, 3):
                queued = records[f"call-{n}"]
                assert (queued.status, queued.cancellation_reason, queued.write_queued) == (
                    ToolCallStatus.REJECTED,
                    reason,
                    False,
                )
            assert records["call-1"].status is ToolCallStatus.APPROVED
        gated.gate(1).set()  # a started write runs to its end; the turn ends after it
        snapshot = await session.idle(turns=2 if steer else 1)
        assert gated.log == (["start 1", "end 1"] if running else [])
        first = 'crm {"n": 1} -> ' + ("succeeded: wrote 1" if running else f"rejected: {result}")
        note = "\n".join(
            (
                "[Dex] The previous turn failed after these tool calls ran:",
                f"- {first}",
                f'- crm {{"n": 2}} -> rejected: {result}',
                f'- crm {{"n": 3}} -> rejected: {result}',
                "Do not repeat these tool calls unless the user asks again.",
            )
        )
        after = [(MessageRole.USER, "stop writing"), (MessageRole.ASSISTANT, "echo: stop writing")]
        assert [(m.role, m.text) for m in snapshot.messages] == [
            (MessageRole.USER, THREE_WRITES),
            (MessageRole.USER, note),
            *(after if steer else []),
        ]
        assert sorted(finished(await session.events())) == [
            ("call-1", "succeeded" if running else "rejected"),
            ("call-2", "rejected"),
            ("call-3", "rejected"),
        ]
        assert len(runner.model_calls) == (2 if steer else 1)
        assert await leftover_results(store) == 0


async def test_run_model_starts_the_next_queued_write_without_a_model_call() -> None:
    records = [
        record("w1", ToolCallStatus.SUCCEEDED, ordered=True, deferral_order=0),
        record(
            "w2",
            ToolCallStatus.AWAITING_APPROVAL,
            ordered=True,
            write_queued=True,
            requires_approval=True,
            deferral_order=1,
        ),
        record("w3", ToolCallStatus.APPROVED, ordered=True, write_queued=True, deferral_order=2),
    ]
    running_model = attrs.evolve(ACTIVE, status=AgentStatus.RUNNING_MODEL)
    state = staged(running_model, records=records)
    runner = ScriptedRunner()
    decision = await RunModel(runtime(runner)).execute(FakeStepContext(state), None)
    assert runner.model_calls == []
    assert [(m.step, m.input) for m in decision.movements] == [
        (AwaitToolApproval, "w2"),
        (ResumeTurn, 1),
    ]
    (interrupt,) = state.get(PENDING_INTERRUPTS) or ()
    assert (interrupt.interrupt_id, interrupt.kind.value) == ("w2", "approval")
    agent_state = state.get(AGENT_STATE)
    assert agent_state is not None
    assert agent_state.status is AgentStatus.RUNNING_TOOLS
    assert not state.publishes


async def test_run_model_waits_again_while_the_write_before_the_queue_still_runs() -> None:
    records = [
        record("w1", ToolCallStatus.APPROVED, ordered=True, deferral_order=0),
        record("w2", ToolCallStatus.APPROVED, ordered=True, write_queued=True, deferral_order=1),
    ]
    state = staged(ACTIVE, records=records)
    runner = ScriptedRunner()
    decision = await RunModel(runtime(runner)).execute(FakeStepContext(state), None)
    assert runner.model_calls == []
    assert decision.kind is DecisionKind.GO
    assert [(m.step, m.input) for m in decision.movements] == [(ResumeTurn, 1)]


@pytest.mark.parametrize("control", ["steer", "cancel_turn"])
async def test_a_rejected_queued_write_publishes_no_result(control: str) -> None:
    # ResumeTurn counts only the calls that started, so a queued write's result would be
    # left over in ToolCallResults for a later wait.
    records = [
        record("w1", ToolCallStatus.APPROVED, ordered=True, deferral_order=0),
        record("w2", ToolCallStatus.APPROVED, ordered=True, write_queued=True, deferral_order=1),
    ]
    if control == "steer":
        state = staged(ACTIVE, records=records, channels=STEERED)
        context = FakeStepContext(state)
        cancel_steered_waits(context, runtime(), ACTIVE)
        reason = CancellationReason.STEERED
    else:
        state = staged(ACTIVE, records=records, values=CANCELLED)
        context = FakeStepContext(state)
        decision = await FinishTurnCancellation(runtime()).execute(context, "turn-1")
        assert decision.kind is DecisionKind.END
        reason = CancellationReason.TURN_CANCELLED
    rejected = written_record(state, "w2")
    assert (rejected.status, rejected.cancellation_reason, rejected.write_queued) == (
        ToolCallStatus.REJECTED,
        reason,
        False,
    )
    assert (AGENT_TOOL_CALLS.name, "w1") not in state.writes  # its tool Step records it
    assert state.publishes == []
    events = [from_json(text, AgentEvent) for _, text in state.events]
    assert [(e.type, e.payload) for e in events] == [
        (
            "tool_call_finished",
            ToolCallFinishedPayload(
                tool_call_id="w2", tool_name="refund", status=ToolCallStatus.REJECTED
            ),
        )
    ]
