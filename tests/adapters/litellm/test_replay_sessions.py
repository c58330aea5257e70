"""Whole sessions whose stored answers once broke every later request of the session.

Each test runs a ``LocalRuntime`` with one built-in loop agent on a LiteLLM
client pointed at the ``ProviderServer``, stores an answer a provider really
gives, and shows that the session's next model call, and its next turn, succeed.
"""

from __future__ import annotations

import litellm
import pytest

from dex_agents import AgentSessionFlow
from dex_agents.builtin_loop import AgentDefinition, builtin_agent_session_flow
from dex_agents.domain.messages import MessageRole
from dex_agents.domain.requests import AgentSnapshot
from dex_agents.litellm import LiteLLMModelClient
from dex_agents.local import LocalRuntime
from tests.adapters.litellm.provider_rules import openai_chat_rules
from tests.adapters.litellm.provider_scripts import (
    CHAT_USAGE,
    anthropic_reply,
    anthropic_stream,
    chat_reply,
)
from tests.adapters.litellm.provider_server import ProviderServer, Reply, sse_reply
from tests.adapters.litellm.session_support import FAST, KEY, lookup, run_turn

litellm.suppress_debug_info = True


def session_flow(model: LiteLLMModelClient) -> AgentSessionFlow:
    agent = AgentDefinition(
        name="support", instructions="You help with orders.", model=model, tools=[lookup]
    )
    return builtin_agent_session_flow(agent, flow_type="LiteLLMReplay")


def turn_error(snapshot: AgentSnapshot) -> str | None:
    assert snapshot.state is not None
    return snapshot.state.last_turn_error


def claude_cut_mid_tool_use() -> Reply:
    """Claude stops at ``max_tokens`` halfway through a tool call's JSON."""
    events = anthropic_stream(
        [{"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {}}],
        stop_reason="max_tokens",
    )
    cut = {"type": "input_json_delta", "partial_json": '{"order_id": "7'}
    return sse_reply(
        [
            (name, {**data, "delta": cut}) if name == "content_block_delta" else (name, data)
            for name, data in events
        ]
    )


async def test_a_tool_call_cut_at_max_tokens_replays_and_the_session_goes_on(
    server: ProviderServer,
) -> None:
    server.script(
        claude_cut_mid_tool_use(),
        anthropic_reply([{"type": "text", "text": "Which order do you mean?"}]),
        anthropic_reply([{"type": "text", "text": "Order 7 shipped."}]),
    )
    model = LiteLLMModelClient(
        "anthropic/claude-sonnet-4-5", api_base=server.url, api_key_provider=lambda: KEY
    )
    flow = session_flow(model)
    async with LocalRuntime(None, [flow], poll_interval=FAST) as runtime:
        first = await run_turn(runtime, flow, "Where is order 7?")
        second = await run_turn(runtime, flow, "Order 7, please.")
    assert turn_error(first) is None
    assert [m.tool_output for m in first.messages if m.role is MessageRole.TOOL] == [
        "The tool call failed: invalid arguments for lookup: arguments are not valid JSON"
    ]
    replayed = server.requests[1].body["messages"][1]
    assert replayed == {
        "role": "assistant",
        "content": [{"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {}}],
    }
    assert turn_error(second) is None
    assert second.messages[-1].text == "Order 7 shipped."
    server.assert_script_used()


def chat_answer_spent_on_reasoning() -> Reply:
    """An answer that ended with no content and no calls, its tokens all spent on reasoning.

    Cut at the output token limit (``length``) it fails the turn and is not stored
    (``test_output_limit.py``); ended by the model, it is stored and replays as none.
    """

    def chunk(delta: dict[str, object] | None, finish: str | None = None) -> tuple[None, object]:
        choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]
        data: dict[str, object] = {
            "id": "chatcmpl-1",
            "object": "chat.completion.chunk",
            "created": 1_700_000_000,
            "model": "gpt-4.1",
            "choices": choices,
        }
        if delta is None:
            data["usage"] = dict(CHAT_USAGE)
        return (None, data)

    return sse_reply(
        [
            chunk({"role": "assistant", "content": ""}),
            chunk({}, "stop"),
            chunk(None),
            (None, "[DONE]"),
        ]
    )


@pytest.mark.parametrize(
    ("model", "path"), [("openai/gpt-4.1", "/v1"), ("azure/my-gpt-4o", "")], ids=["openai", "azure"]
)
async def test_an_empty_answer_replays_and_the_next_turn_succeeds(
    model: str, path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AZURE_API_VERSION", "2025-03-01-preview")
    async with ProviderServer(refuse=openai_chat_rules) as server:
        server.script(chat_answer_spent_on_reasoning(), chat_reply("Yes, I am here."))
        client = LiteLLMModelClient(
            model, api="chat_completions", api_base=server.url + path, api_key_provider=lambda: KEY
        )
        flow = session_flow(client)
        async with LocalRuntime(None, [flow], poll_interval=FAST) as runtime:
            first = await run_turn(runtime, flow, "Hi")
            second = await run_turn(runtime, flow, "Are you there?")
        assert turn_error(first) is None
        assert turn_error(second) is None
        assert second.messages[-1].text == "Yes, I am here."
        assert [m["role"] for m in server.requests[1].body["messages"]] == [
            "system",
            "user",
            "user",
        ]
        server.assert_script_used()
