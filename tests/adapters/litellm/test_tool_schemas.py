"""A tool definition's schema is made plain JSON once per definition, and sent as a fresh copy."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from dex_agents.adapters.litellm.chat_request import chat_arguments
from dex_agents.adapters.litellm.estimates import estimate_input_tokens
from dex_agents.adapters.litellm.responses_request import responses_arguments
from dex_agents.adapters.litellm.tools import chat_tools, responses_tools, schema_text
from dex_agents.domain.model_io import ModelRequest, ModelToolDefinition, UserTextItem
from tests.adapters.litellm.request_cases import ANTHROPIC, OPENAI_RESPONSES


class CountingSchema(Mapping[str, Any]):
    """A schema that counts the walks over it."""

    def __init__(self, data: dict[str, Any]) -> None:
        self._data = data
        self.walks = 0

    def __getitem__(self, key: str) -> Any:
        return self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def items(self) -> Any:
        self.walks += 1
        return self._data.items()


PLAIN = {
    "type": "object",
    "properties": {"order_id": {"type": "string", "enum": ("7", "8")}},
    "required": ("order_id",),
}
AS_SENT = {
    "type": "object",
    "properties": {"order_id": {"type": "string", "enum": ["7", "8"]}},
    "required": ["order_id"],
}


def _lookup(schema: Mapping[str, Any]) -> ModelToolDefinition:
    return ModelToolDefinition(name="lookup", description="Look up.", parameters_schema=schema)


def test_a_definition_is_walked_once_and_every_call_gets_its_own_copy() -> None:
    schema = CountingSchema(PLAIN)
    tool = _lookup(schema)
    first = responses_tools([tool])[0]["parameters"]
    assert first == AS_SENT
    first["properties"]["order_id"]["type"] = "changed by LiteLLM"  # it changes what it gets
    second = chat_tools([tool])[0]["function"]["parameters"]
    assert second == AS_SENT
    assert second is not first
    assert schema.walks == 1
    assert schema_text(tool) == '{"type":"object","properties":{"order_id":' + (
        '{"type":"string","enum":["7","8"]}},"required":["order_id"]}'
    )


def test_an_equal_twin_is_walked_for_itself_and_an_empty_schema_is_an_empty_object() -> None:
    one, other = CountingSchema(PLAIN), CountingSchema(PLAIN)
    responses_tools([_lookup(one)])
    responses_tools([_lookup(other)])
    assert (one.walks, other.walks) == (1, 1)
    assert responses_tools([_lookup({})])[0]["parameters"] == {"type": "object", "properties": {}}


def test_the_kept_text_keeps_no_definition_alive() -> None:
    # The entry going with it is ObjectMemo's own rule (tests/domain/test_object_memo.py).
    tool = _lookup(CountingSchema(PLAIN))
    schema_text(tool)
    gone = weakref.ref(tool)
    del tool
    gc.collect()
    assert gone() is None


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ({"a", "b"}, "Object of type set is not JSON serializable"),
        (float("nan"), "Out of range float values are not JSON compliant"),
        (b"7", "Object of type bytes is not JSON serializable"),
    ],
)
def test_a_schema_that_is_not_json_names_the_tool_in_the_request_and_the_estimate(
    value: object, reason: str
) -> None:
    tool = _lookup({"type": "object", "properties": {"order_id": {"enum": [value]}}})
    request = ModelRequest(instructions="", items=(UserTextItem(text="Hi"),), tools=(tool,))
    expected = f"^the parameters schema of tool 'lookup' is not JSON: {reason}$"
    for make in (
        lambda: responses_arguments(request, OPENAI_RESPONSES, {}),
        lambda: chat_arguments(request, ANTHROPIC, {}),
        lambda: estimate_input_tokens(request, OPENAI_RESPONSES),
    ):
        with pytest.raises(ValueError, match=expected):
            make()
