"""An answer a provider's content filter stopped: the turn fails and says so.

OpenAI ends it with ``content_filter`` (a Chat Completions finish reason, or a
Responses API ``response.incomplete`` with that reason), Anthropic with the
stop reason ``refusal``, Gemini with ``SAFETY`` and Bedrock with
``guardrail_intervened``, which LiteLLM reads as ``content_filter``, and Bedrock
with ``content_filtered``, which LiteLLM reads as ``stop`` and the client as
``content_filter``. Such an answer, empty or cut after some text, is no normal
answer: the turn ends with ``CONTENT_FILTER_TURN_ERROR``, keeping any text that
came, and no empty assistant message is stored. An answer with tool calls is
not failed: its calls run, one the filter cut reads ``invalid arguments``, and
the model is asked again.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import litellm
import pytest

from dex_agents import AgentSessionFlow
from dex_agents.builtin_loop import AgentDefinition, builtin_agent_session_flow
from dex_agents.domain.attention import SessionAttention, session_attention
from dex_agents.domain.messages import MessageRole
from dex_agents.domain.model_io import CONTENT_FILTER_TURN_ERROR
from dex_agents.litellm import LiteLLMModelClient
from tests.adapters.litellm.bedrock_scripts import bedrock_env, converse_reply
from tests.adapters.litellm.provider_scripts import (
    Event,
    anthropic_stream,
    chat_reply,
    chat_reply_finishing,
    chat_stream,
    incomplete_responses_reply,
    message_item,
    pieces,
)
from tests.adapters.litellm.provider_server import ProviderServer, Reply, sse_reply
from tests.adapters.litellm.session_support import (
    KEY,
    lookup,
    loopback_client,
    one_turn,
)

litellm.suppress_debug_info = True

PARTIAL = "Here is the first part of"


def _responses(text: str | None) -> Reply:
    items = [] if text is None else [{**message_item("msg_1", text), "status": "incomplete"}]
    return incomplete_responses_reply(items, "content_filter")


def _chat(text: str | None) -> Reply:
    return chat_reply_finishing(text, "content_filter")


def _anthropic(text: str | None) -> Reply:
    blocks = [] if text is None else [{"type": "text", "text": text}]
    return sse_reply(anthropic_stream(blocks, stop_reason="refusal"))


def _gemini(text: str | None) -> Reply:
    def chunk(parts: list[dict[str, Any]], finish: str | None = None) -> Event:
        candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
        data: dict[str, Any] = {"candidates": [candidate], "modelVersion": "gemini-2.5-pro"}
        if finish is not None:
            candidate["finishReason"] = finish
            data["usageMetadata"] = {"promptTokenCount": 40, "totalTokenCount": 40}
        return (None, data)

    events = [chunk([{"text": piece}]) for piece in pieces(text)] if text else []
    return sse_reply([*events, chunk([], "SAFETY")])


def _bedrock(reason: str) -> Callable[[str | None], Reply]:
    return lambda text: converse_reply(text, stop_reason=reason)


def _flow(server: ProviderServer, api: str) -> AgentSessionFlow:
    model = loopback_client(server, API.get(api, api))
    agent = AgentDefinition(name="support", instructions="Help.", model=model)
    return builtin_agent_session_flow(agent, flow_type="Filtered")


REPLIES: dict[str, Callable[[str | None], Reply]] = {
    "responses": _responses,
    "chat": _chat,
    "anthropic": _anthropic,
    "gemini": _gemini,
    "bedrock_guardrail": _bedrock("guardrail_intervened"),
    "bedrock_filtered": _bedrock("content_filtered"),
}
API = {"bedrock_guardrail": "bedrock", "bedrock_filtered": "bedrock"}
"""The client a reply is for, where its name is not the client's."""


@pytest.fixture(autouse=True)
def _aws(monkeypatch: pytest.MonkeyPatch) -> None:
    bedrock_env(monkeypatch)


@pytest.mark.parametrize("api", list(REPLIES))
@pytest.mark.parametrize("text", [None, PARTIAL], ids=["empty", "cut"])
async def test_a_filtered_answer_fails_the_turn_and_names_the_filter(
    server: ProviderServer, api: str, text: str | None
) -> None:
    server.script(REPLIES[api](text))
    flow = _flow(server, api)
    done = await one_turn(flow, "Hi")
    assert done.state is not None
    assert done.state.last_turn_error == CONTENT_FILTER_TURN_ERROR
    assert session_attention(done) is SessionAttention.TURN_FAILED
    answers = [m.text for m in done.messages if m.role is MessageRole.ASSISTANT]
    assert answers == ([] if text is None else [text])  # never an empty answer
    assert len(server.requests) == 1  # the same request is filtered again: no retry
    server.assert_script_used()


async def test_a_filtered_answer_with_a_tool_call_runs_it_and_asks_again(
    server: ProviderServer,
) -> None:
    # The filter stopped the call inside its arguments: the README says what follows.
    arguments = '{"order_id":"7"}'
    events = []
    for name, data in chat_stream(None, [("call_1", "lookup", arguments)]):
        choices = data["choices"] if isinstance(data, dict) else []
        delta = choices[0]["delta"] if choices else {}
        if (
            delta.get("tool_calls", [{}])[0].get("function", {}).get("arguments")
            == arguments[len(arguments) // 2 :]
        ):
            continue  # the arguments' second half never came
        if choices and choices[0]["finish_reason"] == "tool_calls":
            data = {**data, "choices": [{**choices[0], "finish_reason": "content_filter"}]}
        events.append((name, data))
    server.script(sse_reply(events), chat_reply("Which order do you mean?"))
    model = LiteLLMModelClient(
        "openai/gpt-4.1",
        api="chat_completions",
        api_base=server.url + "/v1",
        api_key_provider=lambda: KEY,
    )
    agent = AgentDefinition(name="support", instructions="Help.", model=model, tools=[lookup])
    flow = builtin_agent_session_flow(agent, flow_type="Filtered")
    done = await one_turn(flow, "Hi")
    assert done.state is not None
    assert done.state.last_turn_error is None
    assert done.messages[-1].text == "Which order do you mean?"
    sent = server.requests[1].body["messages"]
    assert sent[2]["tool_calls"][0]["function"]["arguments"] == "{}"
    assert sent[3]["content"].startswith("The tool call failed: invalid arguments for lookup")
    server.assert_script_used()
