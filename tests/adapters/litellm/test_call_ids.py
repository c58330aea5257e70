"""Which provider tool call IDs the session can record, and which get a new one."""

from __future__ import annotations

import re

import pytest

from dex_agents.adapters.litellm.call_ids import conversation_tool_call_ids, recordable_call_id
from dex_agents.domain.model_io import (
    ModelInputItem,
    ModelOutputItem,
    ModelToolCall,
    ToolResultItem,
    UserTextItem,
)

NEW_ID = re.compile(r"^call_[0-9a-f]{32}$")


@pytest.mark.parametrize(
    ("call_id", "used", "taken", "kept"),
    [
        ("call_1", set(), frozenset(), True),
        ("0", set(), frozenset(), True),
        ("0", {"0"}, frozenset(), False),  # numbered per answer: the second "0"
        ("0", set(), frozenset({"0"}), False),  # numbered per answer: an earlier turn's "0"
        ("", set(), frozenset(), False),
        (None, set(), frozenset(), False),
        (7, set(), frozenset(), False),
        ("fn/abc", set(), frozenset(), False),  # the session refuses "/"
        (" \t", set(), frozenset(), False),  # and a blank ID
        ("call_\ud800", set(), frozenset(), False),  # and a lone surrogate
    ],
)
def test_recordable_call_id(
    call_id: object, used: set[str], taken: frozenset[str], kept: bool
) -> None:
    before = set(used)
    result = recordable_call_id(call_id, used, taken)
    if kept:
        assert result == call_id
    else:
        assert NEW_ID.match(result), result
    assert used == before | {result}


def test_conversation_tool_call_ids_are_its_calls_and_results() -> None:
    call = ModelToolCall(tool_call_id="a", tool_name="lookup", arguments="{}")
    items: list[ModelInputItem] = [
        UserTextItem(text="hi"),
        ModelOutputItem(item="{}", provider="openai", api="chat", tool_calls=(call,)),
        ToolResultItem(tool_call_id="a", tool_name="lookup", output="x"),
        ToolResultItem(tool_call_id="b", tool_name="lookup", output="y"),
    ]
    assert conversation_tool_call_ids(items) == {"a", "b"}
