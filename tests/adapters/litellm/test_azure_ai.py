"""Claude on Azure AI (``azure_ai/claude-...``), which LiteLLM sends to Anthropic's Messages API.

LiteLLM posts such a call to the deployment's ``/anthropic/v1/messages`` with
Anthropic's own request body, so Anthropic's rules hold for it: extended
thinking refuses a forced tool choice ("Plans and plan mode").
"""

from __future__ import annotations

import litellm
import pytest

from dex_agents.builtin_loop import AgentDefinition
from dex_agents.domain.model_io import (
    ModelRequest,
    ModelToolChoice,
    ModelToolDefinition,
    UserTextItem,
)
from dex_agents.litellm import LiteLLMModelClient
from tests.adapters.litellm.provider_scripts import anthropic_reply
from tests.adapters.litellm.provider_server import ProviderServer
from tests.adapters.litellm.recording_output import RecordingOutput
from tests.adapters.litellm.session_support import KEY

litellm.suppress_debug_info = True

THINKING = {"thinking": {"type": "enabled", "budget_tokens": 2048}}
PLAN = ModelToolDefinition(
    name="write_todos", description="Write the plan.", parameters_schema={"type": "object"}
)


def _client(url: str) -> LiteLLMModelClient:
    return LiteLLMModelClient(
        "azure_ai/claude-sonnet-4-5", api_base=url, api_key_provider=lambda: KEY
    )


async def test_claude_on_azure_ai_is_sent_anthropics_thinking_and_tool_choice(
    server: ProviderServer, output: RecordingOutput
) -> None:
    # What Anthropic refuses ("Thinking may not be enabled when tool_choice
    # forces tool use"), so the client must not accept a forced choice here.
    server.script(anthropic_reply([{"type": "text", "text": "Planned."}]))
    request = ModelRequest(
        instructions="Plan.",
        items=(UserTextItem(text="Plan the migration"),),
        tools=(PLAN,),
        tool_choice=ModelToolChoice.REQUIRED,
        settings=THINKING,
    )
    await _client(server.url).call_model(request, output)
    (sent,) = server.requests
    assert sent.path == "/anthropic/v1/messages"
    assert (sent.body["thinking"], sent.body["tool_choice"]) == (
        THINKING["thinking"],
        {"type": "any"},
    )
    server.assert_script_used()


def test_claude_on_azure_ai_with_thinking_refuses_a_forced_planning_tool_choice() -> None:
    client = _client("http://127.0.0.1:9")
    assert client.supports_forced_tool_choice(THINKING) is False
    assert client.supports_forced_tool_choice({}) is True
    with pytest.raises(ValueError, match="required"):
        AgentDefinition(
            name="planner",
            instructions="Plan.",
            model=client,
            model_settings=THINKING,
            planning_tool_choice="required",
        )
