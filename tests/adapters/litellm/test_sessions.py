"""Whole sessions on the embedded engine with ``LiteLLMModelClient`` and a provider on loopback.

Each test runs a ``LocalRuntime`` in memory with one built-in loop agent whose
model is a LiteLLM client pointed at the ``ProviderServer``, and counts the
requests the provider received: a tool turn, an approval, a streamed answer, a
retried 429, a 400 that fails the turn, a stream cut mid-answer, a provider
not listening at all, a refusal, a provider that numbers its tool calls, and a
Gemini tool turn.
"""

from __future__ import annotations

import dataclasses
import json
import socket
from datetime import timedelta
from typing import Any

import litellm

from dex_agents import AgentSessionFlow, RunModelLimit, ToolEffect
from dex_agents.builtin_loop import (
    AgentDefinition,
    BuiltinLoopAgentRunner,
    builtin_agent_session_flow,
    builtin_agent_session_options,
    function_tool,
)
from dex_agents.domain.attention import SessionAttention, session_attention
from dex_agents.domain.events import AgentEvent
from dex_agents.domain.messages import MessageRole
from dex_agents.domain.requests import AgentSnapshot
from dex_agents.litellm import LiteLLMModelClient
from dex_agents.local import LocalRuntime
from dex_agents.ports.errors import StreamReadTimeoutError
from tests.adapters.litellm.provider_scripts import (
    anthropic_reply,
    chat_reply,
    function_call_item,
    gemini_reply,
    message_item,
    openai_error,
    reasoning_item,
    refusal_item,
    responses_reply,
    responses_stream,
)
from tests.adapters.litellm.provider_server import ProviderServer, sse_reply
from tests.adapters.litellm.session_support import FAST, KEY, WAIT, lookup, one_turn, run_turn

litellm.suppress_debug_info = True

ENCRYPTED = "gAAAAABo+session/encrypted=="
SIGNATURE = "EqQBCkYIBxgC+session/signature=="
ANSWER = "Order 7 shipped on Monday and arrives Friday."


@function_tool(effect=ToolEffect.NON_IDEMPOTENT_WRITE, requires_approval=True)
def refund(order_id: str) -> str:
    """Refund an order."""
    return f"refunded {order_id}"


def openai_flow(server: ProviderServer) -> AgentSessionFlow:
    model = LiteLLMModelClient(
        "openai/gpt-5-mini", api_base=server.url + "/v1", api_key_provider=lambda: KEY
    )
    agent = AgentDefinition(
        name="support", instructions="You help with orders.", model=model, tools=[lookup, refund]
    )
    return builtin_agent_session_flow(agent, flow_type="LiteLLMSupport")


def anthropic_flow(server: ProviderServer) -> AgentSessionFlow:
    model = LiteLLMModelClient(
        "anthropic/claude-sonnet-4-5", api_base=server.url, api_key_provider=lambda: KEY
    )
    agent = AgentDefinition(
        name="support",
        instructions="You help with orders.",
        model=model,
        model_settings={"thinking": {"type": "enabled", "budget_tokens": 1024}},
        tools=[lookup, refund],
    )
    return builtin_agent_session_flow(agent, flow_type="LiteLLMClaudeSupport")


async def stream_events(runtime: LocalRuntime, flow: AgentSessionFlow) -> list[AgentEvent]:
    events: list[AgentEvent] = []
    token = ""
    while True:
        try:
            message = await runtime.flow_client.read_stream(
                flow, "s-1", token, poll_timeout=timedelta(milliseconds=50)
            )
        except StreamReadTimeoutError:
            return events
        events.append(message.value)
        token = message.resume_token


def texts(events: list[AgentEvent], kind: str) -> list[str]:
    found = []
    for event in events:
        if event.type == kind:
            payload: Any = event.payload
            found.append(payload["text"] if isinstance(payload, dict) else payload.text)
    return found


def assistant_texts(snapshot: AgentSnapshot) -> list[str | None]:
    return [m.text for m in snapshot.messages if m.role is MessageRole.ASSISTANT]


async def test_a_tool_turn_replays_encrypted_reasoning_and_streams_the_answer(
    server: ProviderServer,
) -> None:
    reasoning = reasoning_item("rs_1", "I should look it up.", ENCRYPTED)
    call = function_call_item("fc_1", "call_1", "lookup", '{"order_id":"7"}')
    server.script(
        responses_reply([reasoning, call]), responses_reply([message_item("msg_2", ANSWER)])
    )
    flow = openai_flow(server)
    async with LocalRuntime(None, [flow], poll_interval=FAST) as runtime:
        done = await run_turn(runtime, flow, "Where is order 7?")
        events = await stream_events(runtime, flow)
    assert session_attention(done) is SessionAttention.IDLE
    assert done.state is not None
    assert done.state.last_turn_error is None
    assert done.messages[-1].text == ANSWER
    assert done.usage.model_calls == 2
    assert done.usage.cached_input_tokens == 40
    second = server.requests[1].body["input"]
    assert second == [
        {"role": "user", "content": "Where is order 7?"},
        reasoning,
        call,
        {"type": "function_call_output", "call_id": "call_1", "output": "order 7 shipped"},
    ]
    assert second[1]["encrypted_content"] == ENCRYPTED
    # The provider sends the answer a word at a time, in one burst: one event.
    assert texts(events, "text_delta") == [ANSWER]
    assert "".join(texts(events, "reasoning_delta")) == "I should look it up."
    server.assert_script_used()


