"""An answer the output token limit cut before any text or tool call: the turn fails.

Chat Completions ends it with ``length`` (LiteLLM's name for Anthropic's
``max_tokens`` too), the Responses API with a ``response.incomplete`` whose
reason is ``max_output_tokens``, its tokens spent on reasoning. Such an answer
read as an empty normal one; the turn now ends with ``output_limit_turn_error``,
keeping the reasoning, and no empty assistant message is stored. An answer
cut after some text is the model's answer, as before.
"""

from __future__ import annotations

import litellm
import pytest

from dex_agents import AgentSessionFlow
from dex_agents.builtin_loop import AgentDefinition, builtin_agent_session_flow
from dex_agents.domain.attention import SessionAttention, session_attention
from dex_agents.domain.messages import MessageRole
from dex_agents.domain.model_io import output_limit_turn_error
from dex_agents.local import LocalRuntime
from tests.adapters.litellm.provider_scripts import (
    anthropic_stream,
    chat_reply_finishing,
    incomplete_responses_reply,
    message_item,
    reasoning_item,
)
from tests.adapters.litellm.provider_server import ProviderServer, Reply, sse_reply
from tests.adapters.litellm.session_support import FAST, loopback_client, run_turn

litellm.suppress_debug_info = True

PARTIAL = "Here is the first part of"
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


REPLIES = {"responses": _responses, "chat": _chat, "anthropic": _anthropic}
REASONS = {"responses": "max_output_tokens", "chat": "length", "anthropic": "length"}


def _flow(server: ProviderServer, api: str) -> AgentSessionFlow:
    model = loopback_client(server, api)
    agent = AgentDefinition(name="support", instructions="Help.", model=model)
    return builtin_agent_session_flow(agent, flow_type="Limited")


@pytest.mark.parametrize("api", list(REPLIES))
async def test_an_answer_cut_empty_at_the_token_limit_fails_the_turn_and_names_it(
    server: ProviderServer, api: str
) -> None:
    server.script(REPLIES[api](None))
    flow = _flow(server, api)
    async with LocalRuntime(None, [flow], poll_interval=FAST) as runtime:
        done = await run_turn(runtime, flow, "Hi")
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
    async with LocalRuntime(None, [flow], poll_interval=FAST) as runtime:
        done = await run_turn(runtime, flow, "Hi")
    assert done.state is not None
    assert done.state.last_turn_error is None
    assert PARTIAL in [m.text for m in done.messages if m.role is MessageRole.ASSISTANT]
    server.assert_script_used()
