"""An answer the output token limit cut before any text or tool call: the turn fails.

Chat Completions ends it with ``length`` (LiteLLM's name for Anthropic's
``max_tokens``, and here for Anthropic's and Bedrock's
``model_context_window_exceeded``, which LiteLLM reads as ``stop``), the
Responses API with a ``response.incomplete`` whose reason is ``max_output_tokens``, its tokens spent on reasoning. Such an answer
read as an empty normal one; the turn now ends with ``output_limit_turn_error``,
keeping the reasoning, and no empty assistant message is stored. An answer
cut after some text is the model's answer, as before. A context summary cut so
fails ``CompactContext`` the same way, since the same request is cut again.
"""

from __future__ import annotations

from datetime import UTC, datetime

import litellm
import pytest

from dex_agents import AgentSessionFlow
from dex_agents.app.builtin_loop.items import user_text_message
from dex_agents.app.builtin_loop.runner import BuiltinLoopAgentRunner
from dex_agents.builtin_loop import AgentDefinition, builtin_agent_session_flow
from dex_agents.domain.attention import SessionAttention, session_attention
from dex_agents.domain.context_summary import ContextSummaryRequest
from dex_agents.domain.messages import AgentMessage, MessageRole
from dex_agents.domain.model_io import output_limit_turn_error
from dex_agents.ports.errors import ModelCallError
from tests.adapters.litellm.bedrock_scripts import bedrock_env, converse_reply
from tests.adapters.litellm.provider_scripts import (
    anthropic_stream,
    chat_reply_finishing,
    incomplete_responses_reply,
    message_item,
    reasoning_item,
)
from tests.adapters.litellm.provider_server import ProviderServer, Reply, sse_reply
from tests.adapters.litellm.session_support import loopback_client, one_turn

litellm.suppress_debug_info = True

PARTIAL = "Here is the first part of"
BLANK = "\n\n"
"""Text that is no text: the line breaks a model may send before its answer."""
THINKING = "Working out the order's route."


def _responses(text: str | None) -> Reply:
    items = [reasoning_item("rs_1", THINKING, "gAAAAB-encrypted")]
    if text is not None:
        items.append({**message_item("msg_1", text), "status": "incomplete"})
    return incomplete_responses_reply(items, "max_output_tokens")


def _chat(text: str | None) -> Reply:
    return chat_reply_finishing(text, "length")


def _anthropic(text: str | None) -> Reply:
    blocks = [] if text is None else [{"type": "text", "text": text}]
    return sse_reply(anthropic_stream(blocks, stop_reason="max_tokens"))


def _anthropic_context(text: str | None) -> Reply:
    # Claude (Sonnet 4.5 on) stops an answer that filled the context window so;
    # LiteLLM does not know the reason and read it as "stop".
    blocks = [] if text is None else [{"type": "text", "text": text}]
    return sse_reply(anthropic_stream(blocks, stop_reason="model_context_window_exceeded"))


def _bedrock_context(text: str | None) -> Reply:
    # Bedrock's Converse stream names the same reason in its binary messageStop event.
    return converse_reply(text, stop_reason="model_context_window_exceeded")


REPLIES = {
    "responses": _responses,
    "chat": _chat,
    "anthropic": _anthropic,
    "anthropic_context": _anthropic_context,
    "bedrock_context": _bedrock_context,
}
REASONS = {
    "responses": "max_output_tokens",
    "chat": "length",
    "anthropic": "length",
    "anthropic_context": "length",
    "bedrock_context": "length",
}
API = {"anthropic_context": "anthropic", "bedrock_context": "bedrock"}
"""The client a reply is for, where its name is not the client's."""


@pytest.fixture(autouse=True)
def _aws(monkeypatch: pytest.MonkeyPatch) -> None:
    bedrock_env(monkeypatch)


def _flow(server: ProviderServer, api: str) -> AgentSessionFlow:
    model = loopback_client(server, API.get(api, api))
    agent = AgentDefinition(name="support", instructions="Help.", model=model)
    return builtin_agent_session_flow(agent, flow_type="Limited")


@pytest.mark.parametrize("text", [None, BLANK])
@pytest.mark.parametrize("api", list(REPLIES))
async def test_an_answer_cut_empty_at_the_token_limit_fails_the_turn_and_names_it(
    server: ProviderServer, api: str, text: str | None
) -> None:
    server.script(REPLIES[api](text))
    flow = _flow(server, api)
    done = await one_turn(flow, "Hi")
    assert done.state is not None
    assert done.state.last_turn_error == output_limit_turn_error(REASONS[api])
    assert session_attention(done) is SessionAttention.TURN_FAILED
    answers = [m for m in done.messages if m.role is MessageRole.ASSISTANT]
    assert all(not m.text for m in answers)
    # The reasoning the tokens went to is kept; an empty answer is not stored.
    assert len(answers) == (1 if api == "responses" else 0)
    assert len(server.requests) == 1  # the same request is cut again: no retry
    server.assert_script_used()


@pytest.mark.parametrize("api", list(REPLIES))
async def test_an_answer_cut_after_some_text_is_the_models_answer(
    server: ProviderServer, api: str
) -> None:
    server.script(REPLIES[api](PARTIAL))
    flow = _flow(server, api)
    done = await one_turn(flow, "Hi")
    assert done.state is not None
    assert done.state.last_turn_error is None
    assert PARTIAL in [m.text for m in done.messages if m.role is MessageRole.ASSISTANT]
    server.assert_script_used()


@pytest.mark.parametrize("text", [None, BLANK])
@pytest.mark.parametrize("api", list(REPLIES))
async def test_a_summary_cut_empty_at_the_token_limit_fails_naming_it_without_a_retry(
    server: ProviderServer, api: str, text: str | None
) -> None:
    # Read as "returned no text", a ValueError, the same summary request was
    # retried and cut again, each a paid call, and the turn's error hid why; a
    # summary of line breaks alone is as empty.
    server.script(REPLIES[api](text))
    agent = AgentDefinition(
        name="support", instructions="Help.", model=loopback_client(server, API.get(api, api))
    )
    message = AgentMessage.from_framework_message(
        user_text_message("Where is order 7?"),
        sequence=1,
        turn_id="t1",
        created_at=datetime(2026, 1, 1, tzinfo=UTC),
    )
    request = ContextSummaryRequest(
        flow_id="s1",
        turn_id="t1",
        messages=(message,),
        through_sequence=1,
        input_token_budget=100_000,
    )
    with pytest.raises(ModelCallError) as caught:
        await BuiltinLoopAgentRunner(agent).summarize_context(request)
    assert str(caught.value) == output_limit_turn_error(REASONS[api])
    assert caught.value.retryable is False
    server.assert_script_used()
