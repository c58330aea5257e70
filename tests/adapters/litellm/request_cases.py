"""Shared values of the request rule tests: images, routes and stored items."""

from __future__ import annotations

import base64
import hashlib
import json

from dex_agents.adapters.litellm.routing import ModelRoute, route_model
from dex_agents.domain.images import AgentImageReference
from dex_agents.domain.model_io import ModelOutputItem, ModelToolCall

PNG = b"\x89PNG\r\n\x1a\n-first-image"
JPEG = b"\xff\xd8\xff-second-image"


def reference(data: bytes, mime_type: str) -> AgentImageReference:
    sha256 = hashlib.sha256(data).hexdigest()
    return AgentImageReference(
        uri=f"memory://tests/sha256/{sha256}",
        mime_type=mime_type,
        sha256=sha256,
        size_bytes=len(data),
    )


PNG_IMAGE = reference(PNG, "image/png")
JPEG_IMAGE = reference(JPEG, "image/jpeg")
IMAGE_BYTES = {PNG_IMAGE.sha256: PNG, JPEG_IMAGE.sha256: JPEG}
PNG_URL = "data:image/png;base64," + base64.b64encode(PNG).decode()
JPEG_URL = "data:image/jpeg;base64," + base64.b64encode(JPEG).decode()


def route(model: str, provider: str, provider_model: str, api: str | None = None) -> ModelRoute:
    return route_model(model, provider, provider_model, api)


OPENAI_RESPONSES = route("openai/gpt-5-mini", "openai", "gpt-5-mini")
OPENAI_CHAT = route("openai/gpt-4.1", "openai", "gpt-4.1", "chat_completions")
ANTHROPIC = route("anthropic/claude-sonnet-4-5", "anthropic", "claude-sonnet-4-5")
BEDROCK = route("bedrock/anthropic.claude-sonnet-4-5", "bedrock", "anthropic.claude-sonnet-4-5")
VERTEX_CLAUDE = route("vertex_ai/claude-sonnet-4-5", "vertex_ai", "claude-sonnet-4-5")
GEMINI = route("gemini/gemini-2.5-pro", "gemini", "gemini-2.5-pro")
GEMINI_RESPONSES = route("gemini/gemini-3-pro", "gemini", "gemini-3-pro", "responses")


def _json(data: object) -> str:
    return json.dumps(data, separators=(",", ":"))


REASONING_JSON = {
    "id": "rs_1",
    "type": "reasoning",
    "summary": [{"type": "summary_text", "text": "Need a screenshot."}],
    "encrypted_content": "gAAAAB+enc/rypted==",
}
REASONING = ModelOutputItem(
    item=_json(REASONING_JSON),
    provider="openai",
    api="responses",
    reasoning="Need a screenshot.",
)
CALL = ModelToolCall(tool_call_id="call_1", tool_name="screenshot", arguments='{"page":"home"}')
FUNCTION_CALL_JSON = {
    "id": "fc_1",
    "type": "function_call",
    "status": "completed",
    "call_id": "call_1",
    "name": "screenshot",
    "arguments": '{"page":"home"}',
}
FUNCTION_CALL = ModelOutputItem(
    item=_json(FUNCTION_CALL_JSON), provider="openai", api="responses", tool_calls=(CALL,)
)
MESSAGE_JSON = {
    "id": "msg_1",
    "type": "message",
    "status": "completed",
    "role": "assistant",
    "content": [{"type": "output_text", "text": "Taking one.", "annotations": []}],
}
MESSAGE = ModelOutputItem(
    item=_json(MESSAGE_JSON), provider="openai", api="responses", text="Taking one."
)

ANTHROPIC_JSON = {
    "role": "assistant",
    "content": "Taking one.",
    "tool_calls": [
        {
            "id": "call_1",
            "type": "function",
            "function": {"name": "screenshot", "arguments": '{"page":"home"}'},
        }
    ],
    "thinking_blocks": [
        {"type": "thinking", "thinking": "Need a screenshot.", "signature": "EqQB+sig/=="},
        {"type": "redacted_thinking", "data": "EmwKAhgB+redacted=="},
    ],
    "reasoning_content": "Need a screenshot.",
}
ANTHROPIC_ITEM = ModelOutputItem(
    item=_json(ANTHROPIC_JSON),
    provider="anthropic",
    api="chat_completions",
    text="Taking one.",
    tool_calls=(CALL,),
    reasoning="Need a screenshot.",
)
