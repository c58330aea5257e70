"""The routing, forced tool choice and options rules of the LiteLLM client, as tables."""

from __future__ import annotations

from typing import Any

import pytest
from litellm.llms.vertex_ai.common_utils import VertexAIModelRoute, get_vertex_ai_model_route

from dex_agents.adapters.litellm.answer_ids import litellm_names_the_answer
from dex_agents.adapters.litellm.options import (
    CREDENTIAL_KEYS,
    RESERVED_KEYS,
    check_options,
    merged_options,
    responses_include,
)
from dex_agents.adapters.litellm.routing import (
    CHAT_COMPLETIONS_API,
    RESPONSES_API,
    ModelRoute,
    ToolResultImages,
    route_model,
)
from dex_agents.adapters.litellm.tool_choice import accepts_forced_tool_choice

IN_RESULT = ToolResultImages.IN_RESULT
FOLLOW_UP = ToolResultImages.FOLLOW_UP_MESSAGE
OMITTED = ToolResultImages.OMITTED


@pytest.mark.parametrize(
    ("model", "provider", "provider_model", "api", "expected_api", "images"),
    [
        ("openai/gpt-5-mini", "openai", "gpt-5-mini", None, RESPONSES_API, IN_RESULT),
        ("gpt-5-mini", "openai", "gpt-5-mini", None, RESPONSES_API, IN_RESULT),
        ("openai/gpt-4.1", "openai", "gpt-4.1", "chat_completions", CHAT_COMPLETIONS_API, FOLLOW_UP),
        ("anthropic/claude-sonnet-4-5", "anthropic", "claude-sonnet-4-5", None, CHAT_COMPLETIONS_API, IN_RESULT),
        ("anthropic/claude-sonnet-4-5", "anthropic", "claude-sonnet-4-5", "responses", RESPONSES_API, IN_RESULT),
        ("bedrock/anthropic.claude-3-5-sonnet", "bedrock", "anthropic.claude-3-5-sonnet", None, CHAT_COMPLETIONS_API, IN_RESULT),
        ("vertex_ai/claude-sonnet-4-5", "vertex_ai", "claude-sonnet-4-5", None, CHAT_COMPLETIONS_API, FOLLOW_UP),
        ("vertex_ai/gemini-2.5-pro", "vertex_ai", "gemini-2.5-pro", None, CHAT_COMPLETIONS_API, OMITTED),
        ("vertex_ai_beta/gemini-2.5-pro", "vertex_ai_beta", "gemini-2.5-pro", None, CHAT_COMPLETIONS_API, OMITTED),
        ("vertex_ai/mistral-large", "vertex_ai", "mistral-large", None, CHAT_COMPLETIONS_API, FOLLOW_UP),
        ("gemini/gemini-2.5-flash", "gemini", "gemini-2.5-flash", None, CHAT_COMPLETIONS_API, OMITTED),
        ("gemini/gemini-3-pro", "gemini", "gemini-3-pro", "responses", RESPONSES_API, OMITTED),
        ("azure/gpt-5", "azure", "gpt-5", None, CHAT_COMPLETIONS_API, FOLLOW_UP),
        ("azure/gpt-5", "azure", "gpt-5", "responses", RESPONSES_API, IN_RESULT),
        ("hosted_vllm/llama", "hosted_vllm", "llama", None, CHAT_COMPLETIONS_API, FOLLOW_UP),
    ],
)  # fmt: skip
def test_which_api_and_where_tool_result_images_go(
    model: str,
    provider: str,
    provider_model: str,
    api: Any,
    expected_api: str,
    images: ToolResultImages,
) -> None:
    route = route_model(model, provider, provider_model, api)
    assert route == ModelRoute(
        model=model,
        provider=provider,
        provider_model=provider_model,
        api=expected_api,
        tool_result_images=images,
        gemini=images is OMITTED,
    )


PSC = "https://10.96.32.8"
"""A Private Service Connect endpoint's ``api_base``."""


