"""Dex Web's session graph has an edge for every movement real sessions make on the embedded engine.

Dex Web draws a session on the session Flow Definition Graph, so a movement the
graph lacks is one Dex Web cannot draw. Sessions run a continued turn, a
durable wait, an approval, a steer, a summary call a spend limit refuses, and
approvals and questions whose Step fails after a person answered;
the database's Step executions name each one's source Step
(``from_step_execution_id``).
"""

from __future__ import annotations

import dataclasses
import sqlite3
from datetime import timedelta
from pathlib import Path

from dex_agents import (
    AgentSessionFlow,
    AgentSessionOptions,
    AgentToolCall,
    AgentUsage,
    BuiltInTool,
    CompactionPolicy,
    DeferredToolExecution,
    DeferredToolOutcome,
    InterruptKind,
    ModelSpendCheck,
    ModelSpendLimitExceededError,
    ToolCallStepOptions,
    ToolEffect,
    ToolInputRequested,
    ToolPolicy,
)
from dex_agents.builtin_loop import (
    AgentDefinition,
    BuiltinLoopAgentRunner,
    ContinueTurn,
    ModelRequest,
    ScriptedModelClient,
    ScriptedModelReply,
    ScriptedToolCall,
    TurnContinuation,
    TurnContinuationContext,
    builtin_agent_session_flow,
    builtin_agent_session_options,
    function_tool,
)
from dex_agents.domain.attention import SessionAttention, session_attention
from dex_agents.local import LocalRuntime
from dex_agents.session_graph import SESSION_FLOW_EDGES
from tests.app.scripted_runner import ScriptedRunner
from tests.support.retry_intervals import retrying_runtime

WAIT = timedelta(seconds=30)


@function_tool(effect=ToolEffect.NON_IDEMPOTENT_WRITE, requires_approval=True)
def refund(order_id: str) -> str:
    """Refund an order."""
    return f"refunded {order_id}"


def reply(request: ModelRequest) -> ScriptedModelReply:
    last = ScriptedModelClient.user_texts(request)[-1]
    if ScriptedModelClient.tool_results(request):
        return ScriptedModelReply(text="done")
    if last.startswith("wait"):
        arguments = {"duration_seconds": 1, "reason": "cooling off"}
        return ScriptedModelReply(tool_calls=(ScriptedToolCall("durable_wait", arguments),))
    if last.startswith("refund"):
        return ScriptedModelReply(tool_calls=(ScriptedToolCall("refund", {"order_id": "7"}),))
    return ScriptedModelReply(text=f"echo: {last}")


def continue_once(context: TurnContinuationContext) -> TurnContinuation:
    texts = [str(item.item) for item in context.model_output]
    if not context.tool_results and any("echo: continue" in text for text in texts):
        return ContinueTurn("Finish now.")
    return "default"


def movements(database: Path) -> set[tuple[str, str]]:
    with sqlite3.connect(database) as connection:
        rows = connection.execute(
            "SELECT source.step_type, target.step_type FROM step_executions AS target "
            "JOIN step_executions AS source ON source.flow_id = target.flow_id "
            "AND source.step_execution_id = target.from_step_execution_id"
        ).fetchall()
    return {(source, target) for source, target in rows}


async def test_every_movement_of_a_real_session_is_an_edge_of_the_graph(tmp_path: Path) -> None:
    agent = AgentDefinition(
        name="graph",
        instructions="Answer.",
        model=ScriptedModelClient(reply),
        tools=[refund],
        built_in_tools=frozenset({BuiltInTool.DURABLE_WAIT}),
        decide_turn_continuation=continue_once,
    )
    flow = builtin_agent_session_flow(agent, flow_type="GraphAgent")
    database = tmp_path / "sessions.sqlite3"
    async with LocalRuntime(database, [flow], poll_interval=timedelta(milliseconds=20)) as runtime:
        sessions = runtime.sessions(flow)
        await sessions.open_session("s1")
        for text in ("wait a second", "continue please"):
            assert await sessions.send_user_message("s1", text)
            assert session_attention(await sessions.wait_for_user("s1", timeout=WAIT)) is (
                SessionAttention.IDLE
            )
        assert await sessions.send_user_message("s1", "refund order 7")
        waiting = await sessions.wait_for_user("s1", timeout=WAIT)
        assert session_attention(waiting) is SessionAttention.APPROVAL
        assert await sessions.steer_user_message("s1", text="never mind")
        assert session_attention(await sessions.wait_for_user("s1", timeout=WAIT)) is (
            SessionAttention.IDLE
        )
    made = movements(database)
    # The scenario reached what it means to check.
    assert {("AwaitTimer", "AwaitTimer"), ("RunModel", "RunModel")} <= made
    assert ("RunModel", "AwaitToolApproval") in made
    drawn = {(edge.source, edge.target) for edge in SESSION_FLOW_EDGES}
    assert sorted(made - drawn) == []


