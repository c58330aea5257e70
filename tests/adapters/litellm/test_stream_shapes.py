"""Answers real providers stream in shapes the happy path does not: each is read whole.

A Responses stream whose ``response.completed`` holds an empty ``output`` (as
ChatGPT's Codex endpoint and some gateways send it) keeps the items its
``response.output_item.done`` events streamed.
"""

from __future__ import annotations

import json

import litellm

from dex_agents.domain.model_io import ModelToolCall
from tests.adapters.litellm.provider_scripts import (
    function_call_item,
    message_item,
    reasoning_item,
    responses_stream,
)
from tests.adapters.litellm.provider_server import ProviderServer, sse_reply
from tests.adapters.litellm.recording_output import RecordingOutput
from tests.adapters.litellm.test_client_errors import REQUEST, clients

litellm.suppress_debug_info = True


async def test_a_completed_response_with_empty_output_keeps_the_streamed_items(
    server: ProviderServer, output: RecordingOutput
) -> None:
    items = [
        reasoning_item("rs_1", "Look it up.", "enc-1"),
        message_item("msg_1", "Checking."),
        function_call_item("fc_1", "call_1", "lookup", '{"order": 7}'),
    ]
    events = responses_stream(items)
    _, completed = events[-1]
    completed["response"]["output"] = []
    server.script(sse_reply(events))
    response = await clients(server)["responses"].call_model(REQUEST, output)
    assert [json.loads(item.item) for item in response.output] == items
    assert response.text == "Checking."
    assert response.output[2].tool_calls == (
        ModelToolCall(tool_call_id="call_1", tool_name="lookup", arguments='{"order": 7}'),
    )
    server.assert_script_used()
