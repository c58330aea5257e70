"""``estimate_input_tokens`` counts a tool source's tools ("Tool sources").

The estimate is synchronous, so it counts a source's ``cached_tools()`` when it has
one, and otherwise the runner's last listing of that source.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import pytest

from dex_agents.app.builtin_loop.runner import BuiltinLoopAgentRunner
from dex_agents.app.builtin_loop.scripted_model import ScriptedModelReply
from dex_agents.domain.builtin_tools import BuiltInTool
from dex_agents.domain.listed_tools import ListedTool
from dex_agents.domain.model_io import ModelRequest
from dex_agents.domain.state import InteractionMode
from tests.app.fake_tool_source import FakeSource, read_tool
from tests.app.test_builtin_loop import agent
from tests.app.test_tool_sources import turn_context


def answer(request: ModelRequest) -> ScriptedModelReply:
    return ScriptedModelReply(text="done")


class CachingSource(FakeSource):
    """A source whose ``cached_tools()`` returns ``cached`` (or raises when ``cached`` is None)."""

    def __init__(self, name: str, cached: Sequence[ListedTool] | None) -> None:
        super().__init__(name, ("listed_tool",))
        self.cached = cached

    def cached_tools(self) -> Sequence[ListedTool]:
        if self.cached is None:
            raise RuntimeError("no cache")
        return self.cached


def offered(runner: BuiltinLoopAgentRunner, **fields: object) -> list[str]:
    return [tool.name for tool in runner.next_model_request(turn_context(**fields)).tools]


async def test_a_source_without_a_cache_counts_the_runners_last_listing() -> None:
    files = FakeSource("files", ("read_file", "stat_file"))
    runner = BuiltinLoopAgentRunner(agent(answer, tool_sources=[files]))
    before = runner.estimate_input_tokens(turn_context())
    assert offered(runner) == ["lookup_order", "refund_order"]
    await runner.run_model_step(turn_context())
    assert offered(runner) == ["lookup_order", "refund_order", "read_file", "stat_file"]
    assert runner.estimate_input_tokens(turn_context()) > before
    assert files.listings == 1  # the estimate itself never lists
    files.tools = ()
    await runner.run_model_step(turn_context())
    assert offered(runner) == ["lookup_order", "refund_order"]


async def test_a_source_with_a_cache_counts_its_cached_tools() -> None:
    files = CachingSource("files", [read_tool("cached_tool")])
    runner = BuiltinLoopAgentRunner(agent(answer, tool_sources=[files]))
    assert offered(runner) == ["lookup_order", "refund_order", "cached_tool"]
    await runner.run_model_step(turn_context())
    assert offered(runner) == ["lookup_order", "refund_order", "cached_tool"]


async def test_a_cache_that_raises_counts_the_last_listing_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    files = CachingSource("files", None)
    runner = BuiltinLoopAgentRunner(agent(answer, tool_sources=[files]))
    await runner.run_model_step(turn_context())
    with caplog.at_level(logging.WARNING):
        assert offered(runner) == ["lookup_order", "refund_order", "listed_tool"]
    assert "cached_tools of tool source files failed" in caplog.text


async def test_a_cached_tool_the_model_cannot_be_offered_counts_the_last_listing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Its schema raised out of the estimate, failing the RunModel that asked for it.
    files = CachingSource(
        "files", [ListedTool(name="odd", description="d", input_schema={"x": {1}})]
    )
    runner = BuiltinLoopAgentRunner(agent(answer, tool_sources=[files]))
    await runner.run_model_step(turn_context())
    with caplog.at_level(logging.WARNING):
        assert offered(runner) == ["lookup_order", "refund_order", "listed_tool"]
        runner.estimate_input_tokens(turn_context())
    assert "cached_tools of tool source files returned a tool the model cannot be" in caplog.text


def test_a_planning_turn_counts_no_source_tools() -> None:
    files = CachingSource("files", [read_tool("cached_tool")])
    runner = BuiltinLoopAgentRunner(agent(answer, tool_sources=[files], plan_mode_enabled=True))
    planning = offered(
        runner,
        interaction_mode=InteractionMode.PLANNING,
        enabled_built_in_tools=frozenset({BuiltInTool.WRITE_TODOS}),
    )
    assert planning == ["write_todos"]