async def test_an_approval_turn_on_anthropic_replays_the_thinking_signature(
    server: ProviderServer,
) -> None:
    thinking = {"type": "thinking", "thinking": "A refund needs approval.", "signature": SIGNATURE}
    tool_use = {"type": "tool_use", "id": "toolu_1", "name": "refund", "input": {"order_id": "7"}}
    server.script(
        anthropic_reply([thinking, {"type": "text", "text": "Refunding."}, tool_use]),
        anthropic_reply([{"type": "text", "text": "Refunded order 7."}]),
    )
    flow = anthropic_flow(server)
    async with LocalRuntime(None, [flow], poll_interval=FAST) as runtime:
        waiting = await run_turn(runtime, flow, "Refund order 7")
        assert session_attention(waiting) is SessionAttention.APPROVAL
        assert len(server.requests) == 1
        approval = waiting.pending_interrupts[0]
        assert approval.tool_name == "refund"
        sessions = runtime.sessions(flow)
        assert await sessions.resolve_interrupt("s-1", approval.interrupt_id, approved=True)
        done = await sessions.wait_for_user("s-1", timeout=WAIT)
    assert done.messages[-1].text == "Refunded order 7."
    messages = server.requests[1].body["messages"]
    assert messages[1] == {
        "role": "assistant",
        "content": [thinking, {"type": "text", "text": "Refunding."}, tool_use],
    }
    assert (
        messages[2]
        == {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_1",
                    "content": [{"type": "text", "text": "refunded 7"}],
                }
            ],
        }
        or messages[2]["content"][0]["content"] == "refunded 7"
    )
    server.assert_script_used()


async def test_a_rate_limit_is_retried_once_and_the_turn_completes(server: ProviderServer) -> None:
    server.script(
        openai_error(429, "Rate limit reached"), responses_reply([message_item("m", ANSWER)])
    )
    flow = openai_flow(server)
    done = await one_turn(flow, "Hi")
    assert done.state is not None
    assert done.state.last_turn_error is None
    assert done.messages[-1].text == ANSWER
    assert len(server.requests) == 2
    assert server.requests[0].body == server.requests[1].body  # the same whole input
    server.assert_script_used()


CONTEXT = "This model's maximum context length is 128000 tokens."


async def test_a_bad_request_fails_the_turn_with_the_providers_message(
    server: ProviderServer,
) -> None:
    server.script(*[openai_error(400, f"{CONTEXT} Key {KEY} was used.")] * 3)
    flow = openai_flow(server)
    done = await one_turn(flow, "Hi")
    assert session_attention(done) is SessionAttention.TURN_FAILED
    assert done.state is not None
    assert done.state.last_turn_error == (
        f"openai model call failed with HTTP 400: {CONTEXT} Key [redacted] was used."
    )
    assert assistant_texts(done) == []


async def test_a_bad_request_burns_no_retries(server: ProviderServer) -> None:
    server.script(openai_error(400, CONTEXT))
    flow = openai_flow(server)
    done = await one_turn(flow, "Hi")
    assert done.state is not None
    assert done.state.last_turn_error == f"openai model call failed with HTTP 400: {CONTEXT}"
    assert len(server.requests) == 1


async def test_a_stream_cut_mid_answer_is_retried_and_nothing_half_is_stored(
    server: ProviderServer,
) -> None:
    events = responses_stream([message_item("msg_1", "Order 7 is somewhere between here and")])
    server.script(sse_reply(events, cut_after=4), responses_reply([message_item("msg_2", ANSWER)]))
    flow = openai_flow(server)
    async with LocalRuntime(None, [flow], poll_interval=FAST) as runtime:
        done = await run_turn(runtime, flow, "Where is order 7?")
        stream = await stream_events(runtime, flow)
    assert done.state is not None
    assert done.state.last_turn_error is None
    assert assistant_texts(done) == [ANSWER]
    assert len(server.requests) == 2
    assert json.dumps(server.requests[1].body) == json.dumps(server.requests[0].body)
    # The cut attempt's deltas reached the Stream under attempt 1; the answer is attempt 2's.
    attempts = {event.attempt for event in stream if event.type == "text_delta"}
    assert attempts == {1, 2}
    server.assert_script_used()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


