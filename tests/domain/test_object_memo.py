"""ObjectMemo: a value made once per object, found by identity, gone with its object."""

from __future__ import annotations

import gc
from typing import Any

import attrs

from dex_agents.domain.object_memo import ObjectMemo


@attrs.frozen
class Tool:
    """A frozen value that holds a mapping, so it cannot key a dict."""

    name: str
    schema: dict[str, Any]


def test_a_value_is_made_once_per_object_and_an_equal_twin_gets_its_own() -> None:
    memo: ObjectMemo[Tool, list[str]] = ObjectMemo()
    made: list[Tool] = []

    def make(tool: Tool) -> list[str]:
        made.append(tool)
        return [tool.name]

    tool = Tool("lookup", {"type": "object"})
    first = memo.get(tool, make)
    assert memo.get(tool, make) is first
    twin = Tool("lookup", {"type": "object"})
    assert memo.get(twin, make) is not first
    assert made == [tool, twin]
    assert len(memo) == 2


def test_an_entry_goes_with_its_object() -> None:
    memo: ObjectMemo[Tool, str] = ObjectMemo()
    tool = Tool("lookup", {})
    memo.get(tool, lambda t: t.name)
    assert len(memo) == 1
    del tool
    gc.collect()
    assert len(memo) == 0
    # A new object that may take the old one's ID gets a value of its own.
    assert memo.get(Tool("other", {}), lambda t: t.name) == "other"
