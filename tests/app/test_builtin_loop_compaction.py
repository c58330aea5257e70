"""Compaction in the built-in loop: ``BuiltinLoopAgentRunner`` as a ``ContextCompactionRunner``."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import pytest

from dex_agents import AgentSessionClient
from dex_agents.app.builtin_loop.definition import AgentDefinition
from dex_agents.app.builtin_loop.flow import builtin_agent_session_options
from dex_agents.app.builtin_loop.function_tools import function_tool
from dex_agents.app.builtin_loop.items import (
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
from dex_agents.domain.compaction import CompactionPolicy
from dex_agents.domain.context_summary import ContextSummary, ContextSummaryRequest
from dex_agents.domain.context_summary_prompt import (
    CONTEXT_SUMMARY_INSTRUCTIONS,
    CONTEXT_SUMMARY_NOTE_HEADER,
    CONTEXT_SUMMARY_TRANSCRIPT_HEADER,
)
from dex_agents.domain.messages import AgentMessage, FrameworkMessage, MessageRole
from dex_agents.domain.model_io import (
    CONTENT_FILTER_TURN_ERROR,
    ModelOutputItem,
    ModelRequest,
    ModelResponse,
    ModelToolCall,
    ToolResultItem,
    UserTextItem,
)
from dex_agents.domain.requests import AgentSnapshot
from dex_agents.domain.runner_outcomes import ModelCallMetadata
from dex_agents.domain.tool_effects import ToolEffect
from dex_agents.domain.usage import AgentUsage
from dex_agents.ports.errors import ModelCallError
from dex_agents.ports.flow_store import FlowStore
from dex_agents.ports.model_client import ModelOutputWriter
from dex_agents.ports.runner import AgentTurnContext, ContextCompactionRunner
from tests.app import harness

SUMMARY_TEXT = "The user asked questions; the assistant answered them."
PADDING = "x" * 240


@function_tool(effect=ToolEffect.READ)
async def fetch_page(page: int) -> str:
    """Fetch one page of a long report."""
    return f"page {page}: {PADDING}"


def is_summary_call(request: ModelRequest) -> bool:
    return request.instructions == CONTEXT_SUMMARY_INSTRUCTIONS


def reply(request: ModelRequest) -> ScriptedModelReply:
    """Summaries for summary calls; pages until page 8 for "read", else an echo."""
    if is_summary_call(request):
        return ScriptedModelReply(text=f"  {SUMMARY_TEXT}\n")
    last = request.items[-1]
    if isinstance(last, ToolResultItem):
        page = int(last.output.split(":")[0].removeprefix("page "))
        if page >= 8:
            return ScriptedModelReply(text="read every page")
        return ScriptedModelReply(tool_calls=[ScriptedToolCall("fetch_page", {"page": page + 1})])
    assert isinstance(last, UserTextItem)
    if last.text.startswith("read"):
        return ScriptedModelReply(tool_calls=[ScriptedToolCall("fetch_page", {"page": 1})])
    return ScriptedModelReply(text=f"answer to {last.text[:12]} {PADDING}")


def agent(policy: CompactionPolicy | None, max_output_tokens: int | None = None) -> AgentDefinition:
    return AgentDefinition(
        name="reader",
        instructions="Answer briefly.",
        model=ScriptedModelClient(reply, max_recorded_requests=1000),
        tools=[fetch_page],
        compaction=policy,
        max_output_tokens=max_output_tokens,
    )


def model_of(definition: AgentDefinition) -> ScriptedModelClient:
    assert isinstance(definition.model, ScriptedModelClient)
    return definition.model


@contextlib.asynccontextmanager
async def running(
    store: FlowStore, definition: AgentDefinition
) -> AsyncIterator[AgentSessionClient]:
    flow = builtin_agent_session_flow(definition, flow_type="ReaderAgent")
    async with harness.serving(store, flow) as client:
        yield AgentSessionClient(client, flow)


async def idle(sessions: AgentSessionClient, turns: int) -> AgentSnapshot:
    return await harness.idle(sessions, turns=turns, seconds=20)


def summary_note(summary: ContextSummary) -> str:
    return f"{CONTEXT_SUMMARY_NOTE_HEADER}\n{summary.text}"


def assert_calls_whole(request: ModelRequest) -> None:
    """Every tool call of the input has its result, and every result its call."""
    calls = {
        call.tool_call_id
        for item in request.items
        if isinstance(item, ModelOutputItem)
        for call in item.tool_calls
    }
    results = {item.tool_call_id for item in request.items if isinstance(item, ToolResultItem)}
    assert calls == results


def test_the_definition_passes_its_policy_to_the_session_options() -> None:
    policy = CompactionPolicy(context_window_tokens=1000)
    assert builtin_agent_session_options(agent(policy)).compaction == policy
    assert builtin_agent_session_options(agent(None)).compaction is None
    assert isinstance(BuiltinLoopAgentRunner(agent(None)), ContextCompactionRunner)


def test_a_definition_refuses_a_compaction_that_is_no_policy() -> None:
    with pytest.raises(TypeError) as raised:
        AgentDefinition(
            name="reader",
            instructions="Answer briefly.",
            model=ScriptedModelClient(reply),
            compaction=1000,  # type: ignore[arg-type]
        )
    assert str(raised.value) == (
        "AgentDefinition.compaction must be a CompactionPolicy or None, not int"
    )


async def test_a_session_past_the_window_summarizes_and_starts_later_input_with_it(
    store: FlowStore,
) -> None:
    definition = agent(CompactionPolicy(context_window_tokens=2000))
    model = model_of(definition)
    async with running(store, definition) as sessions:
        await sessions.start_session("s1", f"question 1 {PADDING}")
        turns = 1
        snapshot = await idle(sessions, turns)
        while snapshot.context_summary is None:
            assert turns < 20, "the session never compacted"
            turns += 1
            await sessions.send_user_message("s1", f"question {turns} {PADDING}")
            snapshot = await idle(sessions, turns)
        summary = snapshot.context_summary
        assert summary.generation == 1
        assert summary.first_sequence == 1
        assert summary.text == SUMMARY_TEXT

        summary_calls = [request for request in model.requests if is_summary_call(request)]
        assert len(summary_calls) == 1
        call = summary_calls[0]
        assert call.tools == ()
        assert call.image_bytes == {}
        assert len(call.items) == 1
        prompt = call.items[0]
        assert isinstance(prompt, UserTextItem)
        assert prompt.images == ()
        assert prompt.text.startswith(CONTEXT_SUMMARY_TRANSCRIPT_HEADER + "\n\n")
        assert prompt.text.endswith(CONTEXT_SUMMARY_INSTRUCTIONS)
        assert "user: question 1 " in prompt.text

        turns += 1
        await sessions.send_user_message("s1", "question last")
        snapshot = await idle(sessions, turns)
        later = [request for request in model.requests if not is_summary_call(request)][-1]
        first = later.items[0]
        assert isinstance(first, UserTextItem)
        assert first.text == summary_note(summary)
        summarized = [
            message.text
            for message in snapshot.messages
            if message.sequence <= summary.last_sequence and message.text is not None
        ]
        assert summarized
        assert "question 1 " + PADDING in summarized
        input_texts = set(later.user_texts[1:]) | {
            item.text for item in later.items if isinstance(item, ModelOutputItem)
        }
        assert input_texts.isdisjoint(summarized)
        assert later.user_texts[-1] == "question last"


async def test_a_turn_with_many_tool_calls_compacts_mid_turn_keeping_calls_whole(
    store: FlowStore,
) -> None:
    definition = agent(CompactionPolicy(context_window_tokens=800))
    model = model_of(definition)
    async with running(store, definition) as sessions:
        await sessions.start_session("s1", "read the report")
        snapshot = await idle(sessions, 1)
        assert snapshot.messages[-1].text == "read every page"
        summary = snapshot.context_summary
        assert summary is not None
        # The cut fell inside the only turn, after its user message.
        assert 1 < summary.last_sequence < snapshot.messages[-1].sequence
        by_call: dict[str, list[AgentMessage]] = {}
        for message in snapshot.messages:
            if message.tool_call_id is not None:
                by_call.setdefault(message.tool_call_id, []).append(message)
        assert len(by_call) == 8
        for pair in by_call.values():
            assert [message.role for message in pair] == [MessageRole.ASSISTANT, MessageRole.TOOL]
            sides = {message.sequence <= summary.last_sequence for message in pair}
            assert len(sides) == 1, f"a call and its result were separated: {pair}"
        after = [
            request
            for request in model.requests
            if not is_summary_call(request) and request.user_texts[:1] == (summary_note(summary),)
        ]
        assert after, "no model call started with the summary note"
        for request in after:
            assert_calls_whole(request)
            assert "read the report" not in request.user_texts
        assert "page 8" in after[-1].items[-1].output  # type: ignore[union-attr]


def stored(sequence: int, message: FrameworkMessage, turn_id: str = "t1") -> AgentMessage:
    return AgentMessage.from_framework_message(
        message, sequence=sequence, turn_id=turn_id, created_at=datetime(2026, 1, 1, tzinfo=UTC)
    )


def history() -> tuple[AgentMessage, ...]:
    """A user message, then two model responses with one call and its result each."""
    messages: list[FrameworkMessage] = [user_text_message(f"read {PADDING}")]
    for page in (1, 2):
        call = ModelToolCall(
            tool_call_id=f"c{page}", tool_name="fetch_page", arguments=json.dumps({"page": page})
        )
        messages.append(
            model_output_message(
                ModelOutputItem(item=f"call {page}", provider="p", api="a", tool_calls=(call,))
            )
        )
        messages.append(
            tool_result_message(
                ToolResultItem(tool_call_id=f"c{page}", tool_name="fetch_page", output=PADDING)
            )
        )
    return tuple(stored(position + 1, message) for position, message in enumerate(messages))


@pytest.mark.parametrize(
    ("budget", "max_output_tokens", "omitted", "kept_user_text"),
    [
        # Estimates (ScriptedModelClient): all 787 tokens, without the user message 727,
        # without the first response and its result 623, with no message 520.
        (10_000, None, 0, True),
        (740, None, 1, False),
        (650, None, 3, False),
        (10_000, 9_300, 3, False),  # the output reservation leaves room for one response
        (600, None, 5, False),
        (500, None, 5, False),  # nothing fits: every message is left out
    ],
)
async def test_a_summary_request_leaves_out_the_oldest_whole_responses(
    budget: int, max_output_tokens: int | None, omitted: int, kept_user_text: bool
) -> None:
    runner = BuiltinLoopAgentRunner(agent(None, max_output_tokens))
    request = ContextSummaryRequest(
        flow_id="s1",
        turn_id="t1",
        messages=history(),
        through_sequence=5,
        input_token_budget=budget,
    )
    result = await runner.summarize_context(request)
    assert result.text == SUMMARY_TEXT
    assert result.usage.model_calls == 1
    call = model_of(runner.definition).requests[-1]
    assert call.instructions == CONTEXT_SUMMARY_INSTRUCTIONS
    assert call.tools == ()
    assert call.max_output_tokens == max_output_tokens
    prompt = call.user_texts[0]
    note = f"[Dex] {omitted} earlier messages did not fit in this request and are left out."
    assert (note in prompt) is (omitted > 0)
    assert (f"user: read {PADDING}" in prompt) is kept_user_text
    if omitted:
        assert prompt.startswith(f"{CONTEXT_SUMMARY_TRANSCRIPT_HEADER}\n\n{note}\n\n")
    if omitted < 5:
        assert "assistant called fetch_page" in prompt
        assert f"tool result of fetch_page: {PADDING}" in prompt
    if budget > 500:
        estimate = model_of(runner.definition).estimate_input_tokens(call)
        assert estimate + (max_output_tokens or 0) <= budget


def test_the_estimate_is_the_model_clients_estimate_of_the_next_request() -> None:
    definition = agent(None)
    runner = BuiltinLoopAgentRunner(definition)
    summary = ContextSummary(
        generation=1, last_sequence=3, text="earlier", created_at=datetime(2026, 1, 1, tzinfo=UTC)
    )
    turn = AgentTurnContext(
        flow_id="s1",
        turn_id="t1",
        attempt=1,
        messages=history()[3:],
        events=None,  # type: ignore[arg-type]
        heartbeat=None,  # type: ignore[arg-type]
        context_summary=summary,
    )
    request = runner.next_model_request(turn)
    assert request.items[0] == UserTextItem(text=f"{CONTEXT_SUMMARY_NOTE_HEADER}\nearlier")
    assert [tool.name for tool in request.tools] == ["fetch_page"]
    assert request.image_bytes == {}
    assert runner.estimate_input_tokens(turn) == model_of(definition).estimate_input_tokens(request)
    # After the first response and its result; never between a call and its result.
    whole = AgentTurnContext(
        flow_id="s1",
        turn_id="t1",
        attempt=1,
        messages=history(),
        events=None,  # type: ignore[arg-type]
        heartbeat=None,  # type: ignore[arg-type]
    )
    assert runner.select_compaction_cutoff(whole, 0) == 3
    assert runner.select_compaction_cutoff(whole, 10_000) is None


class FilteredModel:
    """A model client whose provider's content filter stops every answer part way."""

    async def call_model(self, request: ModelRequest, output: ModelOutputWriter) -> ModelResponse:
        item = ModelOutputItem(item="{}", provider="p", api="a", text="The user asked")
        metadata = ModelCallMetadata(finish_reasons=("content_filter",))
        return ModelResponse(
            output=[item], usage=AgentUsage(model_calls=1), model_call_metadata=metadata
        )

    def estimate_input_tokens(self, request: ModelRequest) -> int:
        return 0


async def test_a_summary_the_content_filter_stopped_fails_and_is_not_stored_cut() -> None:
    definition = AgentDefinition(name="reader", instructions="Answer.", model=FilteredModel())
    request = ContextSummaryRequest(
        flow_id="s1",
        turn_id="t1",
        messages=history(),
        through_sequence=5,
        input_token_budget=10_000,
    )
    with pytest.raises(ModelCallError) as caught:
        await BuiltinLoopAgentRunner(definition).summarize_context(request)
    assert str(caught.value) == CONTENT_FILTER_TURN_ERROR
    assert caught.value.retryable is False