async def test_a_provider_not_listening_fails_the_turn_without_an_http_status() -> None:
    port = free_port()
    model = LiteLLMModelClient(
        "anthropic/claude-sonnet-4-5",
        api_base=f"http://127.0.0.1:{port}",
        api_key_provider=lambda: KEY,
    )
    agent = AgentDefinition(name="support", instructions="You help with orders.", model=model)
    options = dataclasses.replace(
        builtin_agent_session_options(agent), run_model_limit=RunModelLimit(maximum_attempts=1)
    )
    flow = AgentSessionFlow(BuiltinLoopAgentRunner(agent), flow_type="Unreached", options=options)
    async with LocalRuntime(None, [flow], poll_interval=FAST) as runtime:
        failed = await run_turn(runtime, flow, "Hi")
        async with ProviderServer(port=port) as server:
            server.script(anthropic_reply([{"type": "text", "text": "Hello."}]))
            answered = await run_turn(runtime, flow, "Hi again")
    assert failed.state is not None
    assert failed.state.last_turn_error == (
        f"anthropic model call failed: could not connect: Cannot connect to host "
        f"127.0.0.1:{port} [Connect call failed ('127.0.0.1', {port})]"
    )
    assert answered.state is not None
    assert answered.state.last_turn_error is None
    assert assistant_texts(answered) == ["Hello."]
    server.assert_script_used()


async def test_a_refusal_is_the_answer_the_user_reads_and_the_model_sees_again(
    server: ProviderServer,
) -> None:
    refusal = refusal_item("msg_1", "I can't help with that.")
    server.script(responses_reply([refusal]), responses_reply([message_item("msg_2", ANSWER)]))
    flow = openai_flow(server)
    async with LocalRuntime(None, [flow], poll_interval=FAST) as runtime:
        refused = await run_turn(runtime, flow, "Refund everything.")
        events = await stream_events(runtime, flow)
        answered = await run_turn(runtime, flow, "Where is order 7?")
    assert assistant_texts(refused) == ["I can't help with that."]
    assert texts(events, "text_delta") == ["I can't help with that."]
    assert server.requests[1].body["input"][1] == refusal
    assert assistant_texts(answered)[-1] == ANSWER
    server.assert_script_used()


async def test_a_provider_that_numbers_its_tool_calls_completes_the_turn(
    server: ProviderServer,
) -> None:
    # Servers such as Hugging Face TGI name every call "0": the session refuses an ID
    # repeated in a turn, which failed the turn after every retry.
    server.script(
        chat_reply(
            tool_calls=[("0", "lookup", '{"order_id": "7"}'), ("0", "lookup", '{"order_id": "8"}')]
        ),
        chat_reply(tool_calls=[("0", "lookup", '{"order_id": "9"}')]),
        chat_reply(ANSWER),
    )
    model = LiteLLMModelClient(
        "openai/local-model",
        api="chat_completions",
        api_base=server.url + "/v1",
        api_key_provider=lambda: KEY,
    )
    agent = AgentDefinition(name="support", instructions="You help.", model=model, tools=[lookup])
    flow = builtin_agent_session_flow(agent, flow_type="LiteLLMNumberedCalls")
    done = await one_turn(flow, "Where are orders 7, 8 and 9?")
    assert done.state is not None
    assert done.state.last_turn_error is None
    assert assistant_texts(done)[-1] == ANSWER
    assert len(server.requests) == 3
    replayed = server.requests[2].body["messages"]
    call_ids = [call["id"] for m in replayed for call in m.get("tool_calls") or ()]
    result_ids = [m["tool_call_id"] for m in replayed if m["role"] == "tool"]
    assert call_ids[0] == "0"
    assert len(set(call_ids)) == 3
    assert result_ids == call_ids
    server.assert_script_used()


async def test_a_gemini_tool_turn_completes_and_replays_the_thought_signature(
    server: ProviderServer,
) -> None:
    # LiteLLM keeps Gemini's finish reason only as "intermittent", which the client
    # read as a stream cut short, and puts the signature, "/" and all, in the call ID.
    signature = "CiQB0/e2Kf+thought/signature=="
    call = {"functionCall": {"name": "lookup", "args": {"order_id": "7"}}}
    server.script(
        gemini_reply([{**call, "thoughtSignature": signature}]), gemini_reply([{"text": ANSWER}])
    )
    model = LiteLLMModelClient(
        "gemini/gemini-3-pro-preview", api_base=server.url, api_key_provider=lambda: KEY
    )
    agent = AgentDefinition(name="support", instructions="You help.", model=model, tools=[lookup])
    flow = builtin_agent_session_flow(agent, flow_type="LiteLLMGemini")
    async with LocalRuntime(None, [flow], poll_interval=FAST) as runtime:
        done = await run_turn(runtime, flow, "Where is order 7?")
        events = await stream_events(runtime, flow)
    assert done.state is not None
    assert done.state.last_turn_error is None
    assert assistant_texts(done)[-1] == ANSWER
    assert "".join(texts(events, "text_delta")) == ANSWER
    assert len(server.requests) == 2
    model_turn, tool_turn = server.requests[1].body["contents"][1:]
    (sent_call,) = model_turn["parts"]
    assert sent_call["thoughtSignature"] == signature
    assert sent_call["function_call"]["id"] == tool_turn["parts"][0]["function_response"]["id"]
    server.assert_script_used()