class OneModelCall:
    """A spend limit that allows the first model call and refuses every later one."""

    def __init__(self) -> None:
        self.checks: list[str] = []

    async def check_model_call(self, call: ModelSpendCheck) -> None:
        self.checks.append(call.step_execution_id)
        if len(self.checks) > 1:
            raise ModelSpendLimitExceededError("budget reached")

    async def record_model_usage(self, call: ModelSpendCheck, usage: AgentUsage) -> None:
        return None


async def test_a_refused_summary_call_moves_along_an_edge_of_the_graph(tmp_path: Path) -> None:
    agent = AgentDefinition(name="graph", instructions="Answer.", model=ScriptedModelClient(reply))
    limit = OneModelCall()
    options = dataclasses.replace(
        builtin_agent_session_options(agent),
        # A window so small that the second turn compacts before its model call.
        compaction=CompactionPolicy(context_window_tokens=1),
        spend_limit=limit,
    )
    flow = AgentSessionFlow(BuiltinLoopAgentRunner(agent), flow_type="GraphAgent", options=options)
    database = tmp_path / "sessions.sqlite3"
    async with LocalRuntime(database, [flow], poll_interval=timedelta(milliseconds=20)) as runtime:
        sessions = runtime.sessions(flow)
        await sessions.open_session("s1")
        for text in ("first", "second"):
            assert await sessions.send_user_message("s1", text)
            done = await sessions.wait_for_user("s1", timeout=WAIT)
        assert done.state is not None
        assert done.state.last_turn_error == "budget reached"
    assert [check.split("-")[0] for check in limit.checks] == ["RunModel", "CompactContext"]
    made = movements(database)
    assert ("CompactContext", "AwaitUserMessage") in made
    drawn = {(edge.source, edge.target) for edge in SESSION_FLOW_EDGES}
    assert sorted(made - drawn) == []


class StepOptionsFailAfterAPerson(ScriptedRunner):
    """Its Step options raise once a person approved a call or answered its tool's question.

    So ``AwaitToolApproval`` and ``AwaitQuestionAnswer`` fail and take their call's
    failure route, by effect.
    """

    def tool_call_step_options(self, call: AgentToolCall) -> ToolCallStepOptions | None:
        if call.tool_name in APPROVED_TOOLS or call.input_answers:
            raise RuntimeError(f"no Step options for {call.tool_name}")
        return None

    # ScriptedRunner's tools answer with text only; each of these asks its question.
    async def execute_deferred_tool_call(  # type: ignore[override]
        self, call: DeferredToolExecution
    ) -> DeferredToolOutcome:
        return ToolInputRequested("Go ahead?")


APPROVED_TOOLS = {"refund", "peek"}
FAILING_AFTER_A_PERSON = {
    "refund": ToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE),
    "peek": ToolPolicy(ToolEffect.READ, requires_approval=True),
    "ask_read": ToolPolicy(ToolEffect.READ),
    "ask_pay": ToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE, requires_approval=False),
}


async def test_the_failure_routes_of_the_steps_that_wait_for_a_person_are_edges(
    tmp_path: Path,
) -> None:
    flow = AgentSessionFlow(
        StepOptionsFailAfterAPerson(),
        flow_type="GraphAgent",
        options=AgentSessionOptions(tool_policies=FAILING_AFTER_A_PERSON),
    )
    database = tmp_path / "sessions.sqlite3"
    # Each Step that fails after a person retries before its failure route.
    async with retrying_runtime(database, [flow]) as runtime:
        sessions = runtime.sessions(flow)
        await sessions.open_session("s1")
        assert await sessions.send_user_message(
            "s1", "call refund {} and peek {} and ask_read {} and ask_pay {}"
        )
        snapshot = await sessions.wait_for_user("s1", timeout=WAIT)
        while snapshot.pending_interrupts:
            for interrupt in snapshot.pending_interrupts:
                if interrupt.kind is InterruptKind.QUESTION:
                    await sessions.answer_question("s1", interrupt.interrupt_id, "yes")
                else:
                    await sessions.resolve_interrupt("s1", interrupt.interrupt_id, approved=True)
            snapshot = await sessions.wait_for_user("s1", timeout=WAIT)
    made = movements(database)
    # The scenario reached what it means to check.
    assert {
        ("AwaitToolApproval", "RecordToolOutcomeUnknown"),
        ("AwaitToolApproval", "RecordToolFailure"),
        ("AwaitQuestionAnswer", "RecordToolFailure"),
        ("AwaitQuestionAnswer", "RecordToolOutcomeUnknown"),
    } <= made
    drawn = {(edge.source, edge.target) for edge in SESSION_FLOW_EDGES}
    assert sorted(made - drawn) == []
