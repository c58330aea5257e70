"""Listed tool names: a listed name that repeats another tool's fails before any model request."""

from __future__ import annotations

import re
from collections.abc import Sequence

import pytest

from dex_agents.domain.builtin_tools import BuiltInTool
from dex_agents.domain.listed_tools import check_listed_tool_names

ALL = frozenset(BuiltInTool)
FUNCTIONS = frozenset({"lookup_order", "refund"})

Listings = Sequence[tuple[str, Sequence[str]]]


@pytest.mark.parametrize(
    ("enabled", "listings", "message"),
    [
        (ALL, [], None),
        (ALL, [("mcp", ["search", "fetch"]), ("crm", ["find_customer"])], None),
        (ALL, [("mcp", []), ("crm", [])], None),
        # A disabled built-in's name is an ordinary tool name.
        (frozenset({BuiltInTool.ASK_USER}), [("mcp", ["write_todos"])], None),
        (
            ALL,
            [("mcp", ["search", "ask_user"])],
            "tool ask_user uses the name of an enabled built-in tool",
        ),
        (
            frozenset({"durable_wait"}),
            [("mcp", ["ask_user"]), ("crm", ["durable_wait"])],
            "tool durable_wait uses the name of an enabled built-in tool",
        ),
        (
            ALL,
            [("mcp", ["refund"])],
            "tool refund of a tool source uses the name of a function tool",
        ),
        (
            ALL,
            [("mcp", ["search"]), ("crm", ["search"])],
            "two tool sources list a tool named search",
        ),
        (
            ALL,
            [("a", ["x", "y"]), ("b", ["z"]), ("c", ["y", "x"])],
            "two tool sources list a tool named y",  # the first repeat in listing order
        ),
        # Each rule checks every listed name before the next rule runs.
        (
            ALL,
            [("mcp", ["search", "refund"]), ("crm", ["search", "write_todos"])],
            "tool write_todos uses the name of an enabled built-in tool",
        ),
        (
            ALL,
            [("mcp", ["search"]), ("crm", ["search", "lookup_order"])],
            "tool lookup_order of a tool source uses the name of a function tool",
        ),
        (
            ALL,
            [("mcp", ["search", "search"]), ("crm", ["search"])],
            "two tool sources list a tool named search",
        ),
        # Two sources under one source name are still two sources.
        (
            ALL,
            [("mcp", ["search"]), ("mcp", ["search"])],
            "two tool sources list a tool named search",
        ),
        # Spec silent: one source listing a name twice.
        (
            ALL,
            [("mcp", ["search", "fetch", "search"])],
            "tool source mcp lists a tool named search twice",
        ),
    ],
)
def test_listed_tool_name_clashes(
    enabled: frozenset[str], listings: Listings, message: str | None
) -> None:
    if message is None:
        check_listed_tool_names(FUNCTIONS, enabled, listings)
        return
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        check_listed_tool_names(FUNCTIONS, enabled, listings)


def test_function_tool_names_may_be_any_collection() -> None:
    check_listed_tool_names([], ALL, [("mcp", ("search",))])
    with pytest.raises(ValueError, match=r"^tool search of a tool source uses the name"):
        check_listed_tool_names(("search",), frozenset(), [("mcp", ("search",))])
