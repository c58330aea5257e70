"""Request rules real providers enforce and ``ProviderServer(refuse=...)`` applies on loopback.

A rule returns the reply the provider refuses a request with, or ``None`` for a
request it accepts, so a test fails the way production would.
"""

from __future__ import annotations

from tests.adapters.litellm.provider_scripts import openai_error
from tests.adapters.litellm.provider_server import RecordedRequest, Reply


def openai_chat_rules(request: RecordedRequest) -> Reply | None:
    """OpenAI's and Azure OpenAI's Chat Completions: an assistant message needs content.

    The API reference: assistant ``content`` is "Required unless ``tool_calls``
    or ``function_call`` is specified"; a message without both is a 400.
    """
    if not request.path.split("?", 1)[0].endswith("/chat/completions"):
        return None
    for index, message in enumerate((request.body or {}).get("messages", ())):
        if message.get("role") != "assistant" or message.get("tool_calls"):
            continue
        if "content" not in message:
            return openai_error(400, f"Missing required parameter: 'messages.[{index}].content'.")
        if message["content"] is None:
            return openai_error(
                400,
                f"Invalid value for 'content': expected a string, got null. "
                f"(messages.[{index}].content)",
            )
    return None
