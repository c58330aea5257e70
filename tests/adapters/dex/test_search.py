"""Finding sessions that need a person: the search mode, the query text and paging."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import dex
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dex_agents.adapters.dex.search import (
    AGENT_SESSION_ACTIVE_STEP_SEARCH_MODE,
    find_waiting_sessions,
    flow_type_query,
    waiting_sessions_query,
)


def test_sessions_start_searchable_by_the_steps_they_wait_in() -> None:
    assert AGENT_SESSION_ACTIVE_STEP_SEARCH_MODE is dex.ActiveStepSearchMode.WITH_WAIT_FOR


@pytest.mark.parametrize(
    ("step_type", "flow_type", "query"),
    [
        ("AwaitToolApproval", None, 'ActiveStepTypes = "AwaitToolApproval"'),
        ("AwaitQuestionAnswer", None, 'ActiveStepTypes = "AwaitQuestionAnswer"'),
        (
            "AwaitToolApproval",
            "support-agent",
            'ActiveStepTypes = "AwaitToolApproval" AND FlowType = "support-agent"',
        ),
        ('Odd"Step', None, 'ActiveStepTypes = "Odd\\"Step"'),
        ("Back\\slash", None, 'ActiveStepTypes = "Back\\\\slash"'),
        (
            'X" OR FlowType = "Y',
            None,
            'ActiveStepTypes = "X\\" OR FlowType = \\"Y"',
        ),
        ("A", 'agent"\\', 'ActiveStepTypes = "A" AND FlowType = "agent\\"\\\\"'),
    ],
)
def test_waiting_sessions_query(step_type: str, flow_type: str | None, query: str) -> None:
    assert waiting_sessions_query(step_type, flow_type) == query


@pytest.mark.parametrize(
    ("step_type", "flow_type", "message"),
    [
        ("", None, "step_type must be a non-empty name, got ''"),
        ("  ", None, "step_type must be a non-empty name, got '  '"),
        ("AwaitToolApproval", "", "flow_type must be a non-empty name, got ''"),
    ],
)
def test_waiting_sessions_query_rejects_empty_names(
    step_type: str, flow_type: str | None, message: str
) -> None:
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        waiting_sessions_query(step_type, flow_type)


def test_flow_type_query() -> None:
    assert flow_type_query("support-agent") == 'FlowType = "support-agent"'


def _read_literal(text: str) -> tuple[str, str]:
    """The value of the double-quoted literal ``text`` starts with, and what follows it."""
    assert text.startswith('"')
    value: list[str] = []
    index = 1
    while text[index] != '"':
        if text[index] == "\\":
            index += 1
        value.append(text[index])
        index += 1
    return "".join(value), text[index + 1 :]


@settings(max_examples=100, deadline=None)
@given(st.text(min_size=1).filter(str.strip))
def test_a_quoted_name_reads_back_whole_and_ends_the_query(name: str) -> None:
    prefix = "ActiveStepTypes = "
    query = waiting_sessions_query(name)
    assert query.startswith(prefix)
    value, rest = _read_literal(query[len(prefix) :])
    assert value == name
    assert rest == ""


def _entry(flow_id: str) -> dex.SearchFlowEntry:
    return dex.SearchFlowEntry(
        flow_id,
        f"run-{flow_id}",
        "support-agent",
        dex.FlowStatus.RUNNING,
        datetime(2026, 3, 1, tzinfo=UTC),
        None,
        {},
    )


class PagedSearch:
    """A ``search_flows`` that serves fixed pages by token and records each call."""

    def __init__(self, pages: dict[str, dex.SearchFlowsPage]) -> None:
        self.pages = pages
        self.calls: list[tuple[str, int, str, bool]] = []

    async def search_flows(
        self,
        query: str,
        page_size: int,
        next_page_token: str = "",
        *,
        include_continued_as_new: bool = False,
    ) -> dex.SearchFlowsPage:
        self.calls.append((query, page_size, next_page_token, include_continued_as_new))
        return self.pages[next_page_token]


async def test_find_waiting_sessions_pages_through_every_result() -> None:
    search = PagedSearch(
        {
            "": dex.SearchFlowsPage([_entry("s-1"), _entry("s-2")], "p2"),
            "p2": dex.SearchFlowsPage([_entry("s-3")], "p3"),
            "p3": dex.SearchFlowsPage([], ""),
        }
    )
    found = await find_waiting_sessions(search, "AwaitToolApproval", flow_type="support-agent")
    assert [entry.flow_id for entry in found] == ["s-1", "s-2", "s-3"]
    query = 'ActiveStepTypes = "AwaitToolApproval" AND FlowType = "support-agent"'
    assert search.calls == [
        (query, 50, "", False),
        (query, 50, "p2", False),
        (query, 50, "p3", False),
    ]


async def test_find_waiting_sessions_uses_the_page_size() -> None:
    search = PagedSearch({"": dex.SearchFlowsPage([_entry("s-1")], "")})
    found = await find_waiting_sessions(search, "AwaitQuestionAnswer", page_size=7)
    assert [entry.flow_id for entry in found] == ["s-1"]
    assert search.calls == [('ActiveStepTypes = "AwaitQuestionAnswer"', 7, "", False)]


async def test_find_waiting_sessions_rejects_a_page_size_below_one() -> None:
    search = PagedSearch({})
    with pytest.raises(ValueError, match=r"^page_size must be at least 1, got 0$"):
        await find_waiting_sessions(search, "AwaitToolApproval", page_size=0)
    assert search.calls == []


async def test_a_repeated_page_token_stops_the_paging() -> None:
    search = PagedSearch(
        {
            "": dex.SearchFlowsPage([_entry("s-1")], "again"),
            "again": dex.SearchFlowsPage([_entry("s-2")], "again"),
        }
    )
    with pytest.raises(RuntimeError, match="returned page token 'again' twice"):
        await find_waiting_sessions(search, "AwaitToolApproval")
