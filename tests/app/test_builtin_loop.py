"""The built-in agent loop on the embedded engine, with scripted models."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, TypeVar

import pytest

from dex_agents import AgentSessionClient
from dex_agents.adapters.local.client import LocalFlowClient
from dex_agents.app.builtin_loop.definition import AgentDefinition, TurnContinuationContext
from dex_agents.app.builtin_loop.flow import builtin_agent_session_options
from dex_agents.app.builtin_loop.function_tools import ToolCallContext, function_tool
from dex_agents.app.builtin_loop.items import (
    model_input_item,
    model_output_message,
    tool_result_message,
    user_text_message,
)
from dex_agents.app.builtin_loop.runner import BuiltinLoopAgentRunner
from dex_agents.app.builtin_loop.scripted_model import (
    ScriptedModelClient,
    ScriptedModelReply,
    ScriptedToolCall,
)
from dex_agents.builtin_loop import builtin_agent_session_flow
from dex_agents.domain.builtin_tools import BuiltInTool
from dex_agents.domain.messages import AgentMessage, FrameworkMessage, MessageRole
from dex_agents.domain.model_io import (
    ModelOutputItem,
    ModelRequest,
    ModelToolCall,
    ToolResultItem,
    UserTextItem,
)
from dex_agents.domain.requests import AgentSnapshot
from dex_agents.domain.runner_outcomes import TurnCompleted
from dex_agents.domain.tool_effects import ToolEffect, ToolPolicy
from dex_agents.domain.tool_outcomes import OUTCOME_UNKNOWN_TOOL_RESULT
from dex_agents.domain.turns import (
    MAX_CONSECUTIVE_TURN_CONTINUATIONS,
    TURN_CONTINUATION_LIMIT_ERROR,
    ContinueTurn,
    TurnContinuation,
)
from dex_agents.ports.flow_store import FlowStore
from dex_agents.ports.runner import AgentTurnContext
from tests.app import harness

T = TypeVar("T")
ORDERS = {"7": {"order_id": "7", "status": "delivered", "total_cents": "2500"}}
REFUNDS: list[tuple[str, int, str]] = []


@function_tool(effect=ToolEffect.READ)
async def lookup_order(order_id: str) -> dict[str, str]:
    """Look up an order by its ID."""
    return ORDERS[order_id]


@function_tool(effect=ToolEffect.NON_IDEMPOTENT_WRITE)
async def refund_order(order_id: str, amount_cents: int, context: ToolCallContext) -> str:
    """Refund part of an order."""
    REFUNDS.append((order_id, amount_cents, context.idempotency_key))
    return f"refunded {amount_cents} cents of order {order_id}"


def reply_as_demo_model(request: ModelRequest) -> ScriptedModelReply:
    results = ScriptedModelClient.tool_results(request)
    if results:
        return ScriptedModelReply(text="; ".join(result.output for result in results))
    return ScriptedModelReply(text=f"Demo reply: {ScriptedModelClient.user_texts(request)[-1]}")


def agent(respond: Callable[[ModelRequest], ScriptedModelReply], **fields: Any) -> AgentDefinition:
    fields.setdefault("tools", [lookup_order, refund_order])
    return AgentDefinition(
        name="support",
        instructions="You help customers with their orders.",
        model=ScriptedModelClient(respond),
        **fields,
    )


@dataclass
class Stack:
    client: LocalFlowClient
    sessions: AgentSessionClient

    async def until(self, description: str, probe: Callable[[AgentSnapshot], T | None]) -> T:
        return await harness.until(self.sessions, description, probe)

    async def idle(self) -> AgentSnapshot:
        return await harness.idle(self.sessions)


@contextlib.asynccontextmanager
async def running(store: FlowStore, definition: AgentDefinition) -> AsyncIterator[Stack]:
    flow = builtin_agent_session_flow(definition, flow_type="SupportAgent")
    async with harness.serving(store, flow) as client:
        yield Stack(client, AgentSessionClient(client, flow))


def transcript(snapshot: AgentSnapshot) -> list[tuple[str, str | None]]:
    return [
        (m.role.value, m.text if m.role is not MessageRole.TOOL else m.tool_output)
        for m in snapshot.messages
    ]


def model_of(definition: AgentDefinition) -> ScriptedModelClient:
    assert isinstance(definition.model, ScriptedModelClient)
    return definition.model


async def test_the_demo_model_replies_with_the_user_text(store: FlowStore) -> None:
    definition = agent(reply_as_demo_model)
    async with running(store, definition) as stack:
        await stack.sessions.start_session("s1", "hello")
        snapshot = await stack.idle()
    assert transcript(snapshot) == [("user", "hello"), ("assistant", "Demo reply: hello")]
    assert snapshot.usage.model_calls == 1
    (request,) = model_of(definition).requests
    assert request.instructions == "You help customers with their orders."
    assert [tool.name for tool in request.tools] == ["lookup_order", "refund_order"]


def lookup_then_answer(request: ModelRequest) -> ScriptedModelReply:
    if request.tool_results:  # every result, also before a continuation message
        return ScriptedModelReply(text="; ".join(result.output for result in request.tool_results))
    return ScriptedModelReply(
        tool_calls=[ScriptedToolCall("lookup_order", {"order_id": "7"}, call_id="c1")]
    )


async def test_a_turn_calls_a_tool_and_answers_with_its_result(store: FlowStore) -> None:
    definition = agent(lookup_then_answer)
    async with running(store, definition) as stack:
        await stack.sessions.start_session("s1", "where is order 7?")
        snapshot = await stack.idle()
    result = json.dumps(ORDERS["7"])
    assert transcript(snapshot) == [
        ("user", "where is order 7?"),
        ("assistant", None),
        ("tool", result),
        ("assistant", result),
    ]
    assert snapshot.messages[1].tool_name == "lookup_order"
    assert snapshot.usage.model_calls == 2
    second = model_of(definition).requests[1]
    assert [type(item).__name__ for item in second.items] == [
        "UserTextItem",
        "ModelOutputItem",
        "ToolResultItem",
    ]
    assert second.tool_results == (
        ToolResultItem(tool_call_id="c1", tool_name="lookup_order", output=result),
    )


def support_script(request: ModelRequest) -> ScriptedModelReply:
    names = [result.tool_name for result in ScriptedModelClient.tool_results(request)]
    if not names:
        call = ScriptedToolCall("lookup_order", {"order_id": "7"}, call_id="look")
        return ScriptedModelReply(tool_calls=[call])
    if names == ["lookup_order"]:
        call = ScriptedToolCall("refund_order", {"order_id": "7", "amount_cents": 500}, "pay")
        return ScriptedModelReply(tool_calls=[call])
    return ScriptedModelReply(text=f"Done: {ScriptedModelClient.tool_results(request)[-1].output}")


async def test_the_support_agent_reads_freely_and_refunds_after_approval(
    store: FlowStore,
) -> None:
    REFUNDS.clear()
    definition = agent(support_script)
    async with running(store, definition) as stack:
        await stack.sessions.start_session("s1", "refund 5 dollars of order 7")
        interrupt = await stack.until(
            "the refund approval", lambda s: next(iter(s.pending_interrupts), None)
        )
        assert interrupt.interrupt_id == "pay"
        assert REFUNDS == []
        assert await stack.sessions.resolve_interrupt("s1", "pay", approved=True)
        snapshot = await stack.idle()
        history = [entry.step_type for entry in await stack.client.read_step_history("s1")]
    assert REFUNDS == [("7", 500, "s1/turn-1/pay")]
    assert snapshot.messages[-1].text == "Done: refunded 500 cents of order 7"
    assert [m.role.value for m in snapshot.messages] == [
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
        "assistant",
    ]
    assert "CallTool" in history
    assert "CallSingleAttemptTool" in history


def always_lookup(request: ModelRequest) -> ScriptedModelReply:
    return ScriptedModelReply(tool_calls=[ScriptedToolCall("lookup_order", {"order_id": "7"})])


async def test_after_the_model_call_limit_tools_are_not_offered_nor_run(store: FlowStore) -> None:
    definition = agent(always_lookup, max_model_calls_per_turn=2)
    async with running(store, definition) as stack:
        await stack.sessions.start_session("s1", "loop")
        snapshot = await stack.idle()
    requests = model_of(definition).requests
    assert [len(request.tools) for request in requests] == [2, 2, 0]
    assert snapshot.messages[-1].tool_output == (
        "The tool call was not run: this turn reached its limit of 2 model calls."
    )
    assert snapshot.state is not None
    assert snapshot.state.last_turn_error is None
    assert snapshot.usage.model_calls == 3


def keep_going(context: TurnContinuationContext) -> TurnContinuation:
    return ContinueTurn("Go on.")


async def test_continuing_answers_stops_at_the_limit_of_eight(store: FlowStore) -> None:
    definition = agent(reply_as_demo_model, decide_turn_continuation=keep_going)
    async with running(store, definition) as stack:
        await stack.sessions.start_session("s1", "think")
        snapshot = await stack.idle()
    assert MAX_CONSECUTIVE_TURN_CONTINUATIONS == 8
    assert snapshot.state is not None
    assert snapshot.state.last_turn_error == TURN_CONTINUATION_LIMIT_ERROR
    assert len(model_of(definition).requests) == 9
    expected = [("user", "think"), ("assistant", "Demo reply: think")]
    expected += [("user", "Go on."), ("assistant", "Demo reply: Go on.")] * 8
    assert transcript(snapshot) == expected
    assert {m.turn_id for m in snapshot.messages} == {"turn-1"}


def end_after_tools(context: TurnContinuationContext) -> TurnContinuation:
    return "end" if context.tool_results else "default"


async def test_end_after_tools_completes_the_turn_with_the_tool_result(store: FlowStore) -> None:
    definition = agent(lookup_then_answer, decide_turn_continuation=end_after_tools)
    async with running(store, definition) as stack:
        await stack.sessions.start_session("s1", "look")
        snapshot = await stack.idle()
    assert len(model_of(definition).requests) == 1
    assert [m.role.value for m in snapshot.messages] == ["user", "assistant", "tool"]
    assert snapshot.usage.model_calls == 1


def answer_then_continue_after_tools(context: TurnContinuationContext) -> TurnContinuation:
    if context.tool_results:
        assert [item.tool_calls[0].tool_name for item in context.model_output] == ["lookup_order"]
        return ContinueTurn("Summarize it.")
    return "default"


async def test_a_continuation_after_tools_follows_the_results(store: FlowStore) -> None:
    definition = agent(
        lookup_then_answer, decide_turn_continuation=answer_then_continue_after_tools
    )
    async with running(store, definition) as stack:
        await stack.sessions.start_session("s1", "look")
        snapshot = await stack.idle()
    second = model_of(definition).requests[1]
    assert isinstance(second.items[-1], UserTextItem)
    assert second.items[-1].text == "Summarize it."
    assert isinstance(second.items[-2], ToolResultItem)
    assert snapshot.state is not None
    assert snapshot.state.last_turn_error is None
    assert [m.role.value for m in snapshot.messages] == [
        "user",
        "assistant",
        "tool",
        "user",
        "assistant",
    ]


def call_unknown(request: ModelRequest) -> ScriptedModelReply:
    if ScriptedModelClient.tool_results(request):
        return reply_as_demo_model(request)
    return ScriptedModelReply(tool_calls=[ScriptedToolCall("nope", {}, call_id="x")])


async def test_an_unknown_tool_name_fails_the_call_without_approval(store: FlowStore) -> None:
    definition = agent(call_unknown)
    async with running(store, definition) as stack:
        await stack.sessions.start_session("s1", "go")
        snapshot = await stack.idle()
    assert snapshot.messages[-1].text == "The tool call failed: unknown tool nope"


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        (
            {
                "tools": [function_tool(effect=ToolEffect.READ, name="ask_user")(lambda: "x")],
                "built_in_tools": frozenset({BuiltInTool.ASK_USER}),
            },
            "tool ask_user uses the name of an enabled built-in tool",
        ),
        (
            {
                "tools": [function_tool(effect=ToolEffect.READ, name="write_todos")(lambda: "x")],
                "plan_mode_enabled": True,
            },
            "tool write_todos uses the name of an enabled built-in tool",
        ),
        (
            {"tools": [lookup_order, lookup_order]},
            "two tools of AgentDefinition are named lookup_order",
        ),
        ({"max_model_calls_per_turn": 0}, "max_model_calls_per_turn must be an int from 1, not 0"),
    ],
)
def test_the_definition_refuses_clashing_names_and_bad_limits(
    fields: dict[str, object], message: str
) -> None:
    with pytest.raises(ValueError, match=r".") as raised:
        agent(reply_as_demo_model, **fields)
    assert str(raised.value) == message


def test_a_disabled_built_in_name_is_an_ordinary_tool_name() -> None:
    tool = function_tool(effect=ToolEffect.READ, name="ask_user")(lambda: "x")
    assert agent(reply_as_demo_model, tools=[tool]).tools == (tool,)


def test_the_session_options_come_from_the_definition() -> None:
    definition = agent(
        reply_as_demo_model,
        tool_policies={"lookup_order": ToolPolicy(ToolEffect.READ, requires_approval=True)},
        built_in_tools=frozenset({BuiltInTool.ASK_USER}),
        plan_mode_enabled=True,
        interrupt_deadline=timedelta(hours=1),
        event_stream_capacity_bytes=4096,
        default_tool_effect=ToolEffect.READ,
    )
    options = builtin_agent_session_options(definition)
    assert dict(options.tool_policies) == {
        "lookup_order": ToolPolicy(ToolEffect.READ, requires_approval=True),
        "refund_order": ToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE, None),
    }
    assert options.built_in_tools == {BuiltInTool.ASK_USER, BuiltInTool.WRITE_TODOS}
    assert options.plan_mode_enabled is True
    assert options.interrupt_deadline == timedelta(hours=1)
    assert options.event_stream_capacity_bytes == 4096
    assert options.default_tool_effect is ToolEffect.READ
    flow = builtin_agent_session_flow(definition, flow_type="SupportAgent")
    assert isinstance(flow.runner, BuiltinLoopAgentRunner)


@pytest.mark.parametrize(
    "message",
    [
        user_text_message("hi"),
        model_output_message(
            ModelOutputItem(
                item='{"x":1}',
                provider="p",
                api="a",
                text="t",
                reasoning="r",
                tool_calls=[ModelToolCall(tool_call_id="c", tool_name="n", arguments="{}")],
            )
        ),
        tool_result_message(ToolResultItem(tool_call_id="c", tool_name="n", output="o")),
    ],
)
def test_stored_items_replay_as_model_input(message: object) -> None:
    assert isinstance(message, FrameworkMessage)
    item = model_input_item(message.framework_item)
    assert isinstance(item, UserTextItem | ModelOutputItem | ToolResultItem)
    if isinstance(item, UserTextItem):
        assert item == UserTextItem(text="hi")
    elif isinstance(item, ModelOutputItem):
        assert item.item == '{"x":1}'
        assert item.tool_calls[0].tool_call_id == "c"
        assert message.tool_call_id == "c"
    else:
        assert item == ToolResultItem(tool_call_id="c", tool_name="n", output="o")


@pytest.mark.parametrize("text", ["not json", "[]", '{"type": "other"}', '{"type": "user_text"}'])
def test_foreign_items_are_refused_with_a_clear_error(text: str) -> None:
    with pytest.raises(ValueError, match="stored"):
        model_input_item(text)


class RecordingWriter:
    """A fake ``AgentEventWriter`` that keeps the deltas."""

    def __init__(self) -> None:
        self.deltas: list[tuple[str, str]] = []

    def write_text_delta(self, text: str) -> None:
        self.deltas.append(("text", text))

    def write_reasoning_delta(self, text: str) -> None:
        self.deltas.append(("reasoning", text))

    def write_tool_call_started(self, tool_call_id: str, tool_name: str) -> None:
        raise AssertionError("the runner starts no tools")

    def write_tool_call_finished(self, *args: Any, **kwargs: Any) -> None:
        raise AssertionError("the runner finishes no tools")

    def write_event(self, event_type: str, payload: Any) -> None:
        raise AssertionError("the runner writes no other events")


async def no_heartbeat() -> None:
    return None


def turn_context(messages: list[FrameworkMessage], **fields: Any) -> AgentTurnContext:
    return AgentTurnContext(
        flow_id="s1",
        turn_id="turn-2",
        attempt=1,
        messages=[
            AgentMessage.from_framework_message(message, sequence=index, turn_id="turn-2")
            for index, message in enumerate(messages, start=1)
        ],
        events=RecordingWriter(),
        heartbeat=no_heartbeat,
        **fields,
    )


async def test_run_model_step_refuses_a_name_only_the_session_options_reserve() -> None:
    tool = function_tool(effect=ToolEffect.READ, name="ask_user")(lambda: "x")
    definition = agent(reply_as_demo_model, tools=[tool])
    turn = turn_context(
        [user_text_message("hi")], enabled_built_in_tools=frozenset({BuiltInTool.ASK_USER})
    )
    with pytest.raises(
        ValueError, match=r"^tool ask_user uses the name of an enabled built-in tool$"
    ):
        await BuiltinLoopAgentRunner(definition).run_model_step(turn)
    assert model_of(definition).requests == []


async def test_an_orphaned_stored_call_reads_as_outcome_unknown_and_deltas_stream() -> None:
    orphan = ModelOutputItem(
        item="{}",
        provider="p",
        api="a",
        tool_calls=[ModelToolCall(tool_call_id="old", tool_name="lookup_order", arguments="{}")],
    )
    definition = agent(lambda request: ScriptedModelReply(text="ok", reasoning="hmm"))
    turn = turn_context([model_output_message(orphan), user_text_message("hi")])
    outcome = await BuiltinLoopAgentRunner(definition).run_model_step(turn)
    (request,) = model_of(definition).requests
    assert request.items[1] == ToolResultItem(
        tool_call_id="old", tool_name="lookup_order", output=OUTCOME_UNKNOWN_TOOL_RESULT
    )
    assert request.items[2] == UserTextItem(text="hi")
    assert isinstance(outcome, TurnCompleted)
    assert [message.text for message in outcome.new_messages] == [None, "ok"]
    assert outcome.usage.model_calls == 1
    assert isinstance(turn.events, RecordingWriter)
    assert turn.events.deltas == [("reasoning", "hmm"), ("text", "ok")]


async def test_resolve_model_chooses_each_turns_model_from_its_session_settings(
    store: FlowStore,
) -> None:
    def replying_as(name: str) -> ScriptedModelClient:
        def respond(request: ModelRequest) -> ScriptedModelReply:
            return ScriptedModelReply(text=f"from {name}")

        return ScriptedModelClient(respond)

    models = {name: replying_as(name) for name in ("small", "large")}
    definition = AgentDefinition(
        name="support",
        instructions="You help customers with their orders.",
        model=models["small"],
        resolve_model=lambda settings: models.get(str(settings.get("model")), models["small"]),
    )
    async with running(store, definition) as stack:
        await stack.sessions.start_session("s1", "hello", session_settings={"model": "large"})
        snapshot = await stack.idle()
        assert snapshot.messages[-1].text == "from large"
        assert await stack.sessions.update_session_settings("s1", {})
        await stack.sessions.send_user_message("s1", "again")

        def second_turn_done(snapshot: AgentSnapshot) -> AgentSnapshot | None:
            state = snapshot.state
            done = state is not None and state.turn_count == 2 and state.active_turn_id is None
            return snapshot if done else None

        snapshot = await stack.until("the second turn", second_turn_done)
        assert snapshot.messages[-1].text == "from small"
        assert len(models["large"].requests) == 1
        assert len(models["small"].requests) == 1


async def test_a_resolve_model_that_returns_no_client_fails_the_turn_naming_it(
    store: FlowStore,
) -> None:
    small = ScriptedModelClient(reply_as_demo_model)
    models = {"small": small}
    definition = AgentDefinition(
        name="support",
        instructions="You help customers with their orders.",
        model=small,
        # An unknown name gives None, not the default client.
        resolve_model=lambda settings: models.get(str(settings.get("model"))),  # type: ignore[arg-type,return-value]
    )
    async with running(store, definition) as stack:
        await stack.sessions.start_session("s1", "hello", session_settings={"model": "large"})
        snapshot = await stack.idle()
        assert snapshot.state is not None
        assert (
            snapshot.state.last_turn_error
            == "resolve_model of agent support returned NoneType, not a ModelClient"
        )
        assert small.requests == []