@pytest.mark.parametrize(
    ("provider", "provider_model", "api_base", "base_model", "gemini"),
    [
        ("gemini", "gemini-2.5-pro", None, None, True),
        ("vertex_ai", "gemini-2.5-pro", None, None, True),
        ("vertex_ai", "gemini/4965075652664360960", None, None, True),
        ("vertex_ai", "4965075652664360960", PSC, None, True),
        ("vertex_ai", "4965075652664360960", None, "vertex_ai/gemini-2.5-pro", True),
        ("vertex_ai", "4965075652664360960", None, None, False),  # a Model Garden deployment
        ("vertex_ai", "4965075652664360960", None, "vertex_ai/llama-3", False),
        ("vertex_ai", "openai/4965075652664360960", PSC, None, False),
        ("vertex_ai", "claude-sonnet-4-5", None, None, False),
        ("vertex_ai", "mistral-large", PSC, None, False),
        ("vertex_ai_beta", "gemini-2.5-pro", None, None, True),
        ("vertex_ai_beta", "4965075652664360960", None, None, True),
        ("openai", "gemini-2.5-pro", None, None, False),  # an OpenAI-compatible proxy
    ],
)  # fmt: skip
def test_which_models_litellm_sends_to_gemini(
    provider: str, provider_model: str, api_base: str | None, base_model: str | None, gemini: bool
) -> None:
    route = route_model(
        f"{provider}/{provider_model}",
        provider,
        provider_model,
        None,
        api_base=api_base,
        base_model=base_model,
    )
    assert route.gemini is gemini
    assert (route.tool_result_images is OMITTED) is gemini
    if provider == "vertex_ai":
        # The rule is LiteLLM's own choice of a Vertex AI model's handler.
        params = {"api_base": api_base, "base_model": base_model}
        chosen = get_vertex_ai_model_route(provider_model, params)
        assert (chosen is VertexAIModelRoute.GEMINI) is gemini


def test_an_unknown_api_is_refused() -> None:
    with pytest.raises(
        ValueError, match=r'^api must be None, "responses" or "chat_completions", not \'chat\'$'
    ):
        route_model("openai/gpt-5", "openai", "gpt-5", "chat")


def _route(model: str, provider: str, provider_model: str) -> ModelRoute:
    return route_model(model, provider, provider_model, None)


ANTHROPIC = _route("anthropic/claude-sonnet-4-5", "anthropic", "claude-sonnet-4-5")
BEDROCK_CLAUDE = _route(
    "bedrock/us.anthropic.claude-sonnet-4-5-v1:0", "bedrock", "us.anthropic.claude-sonnet-4-5-v1:0"
)
BEDROCK_NOVA = _route("bedrock/amazon.nova-pro-v1:0", "bedrock", "amazon.nova-pro-v1:0")
VERTEX_CLAUDE = _route("vertex_ai/claude-sonnet-4-5", "vertex_ai", "claude-sonnet-4-5")
AZURE_AI_CLAUDE = _route("azure_ai/claude-sonnet-4-5", "azure_ai", "claude-sonnet-4-5")
AZURE_AI_GPT = _route("azure_ai/gpt-5", "azure_ai", "gpt-5")
GEMINI = _route("gemini/gemini-2.5-pro", "gemini", "gemini-2.5-pro")
OPENAI = _route("openai/gpt-5", "openai", "gpt-5")
OPUS_55 = _route("anthropic/claude-opus-5-5", "anthropic", "claude-opus-5-5")
SONNET_55_ROUTER = _route(
    "openrouter/anthropic/claude-sonnet-5.5", "openrouter", "anthropic/claude-sonnet-5.5"
)
OPUS_45 = _route("anthropic/claude-opus-4-5", "anthropic", "claude-opus-4-5")

ENABLED = {"thinking": {"type": "enabled", "budget_tokens": 2048}}


@pytest.mark.parametrize(
    ("route", "settings", "accepts"),
    [
        (ANTHROPIC, {}, True),
        (ANTHROPIC, ENABLED, False),
        (ANTHROPIC, {"thinking": {"type": "adaptive"}}, False),
        (ANTHROPIC, {"thinking": {"type": "disabled"}}, True),
        (ANTHROPIC, {"thinking": None}, True),
        (ANTHROPIC, {"reasoning_effort": "low"}, False),
        (ANTHROPIC, {"reasoning_effort": "none"}, True),
        (ANTHROPIC, {"temperature": 0.2}, True),
        (BEDROCK_CLAUDE, ENABLED, False),
        (BEDROCK_CLAUDE, {"reasoning_effort": "high"}, False),
        (BEDROCK_NOVA, {"reasoning_effort": "high"}, True),
        (VERTEX_CLAUDE, ENABLED, False),
        (AZURE_AI_CLAUDE, ENABLED, False),
        (AZURE_AI_CLAUDE, {"reasoning_effort": "high"}, False),
        (AZURE_AI_CLAUDE, {}, True),
        (AZURE_AI_GPT, {"reasoning_effort": "high"}, True),
        (GEMINI, {"reasoning_effort": "high"}, True),
        (GEMINI, {"thinking": {"type": "enabled", "budget_tokens": 1024}}, True),
        (OPENAI, {"reasoning": {"effort": "high"}}, True),
        (OPENAI, {"reasoning_effort": "high"}, True),
        (OPUS_55, {}, False),
        (SONNET_55_ROUTER, {}, False),
        (OPUS_45, {}, True),
    ],
)
def test_which_calls_accept_a_forced_tool_choice(
    route: ModelRoute, settings: dict[str, Any], accepts: bool
) -> None:
    assert accepts_forced_tool_choice(route, settings) is accepts


