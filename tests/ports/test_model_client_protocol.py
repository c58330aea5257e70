"""The model client port and its optional forced-tool-choice answer.

``client: ModelClient = EchoModelClient()`` is also mypy's check that the fake fits.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from dex_agents.domain.model_io import ModelOutputItem, ModelRequest, ModelResponse, UserTextItem
from dex_agents.ports.event_writer import AgentEventWriter
from dex_agents.ports.model_client import (
    ForcedToolChoiceSupport,
    ModelClient,
    ModelOutputWriter,
    model_supports_forced_tool_choice,
)
from tests.ports.turn_fakes import USAGE, FakeEventWriter


class EchoModelClient:
    async def call_model(self, request: ModelRequest, output: ModelOutputWriter) -> ModelResponse:
        text = f"Demo reply: {request.user_texts[-1]}"
        output.write_reasoning_delta("thinking")
        output.write_text_delta(text)
        return ModelResponse(
            output=[ModelOutputItem(item="{}", provider="demo", api="demo", text=text)],
            usage=USAGE,
        )

    def estimate_input_tokens(self, request: ModelRequest) -> int:
        return len(request.instructions) // 3


class ThinkingModelClient(EchoModelClient):
    def supports_forced_tool_choice(self, settings: Mapping[str, Any]) -> bool:
        return "thinking" not in settings


async def test_a_model_client_streams_to_the_turn_event_writer() -> None:
    client: ModelClient = EchoModelClient()
    writer: AgentEventWriter = FakeEventWriter()
    output: ModelOutputWriter = writer  # every event writer is a model output writer
    request = ModelRequest(instructions="Help.", items=(UserTextItem(text="Hi"),))
    response = await client.call_model(request, output)
    assert response.text == "Demo reply: Hi"
    assert isinstance(writer, FakeEventWriter)
    assert writer.events == [("reasoning_delta", "thinking"), ("text_delta", "Demo reply: Hi")]
    assert isinstance(client, ModelClient)
    assert isinstance(writer, AgentEventWriter)
    assert not isinstance(object(), ModelClient)


@pytest.mark.parametrize(
    ("client", "settings", "supported"),
    [
        (EchoModelClient(), {"thinking": {"type": "enabled"}}, True),
        (ThinkingModelClient(), {}, True),
        (ThinkingModelClient(), {"thinking": {"type": "enabled"}}, False),
    ],
    ids=["no-method-assumes-yes", "asks-yes", "asks-no"],
)
def test_forced_tool_choice_is_asked_only_of_clients_that_answer(
    client: object, settings: Mapping[str, Any], supported: bool
) -> None:
    assert model_supports_forced_tool_choice(client, settings) is supported
    assert isinstance(client, ForcedToolChoiceSupport) is isinstance(client, ThinkingModelClient)