@pytest.mark.parametrize("key", sorted(RESERVED_KEYS))
def test_request_options_may_not_set_what_the_client_sets(key: str) -> None:
    with pytest.raises(ValueError, match=f"^request_options may not set '{key}': "):
        check_options("request_options", {key: "x"})


@pytest.mark.parametrize("key", sorted(CREDENTIAL_KEYS))
def test_credentials_are_refused_and_never_shown(key: str) -> None:
    with pytest.raises(ValueError, match=f"may not hold the credential '{key}'") as caught:
        merged_options({}, {key: "sk-live-very-secret"})
    assert "sk-live-very-secret" not in str(caught.value)
    assert "api_key_provider" in str(caught.value)


def test_model_settings_go_over_request_options() -> None:
    merged = merged_options({"timeout": 30, "temperature": 0.1}, {"temperature": 0.7})
    assert merged == {"timeout": 30, "temperature": 0.7}


@pytest.mark.parametrize(
    ("options", "include"),
    [
        ({}, ["reasoning.encrypted_content"]),
        ({"include": ["reasoning.encrypted_content"]}, ["reasoning.encrypted_content"]),
        (
            {"include": ["message.output_text.logprobs"]},
            ["reasoning.encrypted_content", "message.output_text.logprobs"],
        ),
    ],
)
def test_the_responses_include_always_asks_for_encrypted_reasoning(
    options: dict[str, Any], include: list[str]
) -> None:
    assert responses_include(options) == include


@pytest.mark.parametrize(
    ("model", "provider", "provider_model", "litellms"),
    [
        ("anthropic/claude-sonnet-4-5", "anthropic", "claude-sonnet-4-5", True),
        ("vertex_ai/claude-sonnet-4-5@20250929", "vertex_ai", "claude-sonnet-4-5@20250929", True),
        ("vertex_ai_beta/claude-opus-4-1", "vertex_ai_beta", "claude-opus-4-1", False),  # sent to Gemini
        ("azure_ai/Claude-Sonnet-4-5", "azure_ai", "Claude-Sonnet-4-5", True),
        ("bedrock/amazon.nova-pro-v1:0", "bedrock", "amazon.nova-pro-v1:0", True),
        ("bedrock/us.anthropic.claude-sonnet-4-5-v1:0", "bedrock", "us.anthropic.claude-sonnet-4-5-v1:0", True),
        ("vertex_ai/gemini-2.5-pro", "vertex_ai", "gemini-2.5-pro", False),
        ("vertex_ai/mistral-large", "vertex_ai", "mistral-large", False),
        ("azure_ai/gpt-4o", "azure_ai", "gpt-4o", False),
        ("gemini/gemini-2.5-flash", "gemini", "gemini-2.5-flash", False),
        ("openai/gpt-4.1", "openai", "gpt-4.1", False),
    ],
)  # fmt: skip
def test_which_answers_litellm_names_with_an_id_of_its_own(
    model: str, provider: str, provider_model: str, litellms: bool
) -> None:
    assert litellm_names_the_answer(route_model(model, provider, provider_model, None)) is litellms


@pytest.mark.parametrize(
    ("url", "litellms"),
    [
        (None, True),
        ("https://bedrock-runtime.us-east-1.amazonaws.com/model/amazon.nova-pro-v1%3A0/converse-stream", True),
        ("https://bedrock-runtime.us-east-1.amazonaws.com/model/x/invoke-with-response-stream", True),
        ("https://bedrock-runtime.us-east-1.amazonaws.com/openai/v1/chat/completions", False),
    ],
)  # fmt: skip
def test_a_bedrock_answer_is_named_by_litellm_unless_its_chat_completions_answered(
    url: str | None, litellms: bool
) -> None:
    route = route_model("bedrock/openai.gpt-6-sol", "bedrock", "openai.gpt-6-sol", None)
    assert litellm_names_the_answer(route, url) is litellms
